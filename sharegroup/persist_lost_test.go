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
