package client

import (
	"slices"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/record"
)

// abortFilter drops, for a read_committed consumer, the batches of a
// fetch's aborted transactions (a producer's transactional batches from
// the transaction's first offset until its abort marker) and every
// marker, as Kafka's consumers do. With no aborted transactions it drops
// the markers only.
type abortFilter struct {
	pending []*quirev1.AbortedTransaction // by first offset, not reached yet
	active  map[int64]bool
}

func newAbortFilter(aborted []*quirev1.AbortedTransaction) *abortFilter {
	f := &abortFilter{pending: slices.Clone(aborted)}
	slices.SortFunc(f.pending, func(a, b *quirev1.AbortedTransaction) int {
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

// skip reports whether the batch with header h, the next in offset
// order, is dropped.
func (f *abortFilter) skip(h *record.Header) bool {
	for len(f.pending) > 0 && f.pending[0].FirstOffset <= h.LastOffset() {
		if f.active == nil {
			f.active = map[int64]bool{}
		}
		f.active[f.pending[0].ProducerId] = true
		f.pending = f.pending[1:]
	}
	if h.Control() {
		delete(f.active, h.ProducerID)
		return true
	}
	return h.Transactional() && f.active[h.ProducerID]
}
