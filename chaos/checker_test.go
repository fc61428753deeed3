package chaos

import (
	"bytes"
	"strings"
	"testing"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

// hist builds histories for the checker tests: a clock that ticks a
// millisecond per event, and helpers for the common events.
type hist struct {
	t      time.Time
	events []Event
}

func newHist() *hist { return &hist{t: time.Unix(1_700_000_000, 0)} }

func (h *hist) add(e Event) *hist {
	h.t = h.t.Add(time.Millisecond)
	e.Time = h.t
	h.events = append(h.events, e)
	return h
}

// write sends value to partition p and acknowledges it at offset o.
func (h *hist) write(proc string, p int32, o int64, v string) *hist {
	h.add(Event{Kind: Send, Process: proc, Partition: p, Value: v})
	return h.add(Event{Kind: Ack, Process: proc, Partition: p, Offset: o, Value: v})
}

func (h *hist) read(proc string, p int32, o int64, v string) *hist {
	return h.add(Event{Kind: Read, Process: proc, Partition: p, Offset: o, Value: v})
}

func (h *hist) assign(member string, p int32) *hist {
	return h.add(Event{Kind: Assign, Process: member, Partition: p})
}

func (h *hist) revoke(member string, p int32) *hist {
	return h.add(Event{Kind: Revoke, Process: member, Partition: p})
}

func (h *hist) final(p int32, values ...string) *hist {
	for o, v := range values {
		h.add(Event{Kind: Final, Partition: p, Offset: int64(o), Value: v})
	}
	return h
}

// clean is a history with nothing wrong: two producers, a reader, a
// fault, a final read.
func clean() *hist {
	h := newHist()
	h.write("p1", 0, 0, "a").write("p2", 0, 1, "b").write("p1", 1, 0, "c")
	h.add(Event{Kind: FaultStart, Fault: "kill", Node: "2", Process: "n1"})
	h.read("r", 0, 0, "a").read("r", 0, 1, "b").read("r", 1, 0, "c")
	h.add(Event{Kind: HW, Process: "hw", Partition: 0, Offset: 1}).add(Event{Kind: HW, Process: "hw", Partition: 0, Offset: 2})
	h.add(Event{Kind: Send, Process: "p1", Partition: 0, Value: "maybe"}).add(Event{Kind: Unknown, Process: "p1", Partition: 0, Value: "maybe"})
	h.add(Event{Kind: Send, Process: "p2", Partition: 1, Value: "no"}).add(Event{Kind: Fail, Process: "p2", Partition: 1, Value: "no"})
	h.write("p1", 0, 3, "d")
	h.add(Event{Kind: FaultEnd, Fault: "kill", Node: "2", Process: "n1"})
	// A group: m1 reads partition 0 and commits, hands it to m2 (given
	// up first), which reads on; m1 reads partition 1 throughout. The
	// committed offset of partition 0 stays below the unread "d".
	h.assign("m1", 0).assign("m1", 1)
	h.add(Event{Kind: GroupRead, Process: "m1", Partition: 0, Offset: 0, Value: "a"}).
		add(Event{Kind: GroupRead, Process: "m1", Partition: 1, Offset: 0, Value: "c"}).
		add(Event{Kind: Committed, Process: "c", Partition: 0, Offset: 1})
	h.revoke("m1", 0).assign("m2", 0)
	h.add(Event{Kind: GroupRead, Process: "m2", Partition: 0, Offset: 1, Value: "b"}).
		add(Event{Kind: GroupRead, Process: "m2", Partition: 0, Offset: 2, Value: "maybe"}).
		add(Event{Kind: Committed, Process: "c", Partition: 0, Offset: 3}).add(Event{Kind: Committed, Process: "c", Partition: 0, Offset: 3})
	h.add(Event{Kind: LogStart, Partition: 0, Offset: 0}).add(Event{Kind: LogStart, Partition: 1, Offset: 0})
	return h.final(0, "a", "b", "maybe", "d").final(1, "c")
}

func TestChaosCheckerCleanHistory(t *testing.T) {
	r := Check(clean().events)
	if !r.OK() {
		t.Fatalf("clean history reported anomalies:\n%s", r.Summary())
	}
	if r.GroupReads != 4 || r.Handovers != 3 {
		t.Errorf("group counts: %d reads, %d handovers", r.GroupReads, r.Handovers)
	}
	if r.Acked != 4 || r.Sent != 6 || r.Failed != 1 || r.Unknown != 1 || r.FinalRecords != 5 || r.Faults["kill"] != 1 {
		t.Errorf("counts: %+v", r)
	}
}

// Acknowledged records that retention deleted (below the log start
// offset the final read began at) are lost writes, and said to be
// deleted; one above it that is missing is lost plainly.
func TestChaosCheckerLostBelowLogStart(t *testing.T) {
	h := newHist().write("p", 0, 0, "a").write("p", 0, 1, "b").write("p", 0, 2, "c").write("p", 0, 3, "d")
	h.add(Event{Kind: LogStart, Partition: 0, Offset: 2})
	h.add(Event{Kind: Final, Partition: 0, Offset: 2, Value: "c"})
	r := Check(h.events)
	if r.Count(Lost) != 3 || len(r.Anomalies) != 3 {
		t.Fatalf("want 3 lost writes:\n%s", r.Summary())
	}
	for i, want := range []string{"below the log start offset 2", "below the log start offset 2", "missing from the final read"} {
		if a := r.Anomalies[i]; !strings.Contains(a.Detail, want) {
			t.Errorf("anomaly %d: %s, want %q", i, a, want)
		}
	}
}

// TestChaosCheckerFindsEachAnomaly feeds the checker histories with one
// anomaly each and expects exactly that kind reported.
func TestChaosCheckerFindsEachAnomaly(t *testing.T) {
	for _, tc := range []struct {
		kind  string
		build func() *hist
	}{
		{Lost, func() *hist { // acknowledged, missing from the final read
			return newHist().write("p", 0, 0, "a").write("p", 0, 1, "b").final(0, "a")
		}},
		{Lost, func() *hist { // no final read: never read while later offsets were
			return newHist().write("p", 0, 0, "a").write("p", 0, 1, "b").read("r", 0, 1, "b").
				add(Event{Kind: ReaderReset, Process: "r", Partition: 0}).read("r", 0, 2, "x").
				add(Event{Kind: Send, Process: "q", Partition: 0, Value: "x"})
		}},
		{Duplicate, func() *hist {
			return newHist().write("p", 0, 0, "a").add(Event{Kind: Send, Process: "p", Value: "b"}).
				add(Event{Kind: Unknown, Process: "p", Value: "b"}).final(0, "a", "b", "b")
		}},
		{Inconsistent, func() *hist {
			return newHist().write("p", 0, 0, "a").add(Event{Kind: Send, Process: "q", Value: "b"}).
				read("r1", 0, 0, "a").read("r2", 0, 0, "b")
		}},
		{AckMismatch, func() *hist {
			return newHist().write("p", 0, 1, "a").final(0, "a")
		}},
		{NonmonotonicSend, func() *hist {
			return newHist().write("p", 0, 5, "a").write("p", 0, 4, "b")
		}},
		{NonmonotonicPoll, func() *hist {
			return newHist().write("p", 0, 0, "a").write("p", 0, 1, "b").read("r", 0, 1, "b").read("r", 0, 0, "a")
		}},
		{PollSkip, func() *hist {
			return newHist().write("p", 0, 0, "a").write("p", 0, 1, "b").write("p", 0, 2, "c").
				read("r", 0, 0, "a").read("r", 0, 2, "c").final(0, "a", "b", "c")
		}},
		{ReadOfFailed, func() *hist {
			return newHist().add(Event{Kind: Send, Process: "p", Value: "a"}).add(Event{Kind: Fail, Process: "p", Value: "a"}).
				read("r", 0, 0, "a")
		}},
		{ReadOfUnsent, func() *hist {
			return newHist().read("r", 0, 0, "ghost")
		}},
		{HWBackwards, func() *hist {
			return newHist().add(Event{Kind: HW, Process: "hw", Partition: 0, Offset: 7}).add(Event{Kind: HW, Process: "hw", Partition: 0, Offset: 6})
		}},
		{TwoOwners, func() *hist { // m2 given partition 0 before m1 gave it up
			return newHist().assign("m1", 0).assign("m2", 0).revoke("m1", 0)
		}},
		{CommittedBackwards, func() *hist {
			return newHist().add(Event{Kind: Committed, Process: "c", Partition: 0, Offset: 9}).
				add(Event{Kind: Committed, Process: "c", Partition: 0, Offset: 8})
		}},
		{GroupMissed, func() *hist { // b committed past without a member reading it
			return newHist().write("p", 0, 0, "a").write("p", 0, 1, "b").assign("m", 0).
				add(Event{Kind: GroupRead, Process: "m", Partition: 0, Offset: 0, Value: "a"}).
				add(Event{Kind: Committed, Process: "c", Partition: 0, Offset: 2})
		}},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			r := Check(tc.build().events)
			if r.Count(tc.kind) == 0 {
				t.Fatalf("%s not reported:\n%s", tc.kind, r.Summary())
			}
			for _, a := range r.Anomalies {
				if a.Kind != tc.kind {
					t.Errorf("also reported %s", a)
				}
			}
		})
	}
}

