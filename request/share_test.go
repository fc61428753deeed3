package request_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quirelog/quire/auth"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/record"
	"github.com/quirelog/quire/replica"
	"github.com/quirelog/quire/request"
	"github.com/quirelog/quire/share"
	"github.com/quirelog/quire/sharegroup"
)

func newShareCore(t *testing.T, keyOrdering bool, mod func(*request.Config)) (fixture, *sharegroup.Coordinator) {
	t.Helper()
	cfg := sharegroup.DefaultConfig()
	cfg.ResetEarliest = true
	cfg.Partition.KeyOrdering = keyOrdering
	sc, err := sharegroup.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f := newCore(t, func(c *request.Config) {
		c.Shares = sc
		if mod != nil {
			mod(c)
		}
	})
	return f, sc
}

// produceKeyed appends n records to t-0, the key of offset o being
// "k<o%keys>" and its value "v<o>".
func produceKeyed(t *testing.T, f fixture, from, n, keys int) {
	t.Helper()
	b := record.NewBuilder(record.None)
	for o := from; o < from+n; o++ {
		b.Append(1000, fmt.Appendf(nil, "k%d", o%keys), fmt.Appendf(nil, "v%d", o), nil)
	}
	if _, err := f.core.Produce(ctxT(t), &request.ProduceRequest{Acks: 1, Partitions: []request.ProducePartition{{Topic: "t", Partition: 0, Records: b.Build()}}}); err != nil {
		t.Fatal(err)
	}
}

