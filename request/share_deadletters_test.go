package request_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/quirelog/quire/auth"
	"github.com/quirelog/quire/metadata"

	"github.com/quirelog/quire/record"
	"github.com/quirelog/quire/request"
	"github.com/quirelog/quire/share"
	"github.com/quirelog/quire/sharegroup"
)

// lostAnswerStore saves as shareStore does, then, while lose is set,
// answers the save with an error: the node dies between the save and
// anything it would do after it.
type lostAnswerStore struct {
	*shareStore
	lose bool
}

func (s *lostAnswerStore) Save(ctx context.Context, states []sharegroup.SavedState) ([]error, error) {
	out, err := s.shareStore.Save(ctx, states)
	if s.lose && err == nil {
		return nil, errors.New("the node died after the save")
	}
	return out, err
}

// deadLettersOf counts the dead letters of group g on t-0 that t-0 holds,
// by source offset.
func deadLettersOf(t *testing.T, f fixture) map[string]int {
	t.Helper()
	out := map[string]int{}
	for off := int64(0); ; {
		res, err := f.core.Fetch(request.WithPrincipal(ctxT(t), "User:admin"), &request.FetchRequest{MaxBytes: 1 << 20, Partitions: []request.FetchPartition{{Topic: "t", Partition: 0, Offset: off, MaxBytes: 1 << 20}}})
		if err != nil || res[0].Err != nil {
			t.Fatalf("fetch: %v %v", err, res[0].Err)
		}
		if len(res[0].Records) == 0 {
			return out
		}
		err = record.WalkRead(res[0].Records, func(batch []byte, h record.Header) error {
			off = h.NextOffset()
			return record.ForEachRecord(batch, func(r *record.Record) error {
				h := map[string]string{}
				for _, x := range r.Headers {
					h[x.Key] = string(x.Value)
				}
				if h[request.DeadLetterHeaderGroup] == "g" && h[request.DeadLetterHeaderTopic] == "t" {
					out[h[request.DeadLetterHeaderOffset]]++
				}
				return nil
			})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestCoreShareDeadLetterOnceAcrossFailover: a record rejected on one
// leader is written to the dead-letter topic exactly once whatever point
// of the way the leader dies at: (a) after the state that archived it is
// saved but before the write, the next leader writes it; (b) after the
// write but before its completion is saved, the next leader finds it in
// the dead-letter topic and does not write it again. The dead-letter
// topic is t itself (the dead letters of t-0 land on t-0, led here);
// each "leader" is a
// core with its own share coordinator over the same log and store.
func TestCoreShareDeadLetterOnceAcrossFailover(t *testing.T) {
	for _, diesBeforeWrite := range []bool{true, false} {
		t.Run(fmt.Sprintf("diesBeforeWrite=%v", diesBeforeWrite), func(t *testing.T) {
			store := &lostAnswerStore{shareStore: &shareStore{saved: map[sharegroup.TopicPartition]sharegroup.SavedState{}}}
			newLeader := func() *sharegroup.Coordinator {
				cfg := sharegroup.DefaultConfig()
				cfg.ResetEarliest = true
				cfg.Store = store
				sc, err := sharegroup.New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				if err := sc.SetGroupConfig("g", sharegroup.GroupConfig{Partition: share.DefaultConfig(), DeadLetterTopic: "t"}); err != nil {
					t.Fatal(err)
				}
				return sc
			}
			sc1 := newLeader()
			var base request.Config
			f1 := newCore(t, func(c *request.Config) { c.Shares = sc1; base = *c })
			ctx := ctxT(t)
			key := []byte("poison")
			b := record.NewBuilder(record.None)
			b.Append(1000, key, []byte("poison"), nil)
			if _, err := f1.core.Produce(ctx, &request.ProduceRequest{Acks: 1, Partitions: []request.ProducePartition{{Topic: "t", Partition: 0, Records: b.Build()}}}); err != nil {
				t.Fatal(err)
			}
			join := func(f fixture) {
				t.Helper()
				if _, err := f.core.ShareGroupHeartbeat(ctx, &request.ShareHeartbeat{Group: "g", MemberID: "m", Topics: []string{"t"}}); err != nil {
					t.Fatal(err)
				}
			}
			join(f1)
			res, err := f1.core.ShareFetch(ctx, &request.ShareFetchRequest{Group: "g", MemberID: "m", MaxRecords: 1, Partitions: []request.SharePartition{{Topic: "t", Partition: 0}}})
			if err != nil || len(res[0].Acquired) != 1 {
				t.Fatalf("fetch: %+v, %v", res, err)
			}
			store.lose = diesBeforeWrite
			acks, err := f1.core.ShareAcknowledge(ctx, "g", "m", []request.SharePartition{{Topic: "t", Partition: 0,
				Acks: []share.Ack{{First: 0, Last: 0, Type: share.Reject}}}})
			if err != nil {
				t.Fatal(err)
			}
			if diesBeforeWrite {
				if acks[0].Err == nil {
					t.Fatal("the acknowledgement whose save was not answered was answered applied")
				}
				if n := deadLettersOf(t, f1); len(n) != 0 {
					t.Fatalf("dead letters written before their save was answered: %v", n)
				}
			} else if n := deadLettersOf(t, f1); n["0"] != 1 {
				t.Fatalf("dead letters after the first leader: %v, want offset 0 once", n)
			}
			store.lose = false

			// The next leader: a new coordinator restoring from the store.
			base.Shares = newLeader()
			c2, err := request.New(base)
			if err != nil {
				t.Fatal(err)
			}
			f2 := fixture{core: c2, fwd: f1.fwd}
			join(f2)
			// Its first fetch restores the share-partition and finishes
			// the pending dead letter.
			if _, err := f2.core.ShareFetch(ctx, &request.ShareFetchRequest{Group: "g", MemberID: "m", Partitions: []request.SharePartition{{Topic: "t", Partition: 0}}}); err != nil {
				t.Fatal(err)
			}
			if n := deadLettersOf(t, f2); len(n) != 1 || n["0"] != 1 {
				t.Fatalf("dead letters after the next leader: %v, want offset 0 exactly once", n)
			}
			if p := base.Shares.PendingDeadLetters("g"); len(p) != 0 {
				t.Fatalf("still pending: %v", p)
			}
			// Another leader after it writes nothing more.
			base.Shares = newLeader()
			c3, err := request.New(base)
			if err != nil {
				t.Fatal(err)
			}
			f3 := fixture{core: c3, fwd: f1.fwd}
			join(f3)
			if _, err := f3.core.ShareFetch(ctx, &request.ShareFetchRequest{Group: "g", MemberID: "m", Partitions: []request.SharePartition{{Topic: "t", Partition: 0}}}); err != nil {
				t.Fatal(err)
			}
			if n := deadLettersOf(t, f3); len(n) != 1 || n["0"] != 1 {
				t.Fatalf("dead letters after a third leader: %v, want offset 0 exactly once", n)
			}
		})
	}
}

// guardedCluster is cluster with t's errors.deadletterqueue.group.enable
// as on says.
type guardedCluster struct {
	cluster
	on *atomic.Bool
}

func (c guardedCluster) Topic(name string) (metadata.TopicInfo, bool) {
	t, ok := c.cluster.Topic(name)
	if ok {
		t.Configs = map[string]string{request.DeadLetterGroupEnable: strconv.FormatBool(c.on.Load())}
	}
	return t, ok
}

// adminOr lets User:admin do anything, and the others what acls say.
type adminOr struct{ acls }

func (a adminOr) Authorize(r auth.Request) bool {
	return r.Principal == "User:admin" || a.acls.Authorize(r)
}

// TestCoreShareDeadLetterTopicGuards: KIP-1191's guards. A dead letter is
// written by the node itself, so the member's missing Write on the
// dead-letter topic does not hold it up; it is kept pending, not dropped
// nor written, while its dead-letter topic does not exist, is not
// enabled for groups' dead letters (errors.deadletterqueue.group.enable),
// or lacks the node's name prefix, and is written once the topic is
// enabled. A group cannot be given a dead-letter topic without the prefix.
func TestCoreShareDeadLetterTopicGuards(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, dlq, prefix string
		enabled           bool
	}{
		{name: "written as the node", dlq: "t", enabled: true},
		{name: "missing", dlq: "missing", enabled: true},
		{name: "not enabled", dlq: "t"},
		{name: "without the prefix", dlq: "t", prefix: "dlq.", enabled: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := sharegroup.DefaultConfig()
			cfg.ResetEarliest = true
			sc, err := sharegroup.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := sc.SetGroupConfig("g", sharegroup.GroupConfig{Partition: share.DefaultConfig(), DeadLetterTopic: tc.dlq}); err != nil {
				t.Fatal(err)
			}
			on := &atomic.Bool{}
			on.Store(tc.enabled)
			f := newCore(t, func(c *request.Config) {
				c.Shares, c.Cluster, c.DeadLetterTopicPrefix = sc, guardedCluster{on: on}, tc.prefix
				// alice reads t and the group, and may not write to t;
				// admin may do anything.
				c.Authorizer = adminOr{acls{auth.OpRead: {"t": true, "g": true}, auth.OpDescribe: {"t": true}}}
			})
			ctx := request.WithPrincipal(ctxT(t), "User:alice")
			b := record.NewBuilder(record.None)
			b.Append(1000, []byte("k"), []byte("poison"), nil)
			if _, err := f.core.Produce(request.WithPrincipal(ctxT(t), "User:admin"), &request.ProduceRequest{Acks: 1, Partitions: []request.ProducePartition{{Topic: "t", Partition: 0, Records: b.Build()}}}); err != nil {
				t.Fatal(err)
			}
			if _, err := f.core.ShareGroupHeartbeat(ctx, &request.ShareHeartbeat{Group: "g", MemberID: "m", Topics: []string{"t"}}); err != nil {
				t.Fatal(err)
			}
			if res, err := f.core.ShareFetch(ctx, &request.ShareFetchRequest{Group: "g", MemberID: "m", MaxRecords: 1, Partitions: []request.SharePartition{{Topic: "t", Partition: 0}}}); err != nil || len(res[0].Acquired) != 1 {
				t.Fatalf("fetch: %+v, %v", res, err)
			}
			acks, err := f.core.ShareAcknowledge(ctx, "g", "m", []request.SharePartition{{Topic: "t", Partition: 0,
				Acks: []share.Ack{{First: 0, Last: 0, Type: share.Reject}}}})
			if err != nil || acks[0].Err != nil {
				t.Fatalf("reject: %+v, %v", acks, err)
			}
			written := func() int { return deadLettersOf(t, f)["0"] }
			if tc.name == "written as the node" {
				if n, p := written(), sc.PendingDeadLetters("g"); n != 1 || len(p) != 0 {
					t.Fatalf("written %d times, pending %v; want written once", n, p)
				}
				// alice herself still may not write to t.
				_, err := f.core.Produce(ctx, &request.ProduceRequest{Acks: 1, Partitions: []request.ProducePartition{{Topic: "t", Partition: 0, Records: b.Build()}}})
				if !errors.Is(err, request.ErrTopicAuthorizationFailed) {
					t.Fatalf("alice's own produce to t: %v, want refused", err)
				}
				return
			}
			if n, p := written(), sc.PendingDeadLetters("g"); n != 0 || len(p) != 1 {
				t.Fatalf("written %d times, pending %v; want pending, not written", n, p)
			}
			if tc.name != "not enabled" {
				return
			}
			// Enabled: the next call on the partition writes it.
			on.Store(true)
			if _, err := f.core.ShareFetch(ctx, &request.ShareFetchRequest{Group: "g", MemberID: "m", MaxRecords: 1, Partitions: []request.SharePartition{{Topic: "t", Partition: 0}}}); err != nil {
				t.Fatal(err)
			}
			if n, p := written(), sc.PendingDeadLetters("g"); n != 1 || len(p) != 0 {
				t.Fatalf("once enabled: written %d times, pending %v; want written once", n, p)
			}
		})
	}

	// The group's setting must carry the prefix.
	store := &groupStore{supported: true, configs: map[string]map[string]string{}}
	f, _ := newShareCore(t, false, func(c *request.Config) { c.ShareStore, c.DeadLetterTopicPrefix = store, "dlq." })
	err := f.core.AlterShareGroupConfigs(ctxT(t), &request.AlterShareGroupConfigsRequest{Group: "g",
		Set: map[string]string{sharegroup.KeyDeadLetterTopic: "orders"}})
	if !errors.Is(err, share.ErrInvalidConfig) || !strings.Contains(err.Error(), `"dlq."`) {
		t.Fatalf("dead-letter topic without the prefix: %v, want INVALID_CONFIG naming the prefix", err)
	}
	if err := f.core.AlterShareGroupConfigs(ctxT(t), &request.AlterShareGroupConfigsRequest{Group: "g",
		Set: map[string]string{sharegroup.KeyDeadLetterTopic: "dlq.orders"}}); err != nil {
		t.Fatalf("dead-letter topic with the prefix: %v", err)
	}
}
