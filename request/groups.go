package request

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/quirelog/quire/auth"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/replica"
)

// Consumer groups: heartbeats, descriptions, listings, committed offsets
// and deletion, served by the group coordinator on the controller. The
// core authorizes each call (Read on the group to take part in it or
// commit for it, Describe to see it, Delete to delete it) and passes it
// to the coordinator through GroupCoordinator, which the broker
// implements over its session with the controller. Every call goes to
// the controller, which checks it against its own image: this broker's
// may not yet have a topic created a moment ago through another node.

// The committed offsets' types are the metadata's own.
type (
	// OffsetCommit is one partition's offset to commit; LeaderEpoch -1
	// when the client does not say.
	OffsetCommit = metadata.OffsetCommit
	// CommittedOffset is one partition's committed offset; Offset -1
	// for one never committed.
	CommittedOffset = metadata.CommittedOffset
	// GroupPartition names a partition of a group's offsets.
	GroupPartition = metadata.TopicPartition
	// GroupMember is a member committing under its id and epoch; the
	// zero value commits as no member (an admin's commit).
	GroupMember = metadata.GroupMember
	// GroupListing is a group and its state.
	GroupListing = metadata.GroupListing
)

// GroupCoordinator is the group coordinator as the core reaches it. Its
// errors are the module's sentinels (the coordinator's, the metadata's),
// wrapped as they come.
type GroupCoordinator interface {
	ConsumerGroupHeartbeat(ctx context.Context, hb *GroupHeartbeat) (*GroupHeartbeatResult, error)
	DescribeGroup(ctx context.Context, group string) (*GroupDescription, error)
	ListGroups(ctx context.Context) ([]GroupListing, error)
	// CommitOffsets commits for member and returns the commit time the
	// coordinator recorded; now is this broker's clock.
	CommitOffsets(ctx context.Context, group string, member GroupMember, offsets []OffsetCommit, now time.Time) (time.Time, error)
	// FetchOffsets reads the partitions named, or every committed one
	// for none.
	FetchOffsets(ctx context.Context, group string, parts []GroupPartition) ([]CommittedOffset, error)
	DeleteGroup(ctx context.Context, group string) error
	// DeleteOffsets removes the group's committed offsets of the
	// partitions named, each partition's refusal in its result.
	DeleteOffsets(ctx context.Context, group string, topics []TopicPartitions) ([]PartitionResult, error)
}

// GroupAssignment is a set of partitions, by topic.
type GroupAssignment struct {
	Topics []GroupTopicPartitions
}

// GroupTopicPartitions is partitions of one topic.
type GroupTopicPartitions struct {
	Topic      string
	Partitions []int32
}

// GroupSubscription is what a member subscribes to: topics by name, or a
// regular expression.
type GroupSubscription struct {
	Topics []string
	Regex  string
}

// GroupHeartbeat is a member's heartbeat (KIP-848's protocol: epoch 0
// joins, -1 leaves). Subscription and Owned are nil when unchanged.
type GroupHeartbeat struct {
	Group, MemberID    string
	MemberEpoch        int32
	InstanceID         string
	RebalanceTimeoutMs int32
	SessionTimeoutMs   int32
	Assignor           string
	// Classic: a member speaking the classic group protocol.
	Classic bool
	// ClientAddress is the member's host, as the door saw it.
	ClientAddress string
	Subscription  *GroupSubscription
	Owned         *GroupAssignment
}

// GroupHeartbeatResult is the coordinator's answer; Assignment is nil
// when unchanged.
type GroupHeartbeatResult struct {
	MemberID            string
	MemberEpoch         int32
	HeartbeatIntervalMs int32
	SessionTimeoutMs    int32
	// Rejoin: a classic member must join again (the group moved on).
	Rejoin     bool
	Assignment *GroupAssignment
}

// GroupDescription is a group's membership and, for each partition it
// commits or is assigned, its lag.
type GroupDescription struct {
	Group           string
	State           string
	GroupEpoch      int32
	AssignmentEpoch int32
	Assignor        string
	Members         []GroupMemberDescription
	Partitions      []GroupPartitionLag
	// Throughput is whether the group keeps up; nil when the coordinator
	// did not say (one of a version before it did).
	Throughput *metadata.GroupThroughput
}

