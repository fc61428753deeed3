package sharegroup

import (
	"context"
	"fmt"
	"testing"

	"github.com/quirelog/quire/share"
)

// Release gives back what a member holds on the share-partitions named,
// at once and saved: another member acquires the records (with their
// keys, held by the member under per-key ordering) without waiting for
// their locks, at the next delivery count; the member stays in the
// group and acquires again.
func TestShareReleaseMember(t *testing.T) {
	m := newMetaStore()
	m.lead(tp, 1, 0)
	n := newNode(t, m, 1)
	cfg := n.DefaultGroupConfig()
	cfg.Partition.KeyOrdering = true
	if err := n.SetGroupConfig("g", cfg); err != nil {
		t.Fatal(err)
	}
	join(t, n, "x")
	join(t, n, "y")
	log := &memLog{hw: 4, keys: []string{"a", "b"}}
	f, err := n.Acquire(t0, "g", "x", tp, 100, log)
	if err != nil || fmt.Sprint(f.Acquired) != "[{0 3 1}]" {
		t.Fatalf("x acquired %v, %v", f.Acquired, err)
	}
	persist(t, n, tp)
	if f, err := n.Acquire(t0, "g", "y", tp, 100, log); err != nil || len(f.Acquired) != 0 {
		t.Fatalf("y acquired %v, %v while x holds everything", f.Acquired, err)
	}

	other := TopicPartition{Topic: "u", Partition: 0} // never used here
	mark := n.MarkGroup("g")
	dead, errs := n.Release(t0, "g", "x", []TopicPartition{tp, other})
	for i := range errs {
		if errs[i] != nil || len(dead[i]) != 0 {
			t.Fatalf("release on %v: %v, dead letters %v", []TopicPartition{tp, other}[i], errs[i], dead[i])
		}
	}
	for _, err := range n.PersistSince(context.Background(), "g", []TopicPartition{tp, other}, mark) {
		if err != nil {
			t.Fatal(err)
		}
	}
	// Saved: a next leader finds no record acquired.
	m.mu.Lock()
	saved := m.saved[skey("g", tp)]
	m.mu.Unlock()
	for _, r := range saved.Runs {
		if r.State != share.Available || r.DeliveryCount != 1 {
			t.Fatalf("saved after the release: %+v, want every record available, delivered once", saved.Runs)
		}
	}
	if saved.Records() != 4 {
		t.Fatalf("saved %d records, want 4", saved.Records())
	}

	// The lock is the default 30 s, and the clock has not moved.
	f, err = n.Acquire(t0, "g", "y", tp, 100, log)
	if err != nil || fmt.Sprint(f.Acquired) != "[{0 3 2}]" {
		t.Fatalf("y acquired %v, %v after x's release; want 0-3, delivered twice", f.Acquired, err)
	}
	if members, _ := n.Describe("g"); fmt.Sprint(members) != "[x y]" {
		t.Fatalf("members after the release: %v", members)
	}
	// Nothing held: nothing to release, nothing to save.
	persist(t, n, tp)
	saves, _ := n.SaveStats()
	if _, errs := n.Release(t0, "g", "x", []TopicPartition{tp}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	persist(t, n, tp)
	if again, _ := n.SaveStats(); again != saves {
		t.Fatalf("a release of nothing was saved (%d saves, then %d)", saves, again)
	}
}

// A record released past the delivery limit is archived, as any release
// archives it: Release answers its dead letter, kept pending for the
// group's dead-letter topic.
func TestShareReleaseMemberDeadLetters(t *testing.T) {
	n := newCoord(t)
	cfg := n.DefaultGroupConfig()
	cfg.Partition.DeliveryCountLimit = 1
	cfg.DeadLetterTopic = "dlq"
	if err := n.SetGroupConfig("g", cfg); err != nil {
		t.Fatal(err)
	}
	join(t, n, "x")
	log := &memLog{hw: 2, keys: []string{""}}
	if _, err := n.Acquire(t0, "g", "x", tp, 100, log); err != nil {
		t.Fatal(err)
	}
	dead, errs := n.Release(t0, "g", "x", []TopicPartition{tp})
	if errs[0] != nil || len(dead[0]) != 2 || dead[0][0].Reason != share.ReasonDeliveryLimit || dead[0][1].Offset != 1 {
		t.Fatalf("release: %v, dead letters %+v; want offsets 0 and 1 past the delivery limit", errs[0], dead[0])
	}
	if dlq, letters := n.ClaimDeadLetters("g", tp); dlq != "dlq" || len(letters) != 2 {
		t.Fatalf("pending dead letters: %q %v", dlq, letters)
	}
}
