package client

import (
	"math"
	"testing"

	"github.com/quirelog/quire/record"
)

func numberingBatch(n int) *pbatch {
	b := &pbatch{b: record.NewBuilder(record.None)}
	for i := 0; i < n; i++ {
		b.b.Append(1, nil, []byte("v"), nil)
		b.recs = append(b.recs, promise{})
	}
	return b
}

func seqOf(t *testing.T, b *pbatch) record.Header {
	t.Helper()
	b.build()
	h, err := record.ValidateDeep(append(append([]byte(nil), b.hdr...), b.body...))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// The numbering rules: new batches take consecutive sequences; a batch
// sent before keeps its own; a new epoch restarts at 0 only when nothing
// of the partition is unresolved; refused batches renumber under it.
func TestProducerNumbering(t *testing.T) {
	t.Parallel()
	pp := &prodPart{pid: -1}
	a, b := numberingBatch(3), numberingBatch(2)
	pp.number([]*pbatch{a, b}, 7, 0)
	if ha, hb := seqOf(t, a), seqOf(t, b); ha.ProducerID != 7 || ha.BaseSequence != 0 || hb.BaseSequence != 3 || pp.nextSeq != 5 {
		t.Fatalf("first batches: %d, %d, next %d", ha.BaseSequence, hb.BaseSequence, pp.nextSeq)
	}
	// b is to be resent while the producer moved to epoch 1: b keeps
	// epoch 0 and its sequence, c follows it under epoch 0.
	a.state, b.state = batchAcked, batchResend
	pp.flight = []*pbatch{a, b}
	c := numberingBatch(1)
	pp.number([]*pbatch{b, c}, 7, 1)
	if hb, hc := seqOf(t, b), seqOf(t, c); hb.ProducerEpoch != 0 || hb.BaseSequence != 3 || hc.ProducerEpoch != 0 || hc.BaseSequence != 5 {
		t.Fatalf("retry under the old epoch: b %d/%d, c %d/%d", hb.ProducerEpoch, hb.BaseSequence, hc.ProducerEpoch, hc.BaseSequence)
	}
	// Nothing unresolved: the next batch starts epoch 1 at 0.
	b.state, c.state = batchAcked, batchAcked
	pp.flight = append(pp.flight, c)
	d := numberingBatch(4)
	pp.number([]*pbatch{d}, 7, 1)
	if hd := seqOf(t, d); hd.ProducerEpoch != 1 || hd.BaseSequence != 0 {
		t.Fatalf("new epoch: %d/%d", hd.ProducerEpoch, hd.BaseSequence)
	}
	// d refused as out of order: renumbered (already built) under epoch 2.
	p := &producer{}
	p.ident.id, p.ident.epoch = 7, 1
	p.ident.bump(d.pid, d.epoch)
	d.numbered = false
	if !p.ident.stale {
		t.Fatal("no epoch bump asked for")
	}
	pp.number([]*pbatch{d}, 7, 2)
	if hd := seqOf(t, d); hd.ProducerEpoch != 2 || hd.BaseSequence != 0 || pp.nextSeq != 4 {
		t.Fatalf("renumbered: %d/%d", hd.ProducerEpoch, hd.BaseSequence)
	}
	// A bump for an epoch already left behind asks for nothing.
	p.ident.stale, p.ident.epoch = false, 2
	p.ident.bump(7, 1)
	if p.ident.stale {
		t.Fatal("bump of an old epoch")
	}
	// Sequences wrap from 2^31-1 to 0.
	pp.nextSeq = math.MaxInt32 - 1
	e, f := numberingBatch(3), numberingBatch(1)
	pp.number([]*pbatch{e, f}, 7, 2)
	if he, hf := seqOf(t, e), seqOf(t, f); he.BaseSequence != math.MaxInt32-1 || hf.BaseSequence != 1 {
		t.Fatalf("wrap: %d, %d", he.BaseSequence, hf.BaseSequence)
	}
}
