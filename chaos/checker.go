package chaos

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// The anomalies the checker reports (Jepsen's names for Kafka's, where
// it has them).
const (
	// An acknowledged write missing from the final read (or, without a
	// final read, never read while later offsets of its partition were).
	Lost = "lost-write"
	// One value read at two offsets.
	Duplicate = "duplicate"
	// Two values read (or acknowledged) at one offset.
	Inconsistent = "inconsistent-offsets"
	// A write acknowledged at one offset and read at another.
	AckMismatch = "ack-offset-mismatch"
	// A producer's later write to a partition acknowledged at a lower
	// offset than its earlier one.
	NonmonotonicSend = "nonmonotonic-send"
	// A reader's successive reads of a partition going backwards.
	NonmonotonicPoll = "nonmonotonic-poll"
	// A reader's successive reads of a partition jumping over records that
	// exist.
	PollSkip = "poll-skip"
	// A value read whose write definitely failed.
	ReadOfFailed = "read-of-failed-write"
	// A value read that no producer sent.
	ReadOfUnsent = "read-of-unsent-value"
	// A client's successive observations of a partition's high watermark
	// going backwards.
	HWBackwards = "hw-backwards"
	// Two members of the group owning one partition at once, as their
	// own assignment callbacks tell.
	TwoOwners = "two-owners"
	// A client's successive observations of the group's committed offset
	// of a partition going backwards.
	CommittedBackwards = "committed-backwards"
	// An acknowledged write below the group's last committed offset that
	// no member of the group read: committed without being processed.
	GroupMissed = "group-missed"
)

// anomalyKinds are every kind, in the order the summary lists them.
var anomalyKinds = []string{Lost, Duplicate, Inconsistent, AckMismatch, NonmonotonicSend, NonmonotonicPoll, PollSkip,
	ReadOfFailed, ReadOfUnsent, HWBackwards, TwoOwners, CommittedBackwards, GroupMissed, ReplicasDiffer}

// Anomaly is one finding.
type Anomaly struct {
	Kind      string
	Partition int32
	Offset    int64
	Value     string
	Detail    string
}

func (a Anomaly) String() string {
	return fmt.Sprintf("%s: partition %d offset %d value %q: %s", a.Kind, a.Partition, a.Offset, a.Value, a.Detail)
}

// Report is what the checker found in a history.
type Report struct {
	Sent, Acked, Failed, Unknown int
	Reads, FinalRecords          int
	// GroupReads are the records group members read, Handovers the
	// partitions given to a member.
	GroupReads, Handovers int
	Anomalies             []Anomaly
	// Faults counts the faults injected, by kind.
	Faults map[string]int
	// Txn is the transactional workload's part, nil without it.
	Txn *TxnReport
	// Unavailable is, per kind of fault, the longest time a partition went
	// without an acknowledged write while such a fault was under way.
	Unavailable map[string]time.Duration
}

// OK reports whether no anomaly was found.
func (r *Report) OK() bool { return len(r.Anomalies) == 0 }

// Count is how many anomalies of kind were found.
func (r *Report) Count(kind string) int {
	n := 0
	for _, a := range r.Anomalies {
		if a.Kind == kind {
			n++
		}
	}
	return n
}

// Summary prints the report for people: counts, anomalies by kind (the
// first few of each), faults and the longest unavailability per kind.
func (r *Report) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "writes: %d sent, %d acknowledged, %d failed, %d unknown; %d reads, %d records in the final read\n",
		r.Sent, r.Acked, r.Failed, r.Unknown, r.Reads, r.FinalRecords)
	if r.GroupReads > 0 || r.Handovers > 0 {
		fmt.Fprintf(&b, "group: %d records read by members, %d partitions handed to a member\n", r.GroupReads, r.Handovers)
	}
	if t := r.Txn; t != nil {
		fmt.Fprintf(&b, "transactions: %d committed, %d aborted on purpose or after a failure, %d abandoned (fenced by a new instance), %d unknown (%d found committed, %d not)\n",
			t.Committed, t.Aborted, t.Abandoned, t.Unknown, t.UnknownVisible, t.UnknownGone)
		fmt.Fprintf(&b, "transactional output: %d records read_committed after healing, %d in the log (%d of transactions never committed), %d read by the read_committed reader; input: %d records, %d below the group's offsets\n",
			t.FinalRecords, t.LogRecords, t.AbortedInLog, t.Reads, t.Inputs, t.Processed)
	}
	kinds := anomalyKinds
	if r.Txn != nil {
		kinds = append(slices.Clone(kinds), txnAnomalyKinds...)
	}
	for _, k := range kinds {
		fmt.Fprintf(&b, "%-24s %d\n", k, r.Count(k))
	}
	shown := map[string]int{}
	for _, a := range r.Anomalies {
		if shown[a.Kind]++; shown[a.Kind] <= 5 {
			fmt.Fprintf(&b, "  %s\n", a)
		}
	}
	var faults []string
	for k := range r.Faults {
		faults = append(faults, k)
	}
	sort.Strings(faults)
	for _, k := range faults {
		fmt.Fprintf(&b, "fault %-20s %3d times, longest without an acknowledged write: %v\n", k, r.Faults[k], r.Unavailable[k].Round(time.Millisecond))
	}
	if r.OK() {
		b.WriteString("no anomalies\n")
	} else {
		fmt.Fprintf(&b, "%d anomalies\n", len(r.Anomalies))
	}
	return b.String()
}

