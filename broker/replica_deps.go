package broker

// What the replica manager (replica.New) is given of the cluster: the
// follower fetch tuning, the controller's AlterPartition and the brokers'
// registrations. The peer connection it fetches over is in peers.go.

import (
	"context"
	"errors"
	"fmt"

	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/replica"
)

// AlterPartition asks the controller for a led partition's new ISR
// (replica.Controller).
func (c *cluster) AlterPartition(ctx context.Context, topic string, p int32, a replica.Assignment) (replica.Assignment, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-c.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	info, err := c.fwd.AlterPartition(ctx, topic, p, a.Leader, a.LeaderEpoch, a.PartitionEpoch, a.ISR)
	if err != nil {
		for _, refused := range []error{metadata.ErrStaleEpoch, metadata.ErrFencedBroker, metadata.ErrInvalidPartitions, metadata.ErrUnknownTopic} {
			if errors.Is(err, refused) {
				return a, fmt.Errorf("%w: %w", replica.ErrISRRefused, err)
			}
		}
		return a, err
	}
	return replica.Assignment{Partition: p, Leader: info.Leader, LeaderEpoch: info.LeaderEpoch, PartitionEpoch: info.PartitionEpoch,
		Replicas: info.Replicas, ISR: info.ISR}, nil
}

// Registration is broker id's registration in the image (replica.Brokers).
func (c *cluster) Registration(id int32) (replica.Registration, bool) {
	b, ok := c.node.Image().Broker(id)
	return replica.Registration{Incarnation: b.Incarnation, Fenced: b.Fenced}, ok
}
