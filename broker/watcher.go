package broker

// The image watcher: every new metadata image is turned into the view the
// replicas follow (replica.View) and reconciled; admin calls wait here
// until their change is reflected.

import (
	"context"

	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/replica"
)

// watch reconciles the replicas with every new image. It runs outside the
// FSM: Apply only signals the subscription.
func (c *cluster) watch() {
	defer close(c.stopped)
	ch, cancel := c.node.Subscribe()
	defer cancel()
	for {
		c.reconcile(c.node.Image())
		select {
		case <-ch:
		case <-c.stop:
			return
		}
	}
}

// reconcile brings the hosted replicas in line with img (see
// replica.Manager.Reconcile), then tells waitFor.
func (c *cluster) reconcile(img *metadata.Image) {
	self := c.cfg.NodeID
	b, known := img.Broker(self)
	registered := known && b.Incarnation == c.incarnation
	// An operator's throttle outlives a restart (the registration carries
	// it over), so the one the image holds applies before this run's
	// registration reaches the image too: the leader may accept this run's
	// fetches first, and an adding replica would catch up unthrottled.
	throttle := c.cfg.ReplicaReassignmentThrottle
	if known && b.ReassignmentThrottle >= 0 {
		throttle = b.ReassignmentThrottle
	}
	c.rm.SetReassignmentThrottle(throttle)
	c.rm.Reconcile(c.replicaView(img, registered))
	c.mu.Lock()
	c.reconciled = img
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
	if registered && !b.Fenced {
		c.readyOnce.Do(func() {
			c.logger.Info("broker ready", "node_id", self, "metadata_index", img.Index())
			close(c.ready)
		})
	}
}

// replicaView is what the replicas follow of img: the topics with their
// effective configs and assignments.
func (c *cluster) replicaView(img *metadata.Image, registered bool) replica.View {
	topics := img.Topics()
	v := replica.View{Topics: make([]replica.TopicView, 0, len(topics)), Registered: registered}
	for _, t := range topics {
		tc, err := c.defaults.Resolve(t.Configs)
		if err != nil {
			// Configs are validated before they reach the controller; an
			// invalid one here came from a newer node or a bug.
			c.logger.Error("invalid topic config in metadata", "topic", t.Name, "error", err)
			tc, _ = c.defaults.Resolve(nil)
		}
		tv := replica.TopicView{Name: t.Name, ID: t.ID, Config: tc.ReplicaConfig(c.cfg.BaseLogConfig()),
			Partitions: make([]replica.Assignment, len(t.Partitions))}
		for i, p := range t.Partitions {
			tv.Partitions[i] = replica.Assignment{Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
				PartitionEpoch: p.PartitionEpoch, Replicas: p.Replicas, ISR: p.ISR, Adding: p.AddingReplicas}
		}
		v.Topics = append(v.Topics, tv)
	}
	return v
}

// image returns the newest image whose changes the replicas reflect.
func (c *cluster) image() *metadata.Image {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reconciled == nil {
		return c.node.Image()
	}
	return c.reconciled
}

// waitFor blocks until cond holds for a reconciled image, or ctx ends.
func (c *cluster) waitFor(ctx context.Context, cond func(*metadata.Image) bool) (*metadata.Image, error) {
	for {
		c.mu.Lock()
		img, ch := c.reconciled, c.changed
		c.mu.Unlock()
		if img != nil && cond(img) {
			return img, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return img, ctx.Err()
		}
	}
}
