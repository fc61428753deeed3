package record

import (
	"cmp"
	"slices"
)

// AbortedTxn is an aborted transaction as a fetch answers it: its
// producer and the offset of its first batch.
type AbortedTxn struct {
	ProducerID, FirstOffset int64
}

// AbortFilter tells a read_committed reader which batches of a fetch to
// drop, as Kafka's consumers do with a fetch's aborted transactions:
// walking the batches in order, a producer's transactional batches are
// dropped from its aborted transaction's first offset until its abort
// marker. Control batches are never records for an application; Skip
// reports them too. With no aborted transactions it drops the markers
// only.
type AbortFilter struct {
	pending []AbortedTxn   // by first offset, not yet reached
	active  map[int64]bool // producers inside an aborted transaction
}

// NewAbortFilter returns the filter of a fetch's aborted transactions;
// it keeps aborted, sorted by first offset.
func NewAbortFilter(aborted []AbortedTxn) *AbortFilter {
	slices.SortFunc(aborted, func(a, b AbortedTxn) int { return cmp.Compare(a.FirstOffset, b.FirstOffset) })
	return &AbortFilter{pending: aborted}
}

// Skip reports whether the batch with header h, the next in offset
// order, is to be dropped.
func (f *AbortFilter) Skip(h *Header) bool {
	for len(f.pending) > 0 && f.pending[0].FirstOffset <= h.LastOffset() {
		if f.active == nil {
			f.active = map[int64]bool{}
		}
		f.active[f.pending[0].ProducerID] = true
		f.pending = f.pending[1:]
	}
	if h.Control() {
		// A marker ends its producer's transaction, aborted or not.
		delete(f.active, h.ProducerID)
		return true
	}
	return h.Transactional() && f.active[h.ProducerID]
}
