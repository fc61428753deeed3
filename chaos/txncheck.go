package chaos

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// The anomalies of the transactional workload (Jepsen's names where it
// has them).
const (
	// A read_committed read of a record of a transaction that never
	// committed.
	AbortedRead = "aborted-read"
	// A record of a transaction whose commit was acknowledged, missing
	// from the final read_committed read.
	LostCommitted = "lost-committed-write"
	// A transaction some of whose records read_committed sees and some
	// not: in the final read, or read by the reader and then gone.
	Torn = "torn-transaction"
	// An input record whose transformation is in the committed output
	// more than once.
	DuplicateOutput = "duplicate-output"
	// The group's committed offset of an input partition disagrees with
	// the output: an input below it not in the committed output, or one at
	// or past it in it.
	OffsetsMismatch = "offsets-output-mismatch"
	// A fenced instance of a transactional application had a write or a
	// commit accepted.
	ZombieAccepted = "zombie-accepted"
	// A read_committed read of a record before its application called
	// Commit: past the last stable offset.
	ReadBeforeCommit = "read-before-commit"
)

// txnAnomalyKinds are the transactional workload's kinds, beside the
// general ones it also reports (Duplicate, Inconsistent, PollSkip,
// ReadOfUnsent, NonmonotonicPoll).
var txnAnomalyKinds = []string{AbortedRead, ReadBeforeCommit, LostCommitted, Torn, DuplicateOutput, OffsetsMismatch, ZombieAccepted}

// TxnReport is what the checker found of the transactional workload.
type TxnReport struct {
	Committed, Aborted, Abandoned, Unknown int
	// CommittedVisible and UnknownVisible are the unknown transactions
	// found committed in the final read, UnknownGone those found aborted.
	UnknownVisible, UnknownGone int
	// FinalRecords are the records the final read_committed read, LogRecords
	// those the read_uncommitted one did, AbortedInLog those of them that
	// belong to transactions that never committed (what read_committed
	// must skip).
	FinalRecords, LogRecords, AbortedInLog int
	Reads                                  int
	// Inputs are the input records, Processed those below the group's
	// committed offsets.
	Inputs, Processed int
}

type txnRecord struct {
	txn       string
	partition int32
	offset    int64 // -1 until the write was answered
}

// ctpInput parses the input position a consume-transform-produce output
// value names ("label.j@partition:offset").
func ctpInput(v string) (position, bool) {
	_, pos, ok := strings.Cut(v, "@")
	if !ok {
		return position{}, false
	}
	ps, os, ok := strings.Cut(pos, ":")
	if !ok {
		return position{}, false
	}
	p, err1 := strconv.ParseInt(ps, 10, 32)
	o, err2 := strconv.ParseInt(os, 10, 64)
	if err1 != nil || err2 != nil {
		return position{}, false
	}
	return position{int32(p), o}, true
}

