package chaos

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
)

// txnHist builds histories of the transactional workload: each
// transaction's records get the next offsets of their partitions, and
// each partition it touched a marker after them.
type txnHist struct {
	*hist
	next map[int32]int64
	at   map[string]position
}

func newTxnHist() *txnHist {
	return &txnHist{hist: newHist(), next: map[int32]int64{}, at: map[string]position{}}
}

// tx writes a transaction: values by partition, in partition order,
// then its end (TxnCommit, TxnAbort with why, TxnUnknown).
func (h *txnHist) tx(label string, end Kind, why string, recs map[int32][]string) *txnHist {
	proc, _, _ := cutLast(label)
	for _, p := range slices.Sorted(func(yield func(int32) bool) {
		for p := range recs {
			if !yield(p) {
				return
			}
		}
	}) {
		for _, v := range recs[p] {
			h.add(Event{Kind: TxnSend, Process: proc, Txn: label, Partition: p, Value: v})
		}
		for _, v := range recs[p] {
			h.at[v] = position{p, h.next[p]}
			h.add(Event{Kind: TxnWrite, Process: proc, Txn: label, Partition: p, Offset: h.next[p], Value: v})
			h.next[p]++
		}
	}
	if end != TxnAbort {
		h.add(Event{Kind: TxnCommitting, Process: proc, Txn: label})
	}
	h.add(Event{Kind: end, Process: proc, Txn: label, Error: why})
	for p := range recs {
		h.next[p]++ // the marker
	}
	return h
}

func cutLast(label string) (string, string, bool) {
	for i := len(label) - 1; i >= 0; i-- {
		if label[i] == '.' {
			return label[:i], label[i+1:], true
		}
	}
	return label, "", false
}

func (h *txnHist) offsets(label string, p int32, next int64) *txnHist {
	h.add(Event{Kind: TxnOffsets, Process: "ctp0", Txn: label, Partition: p, Offset: next})
	return h
}

func (h *txnHist) read(kind Kind, values ...string) *txnHist {
	for _, v := range values {
		at := h.at[v]
		h.add(Event{Kind: kind, Process: "tr", Partition: at.partition, Offset: at.offset, Value: v})
	}
	return h
}

// committedValues are the records of clean's transactions that
// read_committed must see, in log order.
var committedValues = []string{"tw0.1.0.0", "tw0.1.0.1", "tw0.1.1.0", "tw0.3.0.0", "tw0.3.1.0",
	"ctp0.1.0@0:0", "ctp0.1.1@0:1", "ctp0.3.0@0:2"}

// txnClean is a history of the transactional workload with nothing
// wrong: a committed transaction over two partitions, an aborted one, an
// abandoned one, two of unknown outcome (one committed, one not), and
// consume-transform-produce of three of four inputs, one transaction of
// it aborted and done again; the reader saw some committed records, the
// final reads the rest.
func txnClean() *txnHist {
	h := newTxnHist()
	h.tx("tw0.1", TxnCommit, "", map[int32][]string{0: {"tw0.1.0.0", "tw0.1.0.1"}, 1: {"tw0.1.1.0"}})
	h.tx("tw0.2", TxnAbort, "deliberate", map[int32][]string{0: {"tw0.2.0.0"}, 2: {"tw0.2.2.0"}})
	h.tx("tw0.3", TxnUnknown, "timeout", map[int32][]string{0: {"tw0.3.0.0"}, 1: {"tw0.3.1.0"}})
	h.tx("tw0.4", TxnUnknown, "timeout", map[int32][]string{1: {"tw0.4.1.0"}, 2: {"tw0.4.2.0"}})
	h.tx("tw0.5", TxnAbort, "abandoned", map[int32][]string{2: {"tw0.5.2.0"}})
	h.offsets("ctp0.1", 0, 2).tx("ctp0.1", TxnCommit, "", map[int32][]string{0: {"ctp0.1.0@0:0"}, 1: {"ctp0.1.1@0:1"}})
	h.offsets("ctp0.2", 0, 3).tx("ctp0.2", TxnAbort, "deliberate", map[int32][]string{2: {"ctp0.2.0@0:2"}})
	h.offsets("ctp0.3", 0, 3).tx("ctp0.3", TxnCommit, "", map[int32][]string{2: {"ctp0.3.0@0:2"}})
	h.read(TxnRead, "tw0.1.0.0", "tw0.1.0.1", "tw0.1.1.0")
	// The reader reads on past the end the final reads stop at.
	h.add(Event{Kind: TxnRead, Process: "tr", Partition: 1, Offset: 99, Value: txnSentinel})
	h.read(TxnFinal, committedValues...)
	h.read(TxnLog, "tw0.1.0.0", "tw0.1.0.1", "tw0.1.1.0", "tw0.2.0.0", "tw0.2.2.0", "tw0.3.0.0", "tw0.3.1.0", "tw0.4.1.0", "tw0.4.2.0", "tw0.5.2.0")
	for o := range 4 {
		h.add(Event{Kind: TxnInput, Partition: 0, Offset: int64(o), Value: fmt.Sprintf("in-0-%d", o)})
	}
	h.add(Event{Kind: TxnGroupOffset, Partition: 0, Offset: 3})
	return h
}

