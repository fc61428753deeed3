// Package controlplane puts the metadata controller on the wire: the gRPC
// ControllerService (register, heartbeat, admin writes, AlterPartition,
// controlled shutdown, consumer group offsets), a Forwarder that sends each controller call to the
// current controller wherever it is, and the broker Lifecycle (register,
// heartbeat, re-register when fenced, controlled shutdown on stop).
//
// metadata knows nothing of gRPC; this package maps its sentinel errors to
// gRPC status codes with a google.rpc.ErrorInfo reason (and a NotController
// detail naming the controller) and back.
package controlplane

import (
	"context"

	"google.golang.org/grpc"

	pb "github.com/quirelog/quire/api/internalv1"
	"github.com/quirelog/quire/metadata"
)

// Service serves ControllerService from this node's controller. A node
// that is not the controller answers FAILED_PRECONDITION naming the one
// that is; the Forwarder follows it.
type Service struct {
	pb.UnimplementedControllerServiceServer
	node *metadata.Node
}

// NewService returns the ControllerService of node.
func NewService(node *metadata.Node) *Service { return &Service{node: node} }

// Register installs the service on gs.
func (s *Service) Register(gs *grpc.Server) { pb.RegisterControllerServiceServer(gs, s) }

func (s *Service) RegisterBroker(ctx context.Context, in *pb.RegisterBrokerRequest) (*pb.RegisterBrokerResponse, error) {
	epoch, err := s.node.Ctl().RegisterBroker(ctx, brokerFromPB(in.Broker))
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.RegisterBrokerResponse{BrokerEpoch: epoch}, nil
}

func (s *Service) BrokerHeartbeat(ctx context.Context, in *pb.BrokerHeartbeatRequest) (*pb.BrokerHeartbeatResponse, error) {
	if err := s.node.Ctl().Heartbeat(ctx, in.BrokerId, in.Incarnation, in.BrokerEpoch, in.MaxPartitions); err != nil {
		return nil, toStatus(err)
	}
	return &pb.BrokerHeartbeatResponse{MetadataIndex: s.node.Image().Index()}, nil
}

func (s *Service) CreateTopic(ctx context.Context, in *pb.CreateTopicRequest) (*pb.CreateTopicResponse, error) {
	info, err := s.node.Ctl().CreateTopic(ctx, specFromPB(in))
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.CreateTopicResponse{Topic: topicToPB(info)}, nil
}

func (s *Service) DeleteTopic(ctx context.Context, in *pb.DeleteTopicRequest) (*pb.DeleteTopicResponse, error) {
	if err := s.node.Ctl().DeleteTopic(ctx, in.Name, in.TopicId); err != nil {
		return nil, toStatus(err)
	}
	return &pb.DeleteTopicResponse{}, nil
}

func (s *Service) AlterConfigs(ctx context.Context, in *pb.AlterConfigsRequest) (*pb.AlterConfigsResponse, error) {
	if err := s.node.Ctl().AlterConfigs(ctx, in.Topic, in.Set, in.Delete); err != nil {
		return nil, toStatus(err)
	}
	return &pb.AlterConfigsResponse{}, nil
}

func (s *Service) CreatePartitions(ctx context.Context, in *pb.CreatePartitionsRequest) (*pb.CreatePartitionsResponse, error) {
	if err := s.node.Ctl().CreatePartitions(ctx, in.Topic, in.Total); err != nil {
		return nil, toStatus(err)
	}
	return &pb.CreatePartitionsResponse{}, nil
}

func (s *Service) AlterPartition(ctx context.Context, in *pb.AlterPartitionRequest) (*pb.AlterPartitionResponse, error) {
	p, err := s.node.Ctl().AlterPartition(ctx, in.Topic, in.Partition, in.LeaderId, in.LeaderEpoch, in.PartitionEpoch, in.Isr)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.AlterPartitionResponse{Partition: partitionToPB(p)}, nil
}

func (s *Service) ControlledShutdown(ctx context.Context, in *pb.ControlledShutdownRequest) (*pb.ControlledShutdownResponse, error) {
	if err := s.node.Ctl().ControlledShutdown(ctx, in.BrokerId); err != nil {
		return nil, toStatus(err)
	}
	return &pb.ControlledShutdownResponse{}, nil
}

func (s *Service) UnregisterBroker(ctx context.Context, in *pb.UnregisterBrokerRequest) (*pb.UnregisterBrokerResponse, error) {
	if err := s.node.Ctl().UnregisterBroker(ctx, in.BrokerId); err != nil {
		return nil, toStatus(err)
	}
	return &pb.UnregisterBrokerResponse{}, nil
}

func (s *Service) CommitOffsets(ctx context.Context, in *pb.CommitOffsetsRequest) (*pb.CommitOffsetsResponse, error) {
	// in.CommitTimeMs is for controllers that record the sender's time.
	at, err := s.node.Ctl().CommitOffsets(ctx, in.Group, metadata.GroupMember{ID: in.MemberId, Epoch: in.MemberEpoch}, offsetCommitsFromPB(in.Offsets))
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.CommitOffsetsResponse{CommitTimeMs: at.UnixMilli()}, nil
}

