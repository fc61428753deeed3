package broker

import (
	"context"
	"fmt"
	"slices"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/controlplane"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/request"
)

// Partition reassignment and broker cordons: the gRPC door over the
// request core (request/reassign.go), and the core's Reassigner over the
// controller forwarder, each change waited for in this broker's image.

func (s *adminService) AlterPartitionReassignments(ctx context.Context, req *quirev1.AlterPartitionReassignmentsRequest) (*quirev1.AlterPartitionReassignmentsResponse, error) {
	if err := s.b.core.AlterPartitionReassignments(coreContext(ctx), controlplane.ReassignmentsFromPB(req.Partitions)); err != nil {
		return nil, toStatus(err)
	}
	return &quirev1.AlterPartitionReassignmentsResponse{}, nil
}

func (s *adminService) ListPartitionReassignments(ctx context.Context, req *quirev1.ListPartitionReassignmentsRequest) (*quirev1.ListPartitionReassignmentsResponse, error) {
	topics := make([]request.PartitionsOf, len(req.Topics))
	for i, t := range req.Topics {
		topics[i] = request.PartitionsOf{Topic: t.Topic, Partitions: t.Partitions}
	}
	parts, err := s.b.core.ListPartitionReassignments(coreContext(ctx), topics)
	if err != nil {
		return nil, toStatus(err)
	}
	return &quirev1.ListPartitionReassignmentsResponse{Reassignments: ReassignmentsToPB(parts)}, nil
}

// ReassignmentsToPB is pending reassignments as quire.v1's.
func ReassignmentsToPB(parts []metadata.PartitionInfo) []*quirev1.PartitionReassignment {
	out := make([]*quirev1.PartitionReassignment, len(parts))
	for i, p := range parts {
		out[i] = &quirev1.PartitionReassignment{Topic: p.Topic, Partition: p.Partition, Replicas: p.Replicas,
			AddingReplicas: p.AddingReplicas, RemovingReplicas: p.RemovingReplicas, Isr: p.ISR, Leader: p.Leader}
	}
	return out
}

func (s *adminService) CordonBroker(ctx context.Context, req *quirev1.CordonBrokerRequest) (*quirev1.CordonBrokerResponse, error) {
	if err := s.b.core.CordonBroker(coreContext(ctx), req.BrokerId, req.Cordon); err != nil {
		return nil, toStatus(err)
	}
	return &quirev1.CordonBrokerResponse{}, nil
}

func (s *adminService) SetReassignmentThrottle(ctx context.Context, req *quirev1.SetReassignmentThrottleRequest) (*quirev1.SetReassignmentThrottleResponse, error) {
	if err := s.b.core.SetReassignmentThrottle(coreContext(ctx), req.BrokerIds, req.BytesPerSecond, req.Unset); err != nil {
		return nil, toStatus(err)
	}
	return &quirev1.SetReassignmentThrottleResponse{}, nil
}

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

func (k kafkaBackend) AlterPartitionReassignments(ctx context.Context, targets []request.ReassignmentTarget) error {
	return k.b.core.AlterPartitionReassignments(coreContext(ctx), targets)
}

func (k kafkaBackend) ListPartitionReassignments(ctx context.Context, topics []request.PartitionsOf) ([]request.PendingReassignment, error) {
	return k.b.core.ListPartitionReassignments(coreContext(ctx), topics)
}