type position struct {
	partition int32
	offset    int64
}

// Check checks a history.
func Check(events []Event) *Report {
	r := &Report{Faults: map[string]int{}, Unavailable: map[string]time.Duration{}}
	sent := map[string]bool{}
	failed := map[string]bool{}
	acked := map[string]position{}
	// Every value seen at each position, and every position of each value
	// as read (acknowledgements apart).
	at := map[position]map[string]bool{}
	readAt := map[string]map[position]bool{}
	final := map[int32]map[int64]string{}
	maxRead := map[int32]int64{}
	see := func(p position, v string) {
		if at[p] == nil {
			at[p] = map[string]bool{}
		}
		at[p][v] = true
	}
	type stream struct {
		process   string
		partition int32
	}
	lastSend := map[stream]int64{}
	lastRead := map[stream]int64{}
	var reads []struct {
		stream
		prev, next int64
	}
	lastHW := map[stream]int64{}
	// The group: each partition's owners (member → since), the values
	// members read, and the highest committed offset seen.
	owners := map[int32]map[string]time.Time{}
	groupRead := map[string]bool{}
	lastCommitted := map[stream]int64{}
	committed := map[int32]int64{}
	acksBy := map[int32][]time.Time{}
	logStart := map[int32]int64{}
	for _, e := range events {
		p := position{e.Partition, e.Offset}
		s := stream{e.Process, e.Partition}
		switch e.Kind {
		case Send:
			r.Sent++
			sent[e.Value] = true
		case Ack:
			r.Acked++
			acked[e.Value] = p
			see(p, e.Value)
			acksBy[e.Partition] = append(acksBy[e.Partition], e.Time)
			if prev, ok := lastSend[s]; ok && e.Offset <= prev {
				r.add(Anomaly{NonmonotonicSend, e.Partition, e.Offset, e.Value,
					fmt.Sprintf("%s's previous write there was acknowledged at %d", e.Process, prev)})
			}
			lastSend[s] = e.Offset
		case Fail:
			r.Failed++
			failed[e.Value] = true
		case Unknown:
			r.Unknown++
		case Read, Final:
			if e.Kind == Read {
				r.Reads++
				if prev, ok := lastRead[s]; ok {
					if e.Offset <= prev {
						r.add(Anomaly{NonmonotonicPoll, e.Partition, e.Offset, e.Value,
							fmt.Sprintf("%s read offset %d just before", e.Process, prev)})
					} else if e.Offset > prev+1 {
						reads = append(reads, struct {
							stream
							prev, next int64
						}{s, prev, e.Offset})
					}
				}
				lastRead[s] = e.Offset
				maxRead[e.Partition] = max(maxRead[e.Partition], e.Offset)
			} else {
				r.FinalRecords++
				if final[e.Partition] == nil {
					final[e.Partition] = map[int64]string{}
				}
				final[e.Partition][e.Offset] = e.Value
			}
			see(p, e.Value)
			if readAt[e.Value] == nil {
				readAt[e.Value] = map[position]bool{}
			}
			readAt[e.Value][p] = true
		case GroupRead:
			r.GroupReads++
			see(p, e.Value)
			if readAt[e.Value] == nil {
				readAt[e.Value] = map[position]bool{}
			}
			readAt[e.Value][p] = true
			groupRead[e.Value] = true
		case Assign:
			r.Handovers++
			for other, since := range owners[e.Partition] {
				if other != e.Process {
					r.add(Anomaly{TwoOwners, e.Partition, -1, "",
						fmt.Sprintf("%s was given it at %s while %s had owned it since %s", e.Process,
							e.Time.Format(time.RFC3339Nano), other, since.Format(time.RFC3339Nano))})
				}
			}
			if owners[e.Partition] == nil {
				owners[e.Partition] = map[string]time.Time{}
			}
			owners[e.Partition][e.Process] = e.Time
		case Revoke:
			delete(owners[e.Partition], e.Process)
		case Committed:
			if prev, ok := lastCommitted[s]; ok && e.Offset < prev {
				r.add(Anomaly{CommittedBackwards, e.Partition, e.Offset, "",
					fmt.Sprintf("%s saw the committed offset at %d before", e.Process, prev)})
			}
			lastCommitted[s] = e.Offset
			committed[e.Partition] = max(committed[e.Partition], e.Offset)
		case LogStart:
			logStart[e.Partition] = max(logStart[e.Partition], e.Offset)
		case ReaderReset:
			delete(lastRead, s)
		case HW:
			if prev, ok := lastHW[s]; ok && e.Offset < prev {
				r.add(Anomaly{HWBackwards, e.Partition, e.Offset, "",
					fmt.Sprintf("%s saw the high watermark at %d before", e.Process, prev)})
			}
			lastHW[s] = e.Offset
		case FaultStart:
			r.Faults[e.Fault]++
		}
	}
	for _, g := range reads {
		for o := g.prev + 1; o < g.next; o++ {
			if v, ok := final[g.partition][o]; ok {
				r.add(Anomaly{PollSkip, g.partition, o, v,
					fmt.Sprintf("%s read %d then %d, skipping this record", g.process, g.prev, g.next)})
				break
			}
		}
	}
	for _, p := range sortedPositions(at) {
		if vs := at[p]; len(vs) > 1 {
			r.add(Anomaly{Inconsistent, p.partition, p.offset, "", fmt.Sprintf("values %s", sortedKeys(vs))})
		}
	}
	for _, v := range sortedKeys(readAt) {
		ps := readAt[v]
		if len(ps) > 1 {
			var where []string
			for _, p := range sortedPositions(ps) {
				where = append(where, fmt.Sprintf("%d/%d", p.partition, p.offset))
			}
			r.add(Anomaly{Duplicate, -1, -1, v, "read at " + strings.Join(where, ", ")})
		}
		if failed[v] {
			r.add(Anomaly{ReadOfFailed, -1, -1, v, "its write was refused"})
		}
		if !sent[v] {
			r.add(Anomaly{ReadOfUnsent, -1, -1, v, "no producer sent it"})
		}
	}
	for _, v := range sortedKeys(acked) {
		p := acked[v]
		ps := readAt[v]
		if len(ps) > 0 && !ps[p] {
			r.add(Anomaly{AckMismatch, p.partition, p.offset, v, fmt.Sprintf("read at %v", sortedPositions(ps))})
		}
		if f, ok := final[p.partition]; ok {
			found := false
			for q := range ps {
				if q.partition == p.partition {
					if _, inFinal := f[q.offset]; inFinal && f[q.offset] == v {
						found = true
					}
				}
			}
			switch {
			case found:
			case p.offset < logStart[p.partition]:
				r.add(Anomaly{Lost, p.partition, p.offset, v, fmt.Sprintf(
					"acknowledged, below the log start offset %d after healing: deleted (the workload's topic keeps every record)",
					logStart[p.partition])})
			default:
				r.add(Anomaly{Lost, p.partition, p.offset, v, "acknowledged, missing from the final read"})
			}
		} else if len(ps) == 0 && maxRead[p.partition] > p.offset {
			r.add(Anomaly{Lost, p.partition, p.offset, v,
				fmt.Sprintf("acknowledged, never read, while reads reached offset %d", maxRead[p.partition])})
		}
	}
	for _, v := range sortedKeys(acked) {
		p := acked[v]
		if c, ok := committed[p.partition]; ok && p.offset < c && !groupRead[v] {
			r.add(Anomaly{GroupMissed, p.partition, p.offset, v,
				fmt.Sprintf("the group committed %d without a member reading it", c)})
		}
	}
	r.checkTxn(events)
	r.unavailability(events, acksBy)
	return r
}

