package testcluster

import (
	"context"
	"fmt"

	"github.com/quirelog/quire/internal/poll"
	"github.com/quirelog/quire/metadata"
)

// Eventually polls cond until it returns nil or ctx (bounded by
// WaitTimeout when it has no deadline) ends, then fails the test with
// what it waited for and cond's last error.
func (c *Cluster) Eventually(ctx context.Context, what string, cond func() error) {
	c.t.Helper()
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, WaitTimeout)
		defer cancel()
	}
	if err := poll.Wait(ctx, cond); err != nil {
		c.t.Fatalf("testcluster: %s: %v", what, err)
	}
}

// WaitController waits until every running node names the same running
// node as controller and that node's controller loop has committed its
// ControllerChange (the image says so too), and returns its id.
func (c *Cluster) WaitController(ctx context.Context) int32 {
	c.t.Helper()
	var ctl int32
	c.Eventually(ctx, "wait for a controller", func() error {
		ctl = -1
		for _, id := range c.Running() {
			b := c.Node(id)
			if b == nil {
				return fmt.Errorf("node %d stopped", id)
			}
			got, _, ok := b.Metadata().Controller()
			if !ok {
				return fmt.Errorf("node %d knows no controller", id)
			}
			if ctl != -1 && got != ctl {
				return fmt.Errorf("nodes disagree: %d and %d", ctl, got)
			}
			ctl = got
			if img := b.Metadata().Image(); img.ControllerID() != got {
				return fmt.Errorf("node %d: image names controller %d, raft %d", id, img.ControllerID(), got)
			}
		}
		if ctl == -1 {
			return fmt.Errorf("no node runs")
		}
		if b := c.Node(ctl); b == nil || !b.Metadata().IsController() {
			return fmt.Errorf("controller %d is not running or not leader", ctl)
		}
		return nil
	})
	return ctl
}

// WaitImage waits until cond holds for the image of every running node.
func (c *Cluster) WaitImage(ctx context.Context, cond func(*metadata.Image) bool) {
	c.t.Helper()
	c.Eventually(ctx, "wait for the metadata image", func() error {
		for _, id := range c.Running() {
			b := c.Node(id)
			if b == nil {
				return fmt.Errorf("node %d stopped", id)
			}
			if img := b.Metadata().Image(); !cond(img) {
				return fmt.Errorf("node %d: not yet (index %d)", id, img.Index())
			}
		}
		return nil
	})
}

// WaitIdenticalImages waits until every running node has applied the
// same metadata index, and returns that image (from the lowest id).
func (c *Cluster) WaitIdenticalImages(ctx context.Context) *metadata.Image {
	c.t.Helper()
	var img *metadata.Image
	c.Eventually(ctx, "wait for identical images", func() error {
		img = nil
		for _, id := range c.Running() {
			b := c.Node(id)
			if b == nil {
				return fmt.Errorf("node %d stopped", id)
			}
			got := b.Metadata().Image()
			if img != nil && got.Index() != img.Index() {
				return fmt.Errorf("node %d at index %d, another at %d", id, got.Index(), img.Index())
			}
			if img == nil {
				img = got
			}
		}
		return nil
	})
	return img
}

// WaitLeader waits until every running node's image gives topic-partition
// the same leader, a running node, and returns it with its leader epoch.
func (c *Cluster) WaitLeader(ctx context.Context, topic string, partition int32) (leader, epoch int32) {
	c.t.Helper()
	c.Eventually(ctx, fmt.Sprintf("wait for a leader of %s-%d", topic, partition), func() error {
		leader, epoch = -1, -1
		for _, id := range c.Running() {
			b := c.Node(id)
			if b == nil {
				return fmt.Errorf("node %d stopped", id)
			}
			p, ok := b.Metadata().Image().Partition(topic, partition)
			if !ok {
				return fmt.Errorf("node %d does not know %s-%d", id, topic, partition)
			}
			if p.Leader < 0 {
				return fmt.Errorf("node %d: %s-%d has no leader", id, topic, partition)
			}
			if leader != -1 && (p.Leader != leader || p.LeaderEpoch != epoch) {
				return fmt.Errorf("nodes disagree: leader %d epoch %d vs %d epoch %d", leader, epoch, p.Leader, p.LeaderEpoch)
			}
			leader, epoch = p.Leader, p.LeaderEpoch
		}
		if leader == -1 {
			return fmt.Errorf("no node runs")
		}
		if c.Node(leader) == nil {
			return fmt.Errorf("leader %d is not running", leader)
		}
		return nil
	})
	return leader, epoch
}

// WaitBroker waits until every running node's image shows broker id
// fenced (or unfenced), and returns its record.
func (c *Cluster) WaitBroker(ctx context.Context, id int32, fenced bool) metadata.BrokerInfo {
	c.t.Helper()
	var info metadata.BrokerInfo
	c.Eventually(ctx, fmt.Sprintf("wait for broker %d fenced=%v", id, fenced), func() error {
		for _, n := range c.Running() {
			b := c.Node(n)
			if b == nil {
				return fmt.Errorf("node %d stopped", n)
			}
			bi, ok := b.Metadata().Image().Broker(id)
			if !ok {
				return fmt.Errorf("node %d does not know broker %d", n, id)
			}
			if bi.Fenced != fenced {
				return fmt.Errorf("node %d: broker %d fenced=%v", n, id, bi.Fenced)
			}
			info = bi
		}
		return nil
	})
	return info
}
