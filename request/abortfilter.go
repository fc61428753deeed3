package request

import (
	"slices"

	"github.com/quirelog/quire/record"
	"github.com/quirelog/quire/storage"
)

// AbortFilter tells a read_committed reader which batches of a fetch to
// drop, as Kafka's consumers do with a fetch's aborted transactions:
// walking the batches in order, a producer's transactional batches are
// dropped from its aborted transaction's first offset until its abort
// marker. Control batches are never records for an application; Skip
// reports them too.
type AbortFilter struct {
	pending []storage.AbortedTxn // by first offset, not yet reached
	active  map[int64]bool       // producers inside an aborted transaction
}

// NewAbortFilter returns the filter of a fetch's aborted transactions
// (nil or empty: only control batches are dropped).
func NewAbortFilter(aborted []storage.AbortedTxn) *AbortFilter {
	f := &AbortFilter{pending: slices.Clone(aborted)}
	slices.SortFunc(f.pending, func(a, b storage.AbortedTxn) int {
		switch {
		case a.FirstOffset < b.FirstOffset:
			return -1
		case a.FirstOffset > b.FirstOffset:
			return 1
		}
		return 0
	})
	return f
}

// Skip reports whether the batch with header h, the next in offset
// order, is to be dropped.
func (f *AbortFilter) Skip(h *record.Header) bool {
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
