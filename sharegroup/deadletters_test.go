package sharegroup

import (
	"testing"

	"github.com/quirelog/quire/share"
)

// TestShareDeadLettersPendingUntilWritten: a dead letter is handed out
// for writing only once the state that archived it is saved, comes back
// marked for a check after a write that failed, stays in the saved state
// until written, and is handed to the next leader, marked for a check,
// when the node dies between the save and the write.
func TestShareDeadLettersPendingUntilWritten(t *testing.T) {
	m := newMetaStore()
	m.lead(tp, 1, 0)
	log := &memLog{hw: 4, keys: []string{"a"}}
	n1 := newNode(t, m, 1)
	if err := n1.SetGroupConfig("g", GroupConfig{Partition: share.DefaultConfig(), DeadLetterTopic: "dlq"}); err != nil {
		t.Fatal(err)
	}
	join(t, n1, "x")
	if _, err := n1.Acquire(t0, "g", "x", tp, 2, log); err != nil {
		t.Fatal(err)
	}
	dead, err := n1.Acknowledge(t0, "g", "x", tp, []share.Ack{{First: 0, Last: 0, Type: share.Reject}})
	if err != nil || len(dead) != 1 {
		t.Fatalf("reject: %v %v", dead, err)
	}
	if _, l := n1.ClaimDeadLetters("g", tp); len(l) != 0 {
		t.Fatalf("claimed %v before the archiving was saved", l)
	}
	persist(t, n1, tp)
	if st := m.saved[skey("g", tp)]; len(st.DeadLetters) != 1 || st.DeadLetters[0].Offset != 0 {
		t.Fatalf("saved dead letters %v", st.DeadLetters)
	}
	dlq, l := n1.ClaimDeadLetters("g", tp)
	if dlq != "dlq" || len(l) != 1 || l[0].Offset != 0 || l[0].Check || l[0].Reason != share.ReasonRejected {
		t.Fatalf("claimed %q %+v", dlq, l)
	}
	if _, again := n1.ClaimDeadLetters("g", tp); len(again) != 0 {
		t.Fatalf("claimed twice: %v", again)
	}
	n1.FinishDeadLetters("g", tp, l, []bool{false}) // the write failed
	if _, l = n1.ClaimDeadLetters("g", tp); len(l) != 1 || !l[0].Check {
		t.Fatalf("after a failed write: %+v, want it again, checked first", l)
	}
	n1.FinishDeadLetters("g", tp, l, []bool{true})
	persist(t, n1, tp)
	if st := m.saved[skey("g", tp)]; len(st.DeadLetters) != 0 {
		t.Fatalf("saved dead letters after the write: %v", st.DeadLetters)
	}

	// Offset 1 rejected and saved; node 1 dies before writing it.
	if _, err := n1.Acknowledge(t0, "g", "x", tp, []share.Ack{{First: 1, Last: 1, Type: share.Reject}}); err != nil {
		t.Fatal(err)
	}
	persist(t, n1, tp)
	m.lead(tp, 2, 1)
	n2 := newNode(t, m, 2)
	if err := n2.SetGroupConfig("g", GroupConfig{Partition: share.DefaultConfig(), DeadLetterTopic: "dlq"}); err != nil {
		t.Fatal(err)
	}
	join(t, n2, "y")
	if _, err := n2.Acquire(t0, "g", "y", tp, 10, log); err != nil {
		t.Fatal(err)
	}
	if _, l := n2.ClaimDeadLetters("g", tp); len(l) != 1 || l[0].Offset != 1 || !l[0].Check {
		t.Fatalf("the next leader claimed %+v, want offset 1, checked first", l)
	}
}

// TestShareDeadLetterClaimedAcrossRestore: a dead letter being written
// when the share-partition is restored (its lease changed, or a save was
// refused) is not handed out again until that write finishes: a second
// claim would check the dead-letter topic before the first write lands
// and write it twice.
func TestShareDeadLetterClaimedAcrossRestore(t *testing.T) {
	m := newMetaStore()
	m.lead(tp, 1, 0)
	log := &memLog{hw: 4, keys: []string{"a"}}
	n := newNode(t, m, 1)
	if err := n.SetGroupConfig("g", GroupConfig{Partition: share.DefaultConfig(), DeadLetterTopic: "dlq"}); err != nil {
		t.Fatal(err)
	}
	join(t, n, "x")
	if _, err := n.Acquire(t0, "g", "x", tp, 2, log); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Acknowledge(t0, "g", "x", tp, []share.Ack{{First: 0, Last: 0, Type: share.Reject}}); err != nil {
		t.Fatal(err)
	}
	persist(t, n, tp)
	_, l := n.ClaimDeadLetters("g", tp)
	if len(l) != 1 {
		t.Fatalf("claimed %+v", l)
	}
	// While it is written, this node leads again under a new epoch: the
	// next use restores the share-partition from the store.
	m.lead(tp, 1, 1)
	if _, err := n.Acquire(t0, "g", "x", tp, 1, log); err != nil {
		t.Fatal(err)
	}
	if _, again := n.ClaimDeadLetters("g", tp); len(again) != 0 {
		t.Fatalf("claimed %+v again while its first write is under way", again)
	}
	n.FinishDeadLetters("g", tp, l, []bool{true})
	if p := n.PendingDeadLetters("g"); len(p) != 0 {
		t.Fatalf("still pending after the write: %v", p)
	}
	persist(t, n, tp)
	if st := m.saved[skey("g", tp)]; len(st.DeadLetters) != 0 {
		t.Fatalf("saved dead letters after the write: %v", st.DeadLetters)
	}
}