// TestChaosCheckerUnavailability: the longest gap between acknowledged
// writes of a partition during a fault is what the report gives for the
// fault's kind; a gap outside every fault does not count.
func TestChaosCheckerUnavailability(t *testing.T) {
	base := time.Unix(1_700_000_000, 0)
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	ev := []Event{
		{Time: at(0), Kind: Ack, Process: "p", Partition: 0, Offset: 0, Value: "a"},
		{Time: at(2000), Kind: Ack, Process: "p", Partition: 0, Offset: 1, Value: "b"}, // a 2 s gap before any fault
		{Time: at(2100), Kind: FaultStart, Fault: "pause", Node: "1", Process: "f1"},
		{Time: at(2200), Kind: Ack, Process: "p", Partition: 0, Offset: 2, Value: "c"},
		{Time: at(3700), Kind: Ack, Process: "p", Partition: 0, Offset: 3, Value: "d"}, // 1.5 s during the pause
		{Time: at(4000), Kind: FaultEnd, Fault: "pause", Node: "1", Process: "f1"},
		{Time: at(4100), Kind: Ack, Process: "p", Partition: 0, Offset: 4, Value: "e"},
	}
	r := Check(ev)
	if got := r.Unavailable["pause"]; got != 1500*time.Millisecond {
		t.Errorf("pause unavailability %v, want 1.5s", got)
	}
}

func TestChaosHistoryRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	h := NewHistory(&buf)
	for _, e := range clean().events {
		h.Add(e)
	}
	if err := h.Err(); err != nil {
		t.Fatal(err)
	}
	got, err := ReadHistory(&buf)
	if err != nil {
		t.Fatal(err)
	}
	want := clean().events
	if len(got) != len(want) {
		t.Fatalf("read %d events, wrote %d", len(got), len(want))
	}
	for i := range got {
		if !got[i].Time.Equal(want[i].Time) || got[i].Kind != want[i].Kind || got[i].Value != want[i].Value || got[i].Offset != want[i].Offset {
			t.Fatalf("event %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if r := Check(got); !r.OK() {
		t.Errorf("re-read clean history: %s", r.Summary())
	}
}

// TestChaosProduceOutcome: a code a leader answers only before appending
// is a definite failure, unless the answer says its outcome is unknown
// (appended, then not known to be committed: such records may yet be
// read, and a history calling them failed would report a false
// read-of-failed-write).
func TestChaosProduceOutcome(t *testing.T) {
	answer := func(code quirev1.ErrorCode, unknown bool) *quirev1.ProduceResponse {
		return &quirev1.ProduceResponse{Partitions: []*quirev1.PartitionProduceResult{{
			Error: &quirev1.Error{Code: code, Message: "m", OutcomeUnknown: unknown}}}}
	}
	for _, tc := range []struct {
		code     quirev1.ErrorCode
		unknown  bool
		definite bool
	}{
		{quirev1.ErrorCode_LEADER_NOT_AVAILABLE, false, true},
		{quirev1.ErrorCode_LEADER_NOT_AVAILABLE, true, false},
		{quirev1.ErrorCode_NOT_ENOUGH_REPLICAS, true, false},
		{quirev1.ErrorCode_REQUEST_TIMED_OUT, false, false},
	} {
		_, def, err := produceOutcome(answer(tc.code, tc.unknown), nil)
		if err == nil || def != tc.definite {
			t.Errorf("%s (outcome unknown %v): definite %v, want %v (%v)", tc.code, tc.unknown, def, tc.definite, err)
		}
	}
}
