package client

import (
	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/record"
)

// newAbortFilter drops, for a read_committed consumer, the batches of a
// fetch's aborted transactions and every marker (record.AbortFilter).
func newAbortFilter(aborted []*quirev1.AbortedTransaction) *record.AbortFilter {
	txns := make([]record.AbortedTxn, len(aborted))
	for i, a := range aborted {
		txns[i] = record.AbortedTxn{ProducerID: a.GetProducerId(), FirstOffset: a.GetFirstOffset()}
	}
	return record.NewAbortFilter(txns)
}
