package client

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"google.golang.org/grpc"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

// Consumer group offsets. A group here is what Kafka calls a simple
// consumer group (manual assignment): any client may commit offsets for a
// group id and read them back. They are kept in the cluster's metadata
// log; any broker takes the calls and passes them to the controller, so a
// commit is read back at once whichever brokers the calls reach.

// MaxGroupIDLen is the longest group id, in bytes.
const MaxGroupIDLen = 255

// ValidateGroupID checks a group id as the brokers do: 1 to MaxGroupIDLen
// bytes and no NUL byte. The error carries the code a broker would answer,
// INVALID_GROUP_ID, so that a caller sees the same error either way.
func ValidateGroupID(group string) error {
	var msg string
	switch {
	case group == "":
		msg = "the group id is empty"
	case len(group) > MaxGroupIDLen:
		msg = fmt.Sprintf("the group id is %d bytes, the limit is %d", len(group), MaxGroupIDLen)
	case strings.IndexByte(group, 0) >= 0:
		msg = fmt.Sprintf("the group id %q holds a NUL byte", group)
	default:
		return nil
	}
	return newError(quirev1.ErrorCode_INVALID_GROUP_ID, msg)
}

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

// OffsetCommit is one partition's offset to commit: the next offset the
// group reads, that is the last record consumed plus one (as in Kafka).
type OffsetCommit struct {
	Topic     string
	Partition int32
	Offset    int64
	// LeaderEpoch is the leader epoch of the last record consumed
	// (Record.LeaderEpoch), or -1 when unknown. Set it either way: the
	// zero value is not "unknown" but epoch 0, and is stored as such;
	// below -1 is refused.
	LeaderEpoch int32
	Metadata    string
}

// CommittedOffset is a group's committed offset of one partition. Offset
// and CommitTimeMs are -1 for a partition the group never committed;
// LeaderEpoch is -1 when unknown.
type CommittedOffset struct {
	Topic        string `json:"topic"`
	Partition    int32  `json:"partition"`
	Offset       int64  `json:"offset"`
	LeaderEpoch  int32  `json:"leader_epoch"`
	Metadata     string `json:"metadata,omitempty"`
	CommitTimeMs int64  `json:"commit_time_ms"`
}

// group runs a Groups call on any broker, retried as admin calls
// are (an election, unreachable brokers).
func (c *Client) group(ctx context.Context, fn func(ctx context.Context, g quirev1.GroupsClient) error) error {
	return c.anyBrokerRetried(ctx, func(ctx context.Context, cc *grpc.ClientConn) error {
		return fn(ctx, quirev1.NewGroupsClient(cc))
	})
}

// CommitOffsets commits offsets for a group, all or none: a bad group id
// (see ValidateGroupID), no offsets or more than 10000, an unknown topic
// or partition, a partition named twice, a negative offset, a leader epoch
// below -1 or metadata over 4096 bytes fail the whole commit.
//
// Ordering: the call's own retries (an election, an unreachable broker)
// resend the same offsets, which is harmless. An attempt it gave up on
// (the call failed or timed out) may still be applied later, even after a
// later commit has succeeded, and then its offsets are the ones that stay.
// So after a failed commit, retry the same offsets or later ones, never
// earlier ones: a late arrival can then only move the group back to
// offsets it has already read past (records read again), never ahead of
// what was processed. Generation fencing will close this once groups have
// members.
func (c *Client) CommitOffsets(ctx context.Context, group string, offsets ...OffsetCommit) error {
	req := &quirev1.CommitOffsetsRequest{Group: group, Offsets: make([]*quirev1.OffsetCommit, len(offsets))}
	for i, o := range offsets {
		req.Offsets[i] = &quirev1.OffsetCommit{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset,
			OptionalLeaderEpoch: &quirev1.OffsetCommit_LeaderEpoch{LeaderEpoch: o.LeaderEpoch}, Metadata: o.Metadata}
	}
	err := c.group(ctx, func(ctx context.Context, g quirev1.GroupsClient) error {
		_, err := g.CommitOffsets(ctx, req)
		return err
	})
	return err
}

