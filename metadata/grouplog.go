package metadata

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	pb "github.com/quirelog/quire/api/metapb"
	"github.com/quirelog/quire/group"
	"github.com/quirelog/quire/txn"
)

// The consumer group coordinator runs on the controller, where the
// committed offsets are, but lives in its own package (coordinator),
// which imports this one: the controller sees it only through
// GroupCoordinator, made by Config.Coordinator from the GroupLog it writes
// through. The FSM's side of groups (the GroupRecords, CommitOffsets and
// DeleteGroup commands, the groups' image) stays here.

// GroupCoordinator is the consumer group coordinator as the controller
// calls it. Its errors are group's sentinels and this package's
// (ErrNotCoordinator when it could not write a change: retriable).
type GroupCoordinator interface {
	// RunTerm runs the coordinator's timers (session and rebalance
	// timeouts, offsets retention, lag figures) for one leadership term,
	// until ctx ends.
	RunTerm(ctx context.Context)
	// Heartbeat handles one member's heartbeat.
	Heartbeat(ctx context.Context, hb group.Heartbeat) (group.Response, error)
	// Describe describes a group's membership.
	Describe(ctx context.Context, id string) (group.Description, error)
	// ValidateCommit fences an offset commit by the group's membership.
	ValidateCommit(ctx context.Context, id string, member GroupMember) error
	// ValidateTxnCommit fences a transaction's offsets, sent as member
	// (none: not checked), by the group's membership: the member at its
	// epoch, owning each partition.
	ValidateTxnCommit(ctx context.Context, id string, member txn.Member, parts []group.TopicPartition) error
	// DeleteMembership refuses to delete a group with members
	// (group.ErrNonEmptyGroup) and removes the state of an empty one.
	DeleteMembership(ctx context.Context, id string) error
	// DeleteOffsets writes, in the group's turn, the deletion of its
	// offsets of the partitions of topics no member subscribes to, and
	// returns the topics some member does subscribe to, whose offsets it
	// kept.
	DeleteOffsets(ctx context.Context, id string, partitions []TopicPartition) (subscribed map[string]bool, err error)
	// States returns the state of every group with membership state.
	States(ctx context.Context) (map[string]group.GroupState, error)
	// Lag is group id's lag in every partition it committed in or has
	// assigned (extra), asking the partitions' leaders afresh.
	Lag(ctx context.Context, id string, extra []group.TopicPartition) GroupLag
	// Stats returns every group with committed offsets or members, with
	// its lag as of the last refresh; none off the controller.
	Stats() []GroupStats
}

