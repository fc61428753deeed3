package service

import (
	"context"

	"google.golang.org/grpc"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/request"
	"github.com/quirelog/quire/subscribe"
)

// groupService implements quire.v1.Groups over the request core, which
// authorizes each call and passes it to the group coordinator on the
// controller (request/groups.go); this is quire.v1 to and from the
// core's types.
type groupService struct {
	quirev1.UnimplementedGroupsServer
	b *node
}

func (s *groupService) CommitOffsets(ctx context.Context, req *quirev1.CommitOffsetsRequest) (*quirev1.CommitOffsetsResponse, error) {
	in := &request.CommitOffsetsRequest{Group: req.Group, MemberID: req.MemberId, MemberEpoch: req.MemberEpoch,
		Offsets: make([]request.OffsetCommit, len(req.Offsets))}
	for i, o := range req.Offsets {
		epoch := int32(-1)
		if o.OptionalLeaderEpoch != nil {
			epoch = o.GetLeaderEpoch()
		}
		in.Offsets[i] = request.OffsetCommit{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset, LeaderEpoch: epoch, Metadata: o.Metadata}
	}
	at, err := s.b.core.CommitOffsets(coreContext(ctx), in)
	if err != nil {
		return nil, toStatus(err)
	}
	return &quirev1.CommitOffsetsResponse{CommitTimeMs: at.UnixMilli()}, nil
}

func (s *groupService) FetchOffsets(ctx context.Context, req *quirev1.FetchOffsetsRequest) (*quirev1.FetchOffsetsResponse, error) {
	parts := make([]request.GroupPartition, len(req.Partitions))
	for i, p := range req.Partitions {
		parts[i] = request.GroupPartition{Topic: p.Topic, Partition: p.Partition}
	}
	offsets, err := s.b.core.FetchOffsets(coreContext(ctx), req.Group, parts)
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &quirev1.FetchOffsetsResponse{Offsets: make([]*quirev1.CommittedOffset, len(offsets))}
	for i, o := range offsets {
		resp.Offsets[i] = &quirev1.CommittedOffset{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset,
			LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata, CommitTimeMs: o.CommitTimeMs}
	}
	return resp, nil
}

func (s *groupService) ListGroups(ctx context.Context, _ *quirev1.ListGroupsRequest) (*quirev1.ListGroupsResponse, error) {
	groups, err := s.b.core.ListGroups(coreContext(ctx))
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &quirev1.ListGroupsResponse{Groups: make([]*quirev1.GroupListing, len(groups))}
	for i, g := range groups {
		resp.Groups[i] = &quirev1.GroupListing{Group: g.Group, State: g.State}
	}
	return resp, nil
}

func (s *groupService) DeleteGroup(ctx context.Context, req *quirev1.DeleteGroupRequest) (*quirev1.DeleteGroupResponse, error) {
	if err := s.b.core.DeleteGroup(coreContext(ctx), req.Group); err != nil {
		return nil, toStatus(err)
	}
	return &quirev1.DeleteGroupResponse{}, nil
}

// ConsumerGroupHeartbeat passes a member's heartbeat, with the address
// it came from, to the group coordinator.
func (s *groupService) ConsumerGroupHeartbeat(ctx context.Context, req *quirev1.ConsumerGroupHeartbeatRequest) (*quirev1.ConsumerGroupHeartbeatResponse, error) {
	hb := heartbeatFromPB(req)
	hb.ClientAddress = ClientHost(ctx)
	out, err := s.b.core.ConsumerGroupHeartbeat(coreContext(ctx), hb)
	if err != nil {
		return nil, toStatus(err)
	}
	return &quirev1.ConsumerGroupHeartbeatResponse{MemberId: out.MemberID, MemberEpoch: out.MemberEpoch, HeartbeatIntervalMs: out.HeartbeatIntervalMs,
		SessionTimeoutMs: out.SessionTimeoutMs, Rejoin: out.Rejoin, Assignment: assignmentToPB(out.Assignment)}, nil
}

// DescribeGroup describes a group's membership from the coordinator.
func (s *groupService) DescribeGroup(ctx context.Context, req *quirev1.DescribeGroupRequest) (*quirev1.DescribeGroupResponse, error) {
	d, err := s.b.core.DescribeGroup(coreContext(ctx), req.Group)
	if err != nil {
		return nil, toStatus(err)
	}
	out := &quirev1.DescribeGroupResponse{Group: d.Group, State: d.State, GroupEpoch: d.GroupEpoch, AssignmentEpoch: d.AssignmentEpoch,
		Assignor: d.Assignor}
	for _, m := range d.Members {
		out.Members = append(out.Members, &quirev1.GroupMemberDescription{MemberId: m.MemberID, InstanceId: m.InstanceID,
			ClientAddress: m.ClientAddress, MemberEpoch: m.MemberEpoch, Topics: m.Topics, Regex: m.Regex, Assigned: assignmentToPB(m.Assigned),
			PendingRevocation: assignmentToPB(m.PendingRevocation), PendingAssignment: assignmentToPB(m.PendingAssignment)})
	}
	for _, l := range d.Partitions {
		out.Partitions = append(out.Partitions, &quirev1.GroupPartitionLag{Topic: l.Topic, Partition: l.Partition, CommittedOffset: l.CommittedOffset,
			HighWatermark: l.HighWatermark, Lag: l.Lag, LagSeconds: l.LagSeconds, MemberId: l.MemberID, ObservedTimeMs: l.ObservedTimeMs,
			OptionalLastStableOffset: &quirev1.GroupPartitionLag_LastStableOffset{LastStableOffset: l.LastStableOffset},
			OptionalStableLag:        &quirev1.GroupPartitionLag_StableLag{StableLag: l.StableLag}})
	}
	if t := d.Throughput; t != nil {
		out.Throughput = &quirev1.GroupThroughput{Lag: t.Lag, ConsumeRate: t.ConsumeRate, ProduceRate: t.ProduceRate, DrainSeconds: t.DrainSeconds,
			Members: int32(t.Members), Partitions: int32(t.Partitions), MembersNeeded: int32(t.MembersNeeded)}
	}
	return out, nil
}

