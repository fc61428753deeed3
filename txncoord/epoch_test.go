package txncoord

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/quirelog/quire/txn"
)

// atMaxEpoch initializes id and moves its producer to txn.MaxEpoch.
func atMaxEpoch(t *testing.T, co *Coordinator, l *fsmLog, id string, bump bool) txn.Producer {
	t.Helper()
	p := initProducer(t, co, id, bump)
	cur, ok := l.Image().Transaction(id)
	if !ok {
		t.Fatal("no transaction state")
	}
	cur.ProducerEpoch, cur.LastProducerEpoch = txn.MaxEpoch, txn.MaxEpoch-1
	if _, err := co.write(context.Background(), cur, false); err != nil {
		t.Fatal(err)
	}
	p.Epoch = txn.MaxEpoch
	return p
}

// TestTxnCoordEndAtMaxEpochNewProducerID: under transaction version 2,
// the End of a transaction at the largest epoch writes its markers at
// the epoch kept for them and answers a new producer id, with which the
// next transaction goes on; the old producer id is the id's no more.
func TestTxnCoordEndAtMaxEpochNewProducerID(t *testing.T) {
	co, l, m, _ := setup(t)
	ctx := context.Background()
	p := atMaxEpoch(t, co, l, "tx", true)
	if err := co.AddPartitions(ctx, p, []txn.TopicPartition{t0}, false); err != nil {
		t.Fatal(err)
	}
	end, err := co.End(ctx, p, true, true)
	if err != nil {
		t.Fatal(err)
	}
	if end.ProducerID == p.PID || end.ProducerEpoch != 0 {
		t.Fatalf("End at the largest epoch answered (pid %d, epoch %d), want a new producer id at epoch 0 (the old one is %d)",
			end.ProducerID, end.ProducerEpoch, p.PID)
	}
	want := []txn.Marker{{ProducerID: p.PID, ProducerEpoch: txn.FenceEpoch, Commit: true, CoordinatorEpoch: 1, Partitions: []txn.TopicPartition{t0}}}
	if got := m.all(); !reflect.DeepEqual(got, want) {
		t.Fatalf("markers %+v, want %+v", got, want)
	}
	next := txn.Producer{ID: "tx", PID: end.ProducerID, Epoch: end.ProducerEpoch}
	if err := co.AddPartitions(ctx, next, []txn.TopicPartition{t0}, false); err != nil {
		st, _ := l.Image().Transaction("tx")
		t.Fatalf("the next transaction with End's answer (pid %d, epoch %d) refused: %v (the coordinator has pid %d epoch %d)",
			next.PID, next.Epoch, err, st.ProducerID, st.ProducerEpoch)
	}
	if err := co.AddPartitions(ctx, p, []txn.TopicPartition{t1}, false); !errors.Is(err, txn.ErrInvalidProducerIDMapping) {
		t.Fatalf("the old producer id after the End: %v, want %v", err, txn.ErrInvalidProducerIDMapping)
	}
	if _, err := co.End(ctx, next, true, true); err != nil {
		t.Fatalf("the next transaction's End: %v", err)
	}
}