// describedDead is the dead-letter count Describe gives for tp.
func describedDead(t *testing.T, n *Coordinator) int64 {
	t.Helper()
	_, parts := n.Describe("g")
	for _, p := range parts {
		if p.TopicPartition == tp {
			return p.DeadLettered
		}
	}
	t.Fatalf("describe holds no state for %v", tp)
	return 0
}

// TestShareDeadLetteredCountSaved: the records archived as dead letters
// are counted with the share-partition's state, whether or not the group
// has a dead-letter topic, so that the count describe gives survives a
// leader change (and a restart) rather than starting over on each node.
func TestShareDeadLetteredCountSaved(t *testing.T) {
	m := newMetaStore()
	m.lead(tp, 1, 0)
	log := &memLog{hw: 10, keys: []string{"a"}}
	n1 := newNode(t, m, 1)
	join(t, n1, "x")
	if _, err := n1.Acquire(t0, "g", "x", tp, 4, log); err != nil {
		t.Fatal(err)
	}
	if _, err := n1.Acknowledge(t0, "g", "x", tp, []share.Ack{{First: 0, Last: 1, Type: share.Reject}, {First: 2, Last: 3, Type: share.Accept}}); err != nil {
		t.Fatal(err)
	}
	if n := describedDead(t, n1); n != 2 {
		t.Fatalf("node 1 describes %d dead letters, want 2", n)
	}
	persist(t, n1, tp)
	if st := m.saved[skey("g", tp)]; st.DeadLettered != 2 {
		t.Fatalf("saved state counts %d dead letters, want 2", st.DeadLettered)
	}

	m.lead(tp, 2, 1)
	n2 := newNode(t, m, 2)
	join(t, n2, "y")
	if _, err := n2.Acquire(t0, "g", "y", tp, 1, log); err != nil {
		t.Fatal(err)
	}
	if n := describedDead(t, n2); n != 2 {
		t.Fatalf("the next leader describes %d dead letters, want the 2 saved", n)
	}
	if _, err := n2.Acknowledge(t0, "g", "y", tp, []share.Ack{{First: 4, Last: 4, Type: share.Reject}}); err != nil {
		t.Fatal(err)
	}
	persist(t, n2, tp)
	if n := describedDead(t, n2); n != 3 {
		t.Fatalf("after one more reject node 2 describes %d, want 3", n)
	}
	if st := m.saved[skey("g", tp)]; st.DeadLettered != 3 {
		t.Fatalf("saved state counts %d dead letters, want 3", st.DeadLettered)
	}
}

// TestShareLeaveDeadLettersTakenAtOnce: records a leaving member held at
// the delivery limit are archived as dead letters when it leaves, counted
// and marked to write then, not at the share-partition's next call (a
// state replaced before that would lose them).
func TestShareLeaveDeadLettersTakenAtOnce(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ResetEarliest = true
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pcfg := share.DefaultConfig()
	pcfg.DeliveryCountLimit = 1
	if err := n.SetGroupConfig("g", GroupConfig{Partition: pcfg, DeadLetterTopic: "dlq.g"}); err != nil {
		t.Fatal(err)
	}
	join(t, n, "x")
	if f, err := n.Acquire(t0, "g", "x", tp, 2, &memLog{hw: 5, keys: []string{"a"}}); err != nil || len(offsets(f.Acquired)) != 2 {
		t.Fatalf("acquired %v, %v", f.Acquired, err)
	}
	if _, err := n.Heartbeat(t0, Heartbeat{Group: "g", MemberID: "x", Epoch: -1}); err != nil {
		t.Fatal(err)
	}
	if d := describedDead(t, n); d != 2 {
		t.Fatalf("after the leave describe counts %d dead letters, want 2", d)
	}
	dlq, letters := n.ClaimDeadLetters("g", tp)
	if dlq != "dlq.g" || len(letters) != 2 || letters[0].Reason != share.ReasonDeliveryLimit {
		t.Fatalf("dead letters to write after the leave: %q %+v", dlq, letters)
	}
}
