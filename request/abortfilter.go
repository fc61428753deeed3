package request

import (
	"github.com/quirelog/quire/record"
	"github.com/quirelog/quire/storage"
)

// NewAbortFilter returns the filter of a fetch's aborted transactions
// (nil or empty: only control batches are dropped).
func NewAbortFilter(aborted []storage.AbortedTxn) *record.AbortFilter {
	txns := make([]record.AbortedTxn, len(aborted))
	for i, a := range aborted {
		txns[i] = record.AbortedTxn{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset}
	}
	return record.NewAbortFilter(txns)
}