// Clock tells the time; the commit times and the coordinator's deadlines
// follow it.
type Clock interface {
	Now() time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// GroupMember names the member an offset commit comes from: its id and
// current epoch. The zero value is no member (manual assignment).
type GroupMember struct {
	ID    string
	Epoch int32
}

// GroupLog is the controller's metadata log as the group coordinator
// writes to and reads it (coordinator.Log).
type GroupLog struct{ c *Controller }

// Active waits until this node is the active controller (ErrNotController
// when it is not).
func (l *GroupLog) Active(ctx context.Context) error { return l.c.active(ctx) }

// Term is the raft term of the running controller loop.
func (l *GroupLog) Term() uint64 {
	l.c.mu.Lock()
	defer l.c.mu.Unlock()
	return l.c.term
}

// Barrier waits until every entry proposed before is applied here.
func (l *GroupLog) Barrier(ctx context.Context) error { return l.c.barrier(ctx) }

// Image is this node's metadata image.
func (l *GroupLog) Image() *Image { return l.c.n.Image() }

// Apply writes cmd to the metadata log and returns the FSM's answer.
func (l *GroupLog) Apply(ctx context.Context, cmd *pb.Command) (any, error) {
	return l.c.raftApply(ctx, cmd)
}

// LevelRising tells whether cmd needs a metadata.version above the
// finalized one that the controller will raise to on its own (a new
// cluster whose voters have not all registered yet), and which.
func (l *GroupLog) LevelRising(cmd *pb.Command) (int32, bool) {
	level := commandLevel(cmd)
	return level, l.c.levelRising(level)
}

// ValidateTxnCommit fences a transaction's offsets for group id, sent as
// member, by the group coordinator's membership (txncoord.Groups). On a
// node without a group coordinator, offsets sent as a member are
// refused (there is no membership to check them against).
func (l *GroupLog) ValidateTxnCommit(ctx context.Context, id string, member txn.Member, parts []txn.TopicPartition) error {
	gps := make([]group.TopicPartition, len(parts))
	for i, p := range parts {
		gps[i] = group.TopicPartition{Topic: p.Topic, Partition: p.Partition}
	}
	if l.c.groups == nil {
		if member != (txn.Member{}) {
			return errNoCoordinator
		}
		return nil
	}
	return l.c.groups.ValidateTxnCommit(ctx, id, member, gps)
}

// errNoCoordinator answers the group calls of a node built without a
// group coordinator (Config.Coordinator nil).
var errNoCoordinator = fmt.Errorf("%w: this node runs no group coordinator", ErrNotCoordinator)

// ConsumerGroupHeartbeat handles one member's heartbeat.
func (c *Controller) ConsumerGroupHeartbeat(ctx context.Context, hb group.Heartbeat) (group.Response, error) {
	if c.groups == nil {
		return group.Response{}, errNoCoordinator
	}
	return c.groups.Heartbeat(ctx, hb)
}

// DescribeGroup describes a group's membership. A group with committed
// offsets and no membership state (manual assignment) is described as
// empty.
func (c *Controller) DescribeGroup(ctx context.Context, id string) (group.Description, error) {
	if c.groups == nil {
		return group.Description{}, errNoCoordinator
	}
	return c.groups.Describe(ctx, id)
}

// GroupLag is group id's lag in every partition it committed in or has
// assigned (extra: those of its members' assignments and targets),
// asking the partitions' leaders afresh; sorted by topic and partition.
func (c *Controller) GroupLag(ctx context.Context, id string, extra []group.TopicPartition) GroupLag {
	if c.groups == nil {
		return GroupLag{Throughput: GroupThroughput{Lag: -1, ConsumeRate: -1, ProduceRate: -1, DrainSeconds: -1, MembersNeeded: -1}}
	}
	return c.groups.Lag(ctx, id, extra)
}

// GroupStats returns every consumer group with committed offsets or
// members, with its lag as of the last refresh; none off the controller.
func (n *Node) GroupStats() []GroupStats {
	if n.ctl.groups == nil {
		return nil
	}
	return n.ctl.groups.Stats()
}

// validateCommit fences an offset commit by the group's membership.
func (c *Controller) validateCommit(ctx context.Context, id string, member GroupMember) error {
	if c.groups == nil {
		if member.ID != "" {
			return errNoCoordinator
		}
		return nil
	}
	return c.groups.ValidateCommit(ctx, id, member)
}

// deleteGroupMembership refuses to delete a group with members
// (group.ErrNonEmptyGroup) and removes the state of an empty one.
func (c *Controller) deleteGroupMembership(ctx context.Context, id string) error {
	if c.groups == nil {
		if c.n.Image().HasGroupState(id) {
			return errNoCoordinator
		}
		return nil
	}
	return c.groups.DeleteMembership(ctx, id)
}

// groupStates is the state of every group the coordinator has.
func (c *Controller) groupStates(ctx context.Context) (map[string]group.GroupState, error) {
	if c.groups == nil {
		return nil, nil
	}
	return c.groups.States(ctx)
}

// barrier waits until every entry proposed before is applied here.
func (c *Controller) barrier(ctx context.Context) error {
	timeout := c.n.cfg.ApplyTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	return c.leaderErr(c.n.raft.Barrier(timeout).Error(), ErrNotCoordinator)
}

// leaderErr maps the error of a raft call only the leader makes: nil
// stays nil, a lost leadership is notController, a shut-down raft
// ErrShutdown, anything else wrapped in fallback.
func (c *Controller) leaderErr(err, fallback error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost):
		return c.notController()
	case errors.Is(err, raft.ErrRaftShutdown):
		return ErrShutdown
	}
	return fmt.Errorf("%w: %w", fallback, err)
}