// FetchOffsets returns a group's committed offsets, sorted by topic and
// partition: those of the named partitions (Offset -1 where never
// committed), or every committed one when none is named. A group that
// never committed has none.
func (c *Client) FetchOffsets(ctx context.Context, group string, partitions ...TopicPartition) ([]CommittedOffset, error) {
	req := &quirev1.FetchOffsetsRequest{Group: group}
	for _, tp := range partitions {
		req.Partitions = append(req.Partitions, &quirev1.TopicPartition{Topic: tp.Topic, Partition: tp.Partition})
	}
	var resp *quirev1.FetchOffsetsResponse
	err := c.group(ctx, func(ctx context.Context, g quirev1.GroupsClient) (err error) {
		resp, err = g.FetchOffsets(ctx, req)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]CommittedOffset, 0, len(resp.GetOffsets()))
	for _, o := range resp.GetOffsets() {
		out = append(out, CommittedOffset{Topic: o.GetTopic(), Partition: o.GetPartition(), Offset: o.GetOffset(),
			LeaderEpoch: o.GetLeaderEpoch(), Metadata: o.GetMetadata(), CommitTimeMs: o.GetCommitTimeMs()})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out, nil
}

// ListGroups lists the groups with committed offsets or members, sorted.
func (c *Client) ListGroups(ctx context.Context) ([]string, error) {
	listed, err := c.ListGroupStates(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(listed))
	for i, l := range listed {
		out[i] = l.Group
	}
	return out, nil
}

// GroupListing is a group and its state: empty, assigning, reconciling
// or stable ("" from a controller too old to say).
type GroupListing struct {
	Group string `json:"group"`
	State string `json:"state"`
}

// ListGroupStates lists the groups with committed offsets or members,
// each with its state, sorted by group.
func (c *Client) ListGroupStates(ctx context.Context) ([]GroupListing, error) {
	var resp *quirev1.ListGroupsResponse
	err := c.group(ctx, func(ctx context.Context, g quirev1.GroupsClient) (err error) {
		resp, err = g.ListGroups(ctx, &quirev1.ListGroupsRequest{})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]GroupListing, 0, len(resp.GetGroups()))
	for _, g := range resp.GetGroups() {
		out = append(out, GroupListing{Group: g.GetGroup(), State: g.GetState()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out, nil
}

// DeleteGroup removes a group with no members: its committed offsets and
// its state. A group with members fails with NON_EMPTY_GROUP, one with
// neither members' state nor offsets with GROUP_ID_NOT_FOUND.
func (c *Client) DeleteGroup(ctx context.Context, group string) error {
	err := c.group(ctx, func(ctx context.Context, g quirev1.GroupsClient) error {
		_, err := g.DeleteGroup(ctx, &quirev1.DeleteGroupRequest{Group: group})
		return err
	})
	return err
}

// GroupDescription is a consumer group as its coordinator describes it.
type GroupDescription struct {
	Group string `json:"group"`
	// State is empty, assigning, reconciling or stable.
	State           string              `json:"state"`
	GroupEpoch      int32               `json:"group_epoch"`
	AssignmentEpoch int32               `json:"assignment_epoch"`
	Assignor        string              `json:"assignor"`
	Members         []GroupMember       `json:"members"`
	Partitions      []GroupPartitionLag `json:"partitions"`
	Throughput      GroupThroughput     `json:"throughput"`
}

// GroupThroughput is whether a group keeps up: its lag in records summed
// over its partitions (-1 unknown), the records a second its committed
// offsets and its partitions' high watermarks move (the coordinator's
// rates over about the last twelve group.lag.refresh.ms; -1 unknown),
// the seconds until the lag is 0 at those rates (0 no lag; -1 when it
// does not shrink or a figure is unknown), and how many members, each
// reading as fast as the members do now, would keep the lag flat at the
// produce rate (at most the partition count; 0 when nothing is
// produced; -1 unknown).
type GroupThroughput struct {
	Lag           int64   `json:"lag"`
	ConsumeRate   float64 `json:"consume_rate"`
	ProduceRate   float64 `json:"produce_rate"`
	DrainSeconds  float64 `json:"drain_seconds"`
	Members       int     `json:"members"`
	Partitions    int     `json:"partitions"`
	MembersNeeded int     `json:"members_needed"`
}

// GroupMember is one member of a GroupDescription.
type GroupMember struct {
	MemberID          string           `json:"member_id"`
	InstanceID        string           `json:"instance_id,omitempty"` // a static member's
	ClientAddress     string           `json:"client_address"`
	MemberEpoch       int32            `json:"member_epoch"`
	Topics            []string         `json:"topics,omitempty"`
	Regex             string           `json:"regex,omitempty"`
	Assigned          []TopicPartition `json:"assigned"`
	PendingRevocation []TopicPartition `json:"pending_revocation"`
	PendingAssignment []TopicPartition `json:"pending_assignment"`
}

// GroupPartitionLag is a group's position in one partition: its committed
// offset (-1 none), the partition's high watermark (-1 unknown), the lag
// in records (-1 unknown) and in seconds (now minus the timestamp of the
// first record not committed, 0 when caught up, -1 unknown), and the
// member the partition is assigned to.
type GroupPartitionLag struct {
	Topic           string  `json:"topic"`
	Partition       int32   `json:"partition"`
	CommittedOffset int64   `json:"committed_offset"`
	HighWatermark   int64   `json:"high_watermark"`
	Lag             int64   `json:"lag"`
	LagSeconds      float64 `json:"lag_seconds"`
	MemberID        string  `json:"member_id,omitempty"`
	// LastStableOffset is the partition's last stable offset (the first
	// offset of its oldest open transaction, or HighWatermark), and
	// StableLag the lag against it: what a read_committed consumer can
	// read now, the records of open transactions left out. Lag is what a
	// read_uncommitted one has left. -1 when unknown; a broker that
	// predates them gives HighWatermark and Lag.
	LastStableOffset int64 `json:"last_stable_offset"`
	StableLag        int64 `json:"stable_lag"`
}

// DescribeGroup describes a consumer group: its state, members and lag
// per partition. A group with neither members nor committed offsets is
// GROUP_ID_NOT_FOUND.
func (c *Client) DescribeGroup(ctx context.Context, group string) (GroupDescription, error) {
	var resp *quirev1.DescribeGroupResponse
	err := c.group(ctx, func(ctx context.Context, g quirev1.GroupsClient) (err error) {
		resp, err = g.DescribeGroup(ctx, &quirev1.DescribeGroupRequest{Group: group})
		return err
	})
	if err != nil {
		return GroupDescription{}, err
	}
	d := GroupDescription{Group: resp.GetGroup(), State: resp.GetState(), GroupEpoch: resp.GetGroupEpoch(),
		AssignmentEpoch: resp.GetAssignmentEpoch(), Assignor: resp.GetAssignor(),
		Members: []GroupMember{}, Partitions: []GroupPartitionLag{}}
	for _, m := range resp.GetMembers() {
		d.Members = append(d.Members, GroupMember{MemberID: m.GetMemberId(), InstanceID: m.GetInstanceId(), ClientAddress: m.GetClientAddress(),
			MemberEpoch: m.GetMemberEpoch(), Topics: m.GetTopics(), Regex: m.GetRegex(),
			Assigned: partitionsFromPB(m.GetAssigned()), PendingRevocation: partitionsFromPB(m.GetPendingRevocation()),
			PendingAssignment: partitionsFromPB(m.GetPendingAssignment())})
	}
	for _, p := range resp.GetPartitions() {
		pl := GroupPartitionLag{Topic: p.GetTopic(), Partition: p.GetPartition(),
			CommittedOffset: p.GetCommittedOffset(), HighWatermark: p.GetHighWatermark(), Lag: p.GetLag(),
			LagSeconds: p.GetLagSeconds(), MemberID: p.GetMemberId(), LastStableOffset: p.GetHighWatermark(), StableLag: p.GetLag()}
		if p.OptionalLastStableOffset != nil {
			pl.LastStableOffset, pl.StableLag = p.GetLastStableOffset(), p.GetStableLag()
		}
		d.Partitions = append(d.Partitions, pl)
	}
	d.Throughput = GroupThroughput{Lag: -1, ConsumeRate: -1, ProduceRate: -1, DrainSeconds: -1, MembersNeeded: -1}
	if t := resp.GetThroughput(); t != nil {
		d.Throughput = GroupThroughput{Lag: t.GetLag(), ConsumeRate: t.GetConsumeRate(), ProduceRate: t.GetProduceRate(),
			DrainSeconds: t.GetDrainSeconds(), Members: int(t.GetMembers()), Partitions: int(t.GetPartitions()),
			MembersNeeded: int(t.GetMembersNeeded())}
	}
	return d, nil
}

func partitionsFromPB(a *quirev1.GroupAssignment) []TopicPartition {
	out := []TopicPartition{}
	for _, t := range a.GetTopics() {
		for _, p := range t.GetPartitions() {
			out = append(out, TopicPartition{Topic: t.GetTopic(), Partition: p})
		}
	}
	return out
}

// ResetTarget is where ResetOffsets moves a group's committed offsets.
type ResetTarget struct {
	to *quirev1.ResetOffsetsRequest
}

// ResetToStart moves each partition to its log start offset.
func ResetToStart() ResetTarget {
	return ResetTarget{&quirev1.ResetOffsetsRequest{To: &quirev1.ResetOffsetsRequest_Earliest{Earliest: true}}}
}

// ResetToEnd moves each partition to its high watermark.
func ResetToEnd() ResetTarget {
	return ResetTarget{&quirev1.ResetOffsetsRequest{To: &quirev1.ResetOffsetsRequest_Latest{Latest: true}}}
}

// ResetToOffset moves each partition to offset (kept within the log).
func ResetToOffset(offset int64) ResetTarget {
	return ResetTarget{&quirev1.ResetOffsetsRequest{To: &quirev1.ResetOffsetsRequest_Offset{Offset: offset}}}
}

// ResetToTime moves each partition to its first record at or after t, or
// its high watermark when there is none.
func ResetToTime(t time.Time) ResetTarget {
	return ResetTarget{&quirev1.ResetOffsetsRequest{To: &quirev1.ResetOffsetsRequest_TimestampMs{TimestampMs: t.UnixMilli()}}}
}

// ResetShift moves each partition's committed offset by n (back when
// negative), kept within the log.
func ResetShift(n int64) ResetTarget {
	return ResetTarget{&quirev1.ResetOffsetsRequest{To: &quirev1.ResetOffsetsRequest_ShiftBy{ShiftBy: n}}}
}

// ResetOffset is one partition's committed offset before and after
// ResetOffsets; Previous is -1 where the group had none.
type ResetOffset struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Previous  int64  `json:"previous"`
	Offset    int64  `json:"offset"`
}

// ResetOffsets moves the committed offsets of a group with no members
// (NON_EMPTY_GROUP otherwise): of every partition of topics, or of every
// partition it committed when none is named. With dryRun it only says
// what it would commit. Sorted by topic and partition.
func (c *Client) ResetOffsets(ctx context.Context, group string, to ResetTarget, dryRun bool, topics ...string) ([]ResetOffset, error) {
	if err := ValidateGroupID(group); err != nil {
		return nil, err
	}
	if to.to == nil {
		return nil, newError(quirev1.ErrorCode_INVALID_REQUEST, "reset offsets: no target")
	}
	req := &quirev1.ResetOffsetsRequest{Group: group, Topics: topics, To: to.to.To, DryRun: dryRun}
	var resp *quirev1.ResetOffsetsResponse
	err := c.group(ctx, func(ctx context.Context, g quirev1.GroupsClient) (err error) {
		resp, err = g.ResetOffsets(ctx, req)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]ResetOffset, 0, len(resp.GetOffsets()))
	for _, o := range resp.GetOffsets() {
		out = append(out, ResetOffset{Topic: o.GetTopic(), Partition: o.GetPartition(), Previous: o.GetPrevious(), Offset: o.GetOffset()})
	}
	return out, nil
}