// decoded maps the offsets of batches to their records' keys and values.
func decoded(t *testing.T, batches []byte) map[int64][2]string {
	t.Helper()
	out := map[int64][2]string{}
	err := record.WalkRead(batches, func(batch []byte, _ record.Header) error {
		return record.ForEachRecord(batch, func(r *record.Record) error {
			out[r.Offset] = [2]string{string(r.Key), string(r.Value)}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCoreShareGroupKeyOrdering has three members of a share group with
// per-key ordering consume one partition through the core: each fetch
// acknowledges the previous one's records (releasing some), and the test
// checks that a key is never held by two members, that nothing accepted
// comes again, that each record comes with its own key and value, and
// that every record is accepted once.
func TestCoreShareGroupKeyOrdering(t *testing.T) {
	f, _ := newShareCore(t, true, nil)
	ctx := ctxT(t)
	const n, keys = 60, 5
	produceKeyed(t, f, 0, n/2, keys)
	produceKeyed(t, f, n/2, n/2, keys)

	members := []string{"m1", "m2", "m3"}
	for _, m := range members {
		r, err := f.core.ShareGroupHeartbeat(ctx, &request.ShareHeartbeat{Group: "g", MemberID: m, Topics: []string{"t"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Assignment.Topics) != 1 || r.Assignment.Topics[0].Topic != "t" || len(r.Assignment.Topics[0].Partitions) != 4 {
			t.Fatalf("%s assigned %+v, want every partition of t", m, r.Assignment)
		}
	}
	holder := map[string]string{} // key -> member holding records of it
	held := map[string][]int64{}  // member -> offsets held
	accepted := map[int64]bool{}  // offsets accepted
	pendingAcks := map[string][]share.Ack{}
	released := map[int64]bool{}
	for round := 0; len(accepted) < n; round++ {
		if round > 50*n {
			t.Fatalf("stuck with %d of %d records accepted", len(accepted), n)
		}
		m := members[round%len(members)]
		// What m acknowledges now is no longer its to hold.
		for _, o := range held[m] {
			k := fmt.Sprintf("k%d", o%keys)
			if holder[k] == m {
				delete(holder, k)
			}
		}
		for _, a := range pendingAcks[m] {
			if a.Type == share.Accept {
				for o := a.First; o <= a.Last; o++ {
					accepted[o] = true
				}
			}
		}
		res, err := f.core.ShareFetch(ctx, &request.ShareFetchRequest{Group: "g", MemberID: m, MaxRecords: 4,
			Partitions: []request.SharePartition{{Topic: "t", Partition: 0, Acks: pendingAcks[m]}}})
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != 1 || res[0].AckErr != nil || res[0].Err != nil {
			t.Fatalf("round %d: %+v", round, res)
		}
		held[m], pendingAcks[m] = nil, nil
		recs := decoded(t, res[0].Records)
		for _, a := range res[0].Acquired {
			for o := a.First; o <= a.Last; o++ {
				if accepted[o] {
					t.Fatalf("round %d: accepted offset %d delivered again", round, o)
				}
				k := fmt.Sprintf("k%d", o%keys)
				if kv := recs[o]; kv != [2]string{k, fmt.Sprintf("v%d", o)} {
					t.Fatalf("round %d: offset %d came as %q", round, o, kv)
				}
				if h := holder[k]; h != "" && h != m {
					t.Fatalf("round %d: %s acquired offset %d of key %s held by %s", round, m, o, k, h)
				}
				holder[k] = m
				held[m] = append(held[m], o)
				typ := share.Accept
				if o%7 == 0 && !released[o] {
					typ, released[o] = share.Release, true
				}
				pendingAcks[m] = append(pendingAcks[m], share.Ack{First: o, Last: o, Type: typ})
			}
		}
	}
	for o := range int64(n) {
		if !accepted[o] {
			t.Errorf("offset %d never accepted", o)
		}
	}
}

// TestCoreShareFetchWaitsForRecords checks that a share fetch with a wait
// answers once records arrive.
func TestCoreShareFetchWaitsForRecords(t *testing.T) {
	f, _ := newShareCore(t, false, nil)
	ctx := ctxT(t)
	if _, err := f.core.ShareGroupHeartbeat(ctx, &request.ShareHeartbeat{Group: "g", MemberID: "m", Topics: []string{"t"}}); err != nil {
		t.Fatal(err)
	}
	done := make(chan []request.ShareFetchResult, 1)
	go func() {
		res, err := f.core.ShareFetch(ctx, &request.ShareFetchRequest{Group: "g", MemberID: "m", MaxWait: time.Minute,
			Partitions: []request.SharePartition{{Topic: "t", Partition: 0}}})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	produceKeyed(t, f, 0, 3, 1)
	select {
	case res := <-done:
		if len(res[0].Acquired) != 1 || res[0].Acquired[0] != (share.AcquiredRange{First: 0, Last: 2, DeliveryCount: 1}) {
			t.Fatalf("acquired %+v, want 0-2", res[0].Acquired)
		}
	case <-ctx.Done():
		t.Fatal("share fetch did not answer")
	}
}

func TestCoreShareErrors(t *testing.T) {
	f, _ := newShareCore(t, false, func(c *request.Config) {
		c.Authorizer = acls{auth.OpRead: {"t": true, "g": true}, auth.OpDescribe: {"t": true}}
	})
	alice := request.WithPrincipal(ctxT(t), "User:alice")
	bob := request.WithPrincipal(ctxT(t), "User:bob")
	if _, err := f.core.ShareGroupHeartbeat(bob, &request.ShareHeartbeat{Group: "g", MemberID: "m", Topics: []string{"t"}}); !errors.Is(err, request.ErrGroupAuthorizationFailed) {
		t.Fatalf("bob's heartbeat: %v", err)
	}
	res, _ := f.core.ShareFetch(alice, &request.ShareFetchRequest{Group: "g", MemberID: "m", Partitions: []request.SharePartition{{Topic: "t", Partition: 0}}})
	if !errors.Is(res[0].Err, sharegroup.ErrUnknownMember) {
		t.Fatalf("fetch before joining: %v", res[0].Err)
	}
	if _, err := f.core.ShareGroupHeartbeat(alice, &request.ShareHeartbeat{Group: "g", MemberID: "m", Topics: []string{"t"}}); err != nil {
		t.Fatal(err)
	}
	acks, err := f.core.ShareAcknowledge(alice, "g", "m", []request.SharePartition{{Topic: "t", Partition: 0, Acks: []share.Ack{{First: 0, Last: 0, Type: share.Accept}}}})
	if err != nil || !errors.Is(acks[0].Err, share.ErrInvalidRecordState) {
		t.Fatalf("ack of nothing acquired: %+v, %v", acks, err)
	}
	if _, err := f.core.ShareFetch(alice, &request.ShareFetchRequest{Group: "g", MemberID: "m"}); !errors.Is(err, replica.ErrInvalidRequest) {
		t.Fatalf("fetch of no partitions: %v", err)
	}
	// A share group's id obeys a consumer group's rules (its state is
	// saved under it).
	for _, g := range []string{"", "a\x00b", strings.Repeat("g", metadata.MaxGroupIDLen+1)} {
		if _, err := f.core.ShareGroupHeartbeat(alice, &request.ShareHeartbeat{Group: g, Topics: []string{"t"}}); !errors.Is(err, metadata.ErrInvalidGroupID) {
			t.Errorf("heartbeat of group %q: %v", g, err)
		}
		if _, err := f.core.ShareFetch(alice, &request.ShareFetchRequest{Group: g, MemberID: "m", Partitions: []request.SharePartition{{Topic: "t"}}}); !errors.Is(err, metadata.ErrInvalidGroupID) {
			t.Errorf("fetch of group %q: %v", g, err)
		}
		if _, err := f.core.ShareAcknowledge(alice, g, "m", nil); !errors.Is(err, metadata.ErrInvalidGroupID) {
			t.Errorf("acknowledgement of group %q: %v", g, err)
		}
	}
	plain := newCore(t, nil)
	if _, err := plain.core.ShareGroupHeartbeat(context.Background(), &request.ShareHeartbeat{Group: "g", Topics: []string{"t"}}); !errors.Is(err, request.ErrShareGroupsDisabled) {
		t.Fatalf("share groups off: %v", err)
	}
}

// TestCoreShareDeadLetters rejects one record and lets another run out
// of deliveries, and reads both back from the group's dead-letter topic
// (here t itself: the dead letters of t-0 land on t-0, led here) with
// their headers and, with errors.deadletterqueue.copy.record.enable,
// their records' values.
func TestCoreShareDeadLetters(t *testing.T) {
	f, sc := newShareCore(t, false, nil)
	ctx := ctxT(t)
	pcfg := share.DefaultConfig()
	pcfg.DeliveryCountLimit = 1
	if err := sc.SetGroupConfig("g", sharegroup.GroupConfig{Partition: pcfg, DeadLetterTopic: "t", DeadLetterCopyRecord: true}); err != nil {
		t.Fatal(err)
	}
	keys := [][]byte{[]byte("a"), []byte("b")}
	b := record.NewBuilder(record.None)
	b.Append(1000, keys[0], []byte("rejected"), nil)
	b.Append(1000, keys[1], []byte("released"), nil)
	if _, err := f.core.Produce(ctx, &request.ProduceRequest{Acks: 1, Partitions: []request.ProducePartition{{Topic: "t", Partition: 0, Records: b.Build()}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.core.ShareGroupHeartbeat(ctx, &request.ShareHeartbeat{Group: "g", MemberID: "m", Topics: []string{"t"}}); err != nil {
		t.Fatal(err)
	}
	res, err := f.core.ShareFetch(ctx, &request.ShareFetchRequest{Group: "g", MemberID: "m", MaxRecords: 2, Partitions: []request.SharePartition{{Topic: "t", Partition: 0}}})
	if err != nil || len(res[0].Acquired) != 1 || res[0].Acquired[0].Last != 1 {
		t.Fatalf("fetch: %+v, %v", res, err)
	}
	acks, err := f.core.ShareAcknowledge(ctx, "g", "m", []request.SharePartition{{Topic: "t", Partition: 0,
		Acks: []share.Ack{{First: 0, Last: 0, Type: share.Reject}, {First: 1, Last: 1, Type: share.Release}}}})
	if err != nil || acks[0].Err != nil {
		t.Fatalf("ack: %+v, %v", acks, err)
	}
	// The dead letters are offsets 2 and 3 of t-0; the group, reading on,
	// acquires them as any record.
	res, err = f.core.ShareFetch(ctx, &request.ShareFetchRequest{Group: "g", MemberID: "m", Partitions: []request.SharePartition{{Topic: "t", Partition: 0}}})
	if err != nil || len(res[0].Acquired) != 1 || res[0].Acquired[0].First != 2 || res[0].Acquired[0].Last != 3 {
		t.Fatalf("fetch of the dead letters: %+v, %v", res, err)
	}
	want := map[int64]map[string]string{
		2: {"value": "rejected", "__dlq.errors.offset": "0", "__dlq.errors.message": "Offset rejected by client."},
		3: {"value": "released", "__dlq.errors.offset": "1", "__dlq.errors.message": "Offset delivery count exceeded the threshold."},
	}
	seen := 0
	err = record.WalkRead(res[0].Records, func(batch []byte, _ record.Header) error {
		return record.ForEachRecord(batch, func(r *record.Record) error {
			w, ok := want[r.Offset]
			if !ok {
				return nil
			}
			seen++
			h := map[string]string{"value": string(r.Value)}
			for _, x := range r.Headers {
				h[x.Key] = string(x.Value)
			}
			for k, v := range w {
				if h[k] != v {
					t.Errorf("dead letter at %d: %s = %q, want %q", r.Offset, k, h[k], v)
				}
			}
			if h[request.DeadLetterHeaderTopic] != "t" || h[request.DeadLetterHeaderPartition] != "0" ||
				h[request.DeadLetterHeaderGroup] != "g" || h[request.DeadLetterHeaderCount] != "1" {
				t.Errorf("dead letter at %d: headers %v", r.Offset, h)
			}
			return nil
		})
	})
	if err != nil || seen != 2 {
		t.Fatalf("found %d dead letters, %v", seen, err)
	}
}

// shareStore is a sharegroup.Store in memory whose saves can be refused,
// as a stale leader's are.
type shareStore struct {
	mu     sync.Mutex
	refuse bool
	saved  map[sharegroup.TopicPartition]sharegroup.SavedState
}

func (s *shareStore) Lease(sharegroup.TopicPartition) (sharegroup.Lease, error) {
	return sharegroup.Lease{Incarnation: "t-id"}, nil
}

func (s *shareStore) Load(_ string, tp sharegroup.TopicPartition, _ sharegroup.Lease) (sharegroup.SavedState, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.saved[tp]
	return st, ok, nil
}

func (s *shareStore) Save(_ context.Context, states []sharegroup.SavedState) ([]error, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]error, len(states))
	for i, st := range states {
		if s.refuse {
			out[i] = fmt.Errorf("%w: refused", replica.ErrNotLeader)
			continue
		}
		s.saved[st.TopicPartition] = st
	}
	return out, nil
}

// TestCoreShareAnswersOnlySaved: a share fetch hands out records only once
// their delivery is saved and an acknowledgement is taken only once
// saved; when the saves are refused, neither is, and the share-partition
// is restored from what was saved: the records acquired and saved come
// back with a raised delivery count, those whose acquisition was not
// saved with the same one.
func TestCoreShareAnswersOnlySaved(t *testing.T) {
	store := &shareStore{saved: map[sharegroup.TopicPartition]sharegroup.SavedState{}}
	cfg := sharegroup.DefaultConfig()
	cfg.ResetEarliest = true
	cfg.Store = store
	sc, err := sharegroup.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f := newCore(t, func(c *request.Config) { c.Shares = sc })
	ctx := ctxT(t)
	produceKeyed(t, f, 0, 5, 2)
	if _, err := f.core.ShareGroupHeartbeat(ctx, &request.ShareHeartbeat{Group: "g", MemberID: "m", Topics: []string{"t"}}); err != nil {
		t.Fatal(err)
	}
	fetch := func() request.ShareFetchResult {
		t.Helper()
		res, err := f.core.ShareFetch(ctx, &request.ShareFetchRequest{Group: "g", MemberID: "m", Partitions: []request.SharePartition{{Topic: "t", Partition: 0}}})
		if err != nil {
			t.Fatal(err)
		}
		return res[0]
	}
	tp := sharegroup.TopicPartition{Topic: "t", Partition: 0}
	if r := fetch(); r.Err != nil || fmt.Sprint(r.Acquired) != fmt.Sprint([]share.AcquiredRange{{First: 0, Last: 4, DeliveryCount: 1}}) {
		t.Fatalf("first fetch: %v %v", r.Acquired, r.Err)
	}
	if st := store.saved[tp]; fmt.Sprint(st.Snapshot) != fmt.Sprint(share.Snapshot{Start: 0, Runs: []share.Run{{Length: 5, State: share.Acquired, DeliveryCount: 1}}}) {
		t.Fatalf("saved after the fetch: %+v", st.Snapshot)
	}

	store.mu.Lock()
	store.refuse = true
	store.mu.Unlock()
	acks, err := f.core.ShareAcknowledge(ctx, "g", "m", []request.SharePartition{{Topic: "t", Partition: 0, Acks: []share.Ack{{First: 0, Last: 4, Type: share.Accept}}}})
	if err != nil || !errors.Is(acks[0].Err, replica.ErrNotLeader) {
		t.Fatalf("acknowledgement not saved: %+v, %v", acks, err)
	}
	produceKeyed(t, f, 5, 5, 2)
	if r := fetch(); !errors.Is(r.Err, replica.ErrNotLeader) || len(r.Acquired) != 0 || len(r.Records) != 0 {
		t.Fatalf("fetch not saved: %v %d bytes, %v", r.Acquired, len(r.Records), r.Err)
	}

	store.mu.Lock()
	store.refuse = false
	store.mu.Unlock()
	want := []share.AcquiredRange{{First: 0, Last: 4, DeliveryCount: 2}, {First: 5, Last: 9, DeliveryCount: 1}}
	if r := fetch(); r.Err != nil || fmt.Sprint(r.Acquired) != fmt.Sprint(want) {
		t.Fatalf("fetch after the refusals: %v %v, want %v", r.Acquired, r.Err, want)
	}
}

// TestCoreShareFetchAnswersOnlyAcquiredBatches: a share fetch answers the
// batches holding the records it acquired and none past them, however
// much more of the log there is.
func TestCoreShareFetchAnswersOnlyAcquiredBatches(t *testing.T) {
	f, _ := newShareCore(t, false, nil)
	ctx := ctxT(t)
	for b := range 5 {
		produceKeyed(t, f, b*10, 10, 3) // one batch a call: offsets 0-9, 10-19, ...
	}
	if _, err := f.core.ShareGroupHeartbeat(ctx, &request.ShareHeartbeat{Group: "g", MemberID: "m", Topics: []string{"t"}}); err != nil {
		t.Fatal(err)
	}
	res, err := f.core.ShareFetch(ctx, &request.ShareFetchRequest{Group: "g", MemberID: "m", MaxRecords: 15,
		Partitions: []request.SharePartition{{Topic: "t", Partition: 0}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res[0].Acquired) != 1 || res[0].Acquired[0] != (share.AcquiredRange{First: 0, Last: 14, DeliveryCount: 1}) {
		t.Fatalf("acquired %+v, want 0-14", res[0].Acquired)
	}
	var bases []int64
	if err := record.WalkRead(res[0].Records, func(_ []byte, h record.Header) error {
		bases = append(bases, h.BaseOffset)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(bases) != "[0 10]" {
		t.Fatalf("answered batches at %v, want the two holding 0-14: [0 10]", bases)
	}
	recs := decoded(t, res[0].Records)
	for o := range int64(20) {
		if got, want := recs[o][1], fmt.Sprintf("v%d", o); got != want {
			t.Fatalf("offset %d: value %q, want %q", o, got, want)
		}
	}
}
