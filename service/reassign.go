package service

import (
	"context"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/controlplane"
	"github.com/quirelog/quire/request"
)

// Partition reassignment and broker cordons over the request core
// (request/reassign.go).

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
	parts, err := s.b.core.ListPartitionReassignmentsProgress(coreContext(ctx), topics)
	if err != nil {
		return nil, toStatus(err)
	}
	return &quirev1.ListPartitionReassignmentsResponse{Reassignments: reassignmentsToPB(parts)}, nil
}

// reassignmentsToPB is pending reassignments as quire.v1's.
func reassignmentsToPB(parts []request.ReassignmentProgress) []*quirev1.PartitionReassignment {
	out := make([]*quirev1.PartitionReassignment, len(parts))
	for i, p := range parts {
		out[i] = &quirev1.PartitionReassignment{Topic: p.Topic, Partition: p.Partition, Replicas: p.Replicas,
			AddingReplicas: p.AddingReplicas, RemovingReplicas: p.RemovingReplicas, Isr: p.ISR, Leader: p.Leader,
			LeaderLogEndOffset: p.LeaderLogEndOffset, LeaderSizeBytes: p.LeaderSizeBytes}
		for _, a := range p.Adding {
			out[i].AddingProgress = append(out[i].AddingProgress, &quirev1.AddingReplicaProgress{BrokerId: a.BrokerID,
				LogEndOffset: a.LogEndOffset, SizeBytes: a.SizeBytes, BytesLeft: a.BytesLeft})
		}
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