// TestTxnCoordEndAtMaxEpochMarkersPending: an End at the largest epoch
// whose markers cannot be written yet does not answer the old producer
// id (the next transaction's batches would then join the one whose
// markers are pending): it answers ErrConcurrentTransactions, and the
// producer's retry gets the new producer id once the markers are
// written, by the sweep or by the retry itself.
func TestTxnCoordEndAtMaxEpochMarkersPending(t *testing.T) {
	for _, bySweep := range []bool{true, false} {
		co, l, m, _ := setup(t)
		ctx := context.Background()
		p := atMaxEpoch(t, co, l, "tx", true)
		if err := co.AddPartitions(ctx, p, []txn.TopicPartition{t0, t1}, false); err != nil {
			t.Fatal(err)
		}
		m.mu.Lock()
		m.fail = errors.New("no leader")
		m.mu.Unlock()
		if got, err := co.End(ctx, p, false, true); !errors.Is(err, txn.ErrConcurrentTransactions) {
			t.Fatalf("End with its markers pending: %+v, %v; want %v", got, err, txn.ErrConcurrentTransactions)
		}
		if got, err := co.End(ctx, p, false, true); !errors.Is(err, txn.ErrConcurrentTransactions) {
			t.Fatalf("End retried with its markers pending: %+v, %v; want %v", got, err, txn.ErrConcurrentTransactions)
		}
		st, _ := l.Image().Transaction("tx")
		if st.State != txn.PrepareAbort || st.ProducerID != p.PID || st.ProducerEpoch != txn.FenceEpoch {
			t.Fatalf("state %+v, want PrepareAbort of pid %d at epoch %d", st, p.PID, txn.FenceEpoch)
		}
		// No batch of the ended transaction's producer id and epoch opens
		// a transaction at the coordinator, nor one at the fence epoch.
		for _, e := range []int16{txn.MaxEpoch, txn.FenceEpoch} {
			q := txn.Producer{ID: "tx", PID: p.PID, Epoch: e}
			if err := co.AddPartitions(ctx, q, []txn.TopicPartition{t0}, false); err == nil {
				t.Fatalf("a batch at epoch %d added to a transaction while the ended one's markers are pending", e)
			}
		}
		m.mu.Lock()
		m.fail = nil
		m.mu.Unlock()
		if bySweep {
			co.sweep(ctx)
			if st, _ := l.Image().Transaction("tx"); st.State != txn.CompleteAbort || st.ProducerID != p.PID {
				t.Fatalf("after the sweep: %+v", st)
			}
		}
		end, err := co.End(ctx, p, false, true)
		if err != nil || end.ProducerID == p.PID || end.ProducerEpoch != 0 {
			t.Fatalf("End retried once the markers can be written (by the sweep: %v): %+v, %v; want a new producer id", bySweep, end, err)
		}
		if got := m.all(); len(got) != 1 || got[0].ProducerEpoch != txn.FenceEpoch || got[0].Commit {
			t.Fatalf("markers %+v", got)
		}
		next := txn.Producer{ID: "tx", PID: end.ProducerID, Epoch: 0}
		if err := co.AddPartitions(ctx, next, []txn.TopicPartition{t0}, false); err != nil {
			t.Fatalf("the next transaction: %v", err)
		}
	}
}

// TestTxnCoordTimeoutAtMaxEpochFences: a transaction at the largest
// epoch aborted at its timeout fences its producer as at any other
// epoch: the markers take the epoch kept for them, and the producer's
// next transaction is refused until it initializes again.
func TestTxnCoordTimeoutAtMaxEpochFences(t *testing.T) {
	co, l, m, clk := setup(t)
	ctx := context.Background()
	p := atMaxEpoch(t, co, l, "tx", false)
	if err := co.AddPartitions(ctx, p, []txn.TopicPartition{t1}, false); err != nil {
		t.Fatal(err)
	}
	clk.ms.Add(10001)
	co.sweep(ctx)
	want := []txn.Marker{{ProducerID: p.PID, ProducerEpoch: txn.FenceEpoch, CoordinatorEpoch: 1, Partitions: []txn.TopicPartition{t1}}}
	if got := m.all(); !reflect.DeepEqual(got, want) {
		t.Fatalf("markers %+v, want %+v", got, want)
	}
	if err := co.AddPartitions(ctx, p, []txn.TopicPartition{t0}, false); !errors.Is(err, txn.ErrProducerFenced) {
		t.Fatalf("the timed-out producer's next transaction: %v, want %v", err, txn.ErrProducerFenced)
	}
	q := initProducer(t, co, "tx", false)
	if q.PID == p.PID || q.Epoch != 0 {
		t.Fatalf("init after the epoch is exhausted: %+v", q)
	}
}

// TestTxnCoordInitAtMaxEpochFences: an Init over a transaction ongoing at
// the largest epoch aborts it with markers at the epoch kept for them,
// fencing its producer, and its retry gets a new producer id.
func TestTxnCoordInitAtMaxEpochFences(t *testing.T) {
	co, l, m, _ := setup(t)
	ctx := context.Background()
	p := atMaxEpoch(t, co, l, "tx", false)
	if err := co.AddPartitions(ctx, p, []txn.TopicPartition{t0}, false); err != nil {
		t.Fatal(err)
	}
	req := txn.InitRequest{ID: "tx", TimeoutMs: 10000, ProducerID: -1, ProducerEpoch: -1}
	if _, err := co.InitProducer(ctx, req); !errors.Is(err, txn.ErrConcurrentTransactions) {
		t.Fatalf("init over the ongoing transaction: %v", err)
	}
	if got := m.all(); len(got) != 1 || got[0].ProducerEpoch != txn.FenceEpoch {
		t.Fatalf("markers %+v, want one at epoch %d", got, txn.FenceEpoch)
	}
	if err := co.AddPartitions(ctx, p, []txn.TopicPartition{t0}, false); !errors.Is(err, txn.ErrProducerFenced) {
		t.Fatalf("the fenced producer's next transaction: %v, want %v", err, txn.ErrProducerFenced)
	}
	got, err := co.InitProducer(ctx, req)
	if err != nil || got.ProducerID == p.PID || got.ProducerEpoch != 0 {
		t.Fatalf("init retried: %+v, %v", got, err)
	}
}
