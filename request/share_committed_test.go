package request_test

import (
	"context"
	"slices"
	"testing"

	"github.com/quirelog/quire/request"
	"github.com/quirelog/quire/sharegroup"
	"github.com/quirelog/quire/txn"
)

// txnsByID is a transaction coordinator of several transactional ids,
// each a oneTxn.
type txnsByID struct {
	oneTxn
	ids map[string]*oneTxn
}

func (c *txnsByID) AddPartitionsToTxn(ctx context.Context, p txn.Producer, parts []txn.TopicPartition, verifyOnly bool) error {
	return c.ids[p.ID].AddPartitionsToTxn(ctx, p, parts, verifyOnly)
}

// TestCoreShareReadCommitted: a share group with share.isolation.level
// read_committed acquires only committed records: not those of an
// aborted transaction, and not those of an open one (nor anything after
// it) until it commits; a group reading uncommitted acquires every
// record. Markers are never acquired.
func TestCoreShareReadCommitted(t *testing.T) {
	t.Parallel()
	co := &txnsByID{ids: map[string]*oneTxn{}}
	for pid, id := range map[int64]string{7: "aborted", 8: "committed", 9: "open"} {
		co.ids[id] = &oneTxn{cur: &txn.Txn{ID: id, ProducerID: pid, LastProducerEpoch: -1, State: txn.Ongoing,
			Partitions: []txn.TopicPartition{{Topic: "t", Partition: 0}}}}
	}
	f, sc := newShareCore(t, false, func(c *request.Config) { c.Transactions, c.Codes = co, txnCodes })
	ctx := ctxT(t)
	produce := func(id string, records []byte) {
		t.Helper()
		res, err := f.core.Produce(ctx, &request.ProduceRequest{Acks: -1, TransactionalID: id,
			Partitions: []request.ProducePartition{{Topic: "t", Partition: 0, Records: records}}})
		if err != nil || res[0].Err != nil {
			t.Fatalf("produce (%q): %+v, %v", id, res, err)
		}
	}
	end := func(pid int64, commit bool) {
		t.Helper()
		got := f.core.WriteMarkers(ctx, []request.TxnMarker{{ProducerID: pid, Commit: commit, CoordinatorEpoch: 1,
			Partitions: []txn.TopicPartition{{Topic: "t", Partition: 0}}}}, true)
		if got[0][0] != nil {
			t.Fatalf("marker of %d: %v", pid, got[0][0])
		}
	}
	produce("", batch(1))                // 0
	produce("aborted", txnBatch(7, 2))   // 1-2
	end(7, false)                        // 3
	produce("committed", txnBatch(8, 2)) // 4-5
	end(8, true)                         // 6
	produce("", batch(1))                // 7
	produce("open", txnBatch(9, 2))      // 8-9
	produce("", batch(1))                // 10

	for _, g := range []string{"committed", "uncommitted"} {
		if err := sc.SetGroupConfig(g, sharegroup.GroupConfig{Partition: sc.DefaultGroupConfig().Partition, ReadCommitted: g == "committed"}); err != nil {
			t.Fatal(err)
		}
		if _, err := f.core.ShareGroupHeartbeat(ctx, &request.ShareHeartbeat{Group: g, MemberID: "m", Topics: []string{"t"}}); err != nil {
			t.Fatal(err)
		}
	}
	// acquired fetches until a fetch acquires nothing (a fetch reads at
	// most one segment of the log).
	acquired := func(g string) []int64 {
		t.Helper()
		var out []int64
		for {
			res, err := f.core.ShareFetch(ctx, &request.ShareFetchRequest{Group: g, MemberID: "m", MaxRecords: 100,
				Partitions: []request.SharePartition{{Topic: "t", Partition: 0}}})
			if err != nil || res[0].Err != nil {
				t.Fatalf("fetch of %s: %+v, %v", g, res, err)
			}
			if len(res[0].Acquired) == 0 {
				return out
			}
			for _, r := range res[0].Acquired {
				for o := r.First; o <= r.Last; o++ {
					out = append(out, o)
				}
			}
		}
	}
	if got, want := acquired("committed"), []int64{0, 4, 5, 7}; !slices.Equal(got, want) {
		t.Fatalf("read_committed acquired %v, want %v", got, want)
	}
	if got, want := acquired("uncommitted"), []int64{0, 1, 2, 4, 5, 7, 8, 9, 10}; !slices.Equal(got, want) {
		t.Fatalf("read_uncommitted acquired %v, want %v", got, want)
	}
	end(9, true) // 11
	if got, want := acquired("committed"), []int64{8, 9, 10}; !slices.Equal(got, want) {
		t.Fatalf("read_committed after the commit acquired %v, want %v", got, want)
	}
}