// GroupMemberDescription is one member of a described group.
type GroupMemberDescription struct {
	MemberID, InstanceID, ClientAddress string
	MemberEpoch                         int32
	Topics                              []string
	Regex                               string
	Assigned                            *GroupAssignment
	PendingRevocation                   *GroupAssignment
	PendingAssignment                   *GroupAssignment
}

// GroupPartitionLag is one partition's committed offset and lag;
// ObservedTimeMs 0 when its high watermark was never observed.
type GroupPartitionLag struct {
	Topic           string
	Partition       int32
	CommittedOffset int64
	HighWatermark   int64
	Lag             int64
	LagSeconds      float64
	MemberID        string
	ObservedTimeMs  int64
	// LastStableOffset and StableLag are the partition's last stable
	// offset and the lag against it (a read_committed consumer's: the
	// records of open transactions left out), -1 when unknown.
	LastStableOffset int64
	StableLag        int64
}

// CommitOffsetsRequest commits a group's offsets, all or none: as a
// member (its id and epoch), or as none for an empty MemberID.
type CommitOffsetsRequest struct {
	Group       string
	MemberID    string
	MemberEpoch int32
	Offsets     []OffsetCommit
}

// coordinator is the configured coordinator, or the error for a core
// without one.
func (c *Core) coordinator() (GroupCoordinator, error) {
	if c.cfg.Groups == nil {
		return nil, c.fail(fmt.Errorf("%w: this node serves no consumer groups", replica.ErrInvalidRequest))
	}
	return c.cfg.Groups, nil
}

// authorizeGroup refuses unless the principal of ctx may do op on group,
// then each of topics (op on them as topicOp).
func (c *Core) authorizeGroup(ctx context.Context, op auth.Operation, group string, topicOp auth.Operation, topics []string) error {
	z := c.cfg.Authorizer
	if z == nil {
		return nil
	}
	r := auth.Request{Principal: Principal(ctx), Operation: op, ResourceType: auth.ResourceGroup, ResourceName: group}
	if !z.Authorize(r) {
		return c.fail(Refusal(r))
	}
	return c.authorizeTopics(ctx, topicOp, distinct(len(topics), func(i int) string { return topics[i] }), nil)
}

// mayDescribeResource reports whether the principal of ctx may describe the
// resource: what a listing shows.
func (c *Core) mayDescribeResource(ctx context.Context, rt auth.ResourceType, name string) bool {
	z := c.cfg.Authorizer
	return z == nil || z.Authorize(auth.Request{Principal: Principal(ctx), Operation: auth.OpDescribe, ResourceType: rt, ResourceName: name})
}

// AuthorizeFindCoordinator refuses to name the coordinator of a group
// the principal may not describe, as Kafka's FindCoordinator does.
func (c *Core) AuthorizeFindCoordinator(ctx context.Context, group string) error {
	return c.authorizeGroup(ctx, auth.OpDescribe, group, "", nil)
}

// ConsumerGroupHeartbeat passes a member's heartbeat to the coordinator
// (Read on the group, Describe on each topic subscribed to by name).
func (c *Core) ConsumerGroupHeartbeat(ctx context.Context, hb *GroupHeartbeat) (*GroupHeartbeatResult, error) {
	g, err := c.coordinator()
	if err != nil {
		return nil, err
	}
	var topics []string
	if hb.Subscription != nil {
		topics = hb.Subscription.Topics
	}
	if err := c.authorizeGroup(ctx, auth.OpRead, hb.Group, auth.OpDescribe, topics); err != nil {
		return nil, err
	}
	if err := CheckSubscription(hb.Subscription); err != nil {
		return nil, c.fail(fmt.Errorf("group %q member %q heartbeat: %w", hb.Group, hb.MemberID, err))
	}
	out, err := g.ConsumerGroupHeartbeat(ctx, hb)
	if err != nil {
		return nil, c.fail(fmt.Errorf("group %q member %q heartbeat: %w", hb.Group, hb.MemberID, err))
	}
	return out, nil
}

// CheckSubscription refuses a subscription naming a topic no topic can
// be called (INVALID_TOPIC_EXCEPTION), as any call naming a topic does:
// ConsumerGroupHeartbeat, and a Subscribe stream's start before it joins.
func CheckSubscription(s *GroupSubscription) error {
	if s == nil {
		return nil
	}
	for _, t := range s.Topics {
		if err := ValidateTopicName(t); err != nil {
			return fmt.Errorf("subscription: %w", err)
		}
	}
	return nil
}

