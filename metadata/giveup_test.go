package metadata

import (
	"context"
	"slices"
	"testing"
)

// TestControllerAlterPartitionLeaderGivesUp: a leader asking for an ISR
// without itself (its log failed) hands leadership to a live member of
// that ISR at a new leader epoch; the only in-sync replica giving up
// leaves the partition offline with itself as the ISR.
func TestControllerAlterPartitionLeaderGivesUp(t *testing.T) {
	c := newTestCluster(t, 3, 0, nil)
	for i := int32(1); i <= 3; i++ {
		c.startBroker(i)
	}
	c.waitBrokersLive(1, 2, 3)
	c.createTopic(TopicSpec{Name: "t", Partitions: 1, ReplicationFactor: 3})
	c.createTopic(TopicSpec{Name: "single", Partitions: 1, ReplicationFactor: 1})
	ctl := c.waitController()
	ctx := context.Background()

	p, _ := ctl.Image().Partition("t", 0)
	rest := without(p.ISR, p.Leader)
	np, err := ctl.Ctl().AlterPartition(ctx, "t", 0, p.Leader, p.LeaderEpoch, p.PartitionEpoch, rest)
	if err != nil {
		t.Fatal(err)
	}
	if np.Leader == p.Leader || !slices.Contains(rest, np.Leader) || np.LeaderEpoch != p.LeaderEpoch+1 ||
		slices.Contains(np.ISR, p.Leader) || np.PartitionEpoch != p.PartitionEpoch+1 {
		t.Fatalf("leader %d gave up %+v: got %+v", p.Leader, p, np)
	}
	if img, _ := ctl.Image().Partition("t", 0); img.Leader != np.Leader || !slices.Equal(img.ISR, rest) {
		t.Fatalf("image has %+v", img)
	}

	s, _ := ctl.Image().Partition("single", 0)
	ns, err := ctl.Ctl().AlterPartition(ctx, "single", 0, s.Leader, s.LeaderEpoch, s.PartitionEpoch, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ns.Leader != -1 || !slices.Equal(ns.ISR, []int32{s.Leader}) || ns.LeaderEpoch != s.LeaderEpoch+1 {
		t.Fatalf("only replica %d gave up %+v: got %+v", s.Leader, s, ns)
	}
}