// checkTxn checks the transactional workload's events of a history.
func (r *Report) checkTxn(events []Event) {
	t := &TxnReport{}
	sent := map[string]*txnRecord{} // value → its transaction and place
	txns := map[string][]string{}   // transaction → its values
	outcome := map[string]Kind{}    // transaction → commit, abort or unknown
	final := map[position]string{}
	finalAt := map[string][]position{}
	logAt := map[position]string{}
	liveRead := map[string]bool{}
	lastRead := map[int32]int64{}
	var skips []struct {
		partition  int32
		prev, next int64
	}
	inputs := map[position]bool{}
	groupOffset := map[int32]int64{}
	active := false
	var reads []Event // checked once every outcome is known
	// committing: the transactions whose Commit has been called so far;
	// early: reads of records of transactions not among them then.
	committing := map[string]bool{}
	var early []Event
	for _, e := range events {
		switch e.Kind {
		case TxnSend:
			active = true
			if sent[e.Value] == nil {
				sent[e.Value] = &txnRecord{txn: e.Txn, partition: e.Partition, offset: -1}
				txns[e.Txn] = append(txns[e.Txn], e.Value)
			}
		case TxnWrite:
			if s := sent[e.Value]; s != nil {
				s.offset = e.Offset
			}
		case TxnCommitting:
			committing[e.Txn] = true
		case TxnCommit, TxnAbort, TxnUnknown:
			outcome[e.Txn] = e.Kind
			switch {
			case e.Kind == TxnCommit:
				t.Committed++
			case e.Kind == TxnUnknown:
				t.Unknown++
			case e.Error == "abandoned":
				t.Abandoned++
			default:
				t.Aborted++
			}
		case TxnZombie:
			r.add(Anomaly{ZombieAccepted, e.Partition, e.Offset, e.Value, fmt.Sprintf("transaction %s: %s", e.Txn, e.Error)})
		case TxnRead:
			if e.Value == txnSentinel {
				break // written plainly once the workload stopped
			}
			t.Reads++
			liveRead[e.Value] = true
			if prev, ok := lastRead[e.Partition]; ok {
				if e.Offset <= prev {
					r.add(Anomaly{NonmonotonicPoll, e.Partition, e.Offset, e.Value,
						fmt.Sprintf("the read_committed reader of %s read offset %d just before", txnTopic, prev)})
				} else if e.Offset > prev+1 {
					skips = append(skips, struct {
						partition  int32
						prev, next int64
					}{e.Partition, prev, e.Offset})
				}
			}
			lastRead[e.Partition] = e.Offset
			reads = append(reads, e)
			if s := sent[e.Value]; s != nil && !committing[s.txn] {
				early = append(early, e)
			}
		case TxnFinal:
			t.FinalRecords++
			p := position{e.Partition, e.Offset}
			if v, ok := final[p]; ok && v != e.Value {
				r.add(Anomaly{Inconsistent, e.Partition, e.Offset, e.Value, fmt.Sprintf("%s: also %q in the final read", txnTopic, v)})
			}
			final[p] = e.Value
			finalAt[e.Value] = append(finalAt[e.Value], p)
			reads = append(reads, e)
		case TxnLog:
			t.LogRecords++
			logAt[position{e.Partition, e.Offset}] = e.Value
			if s := sent[e.Value]; s != nil && outcome[s.txn] == TxnAbort {
				t.AbortedInLog++
			}
		case TxnInput:
			t.Inputs++
			inputs[position{e.Partition, e.Offset}] = true
		case TxnGroupOffset:
			groupOffset[e.Partition] = e.Offset
		}
	}
	if !active {
		return
	}
	r.Txn = t
	for _, e := range reads {
		who := "the read_committed reader"
		if e.Kind == TxnFinal {
			who = "the final read_committed read"
		}
		r.txnReadCheck(e, sent, outcome, who)
	}
	if len(committing) == 0 {
		early = nil // a history from before Commit calls were recorded
	}
	for _, e := range early {
		// Those never committed are aborted reads already.
		if s := sent[e.Value]; outcome[s.txn] == TxnCommit || outcome[s.txn] == TxnUnknown {
			r.add(Anomaly{ReadBeforeCommit, e.Partition, e.Offset, e.Value,
				fmt.Sprintf("the read_committed reader read it before transaction %s called Commit", s.txn)})
		}
	}
	// Skips: a committed record the reader passed over.
	for _, s := range skips {
		for o := s.prev + 1; o < s.next; o++ {
			if v, ok := final[position{s.partition, o}]; ok {
				r.add(Anomaly{PollSkip, s.partition, o, v,
					fmt.Sprintf("the read_committed reader of %s read %d then %d, skipping this committed record", txnTopic, s.prev, s.next)})
				break
			}
		}
	}
	for _, v := range sortedKeys(finalAt) {
		if ps := finalAt[v]; len(ps) > 1 {
			r.add(Anomaly{Duplicate, ps[0].partition, ps[0].offset, v, fmt.Sprintf("%s: read_committed at %v", txnTopic, ps)})
		}
	}
	labels := make([]string, 0, len(txns))
	for l := range txns {
		labels = append(labels, l)
	}
	sort.Strings(labels)
	for _, l := range labels {
		var seen, missing []string
		for _, v := range txns[l] {
			if len(finalAt[v]) > 0 {
				seen = append(seen, v)
			} else {
				missing = append(missing, v)
			}
		}
		switch outcome[l] {
		case TxnCommit:
			for _, v := range missing {
				s := sent[v]
				r.add(Anomaly{LostCommitted, s.partition, s.offset, v, fmt.Sprintf("transaction %s committed, the record not in the final read_committed read%s",
					l, inLog(logAt, s))})
			}
		case TxnUnknown:
			if len(seen) > 0 {
				t.UnknownVisible++
			} else {
				t.UnknownGone++
			}
		}
		if len(seen) > 0 && len(missing) > 0 {
			r.add(Anomaly{Torn, -1, -1, l, fmt.Sprintf("%s (%s): read_committed sees %d of its %d records; missing %v",
				l, outcome[l], len(seen), len(txns[l]), missing)})
			continue
		}
		if len(seen) == 0 {
			for _, v := range txns[l] {
				if liveRead[v] && outcome[l] != TxnAbort {
					r.add(Anomaly{Torn, -1, -1, l, fmt.Sprintf("%s (%s): %q was read by the read_committed reader, yet none of its records are in the final read",
						l, outcome[l], v)})
					break
				}
			}
		}
	}
	r.checkOutput(t, inputs, groupOffset, finalAt)
}