// DescribeGroup describes a group's membership and lag (Describe on the
// group).
func (c *Core) DescribeGroup(ctx context.Context, group string) (*GroupDescription, error) {
	g, err := c.coordinator()
	if err != nil {
		return nil, err
	}
	if err := c.authorizeGroup(ctx, auth.OpDescribe, group, "", nil); err != nil {
		return nil, err
	}
	d, err := g.DescribeGroup(ctx, group)
	if err != nil {
		return nil, c.fail(fmt.Errorf("describe group %q: %w", group, err))
	}
	return d, nil
}

// ListGroups lists the groups with committed offsets or members that
// the principal may describe.
func (c *Core) ListGroups(ctx context.Context) ([]GroupListing, error) {
	g, err := c.coordinator()
	if err != nil {
		return nil, err
	}
	groups, err := g.ListGroups(ctx)
	if err != nil {
		return nil, c.fail(fmt.Errorf("list groups: %w", err))
	}
	return slices.DeleteFunc(groups, func(l GroupListing) bool { return !c.mayDescribeResource(ctx, auth.ResourceGroup, l.Group) }), nil
}

// CommitOffsets commits a group's offsets (Read on the group and on each
// topic) and returns the commit time the coordinator recorded.
func (c *Core) CommitOffsets(ctx context.Context, req *CommitOffsetsRequest) (time.Time, error) {
	g, err := c.coordinator()
	if err != nil {
		return time.Time{}, err
	}
	topics := make([]string, len(req.Offsets))
	for i, o := range req.Offsets {
		topics[i] = o.Topic
	}
	if err := c.authorizeGroup(ctx, auth.OpRead, req.Group, auth.OpRead, topics); err != nil {
		return time.Time{}, err
	}
	for i, o := range req.Offsets {
		// A name no topic can have is INVALID_TOPIC_EXCEPTION here as in
		// every call that names a topic, not the controller's unknown
		// topic.
		if err := ValidateTopicName(o.Topic); err != nil {
			return time.Time{}, c.fail(fmt.Errorf("commit offsets: group %q entry %d: %w", req.Group, i, err))
		}
	}
	at, err := g.CommitOffsets(ctx, req.Group, GroupMember{ID: req.MemberID, Epoch: req.MemberEpoch}, req.Offsets, c.cfg.Now())
	if err != nil {
		return time.Time{}, c.fail(fmt.Errorf("commit offsets: %w", err))
	}
	return at, nil
}

// FetchOffsets reads a group's committed offsets (Describe on the group
// and on each topic named), of the partitions named or, for none, every
// committed one whose topic the principal may describe; sorted by topic
// and partition.
func (c *Core) FetchOffsets(ctx context.Context, group string, parts []GroupPartition) ([]CommittedOffset, error) {
	g, err := c.coordinator()
	if err != nil {
		return nil, err
	}
	topics := make([]string, len(parts))
	for i, p := range parts {
		topics[i] = p.Topic
	}
	if err := c.authorizeGroup(ctx, auth.OpDescribe, group, auth.OpDescribe, topics); err != nil {
		return nil, err
	}
	for _, p := range parts {
		if err := ValidateTopicName(p.Topic); err != nil {
			return nil, c.fail(fmt.Errorf("fetch offsets: group %q: %w", group, err))
		}
	}
	offsets, err := g.FetchOffsets(ctx, group, parts)
	if err != nil {
		return nil, c.fail(fmt.Errorf("fetch offsets: %w", err))
	}
	slices.SortStableFunc(offsets, func(a, b CommittedOffset) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return slices.DeleteFunc(offsets, func(o CommittedOffset) bool { return !c.mayDescribeResource(ctx, auth.ResourceTopic, o.Topic) }), nil
}

// DeleteGroup deletes an empty group and its committed offsets, or an
// empty share group's saved state and settings (Delete on the group).
func (c *Core) DeleteGroup(ctx context.Context, group string) error {
	g, err := c.coordinator()
	if err != nil {
		return err
	}
	if err := c.authorizeGroup(ctx, auth.OpDelete, group, "", nil); err != nil {
		return err
	}
	if c.shareGroupKnown(group) {
		// A share group: its saved share-partition state and settings
		// (share_config.go).
		return c.deleteShareGroup(ctx, group)
	}
	if err := g.DeleteGroup(ctx, group); err != nil {
		return c.fail(fmt.Errorf("delete group: %w", err))
	}
	return nil
}