// unavailability finds, per fault kind, the longest gap between
// acknowledged writes of one partition that overlaps a fault of that kind
// (from its start to its end, or to the end of the history).
func (r *Report) unavailability(events []Event, acksBy map[int32][]time.Time) {
	if len(events) == 0 {
		return
	}
	type interval struct {
		kind       string
		start, end time.Time
	}
	var faults []interval
	open := map[string]int{}
	for _, e := range events {
		id := e.Fault + "@" + e.Node + "#" + e.Process
		switch e.Kind {
		case FaultStart:
			open[id] = len(faults)
			faults = append(faults, interval{kind: e.Fault, start: e.Time})
		case FaultEnd:
			if i, ok := open[id]; ok {
				faults[i].end = e.Time
				delete(open, id)
			}
		}
	}
	last := events[len(events)-1].Time
	for i := range faults {
		if faults[i].end.IsZero() {
			faults[i].end = last
		}
	}
	for _, times := range acksBy {
		sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
		for _, f := range faults {
			// The gap around the fault's start, then the gaps within it.
			prev := time.Time{}
			for _, t := range times {
				if !prev.IsZero() && t.After(f.start) && prev.Before(f.end) {
					from := prev
					if from.Before(f.start) {
						from = f.start
					}
					if g := t.Sub(from); g > r.Unavailable[f.kind] {
						r.Unavailable[f.kind] = g
					}
				}
				prev = t
				if t.After(f.end) {
					break
				}
			}
		}
	}
}

func (r *Report) add(a Anomaly) { r.Anomalies = append(r.Anomalies, a) }

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sortedPositions[V any](m map[position]V) []position {
	out := make([]position, 0, len(m))
	for p := range m {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].partition != out[j].partition {
			return out[i].partition < out[j].partition
		}
		return out[i].offset < out[j].offset
	})
	return out
}
