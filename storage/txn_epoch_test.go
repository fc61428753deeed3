package storage

import (
	"math"
	"testing"

	"github.com/quirelog/quire/record"
)

// TestLogTxnEndedAtLargestEpoch: a transaction at the largest epoch a
// producer is given (math.MaxInt16 - 1) is ended by a marker at the one
// past it, kept for markers: the transaction is closed, and a late batch
// of its producer at its epoch is refused, never opening a transaction
// no marker would end.
func TestLogTxnEndedAtLargestEpoch(t *testing.T) {
	t.Parallel()
	l := openTest(t, t.TempDir(), smallConfig(), 0)
	defer l.Close()
	const maxEpoch = math.MaxInt16 - 1
	mustAppend(t, l, txnBatch(1, maxEpoch, 0, 2, 1), 0)
	if !l.InTransaction(1, maxEpoch) {
		t.Fatal("no transaction open at the largest epoch")
	}
	mustMarker(t, l, 1, math.MaxInt16, record.ControlCommit, 3)
	if l.InTransaction(1, maxEpoch) || l.InTransaction(1, math.MaxInt16) {
		t.Fatal("a transaction still open after its marker")
	}
	wantUnstable(t, l, math.MaxInt64)
	if _, err := l.AppendAsLeader(txnBatch(1, maxEpoch, 2, 1, 2), 0); !isErr(err, ErrInvalidProducerEpoch) {
		t.Fatalf("a late batch at the largest epoch after the marker: %v, want %v", err, ErrInvalidProducerEpoch)
	}
}
