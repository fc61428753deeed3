package controlplane

import (
	"context"
	"slices"
	"time"

	pb "github.com/quirelog/quire/api/internalv1"
	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/group"
)

// The consumer group coordinator's calls. They carry the public
// quire.v1 messages as they are, so a broker passes a member's heartbeat
// to the controller unchanged.

func (s *Service) ConsumerGroupHeartbeat(ctx context.Context, in *quirev1.ConsumerGroupHeartbeatRequest) (*quirev1.ConsumerGroupHeartbeatResponse, error) {
	resp, err := s.node.Ctl().ConsumerGroupHeartbeat(ctx, HeartbeatFromPB(in))
	if err != nil {
		return nil, toStatus(err)
	}
	out := &quirev1.ConsumerGroupHeartbeatResponse{MemberId: resp.MemberID, MemberEpoch: resp.MemberEpoch,
		HeartbeatIntervalMs: int32(resp.HeartbeatInterval.Milliseconds()), SessionTimeoutMs: int32(resp.SessionTimeout.Milliseconds()),
		Rejoin: resp.Rejoin}
	if resp.HasAssignment {
		out.Assignment = AssignmentToPB(resp.Assignment)
	}
	return out, nil
}

func (s *Service) DescribeGroup(ctx context.Context, in *quirev1.DescribeGroupRequest) (*quirev1.DescribeGroupResponse, error) {
	d, err := s.node.Ctl().DescribeGroup(ctx, in.Group)
	if err != nil {
		return nil, toStatus(err)
	}
	out := &quirev1.DescribeGroupResponse{Group: d.Group, State: d.State.String(), GroupEpoch: d.Epoch,
		AssignmentEpoch: d.TargetEpoch, Assignor: d.Assignor}
	var extra []group.TopicPartition
	for _, m := range d.Members {
		out.Members = append(out.Members, &quirev1.GroupMemberDescription{
			MemberId: m.MemberID, InstanceId: m.InstanceID, ClientAddress: m.ClientAddress, MemberEpoch: m.Epoch,
			Topics: m.Topics, Regex: m.Regex, Assigned: AssignmentToPB(m.Assigned),
			PendingRevocation: AssignmentToPB(m.PendingRevocation), PendingAssignment: AssignmentToPB(m.PendingAssignment),
		})
		extra = append(append(extra, m.Assigned...), m.Target...)
	}
	lag := s.node.Ctl().GroupLag(ctx, in.Group, extra)
	for _, l := range lag.Partitions {
		pl := &quirev1.GroupPartitionLag{Topic: l.Topic, Partition: l.Partition, CommittedOffset: l.Committed,
			HighWatermark: l.HighWatermark, Lag: l.Lag, LagSeconds: l.LagSeconds, MemberId: l.MemberID,
			OptionalLastStableOffset: &quirev1.GroupPartitionLag_LastStableOffset{LastStableOffset: l.LastStableOffset},
			OptionalStableLag:        &quirev1.GroupPartitionLag_StableLag{StableLag: l.StableLag}}
		if !l.Observed.IsZero() {
			pl.ObservedTimeMs = l.Observed.UnixMilli()
		}
		out.Partitions = append(out.Partitions, pl)
	}
	t := lag.Throughput
	out.Throughput = &quirev1.GroupThroughput{Lag: t.Lag, ConsumeRate: t.ConsumeRate, ProduceRate: t.ProduceRate,
		DrainSeconds: t.DrainSeconds, Members: int32(t.Members), Partitions: int32(t.Partitions), MembersNeeded: int32(t.MembersNeeded)}
	return out, nil
}

// ConsumerGroupHeartbeat passes a member's heartbeat to the coordinator
// on the controller.
func (f *Forwarder) ConsumerGroupHeartbeat(ctx context.Context, req *quirev1.ConsumerGroupHeartbeatRequest) (*quirev1.ConsumerGroupHeartbeatResponse, error) {
	return Call(ctx, f, (*Service).ConsumerGroupHeartbeat, pb.ControllerServiceClient.ConsumerGroupHeartbeat, req)
}

// DescribeGroup describes a group's membership from the coordinator.
func (f *Forwarder) DescribeGroup(ctx context.Context, req *quirev1.DescribeGroupRequest) (*quirev1.DescribeGroupResponse, error) {
	return Call(ctx, f, (*Service).DescribeGroup, pb.ControllerServiceClient.DescribeGroup, req)
}

// HeartbeatFromPB turns a heartbeat request into the state machine's
// input (its Now is set by the coordinator).
func HeartbeatFromPB(in *quirev1.ConsumerGroupHeartbeatRequest) group.Heartbeat {
	hb := group.Heartbeat{Group: in.Group, MemberID: in.MemberId, MemberEpoch: in.MemberEpoch,
		RebalanceTimeout: time.Duration(in.RebalanceTimeoutMs) * time.Millisecond, Assignor: in.Assignor, Classic: in.Classic,
		ClientAddress: in.ClientAddress, InstanceID: in.InstanceId, SessionTimeout: time.Duration(in.SessionTimeoutMs) * time.Millisecond}
	if in.Subscription != nil {
		hb.Subscription = &group.Subscription{Topics: slices.Clone(in.Subscription.Topics), Regex: in.Subscription.Regex}
	}
	if in.Owned != nil {
		hb.HasOwned, hb.Owned = true, AssignmentFromPB(in.Owned)
	}
	return hb
}

// AssignmentToPB groups partitions by topic, in the order given.
func AssignmentToPB(ps []group.TopicPartition) *quirev1.GroupAssignment {
	out := &quirev1.GroupAssignment{}
	for _, tp := range ps {
		if n := len(out.Topics); n == 0 || out.Topics[n-1].Topic != tp.Topic {
			out.Topics = append(out.Topics, &quirev1.GroupTopicPartitions{Topic: tp.Topic})
		}
		last := out.Topics[len(out.Topics)-1]
		last.Partitions = append(last.Partitions, tp.Partition)
	}
	return out
}

// AssignmentFromPB lists a set of partitions.
func AssignmentFromPB(in *quirev1.GroupAssignment) []group.TopicPartition {
	out := []group.TopicPartition{}
	for _, t := range in.GetTopics() {
		for _, p := range t.Partitions {
			out = append(out, group.TopicPartition{Topic: t.Topic, Partition: p})
		}
	}
	return out
}
