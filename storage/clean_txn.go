package storage

// Transactions in a clean pass, by Kafka's rules. Every transaction with
// a batch below the first uncleanable offset has ended (that offset is at
// most the last stable offset), and the aborted ones are all in the
// aborted-transactions index (Log.aborted): a transactional batch is
// aborted when an entry of its producer spans it (first offset to abort
// marker), committed otherwise. So a pass
//
//   - maps the keys of committed transactional records like any other
//     record, and never those of aborted ones (an aborted record must not
//     hide an older committed one);
//   - removes every record of an aborted transaction, keeping the batch
//     empty if it is the last batch of a producer the log tracks (as for
//     any other batch);
//   - deduplicates committed transactional records like any other;
//   - decides for each marker whether its transaction has a batch left:
//     the pass reads the log from its start, so a transaction with no
//     batch met before its marker has none. Such a marker may go, but not
//     at once: the first pass that finds it so stamps it with a delete
//     horizon (record.SetDeleteHorizon: now + delete.retention.ms, kept
//     in the batch itself, so across restarts and on whichever replica
//     reads it), and a pass after the horizon removes it. A marker whose
//     transaction still has a batch (even one this pass empties) stays
//     as it is, so that a consumer that read the records finds it; the
//     next pass finds the transaction empty and stamps it. Two passes and
//     delete.retention.ms at least, as Kafka;
//   - rewrites each cleaned segment's .txnindex with the entries of the
//     aborted transactions whose markers stay there and that still have a
//     batch: a read_committed fetch needs no entry for a transaction with
//     no record left.

import (
	"sort"

	"github.com/quirelog/quire/record"
)

// txnClean is a pass's view of the transactions of the log.
type txnClean struct {
	// byProducer is each producer's aborted transactions by first offset.
	byProducer map[int64][]AbortedTxn
	// seen: the aborted transactions (by marker offset) with a batch met
	// by the pass.
	seen map[int64]bool
	// open: the producers with a committed transaction's batch met and
	// its marker not yet.
	open map[int64]bool
	// kept collects the index entries of the markers kept with batches,
	// for the group being written.
	kept []AbortedTxn
}

// newTxnClean takes the log's aborted transactions (appendMu or txnMu
// held by the caller's snapshot).
func newTxnClean(aborted []AbortedTxn) *txnClean {
	t := &txnClean{byProducer: map[int64][]AbortedTxn{}, seen: map[int64]bool{}, open: map[int64]bool{}}
	for _, a := range aborted {
		t.byProducer[a.ProducerID] = append(t.byProducer[a.ProducerID], a)
	}
	for _, l := range t.byProducer {
		sort.Slice(l, func(i, j int) bool { return l[i].FirstOffset < l[j].FirstOffset })
	}
	return t
}

// abortedAt returns the aborted transaction of the producer spanning
// offset, if any.
func (t *txnClean) abortedAt(pid, offset int64) (AbortedTxn, bool) {
	l := t.byProducer[pid]
	i := sort.Search(len(l), func(i int) bool { return l[i].FirstOffset > offset }) - 1
	if i >= 0 && l[i].LastOffset >= offset {
		return l[i], true
	}
	return AbortedTxn{}, false
}

// aborted says whether a data batch belongs to an aborted transaction.
func (t *txnClean) aborted(h *record.Header) bool {
	if !h.Transactional() || h.Control() {
		return false
	}
	_, ok := t.abortedAt(h.ProducerID, h.BaseOffset)
	return ok
}

// onBatch notes a data batch the pass meets, in offset order, and says
// whether it belongs to an aborted transaction (its records all go).
func (t *txnClean) onBatch(h *record.Header) bool {
	if !h.Transactional() {
		return false
	}
	if a, ok := t.abortedAt(h.ProducerID, h.BaseOffset); ok {
		t.seen[a.LastOffset] = true
		return true
	}
	t.open[h.ProducerID] = true
	return false
}

// onMarker notes a marker the pass meets and says whether its
// transaction has no batch left (the marker may go, after its delete
// horizon). A kept abort marker's index entry goes into kept.
func (t *txnClean) onMarker(h *record.Header, m record.Marker) bool {
	switch m.Type {
	case record.ControlAbort:
		a, ok := t.abortedAt(h.ProducerID, h.BaseOffset)
		if !ok || a.LastOffset != h.BaseOffset {
			// No entry of its own: an earlier pass found its
			// transaction empty and dropped the entry.
			return true
		}
		if t.seen[a.LastOffset] {
			delete(t.seen, a.LastOffset)
			t.kept = append(t.kept, a)
			return false
		}
		return true
	case record.ControlCommit:
		had := t.open[h.ProducerID]
		delete(t.open, h.ProducerID)
		return !had
	}
	return false
}

// takeKept returns the entries kept since the last call.
func (t *txnClean) takeKept() []AbortedTxn {
	k := t.kept
	t.kept = nil
	return k
}

// abortedIn returns the log's entries whose markers lie in [from, to).
func (l *Log) abortedIn(from, to int64) []AbortedTxn {
	l.txnMu.RLock()
	defer l.txnMu.RUnlock()
	i := sort.Search(len(l.aborted), func(i int) bool { return l.aborted[i].LastOffset >= from })
	j := sort.Search(len(l.aborted), func(i int) bool { return l.aborted[i].LastOffset >= to })
	return append([]AbortedTxn(nil), l.aborted[i:j]...)
}

// replaceAborted replaces the log's entries whose markers lie in [from,
// to) (a swapped-in cleaned segment's range) by kept, in marker order.
func (l *Log) replaceAborted(from, to int64, kept []AbortedTxn) {
	l.txnMu.Lock()
	defer l.txnMu.Unlock()
	i := sort.Search(len(l.aborted), func(i int) bool { return l.aborted[i].LastOffset >= from })
	j := sort.Search(len(l.aborted), func(i int) bool { return l.aborted[i].LastOffset >= to })
	out := make([]AbortedTxn, 0, len(l.aborted)-(j-i)+len(kept))
	out = append(out, l.aborted[:i]...)
	out = append(out, kept...)
	l.aborted = append(out, l.aborted[j:]...)
}
