package testcluster_test

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

func (s *subStream) viewCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.views)
}

// TestClusterSubscribeControllerKill: two Subscribe streams on the nodes
// that are not the controller split a topic; the controller is killed
// mid-consumption: both keep their partitions (no assignment change) and
// go on reading and committing through the new coordinator.
func TestClusterSubscribeControllerKill(t *testing.T) {
	t.Parallel()
	c, ctx, ctl := subCluster(t, 5000)
	createTopic(t, c, ctl, "ck", 4, 3)
	waitTopic(ctx, c, "ck")
	var others []int32
	for _, id := range c.IDs() {
		if id != ctl {
			others = append(others, id)
		}
	}
	start := &quirev1.SubscribeStart{Group: "ckg", Subscription: &quirev1.GroupSubscription{Topics: []string{"ck"}}, CommitIntervalMs: 50}
	a := subscribe(t, c, others[0], "A", start, true)
	b := subscribe(t, c, others[1], "B", start, true)
	b.wait(ctx, "B owns 2", func() bool { return len(b.owned) == 2 })
	a.wait(ctx, "A owns 2", func() bool { return len(a.owned) == 2 })
	produceN(ctx, t, c, "ck", 4, 5, "before")
	a.wait(ctx, "A reads", func() bool { return a.totalLocked() == 10 })
	b.wait(ctx, "B reads", func() bool { return b.totalLocked() == 10 })
	ownA, ownB := a.ownedNow(), b.ownedNow()
	viewsA, viewsB := a.viewCount(), b.viewCount()

	c.Kill(ctl)
	newCtl := c.WaitController(ctx)
	if newCtl == ctl {
		t.Fatalf("node %d still controller", ctl)
	}
	produceN(ctx, t, c, "ck", 4, 5, "after")
	// (A produce retried across the leader change may write twice.)
	a.wait(ctx, "A reads on", func() bool { return a.totalLocked() >= 20 })
	b.wait(ctx, "B reads on", func() bool { return b.totalLocked() >= 20 })
	c.Eventually(ctx, "commits through the new controller", func() error {
		for p := range int32(4) {
			if got, err := committedAt(ctx, c, newCtl, "ckg", "ck", p); err != nil || got < 10 {
				return fmt.Errorf("ck-%d committed at %d (%v)", p, got, err)
			}
		}
		return nil
	})
	if !slices.Equal(a.ownedNow(), ownA) || !slices.Equal(b.ownedNow(), ownB) || a.viewCount() != viewsA || b.viewCount() != viewsB {
		t.Fatalf("assignments changed over the controller kill: A %v -> %v, B %v -> %v", ownA, a.ownedNow(), ownB, b.ownedNow())
	}
	checkViews(t, a, b)
}

func (s *subStream) totalLocked() int {
	n := 0
	for _, rs := range s.records {
		n += len(rs)
	}
	return n
}

// TestClusterSubscribeNewPartitions: partitions added to a subscribed
// topic are assigned (split between the two streams) and read.
func TestClusterSubscribeNewPartitions(t *testing.T) {
	t.Parallel()
	c, ctx, ctl := subCluster(t, 5000)
	createTopic(t, c, ctl, "grow", 2, 3)
	waitTopic(ctx, c, "grow")
	start := &quirev1.SubscribeStart{Group: "gg", Subscription: &quirev1.GroupSubscription{Topics: []string{"grow"}}, CommitIntervalMs: 50}
	a := subscribe(t, c, c.IDs()[0], "A", start, true)
	b := subscribe(t, c, c.IDs()[1], "B", start, true)
	a.wait(ctx, "A owns 1", func() bool { return len(a.owned) == 1 })
	b.wait(ctx, "B owns 1", func() bool { return len(b.owned) == 1 })
	if _, err := admin(c, ctl).CreatePartitions(ctx, &quirev1.CreatePartitionsRequest{Topic: "grow", TotalCount: 4}); err != nil {
		// A retry of a write that went through (the answer lost) finds
		// the partitions there already.
		if tp, ok := c.Image(ctl).Topic("grow"); !ok || len(tp.Partitions) != 4 {
			t.Fatal(err)
		}
	}
	a.wait(ctx, "A owns 2", func() bool { return len(a.owned) == 2 })
	b.wait(ctx, "B owns 2", func() bool { return len(b.owned) == 2 })
	produceN(ctx, t, c, "grow", 4, 3, "r")
	a.wait(ctx, "A reads its 2", func() bool { return a.totalLocked() == 6 })
	b.wait(ctx, "B reads its 2", func() bool { return b.totalLocked() == 6 })
	checkViews(t, a, b)
}

// TestClusterGroupOffsetsWholeClusterRestart: offsets committed by a group
// member are there after every node stops and starts again.
func TestClusterGroupOffsetsWholeClusterRestart(t *testing.T) {
	t.Parallel()
	c, ctx, ctl := subCluster(t, 5000)
	createTopic(t, c, ctl, "rs", 2, 3)
	waitTopic(ctx, c, "rs")
	produceN(ctx, t, c, "rs", 2, 4, "r")
	start := &quirev1.SubscribeStart{Group: "rg", Subscription: &quirev1.GroupSubscription{Topics: []string{"rs"}}, CommitIntervalMs: 50}
	s := subscribe(t, c, c.IDs()[0], "S", start, true)
	s.wait(ctx, "all read", func() bool { return s.totalLocked() == 8 })
	if err := s.closeSend(ctx); !errors.Is(err, io.EOF) {
		t.Fatalf("close: %v", err)
	}
	for _, id := range c.IDs() {
		c.Stop(id)
	}
	for _, id := range c.IDs() {
		if err := c.TryRestart(id); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range c.IDs() {
		if err := c.Node(id).WaitReady(ctx); err != nil {
			t.Fatal(err)
		}
	}
	newCtl := c.WaitController(ctx)
	for p := range int32(2) {
		if got := fetchOffset(ctx, t, c, newCtl, "rg", "rs", p); got != 4 {
			t.Fatalf("rs-%d committed at %d after the restart, want 4", p, got)
		}
	}
	// A new stream goes on from there.
	produceN(ctx, t, c, "rs", 2, 1, "late")
	s2 := subscribe(t, c, c.IDs()[2], "S2", start, true)
	s2.wait(ctx, "the two new records", func() bool { return s2.totalLocked() == 2 })
	for p := range int32(2) {
		if got := s2.offsets(tpName("rs", p)); !slices.Equal(got, []int64{4}) {
			t.Fatalf("rs-%d read %v after the restart, want offset 4 only", p, got)
		}
	}
}