// without drops the events of kind whose value is v.
func (h *txnHist) without(kind Kind, v string) []Event {
	return slices.DeleteFunc(slices.Clone(h.events), func(e Event) bool { return e.Kind == kind && e.Value == v })
}

func TestChaosTxnCheckerCleanHistory(t *testing.T) {
	h := txnClean()
	r := Check(h.events)
	if !r.OK() {
		t.Fatalf("clean history reported anomalies:\n%s", r.Summary())
	}
	tr := r.Txn
	if tr == nil || tr.Committed != 3 || tr.Aborted != 2 || tr.Abandoned != 1 || tr.Unknown != 2 ||
		tr.UnknownVisible != 1 || tr.UnknownGone != 1 || tr.FinalRecords != len(committedValues) || tr.AbortedInLog != 3 ||
		tr.Inputs != 4 || tr.Processed != 3 {
		t.Fatalf("counts %+v", tr)
	}
	// Without the transactional workload: no part of the report.
	if r := Check(clean().events); r.Txn != nil {
		t.Fatalf("a history without transactions has a transactional report %+v", r.Txn)
	}
}

// TestChaosTxnCheckerFindsAnomalies: each anomaly added to the clean
// history is reported, and only where it is.
func TestChaosTxnCheckerFindsAnomalies(t *testing.T) {
	for _, tc := range []struct {
		name   string
		kind   string
		events func(h *txnHist) []Event
	}{
		{"aborted read by the reader", AbortedRead, func(h *txnHist) []Event {
			return h.read(TxnRead, "tw0.2.0.0").events
		}},
		{"aborted read in the final read", AbortedRead, func(h *txnHist) []Event {
			return h.read(TxnFinal, "tw0.5.2.0").events
		}},
		{"lost committed write", LostCommitted, func(h *txnHist) []Event {
			return h.without(TxnFinal, "tw0.1.1.0")
		}},
		{"torn transaction of unknown outcome", Torn, func(h *txnHist) []Event {
			return h.without(TxnFinal, "tw0.3.1.0")
		}},
		{"torn: read, then gone", Torn, func(h *txnHist) []Event {
			return h.read(TxnRead, "tw0.4.2.0").events
		}},
		{"duplicate record", Duplicate, func(h *txnHist) []Event {
			return h.add(Event{Kind: TxnFinal, Partition: 0, Offset: 40, Value: "tw0.1.0.1"}).events
		}},
		{"input transformed twice", DuplicateOutput, func(h *txnHist) []Event {
			h.offsets("ctp0.4", 0, 2).tx("ctp0.4", TxnCommit, "", map[int32][]string{1: {"ctp0.4.0@0:1"}})
			return h.read(TxnFinal, "ctp0.4.0@0:1").events
		}},
		{"group offset past an unprocessed input", OffsetsMismatch, func(h *txnHist) []Event {
			return h.add(Event{Kind: TxnGroupOffset, Partition: 0, Offset: 4}).events
		}},
		{"output past the group's offset", OffsetsMismatch, func(h *txnHist) []Event {
			return h.add(Event{Kind: TxnGroupOffset, Partition: 0, Offset: 2}).events
		}},
		{"read before the commit", ReadBeforeCommit, func(h *txnHist) []Event {
			// The reader's read of tw0.1.1.0 comes before tw0.1 calls
			// Commit.
			events := h.without(TxnRead, "tw0.1.1.0")
			i := slices.IndexFunc(events, func(e Event) bool { return e.Kind == TxnCommitting && e.Txn == "tw0.1" })
			at := h.at["tw0.1.1.0"]
			return slices.Insert(events, i, Event{Kind: TxnRead, Process: "tr", Partition: at.partition, Offset: at.offset, Value: "tw0.1.1.0"})
		}},
		{"zombie accepted", ZombieAccepted, func(h *txnHist) []Event {
			return h.add(Event{Kind: TxnZombie, Process: "tw0", Txn: "tw0.5", Error: "a fenced instance's commit was accepted"}).events
		}},
		{"committed record skipped by the reader", PollSkip, func(h *txnHist) []Event {
			return h.read(TxnRead, "ctp0.1.0@0:0").events
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Check(tc.events(txnClean()))
			if r.Count(tc.kind) == 0 {
				t.Fatalf("%s not reported:\n%s", tc.kind, r.Summary())
			}
			for _, a := range r.Anomalies {
				// A record missing from a committed transaction tears it
				// too; a record at two offsets is at most once where it
				// was written.
				if a.Kind != tc.kind && !(tc.kind == LostCommitted && a.Kind == Torn) && !(tc.kind == Duplicate && a.Kind == AckMismatch) {
					t.Errorf("also reported: %s", a)
				}
			}
		})
	}
}

