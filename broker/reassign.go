package broker

import (
	"context"
	"fmt"
	"slices"

	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/request"
	"github.com/quirelog/quire/service"
)

// Partition reassignment and broker cordons: the request core's
// Reassigner over the controller forwarder, each change waited for in
// this broker's image; the Kafka door's calls into the core.

func (c coreController) ReassignPartitions(ctx context.Context, rs []metadata.Reassignment, minISR map[string]int32) error {
	b := c.b
	index, err := b.cluster.fwd.ReassignPartitions(ctx, rs, minISR)
	if err != nil {
		return err
	}
	b.logger.Info("partition reassignment", "partitions", len(rs))
	if _, err := b.cluster.waitFor(ctx, func(img *metadata.Image) bool { return img.Index() >= index }); err != nil {
		return fmt.Errorf("waiting for the metadata: %w", err)
	}
	return nil
}

func (c coreController) CordonBroker(ctx context.Context, id int32, cordon bool) error {
	b := c.b
	if err := b.cluster.fwd.CordonBroker(ctx, id, cordon); err != nil {
		return err
	}
	b.logger.Info("broker cordon", "broker", id, "cordoned", cordon)
	_, err := b.cluster.waitFor(ctx, func(img *metadata.Image) bool {
		br, ok := img.Broker(id)
		return !ok || br.Cordoned == cordon
	})
	if err != nil {
		return fmt.Errorf("waiting for the metadata: %w", err)
	}
	return nil
}

func (c coreController) SetReassignmentThrottle(ctx context.Context, ids []int32, bytesPerSecond int64, unset bool) error {
	b := c.b
	if err := b.cluster.fwd.SetReassignmentThrottle(ctx, ids, bytesPerSecond, unset); err != nil {
		return err
	}
	want := bytesPerSecond
	if unset {
		want = -1
	}
	_, err := b.cluster.waitFor(ctx, func(img *metadata.Image) bool {
		for _, br := range img.Brokers() {
			if (len(ids) == 0 || slices.Contains(ids, br.ID)) && br.ReassignmentThrottle != want {
				return false
			}
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("waiting for the metadata: %w", err)
	}
	return nil
}

func (k kafkaBackend) AlterPartitionReassignments(ctx context.Context, targets []request.ReassignmentTarget) ([]request.PartitionResult, error) {
	return k.b.core.AlterPartitionReassignmentsEach(service.CoreContext(ctx), targets)
}

func (k kafkaBackend) ListPartitionReassignments(ctx context.Context, topics []request.PartitionsOf) ([]request.PendingReassignment, error) {
	return k.b.core.ListPartitionReassignments(service.CoreContext(ctx), topics)
}
