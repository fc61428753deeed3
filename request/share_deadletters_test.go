package request_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/quirelog/quire/partitioner"
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
		res, err := f.core.Fetch(ctxT(t), &request.FetchRequest{MaxBytes: 1 << 20, Partitions: []request.FetchPartition{{Topic: "t", Partition: 0, Offset: off, MaxBytes: 1 << 20}}})
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
// topic is t itself (the keys land on t-0, led here); each "leader" is a
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
			var key []byte
			for i := 0; key == nil; i++ {
				if k := fmt.Appendf(nil, "key%d", i); partitioner.KeyPartition(k, 4) == 0 {
					key = k
				}
			}
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

// TestCoreShareDeadLetterTopicMissing: a dead letter whose dead-letter
// topic does not exist (yet) is kept pending, not dropped: Kafka's
// UNKNOWN_TOPIC_OR_PARTITION is retriable, the topic may be created.
func TestCoreShareDeadLetterTopicMissing(t *testing.T) {
	t.Parallel()
	cfg := sharegroup.DefaultConfig()
	cfg.ResetEarliest = true
	sc, err := sharegroup.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := sc.SetGroupConfig("g", sharegroup.GroupConfig{Partition: share.DefaultConfig(), DeadLetterTopic: "missing"}); err != nil {
		t.Fatal(err)
	}
	f := newCore(t, func(c *request.Config) { c.Shares = sc })
	ctx := ctxT(t)
	b := record.NewBuilder(record.None)
	b.Append(1000, []byte("k"), []byte("poison"), nil)
	if _, err := f.core.Produce(ctx, &request.ProduceRequest{Acks: 1, Partitions: []request.ProducePartition{{Topic: "t", Partition: 0, Records: b.Build()}}}); err != nil {
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
	if p := sc.PendingDeadLetters("g"); len(p) != 1 {
		t.Fatalf("pending dead letters with the dead-letter topic missing: %v, want the rejected record's", p)
	}
}
