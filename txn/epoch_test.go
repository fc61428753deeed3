package txn

import "testing"

// TestTxnEndExhaustsEpoch: under version 2 the End of a transaction at
// MaxEpoch bumps to FenceEpoch (its markers fence the producer's late
// batches); no producer call is accepted at FenceEpoch, and the
// producer's retry is recognised, at MaxEpoch, by End and by Init.
func TestTxnEndExhaustsEpoch(t *testing.T) {
	cur := initNew(t, true)
	cur.ProducerEpoch, cur.LastProducerEpoch = MaxEpoch, MaxEpoch-1
	cur = mustAdd(t, cur, tp0)
	res, err := End(&cur, 7, MaxEpoch, true, true, 20)
	if err != nil || res.Next == nil || res.Next.ProducerEpoch != FenceEpoch || res.Next.LastProducerEpoch != MaxEpoch || !Exhausted(*res.Next) {
		t.Fatalf("end at MaxEpoch: %+v, %v", res, err)
	}
	if m, _ := Markers(*res.Next); m.ProducerEpoch != FenceEpoch {
		t.Fatalf("markers %+v", m)
	}
	prep := *res.Next
	_, err = AddPartitions(&prep, 7, FenceEpoch, []TopicPartition{tp0}, false, 21)
	wantErr(t, err, ErrProducerFenced)
	_, err = End(&prep, 7, MaxEpoch, true, true, 21)
	wantErr(t, err, ErrConcurrentTransactions)
	done := mustComplete(t, prep)
	for _, e := range []int16{MaxEpoch, FenceEpoch} {
		_, err = AddPartitions(&done, 7, e, []TopicPartition{tp0}, false, 31)
		wantErr(t, err, ErrProducerFenced)
		_, err = AddGroup(&done, 7, e, "g", 31)
		wantErr(t, err, ErrProducerFenced)
	}
	_, err = End(&done, 7, FenceEpoch, false, true, 31)
	wantErr(t, err, ErrProducerFenced)
	res, err = End(&done, 7, MaxEpoch, true, true, 31)
	if err != nil || !res.Done {
		t.Fatalf("end retried once complete: %+v, %v", res, err)
	}
	// The producer that had no answer initializes again with its id
	// and epoch (KIP-360): a new producer id.
	init, err := Init(&done, InitRequest{ID: "tx", TimeoutMs: 1000, ProducerID: 7, ProducerEpoch: MaxEpoch, BumpPerTransaction: true}, maxTimeout)
	if err != nil || !init.AllocateID {
		t.Fatalf("init after the exhausting end: %+v, %v", init, err)
	}
	_, err = Init(&done, InitRequest{ID: "tx", TimeoutMs: 1000, ProducerID: 7, ProducerEpoch: MaxEpoch - 1}, maxTimeout)
	wantErr(t, err, ErrProducerFenced)
}

// TestTxnAbortAtMaxEpochFences: an Init over, or the timeout of, a
// transaction at MaxEpoch bumps to FenceEpoch, fencing its producer.
func TestTxnAbortAtMaxEpochFences(t *testing.T) {
	cur := initNew(t, false)
	cur.ProducerEpoch = MaxEpoch
	cur = mustAdd(t, cur, tp0)
	res, err := Init(&cur, InitRequest{ID: "tx", TimeoutMs: 1000, ProducerID: -1, ProducerEpoch: -1}, maxTimeout)
	if err != nil || !res.Aborting || res.Next.ProducerEpoch != FenceEpoch {
		t.Fatalf("init over a transaction at MaxEpoch: %+v, %v", res, err)
	}
	done := mustComplete(t, res.Next)
	_, err = AddPartitions(&done, 7, MaxEpoch, []TopicPartition{tp0}, false, 40)
	wantErr(t, err, ErrProducerFenced)
	next, expired := Expired(cur, cur.StartMs+int64(cur.TimeoutMs)+1)
	if !expired || next.ProducerEpoch != FenceEpoch {
		t.Fatalf("timeout at MaxEpoch: %+v, %v", next, expired)
	}
	done = mustComplete(t, next)
	_, err = AddPartitions(&done, 7, MaxEpoch, []TopicPartition{tp0}, false, 40)
	wantErr(t, err, ErrProducerFenced)
}