// inLog says whether a record missing from the read_committed read is in
// the log at all.
func inLog(logAt map[position]string, s *txnRecord) string {
	if s.offset < 0 {
		return ""
	}
	if logAt[position{s.partition, s.offset}] != "" {
		return " (read_uncommitted reads it at its offset)"
	}
	return " (nor in the read_uncommitted read)"
}

// txnReadCheck checks one read_committed read: a value some transaction
// sent, of a transaction that did not abort, in the partition it was
// sent to and at the offset its write was answered (when it was).
func (r *Report) txnReadCheck(e Event, sent map[string]*txnRecord, outcome map[string]Kind, who string) {
	s := sent[e.Value]
	switch {
	case s == nil:
		r.add(Anomaly{ReadOfUnsent, e.Partition, e.Offset, e.Value, who + " of " + txnTopic + " read it; no transaction sent it"})
	case outcome[s.txn] == TxnAbort:
		r.add(Anomaly{AbortedRead, e.Partition, e.Offset, e.Value, fmt.Sprintf("%s read it; transaction %s never committed", who, s.txn)})
	case outcome[s.txn] == "":
		// Not ended in the history (the run stopped first): it must be
		// neither visible nor committed; its application's next instance
		// aborted it.
		r.add(Anomaly{AbortedRead, e.Partition, e.Offset, e.Value, fmt.Sprintf("%s read it; transaction %s never ended", who, s.txn)})
	case s.partition != e.Partition || (s.offset >= 0 && s.offset != e.Offset):
		at := fmt.Sprintf("%d/%d", s.partition, s.offset)
		if s.offset < 0 {
			at = fmt.Sprintf("partition %d (its offset never acknowledged)", s.partition)
		}
		r.add(Anomaly{AckMismatch, e.Partition, e.Offset, e.Value, fmt.Sprintf("%s read it here; written at %s", who, at)})
	}
}

// checkOutput checks consume-transform-produce: each input record below
// the group's committed offset of its partition is exactly once in the
// committed output, none at or past it.
func (r *Report) checkOutput(t *TxnReport, inputs map[position]bool, groupOffset map[int32]int64, finalAt map[string][]position) {
	if len(inputs) == 0 && len(groupOffset) == 0 {
		return
	}
	count := map[position][]string{}
	for v := range finalAt {
		if in, ok := ctpInput(v); ok {
			count[in] = append(count[in], v)
		}
	}
	for _, in := range sortedPositions(inputs) {
		outs := count[in]
		slices.Sort(outs)
		below := in.offset < groupOffset[in.partition]
		if below {
			t.Processed++
		}
		switch {
		case len(outs) > 1:
			r.add(Anomaly{DuplicateOutput, in.partition, in.offset, "", fmt.Sprintf("input %s/%d:%d is in the committed output %d times: %v",
				txnInTopic, in.partition, in.offset, len(outs), outs)})
		case below && len(outs) == 0:
			r.add(Anomaly{OffsetsMismatch, in.partition, in.offset, "", fmt.Sprintf("input below the group's committed offset %d, not in the committed output",
				groupOffset[in.partition])})
		case !below && len(outs) > 0:
			r.add(Anomaly{OffsetsMismatch, in.partition, in.offset, outs[0], fmt.Sprintf("in the committed output, at or past the group's committed offset %d",
				groupOffset[in.partition])})
		}
	}
	for _, in := range sortedPositions(count) {
		if !inputs[in] {
			r.add(Anomaly{OffsetsMismatch, in.partition, in.offset, count[in][0], "the committed output names an input record that is not in the input"})
		}
	}
}