func (s *Service) FetchOffsets(ctx context.Context, in *pb.FetchOffsetsRequest) (*pb.FetchOffsetsResponse, error) {
	parts := make([]metadata.TopicPartition, len(in.Partitions))
	for i, p := range in.Partitions {
		parts[i] = metadata.TopicPartition{Topic: p.Topic, Partition: p.Partition}
	}
	offsets, err := s.node.Ctl().FetchOffsets(ctx, in.Group, parts)
	if err != nil {
		return nil, toStatus(err)
	}
	out := &pb.FetchOffsetsResponse{Offsets: make([]*pb.GroupOffset, len(offsets))}
	for i, o := range offsets {
		out.Offsets[i] = &pb.GroupOffset{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset,
			LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata, CommitTimeMs: o.CommitTimeMs}
	}
	return out, nil
}

func (s *Service) ListGroups(ctx context.Context, in *pb.ListGroupsRequest) (*pb.ListGroupsResponse, error) {
	groups, err := s.node.Ctl().ListGroups(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	out := &pb.ListGroupsResponse{Groups: make([]string, len(groups)), States: make([]string, len(groups))}
	for i, g := range groups {
		out.Groups[i], out.States[i] = g.Group, g.State
	}
	return out, nil
}

func (s *Service) DeleteGroup(ctx context.Context, in *pb.DeleteGroupRequest) (*pb.DeleteGroupResponse, error) {
	if err := s.node.Ctl().DeleteGroup(ctx, in.Group); err != nil {
		return nil, toStatus(err)
	}
	return &pb.DeleteGroupResponse{}, nil
}

func offsetCommitsFromPB(in []*pb.GroupOffset) []metadata.OffsetCommit {
	out := make([]metadata.OffsetCommit, len(in))
	for i, o := range in {
		out[i] = metadata.OffsetCommit{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata}
	}
	return out
}

func offsetCommitsToPB(in []metadata.OffsetCommit) []*pb.GroupOffset {
	out := make([]*pb.GroupOffset, len(in))
	for i, o := range in {
		out[i] = &pb.GroupOffset{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata}
	}
	return out
}

func brokerFromPB(b *pb.BrokerInfo) metadata.BrokerInfo {
	if b == nil {
		return metadata.BrokerInfo{ID: -1}
	}
	return metadata.BrokerInfo{ID: b.Id, Incarnation: b.Incarnation, Addr: b.Addr, Rack: b.Rack, Fenced: b.Fenced, Epoch: b.Epoch, DirectoryID: b.DirectoryId,
		Endpoints:        metadata.EndpointsFromPB(b.Endpoints),
		MetadataVersions: metadata.VersionRange{Min: b.MinMetadataVersion, Max: b.MaxMetadataVersion}}
}

func brokerToPB(b metadata.BrokerInfo) *pb.BrokerInfo {
	return &pb.BrokerInfo{Id: b.ID, Incarnation: b.Incarnation, Addr: b.Addr, Rack: b.Rack, Fenced: b.Fenced, Epoch: b.Epoch, DirectoryId: b.DirectoryID,
		Endpoints:          metadata.EndpointsToPB(b.Endpoints),
		MinMetadataVersion: b.MetadataVersions.Min, MaxMetadataVersion: b.MetadataVersions.Max}
}

func specFromPB(in *pb.CreateTopicRequest) metadata.TopicSpec {
	spec := metadata.TopicSpec{Name: in.Name, Partitions: in.Partitions, ReplicationFactor: int16(in.ReplicationFactor), Configs: in.Configs, ID: in.TopicId, RequestID: in.RequestId}
	for _, a := range in.Assignment {
		spec.Assignment = append(spec.Assignment, a.Replicas)
	}
	return spec
}

func specToPB(spec metadata.TopicSpec) *pb.CreateTopicRequest {
	out := &pb.CreateTopicRequest{Name: spec.Name, Partitions: spec.Partitions, ReplicationFactor: int32(spec.ReplicationFactor), Configs: spec.Configs, TopicId: spec.ID, RequestId: spec.RequestID}
	for _, r := range spec.Assignment {
		out.Assignment = append(out.Assignment, &pb.ReplicaList{Replicas: r})
	}
	return out
}

func partitionToPB(p metadata.PartitionInfo) *pb.PartitionInfo {
	return &pb.PartitionInfo{
		Topic: p.Topic, Partition: p.Partition, Replicas: p.Replicas, Isr: p.ISR,
		Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch,
	}
}

func partitionFromPB(p *pb.PartitionInfo) metadata.PartitionInfo {
	if p == nil {
		return metadata.PartitionInfo{Leader: -1}
	}
	return metadata.PartitionInfo{
		Topic: p.Topic, Partition: p.Partition, Replicas: p.Replicas, ISR: p.Isr,
		Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch,
	}
}

func topicToPB(t metadata.TopicInfo) *pb.TopicInfo {
	out := &pb.TopicInfo{Name: t.Name, Id: t.ID, Configs: t.Configs}
	for _, p := range t.Partitions {
		out.Partitions = append(out.Partitions, partitionToPB(p))
	}
	return out
}

func topicFromPB(t *pb.TopicInfo) metadata.TopicInfo {
	if t == nil {
		return metadata.TopicInfo{}
	}
	out := metadata.TopicInfo{Name: t.Name, ID: t.Id, Configs: t.Configs}
	if out.Configs == nil {
		out.Configs = map[string]string{}
	}
	for _, p := range t.Partitions {
		out.Partitions = append(out.Partitions, partitionFromPB(p))
	}
	return out
}
