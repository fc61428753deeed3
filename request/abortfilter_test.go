package request

import (
	"testing"

	"github.com/quirelog/quire/record"
	"github.com/quirelog/quire/storage"
)

// TestAbortFilterDropsAbortedAndMarkers: batches of an aborted
// transaction are dropped up to its marker, those of a committed one and
// of other producers kept, markers always dropped.
func TestAbortFilterDropsAbortedAndMarkers(t *testing.T) {
	hdr := func(off int64, pid int64, txn, control bool) *record.Header {
		h := &record.Header{BaseOffset: off, ProducerID: pid}
		if txn {
			h.Attributes |= record.AttrTransactional
		}
		if control {
			h.Attributes |= record.AttrControl | record.AttrTransactional
		}
		return h
	}
	f := NewAbortFilter([]storage.AbortedTxn{{ProducerID: 1, FirstOffset: 2, LastOffset: 5}})
	steps := []struct {
		h    *record.Header
		skip bool
	}{
		{hdr(0, 1, true, false), false},   // producer 1's committed transaction
		{hdr(1, 1, false, true), true},    // its commit marker
		{hdr(2, 1, true, false), true},    // the aborted one
		{hdr(3, 2, true, false), false},   // another producer
		{hdr(4, -1, false, false), false}, // no producer
		{hdr(5, 1, false, true), true},    // the abort marker
		{hdr(6, 1, true, false), false},   // producer 1's next transaction
	}
	for i, s := range steps {
		if got := f.Skip(s.h); got != s.skip {
			t.Fatalf("step %d (offset %d): skip %v, want %v", i, s.h.BaseOffset, got, s.skip)
		}
	}
}
