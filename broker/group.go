package broker

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/metadata"
)

// groupService implements quire.v1.Groups: consumer groups' committed
// offsets, kept in the metadata log. Every call goes to the controller,
// which checks it against its image (metadata.ValidateOffsetCommit): this
// broker's own image may not have a topic created a moment ago through
// another node, and the controller's is the one the commit applies to.
type groupService struct {
	quirev1.UnimplementedGroupsServer
	b *Broker
}

func (s *groupService) CommitOffsets(ctx context.Context, req *quirev1.CommitOffsetsRequest) (*quirev1.CommitOffsetsResponse, error) {
	offsets := make([]metadata.OffsetCommit, len(req.Offsets))
	for i, o := range req.Offsets {
		// A name no topic can have is INVALID_TOPIC_EXCEPTION here as in
		// every call that names a topic, not the controller's unknown topic.
		if err := validateTopicName(o.Topic); err != nil {
			return nil, toStatus(fmt.Errorf("commit offsets: group %q entry %d: %w", req.Group, i, err))
		}
		epoch := int32(-1)
		if o.OptionalLeaderEpoch != nil {
			epoch = o.GetLeaderEpoch()
		}
		offsets[i] = metadata.OffsetCommit{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset, LeaderEpoch: epoch, Metadata: o.Metadata}
	}
	// Stamped by the controller.
	at, err := s.b.cluster.fwd.CommitOffsets(ctx, req.Group, metadata.GroupMember{ID: req.MemberId, Epoch: req.MemberEpoch}, offsets, s.b.clock.Now())
	if err != nil {
		return nil, toStatus(fmt.Errorf("commit offsets: %w", err))
	}
	return &quirev1.CommitOffsetsResponse{CommitTimeMs: at.UnixMilli()}, nil
}

func (s *groupService) FetchOffsets(ctx context.Context, req *quirev1.FetchOffsetsRequest) (*quirev1.FetchOffsetsResponse, error) {
	parts := make([]metadata.TopicPartition, len(req.Partitions))
	for i, p := range req.Partitions {
		if err := validateTopicName(p.Topic); err != nil {
			return nil, toStatus(fmt.Errorf("fetch offsets: group %q: %w", req.Group, err))
		}
		parts[i] = metadata.TopicPartition{Topic: p.Topic, Partition: p.Partition}
	}
	offsets, err := s.b.cluster.fwd.FetchOffsets(ctx, req.Group, parts)
	if err != nil {
		return nil, toStatus(fmt.Errorf("fetch offsets: %w", err))
	}
	slices.SortStableFunc(offsets, func(a, b metadata.CommittedOffset) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	resp := &quirev1.FetchOffsetsResponse{Offsets: make([]*quirev1.CommittedOffset, len(offsets))}
	for i, o := range offsets {
		resp.Offsets[i] = &quirev1.CommittedOffset{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset,
			LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata, CommitTimeMs: o.CommitTimeMs}
	}
	return resp, nil
}

func (s *groupService) ListGroups(ctx context.Context, req *quirev1.ListGroupsRequest) (*quirev1.ListGroupsResponse, error) {
	groups, err := s.b.cluster.fwd.ListGroups(ctx)
	if err != nil {
		return nil, toStatus(fmt.Errorf("list groups: %w", err))
	}
	resp := &quirev1.ListGroupsResponse{Groups: make([]*quirev1.GroupListing, len(groups))}
	for i, g := range groups {
		resp.Groups[i] = &quirev1.GroupListing{Group: g.Group, State: g.State}
	}
	return resp, nil
}

func (s *groupService) DeleteGroup(ctx context.Context, req *quirev1.DeleteGroupRequest) (*quirev1.DeleteGroupResponse, error) {
	if err := s.b.cluster.fwd.DeleteGroup(ctx, req.Group); err != nil {
		return nil, toStatus(fmt.Errorf("delete group: %w", err))
	}
	s.b.logger.Info("deleted group", "group", req.Group)
	return &quirev1.DeleteGroupResponse{}, nil
}

// ConsumerGroupHeartbeat passes a member's heartbeat to the group
// coordinator on the controller.
func (s *groupService) ConsumerGroupHeartbeat(ctx context.Context, req *quirev1.ConsumerGroupHeartbeatRequest) (*quirev1.ConsumerGroupHeartbeatResponse, error) {
	if err := checkSubscription(req.Subscription); err != nil { // validate.go
		return nil, toStatus(fmt.Errorf("group %q member %q heartbeat: %w", req.Group, req.MemberId, err))
	}
	req.ClientAddress = clientHost(ctx)
	resp, err := s.b.cluster.fwd.ConsumerGroupHeartbeat(ctx, req)
	if err != nil {
		return nil, toStatus(fmt.Errorf("group %q member %q heartbeat: %w", req.Group, req.MemberId, err))
	}
	return resp, nil
}

// DescribeGroup describes a group's membership from the coordinator.
func (s *groupService) DescribeGroup(ctx context.Context, req *quirev1.DescribeGroupRequest) (*quirev1.DescribeGroupResponse, error) {
	resp, err := s.b.cluster.fwd.DescribeGroup(ctx, req)
	if err != nil {
		return nil, toStatus(fmt.Errorf("describe group %q: %w", req.Group, err))
	}
	return resp, nil
}
