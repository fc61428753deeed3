package sharegroup

import (
	"context"
	"slices"
	"testing"

	"github.com/quirelog/quire/share"
)

// TestSharePersistAckUnderALostLeaseNotAnsweredSaved: an acknowledgement
// applied while this node still leads, whose Persist runs after another
// call's save under the same lease was refused (the leadership moved on),
// is not answered as saved: the next leader, which never got it, delivers
// the record again, and the member must hear that its ack did not count.
// ShareFetch applies its acks first and persists them after its long
// poll, so the window is MaxWait wide.
func TestSharePersistAckUnderALostLeaseNotAnsweredSaved(t *testing.T) {
	m := newMetaStore()
	m.lead(tp, 1, 0)
	log := &memLog{hw: 10, keys: []string{"a", "b"}}
	n1 := newNode(t, m, 1)
	join(t, n1, "x")
	f, err := n1.Acquire(t0, "g", "x", tp, 6, log)
	if err != nil || !slices.Equal(offsets(f.Acquired), []int64{0, 1, 2, 3, 4, 5}) {
		t.Fatalf("acquired %v, %v", f.Acquired, err)
	}
	persist(t, n1, tp)

	// Call A: acks offset 0, its save is under way (held at the store).
	if _, err := n1.Acknowledge(t0, "g", "x", tp, []share.Ack{{First: 0, Last: 0, Type: share.Accept}}); err != nil {
		t.Fatal(err)
	}
	m.saving, m.gate = make(chan struct{}, 8), make(chan struct{})
	doneA := make(chan []error, 1)
	go func() { doneA <- n1.Persist(context.Background(), "g", []TopicPartition{tp}) }()
	<-m.saving
	// Call B: acks offset 1 while node 1 still leads (its Persist comes
	// later, as ShareFetch's does after its long poll).
	if _, err := n1.Acknowledge(t0, "g", "x", tp, []share.Ack{{First: 1, Last: 1, Type: share.Accept}}); err != nil {
		t.Fatal(err)
	}
	// Leadership moves; A's save is refused.
	m.lead(tp, 2, 1)
	close(m.gate)
	if errs := <-doneA; errs[0] == nil {
		t.Fatalf("A's save after the move: nil")
	}
	errsB := n1.Persist(context.Background(), "g", []TopicPartition{tp})
	n2 := newNode(t, m, 2)
	join(t, n2, "y")
	f, err = n2.Acquire(t0, "g", "y", tp, 100, log)
	if err != nil {
		t.Fatal(err)
	}
	if errsB[0] == nil && slices.Contains(offsets(f.Acquired), 1) {
		t.Fatalf("offset 1's acknowledgement was answered saved (Persist nil), yet the new leader delivers it again: %v", f.Acquired)
	}
}

// TestSharePersistLostAnswerKeyOrder: with per-key ordering, a fetch
// acquires a key's record and its save is stored but answered an error
// (its entry committed, the answer lost as the controller changed), so
// the record is not handed out yet stays the member's. The member's next
// fetch must not get the key's later records: the lost one comes back
// (here when a new leader restores it) before them, as it must
// (TestClusterShareKeyOrderedFailures saw @192 of a key redelivered
// after @202-@222 of it).
func TestSharePersistLostAnswerKeyOrder(t *testing.T) {
	m := newMetaStore()
	m.lead(tp, 1, 0)
	n1 := newKeyedNode(t, m, 1)
	log := &memLog{hw: 4, keys: []string{"k", "j"}} // 0 k, 1 j, 2 k, 3 j
	join(t, n1, "x")
	f, err := n1.Acquire(t0, "g", "x", tp, 1, log)
	if err != nil || !slices.Equal(offsets(f.Acquired), []int64{0}) {
		t.Fatalf("acquired %v, %v", f.Acquired, err)
	}
	m.lostAnswer = true
	if errs := n1.Persist(context.Background(), "g", []TopicPartition{tp}); errs[0] == nil {
		t.Fatal("a save answered an error was reported saved")
	}
	m.lostAnswer = false
	// The fetch answered the error: offset 0 never reached x.
	f, err = n1.Acquire(t0, "g", "x", tp, 10, log)
	if err != nil {
		t.Fatal(err)
	}
	if got := offsets(f.Acquired); slices.Contains(got, 2) {
		t.Fatalf("x acquired %v: k's offset 2 while k's 0, handed out by a fetch that failed, is outstanding", got)
	}
	persist(t, n1, tp)

	// A new leader restores 0 (count raised) and hands it out first.
	m.lead(tp, 2, 1)
	n2 := newKeyedNode(t, m, 2)
	join(t, n2, "y")
	f, err = n2.Acquire(t0, "g", "y", tp, 10, log)
	if err != nil || len(f.Acquired) == 0 || f.Acquired[0].First != 0 || f.Acquired[0].DeliveryCount != 2 {
		t.Fatalf("the new leader acquired %v, %v; want 0 again first, delivery count 2", f.Acquired, err)
	}
}

func newKeyedNode(t *testing.T, m *metaStore, node int32) *Coordinator {
	t.Helper()
	cfg := DefaultConfig()
	cfg.ResetEarliest = true
	cfg.Partition.KeyOrdering = true
	cfg.Store = nodeStore{m, node}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
