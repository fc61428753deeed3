package metadata

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// giveUp has topic-0's leader ask for the ISR without itself, retrying
// through controller elections (a try that lost its leadership may have
// been committed: the next image then shows it). It returns the partition
// before and after.
func giveUp(t *testing.T, c *testCluster, topic string) (before, after PartitionInfo) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctl := c.waitController()
		p, _ := ctl.Image().Partition(topic, 0)
		if before.Replicas == nil {
			before = p
		}
		if p.PartitionEpoch > before.PartitionEpoch {
			return before, p
		}
		np, err := ctl.Ctl().AlterPartition(context.Background(), topic, 0, p.Leader, p.LeaderEpoch, p.PartitionEpoch, without(p.ISR, p.Leader))
		if err == nil {
			return before, np
		}
		if !errors.Is(err, ErrNoQuorum) && !errors.Is(err, ErrNotController) && !errors.Is(err, ErrStaleEpoch) {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s-0: leader never gave up: %v", topic, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestControllerAlterPartitionLeaderGivesUp: a leader asking for an ISR
// without itself (its log failed) hands leadership to a live member of
// that ISR at a new leader epoch; the only in-sync replica giving up
// leaves the partition offline with itself as the ISR.
func TestControllerAlterPartitionLeaderGivesUp(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 3, 0, nil)
	for i := int32(1); i <= 3; i++ {
		c.startBroker(i)
	}
	c.waitBrokersLive(1, 2, 3)
	c.createTopic(TopicSpec{Name: "t", Partitions: 1, ReplicationFactor: 3})
	c.createTopic(TopicSpec{Name: "single", Partitions: 1, ReplicationFactor: 1})

	p, np := giveUp(t, c, "t")
	rest := without(p.ISR, p.Leader)
	if np.Leader == p.Leader || !slices.Contains(rest, np.Leader) || np.LeaderEpoch != p.LeaderEpoch+1 ||
		!slices.Equal(np.ISR, rest) || np.PartitionEpoch != p.PartitionEpoch+1 {
		t.Fatalf("leader %d gave up %+v: got %+v", p.Leader, p, np)
	}

	s, ns := giveUp(t, c, "single")
	if ns.Leader != -1 || !slices.Equal(ns.ISR, []int32{s.Leader}) || ns.LeaderEpoch != s.LeaderEpoch+1 {
		t.Fatalf("only replica %d gave up %+v: got %+v", s.Leader, s, ns)
	}
}