// TestChaosTxnCheckerHistoryRoundTrip: a transactional history written
// and read back checks the same.
func TestChaosTxnCheckerHistoryRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	h := NewHistory(&buf)
	for _, e := range txnClean().events {
		h.Add(e)
	}
	events, err := ReadHistory(&buf)
	if err != nil {
		t.Fatal(err)
	}
	r := Check(events)
	if !r.OK() || r.Txn == nil || r.Txn.Committed != 3 {
		t.Fatalf("re-read history: %+v\n%s", r.Txn, r.Summary())
	}
}

// TestChaosTxnCheckerRecordInWrongPartition: a committed record read in
// another partition than it was sent to is an anomaly, at the offset its
// write was answered or with its write unanswered.
func TestChaosTxnCheckerRecordInWrongPartition(t *testing.T) {
	v := "tw0.1.1.0"
	for _, acked := range []bool{true, false} {
		events := []Event{{Kind: TxnSend, Process: "tw0", Txn: "tw0.1", Partition: 1, Value: v}}
		if acked {
			events = append(events, Event{Kind: TxnWrite, Process: "tw0", Txn: "tw0.1", Partition: 1, Offset: 5, Value: v})
		}
		events = append(events,
			Event{Kind: TxnCommitting, Process: "tw0", Txn: "tw0.1"},
			Event{Kind: TxnCommit, Process: "tw0", Txn: "tw0.1"},
			Event{Kind: TxnRead, Process: "tr", Partition: 2, Offset: 5, Value: v},
			Event{Kind: TxnFinal, Partition: 2, Offset: 5, Value: v},
		)
		r := Check(events)
		if !slices.ContainsFunc(r.Anomalies, func(a Anomaly) bool { return a.Kind == AckMismatch && a.Partition == 2 }) {
			t.Errorf("write answered %v: a record sent to partition 1 and read in partition 2: anomalies %+v, want %s", acked, r.Anomalies, AckMismatch)
		}
	}
}