// heartbeatFromPB and the functions below turn the group calls' quire.v1
// messages into the core's types and back (the controller is reached
// with the quire.v1 messages too, core_groups.go).
func heartbeatFromPB(in *quirev1.ConsumerGroupHeartbeatRequest) *request.GroupHeartbeat {
	hb := &request.GroupHeartbeat{Group: in.Group, MemberID: in.MemberId, MemberEpoch: in.MemberEpoch, InstanceID: in.InstanceId,
		RebalanceTimeoutMs: in.RebalanceTimeoutMs, SessionTimeoutMs: in.SessionTimeoutMs, Assignor: in.Assignor, Classic: in.Classic,
		ClientAddress: in.ClientAddress, Owned: AssignmentFromPB(in.Owned)}
	if in.Subscription != nil {
		hb.Subscription = &request.GroupSubscription{Topics: in.Subscription.Topics, Regex: in.Subscription.Regex}
	}
	return hb
}

// HeartbeatToPB is a heartbeat as the coordinator's quire.v1 call takes
// it.
func HeartbeatToPB(hb *request.GroupHeartbeat) *quirev1.ConsumerGroupHeartbeatRequest {
	out := &quirev1.ConsumerGroupHeartbeatRequest{Group: hb.Group, MemberId: hb.MemberID, MemberEpoch: hb.MemberEpoch, InstanceId: hb.InstanceID,
		RebalanceTimeoutMs: hb.RebalanceTimeoutMs, SessionTimeoutMs: hb.SessionTimeoutMs, Assignor: hb.Assignor, Classic: hb.Classic,
		ClientAddress: hb.ClientAddress, Owned: assignmentToPB(hb.Owned)}
	if hb.Subscription != nil {
		out.Subscription = &quirev1.GroupSubscription{Topics: hb.Subscription.Topics, Regex: hb.Subscription.Regex}
	}
	return out
}

// AssignmentFromPB keeps nil as nil: an assignment not given.
func AssignmentFromPB(in *quirev1.GroupAssignment) *request.GroupAssignment {
	if in == nil {
		return nil
	}
	out := &request.GroupAssignment{Topics: make([]request.GroupTopicPartitions, len(in.Topics))}
	for i, t := range in.Topics {
		out.Topics[i] = request.GroupTopicPartitions{Topic: t.Topic, Partitions: t.Partitions}
	}
	return out
}

func assignmentToPB(in *request.GroupAssignment) *quirev1.GroupAssignment {
	if in == nil {
		return nil
	}
	out := &quirev1.GroupAssignment{Topics: make([]*quirev1.GroupTopicPartitions, len(in.Topics))}
	for i, t := range in.Topics {
		out.Topics[i] = &quirev1.GroupTopicPartitions{Topic: t.Topic, Partitions: t.Partitions}
	}
	return out
}

// GroupDescriptionFromPB is the coordinator's description as the core's.
func GroupDescriptionFromPB(d *quirev1.DescribeGroupResponse) *request.GroupDescription {
	out := &request.GroupDescription{Group: d.Group, State: d.State, GroupEpoch: d.GroupEpoch, AssignmentEpoch: d.AssignmentEpoch, Assignor: d.Assignor}
	for _, m := range d.Members {
		out.Members = append(out.Members, request.GroupMemberDescription{MemberID: m.MemberId, InstanceID: m.InstanceId,
			ClientAddress: m.ClientAddress, MemberEpoch: m.MemberEpoch, Topics: m.Topics, Regex: m.Regex, Assigned: AssignmentFromPB(m.Assigned),
			PendingRevocation: AssignmentFromPB(m.PendingRevocation), PendingAssignment: AssignmentFromPB(m.PendingAssignment)})
	}
	for _, l := range d.Partitions {
		// From a controller that predates the last stable offset: as if
		// no transaction were open.
		lso, stable := l.HighWatermark, l.Lag
		if l.OptionalLastStableOffset != nil {
			lso, stable = l.GetLastStableOffset(), l.GetStableLag()
		}
		out.Partitions = append(out.Partitions, request.GroupPartitionLag{Topic: l.Topic, Partition: l.Partition, CommittedOffset: l.CommittedOffset,
			HighWatermark: l.HighWatermark, Lag: l.Lag, LagSeconds: l.LagSeconds, MemberID: l.MemberId, ObservedTimeMs: l.ObservedTimeMs,
			LastStableOffset: lso, StableLag: stable})
	}
	if t := d.Throughput; t != nil {
		out.Throughput = &metadata.GroupThroughput{Lag: t.Lag, ConsumeRate: t.ConsumeRate, ProduceRate: t.ProduceRate, DrainSeconds: t.DrainSeconds,
			Members: int(t.Members), Partitions: int(t.Partitions), MembersNeeded: int(t.MembersNeeded)}
	}
	return out
}

// Subscribe runs one stream's group member (package subscribe) on this
// broker, over the request core, which authorizes its every call as the
// stream's principal.
func (s *groupService) Subscribe(stream grpc.BidiStreamingServer[quirev1.SubscribeRequest, quirev1.SubscribeResponse]) error {
	return subscribe.Serve(coreContext(stream.Context()), s.b.core, s.b.subscriber, stream)
}
