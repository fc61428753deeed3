package broker

import (
	"context"
	"fmt"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/auth"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/request"
	"github.com/quirelog/quire/service"
)

// The request core's way to the group coordinator and to the users and
// ACLs: the controller, through this broker's controlplane.Forwarder,
// and this node's metadata image.

// coreGroups is request.GroupCoordinator over the controller session.
type coreGroups struct{ b *Broker }

func (g coreGroups) ConsumerGroupHeartbeat(ctx context.Context, hb *request.GroupHeartbeat) (*request.GroupHeartbeatResult, error) {
	resp, err := g.b.cluster.fwd.ConsumerGroupHeartbeat(ctx, service.HeartbeatToPB(hb))
	if err != nil {
		return nil, err
	}
	return &request.GroupHeartbeatResult{MemberID: resp.MemberId, MemberEpoch: resp.MemberEpoch, HeartbeatIntervalMs: resp.HeartbeatIntervalMs,
		SessionTimeoutMs: resp.SessionTimeoutMs, Rejoin: resp.Rejoin, Assignment: service.AssignmentFromPB(resp.Assignment)}, nil
}

func (g coreGroups) DescribeGroup(ctx context.Context, group string) (*request.GroupDescription, error) {
	d, err := g.b.cluster.fwd.DescribeGroup(ctx, &quirev1.DescribeGroupRequest{Group: group})
	if err != nil {
		return nil, err
	}
	return service.GroupDescriptionFromPB(d), nil
}

func (g coreGroups) ListGroups(ctx context.Context) ([]request.GroupListing, error) {
	return g.b.cluster.fwd.ListGroups(ctx)
}

func (g coreGroups) CommitOffsets(ctx context.Context, group string, member request.GroupMember, offsets []request.OffsetCommit, now time.Time) (time.Time, error) {
	return g.b.cluster.fwd.CommitOffsets(ctx, group, member, offsets, now)
}

func (g coreGroups) FetchOffsets(ctx context.Context, group string, parts []request.GroupPartition) ([]request.CommittedOffset, error) {
	return g.b.cluster.fwd.FetchOffsets(ctx, group, parts)
}

func (g coreGroups) DeleteGroup(ctx context.Context, group string) error {
	if err := g.b.cluster.fwd.DeleteGroup(ctx, group); err != nil {
		return err
	}
	g.b.logger.Info("deleted group", "group", group)
	return nil
}

// DeleteOffsets asks the coordinator to remove some of a group's
// committed offsets.
func (g coreGroups) DeleteOffsets(ctx context.Context, group string, topics []request.TopicPartitions) ([]request.PartitionResult, error) {
	in := &quirev1.DeleteOffsetsRequest{Group: group, Topics: make([]*quirev1.DeleteOffsetsTopic, len(topics))}
	for i, t := range topics {
		in.Topics[i] = &quirev1.DeleteOffsetsTopic{Topic: t.Topic, Partitions: t.Partitions}
	}
	resp, err := g.b.cluster.fwd.DeleteOffsets(ctx, in)
	if err != nil {
		return nil, err
	}
	out := make([]request.PartitionResult, len(resp.Partitions))
	n := 0
	for i, r := range resp.Partitions {
		out[i] = request.PartitionResult{Topic: r.Topic, Partition: r.Partition, Err: wireError(r.Error)}
		if r.Error == nil {
			n++
		}
	}
	g.b.logger.Info("deleted group offsets", "group", group, "partitions", n, "refused", len(out)-n)
	return out, nil
}

// ListOffset asks leader for one partition's offset (an offset reset's
// target), as a request passed on.
func (f coreForwarder) ListOffset(ctx context.Context, leader int32, p request.ListOffsetsPartition) (request.ListOffsetsResult, error) {
	cc, addr, err := f.conn(leader)
	if err != nil {
		return request.ListOffsetsResult{}, err
	}
	resp, err := quirev1.NewConsumerClient(cc).ListOffsets(f.b.forwardContext(ctx), &quirev1.ListOffsetsRequest{
		Partitions: []*quirev1.ListOffsetsPartition{{Topic: p.Topic, Partition: p.Partition, TimestampMs: p.Timestamp}}})
	if err != nil {
		return request.ListOffsetsResult{}, err
	}
	if len(resp.Partitions) != 1 {
		return request.ListOffsetsResult{}, fmt.Errorf("broker: the leader at %s answered %d partitions for 1", addr, len(resp.Partitions))
	}
	r := resp.Partitions[0]
	return request.ListOffsetsResult{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.TimestampMs,
		LeaderEpoch: r.LeaderEpoch, Err: service.FromError(r.Error)}, nil
}

// coreSecurity is request.SecurityStore over the controller session and
// this node's image.
type coreSecurity struct{ b *Broker }

func (s coreSecurity) UpsertUserCredential(ctx context.Context, user string, cred auth.Credential, mechanisms []string) error {
	return s.b.cluster.fwd.UpsertUserCredential(ctx, user, cred, mechanisms)
}
func (s coreSecurity) DeleteUserCredential(ctx context.Context, user, mechanism string) error {
	return s.b.cluster.fwd.DeleteUserCredential(ctx, user, mechanism)
}
func (s coreSecurity) CreateACLs(ctx context.Context, acls []auth.ACL) error {
	return s.b.cluster.fwd.CreateACLs(ctx, acls)
}
func (s coreSecurity) DeleteACLs(ctx context.Context, filters []auth.ACL) ([]auth.ACL, error) {
	return s.b.cluster.fwd.DeleteACLs(ctx, filters)
}
func (s coreSecurity) ACLs() []auth.ACL { return s.b.cluster.node.Image().ACLs() }
func (s coreSecurity) Users() []string  { return s.b.cluster.node.Image().Users() }
func (s coreSecurity) UserCredential(user string) (auth.Credential, bool) {
	return s.b.cluster.node.Image().UserCredential(user)
}

// WaitFor checks cond as each image is applied: cond reads the newest.
func (s coreSecurity) WaitFor(ctx context.Context, cond func() bool) error {
	_, err := s.b.cluster.waitFor(ctx, func(*metadata.Image) bool { return cond() })
	return err
}
