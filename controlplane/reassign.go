package controlplane

import (
	"context"

	pb "github.com/quirelog/quire/api/internalv1"
	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/metadata"
)

// ReassignPartitions starts, replaces or cancels partition reassignments
// on the controller (metadata.Controller.AlterPartitionReassignments).
func (s *Service) ReassignPartitions(ctx context.Context, in *pb.ReassignPartitionsRequest) (*pb.ReassignPartitionsResponse, error) {
	index, err := s.node.Ctl().AlterPartitionReassignments(ctx, ReassignmentsFromPB(in.Partitions), in.MinInsyncReplicas)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.ReassignPartitionsResponse{MetadataIndex: index}, nil
}

// CordonBroker cordons or uncordons a broker on the controller.
func (s *Service) CordonBroker(ctx context.Context, in *quirev1.CordonBrokerRequest) (*quirev1.CordonBrokerResponse, error) {
	if err := s.node.Ctl().CordonBroker(ctx, in.BrokerId, in.Cordon); err != nil {
		return nil, toStatus(err)
	}
	return &quirev1.CordonBrokerResponse{}, nil
}

// SetReassignmentThrottle sets brokers' reassignment throttle on the
// controller.
func (s *Service) SetReassignmentThrottle(ctx context.Context, in *quirev1.SetReassignmentThrottleRequest) (*quirev1.SetReassignmentThrottleResponse, error) {
	if err := s.node.Ctl().SetReassignmentThrottle(ctx, in.BrokerIds, in.BytesPerSecond, in.Unset); err != nil {
		return nil, toStatus(err)
	}
	return &quirev1.SetReassignmentThrottleResponse{}, nil
}

// ReassignmentsFromPB turns the public API's targets into the
// controller's.
func ReassignmentsFromPB(in []*quirev1.ReassignmentTarget) []metadata.Reassignment {
	out := make([]metadata.Reassignment, len(in))
	for i, r := range in {
		out[i] = metadata.Reassignment{Topic: r.Topic, Partition: r.Partition, Replicas: r.Replicas, Cancel: r.Cancel}
	}
	return out
}

// ReassignPartitions passes reassignments on to the controller and
// returns the controller's metadata index with them applied.
func (f *Forwarder) ReassignPartitions(ctx context.Context, rs []metadata.Reassignment, minISR map[string]int32) (uint64, error) {
	in := &pb.ReassignPartitionsRequest{MinInsyncReplicas: minISR, Partitions: make([]*quirev1.ReassignmentTarget, len(rs))}
	for i, r := range rs {
		in.Partitions[i] = &quirev1.ReassignmentTarget{Topic: r.Topic, Partition: r.Partition, Replicas: r.Replicas, Cancel: r.Cancel}
	}
	resp, err := Call(ctx, f, (*Service).ReassignPartitions, pb.ControllerServiceClient.ReassignPartitions, in)
	if err != nil {
		return 0, err
	}
	return resp.MetadataIndex, nil
}

// CordonBroker passes a cordon or uncordon on to the controller.
func (f *Forwarder) CordonBroker(ctx context.Context, id int32, cordon bool) error {
	_, err := Call(ctx, f, (*Service).CordonBroker, pb.ControllerServiceClient.CordonBroker,
		&quirev1.CordonBrokerRequest{BrokerId: id, Cordon: cordon})
	return err
}

// SetReassignmentThrottle passes a throttle change on to the controller.
func (f *Forwarder) SetReassignmentThrottle(ctx context.Context, ids []int32, bytesPerSecond int64, unset bool) error {
	_, err := Call(ctx, f, (*Service).SetReassignmentThrottle, pb.ControllerServiceClient.SetReassignmentThrottle,
		&quirev1.SetReassignmentThrottleRequest{BrokerIds: ids, BytesPerSecond: bytesPerSecond, Unset: unset})
	return err
}
