package request

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/quirelog/quire/auth"
	"github.com/quirelog/quire/replica"
	"github.com/quirelog/quire/share"
	"github.com/quirelog/quire/sharegroup"
)

// ErrShareGroupNotFound: this node serves no share group of that name.
// Kafka's GROUP_ID_NOT_FOUND.
var ErrShareGroupNotFound = errors.New("request: share group not found")

// ErrShareRecordNotHeld is share.ErrInvalidRecordState, for the doors: an
// acknowledgement of a record the member does not hold.
var ErrShareRecordNotHeld = share.ErrInvalidRecordState

// ShareGroupDescription is a share group as this node serves it.
type ShareGroupDescription struct {
	Group           string
	KeyOrdering     bool
	DeadLetterTopic string
	Members         []ShareGroupMember
	// Partitions are sorted by topic and partition.
	Partitions []ShareGroupPartition
}

// ShareGroupMember is one member of a share group.
type ShareGroupMember struct {
	MemberID string
	Epoch    int32
	Topics   []string
	// InFlight is how many records it holds, over every partition.
	InFlight int
}

// ShareGroupPartition is one share-partition of a share group.
type ShareGroupPartition struct {
	Topic     string
	Partition int32
	// StartOffset: every record below it is finished; EndOffset: the
	// first not taken in from the log yet, -1 for a share-partition this
	// node does not hold (its StartOffset is the saved one).
	StartOffset, EndOffset int64
	// InFlight records are acquired by a member; Available ones wait for
	// one.
	InFlight, Available int
	// OldestLock is the in-flight record whose lock runs out first;
	// OldestLock.Offset is -1 when none is in flight.
	OldestLock share.RecordState
	// DeadLettered counts the records archived as dead letters
	// (rejected, or past the delivery count limit) since the
	// share-partition's state was made; saved with the state, it
	// survives restarts and leader changes (a state deleted or set by
	// AlterShareGroupOffsets starts again from 0).
	DeadLettered int64
}

// ShareGroupDescribe describes a share group: Describe on the group. A
// group this node does not serve is ErrShareGroupNotFound.
func (c *Core) ShareGroupDescribe(ctx context.Context, group string) (*ShareGroupDescription, error) {
	sc, err := c.describedShareGroup(ctx, group)
	if err != nil {
		return nil, err
	}
	cfg := sc.GroupConfig(group)
	out := &ShareGroupDescription{Group: group, KeyOrdering: cfg.Partition.KeyOrdering, DeadLetterTopic: cfg.DeadLetterTopic}
	held := map[string]int{}
	_, parts := sc.Describe(group)
	for _, p := range parts {
		d := ShareGroupPartition{Topic: p.Topic, Partition: p.Partition, StartOffset: p.Start, EndOffset: p.End,
			OldestLock: share.RecordState{Offset: -1}, DeadLettered: p.DeadLettered}
		for _, r := range p.Records {
			switch r.State {
			case share.Acquired:
				d.InFlight++
				held[r.Member]++
				if d.OldestLock.Offset < 0 || r.Deadline.Before(d.OldestLock.Deadline) {
					d.OldestLock = r
				}
			case share.Available:
				d.Available++
			}
		}
		out.Partitions = append(out.Partitions, d)
	}
	// The share-partitions this node does not hold: their saved start.
	if st := c.cfg.ShareStore; st != nil {
		held := len(out.Partitions)
		for _, s := range st.ShareStarts(group) {
			if slices.ContainsFunc(out.Partitions[:held], func(p ShareGroupPartition) bool { return p.Topic == s.Topic && p.Partition == s.Partition }) {
				continue
			}
			out.Partitions = append(out.Partitions, ShareGroupPartition{Topic: s.Topic, Partition: s.Partition, StartOffset: s.StartOffset,
				EndOffset: -1, OldestLock: share.RecordState{Offset: -1}, DeadLettered: s.DeadLettered})
		}
		slices.SortFunc(out.Partitions, func(a, b ShareGroupPartition) int {
			if a.Topic != b.Topic {
				return strings.Compare(a.Topic, b.Topic)
			}
			return int(a.Partition - b.Partition)
		})
	}
	for _, m := range sc.Members(group) {
		out.Members = append(out.Members, ShareGroupMember{MemberID: m.ID, Epoch: m.Epoch, Topics: m.Topics, InFlight: held[m.ID]})
	}
	return out, nil
}

// ShareGroupRequireKeyOrdering is a key-ordered stream's start: it
// accepts a share group with share.key.ordering on, and turns it on for
// a group that has neither the setting nor any share-partition state
// (nothing delivered yet): Read on the group, and AlterConfigs on it for
// the write. From metadata.version 16 the setting is saved on the group
// (every node applies it); below, it is kept in this node's memory. A
// group set to false, or delivering without key ordering, is
// ErrInvalidRequest: its setting is changed with AlterConfigs only,
// since turning it on releases every node's records in flight.
func (c *Core) ShareGroupRequireKeyOrdering(ctx context.Context, group string) error {
	sc, err := c.shares(group)
	if err != nil {
		return err
	}
	if err := c.authorizeGroup(ctx, auth.OpRead, group, "", nil); err != nil {
		return err
	}
	cfg := sc.GroupConfig(group)
	if cfg.Partition.KeyOrdering {
		return nil
	}
	st, stErr := c.shareStore()
	if stErr != nil {
		if _, parts := sc.Describe(group); len(parts) > 0 {
			return c.fail(keyOrderingDelivering(group))
		}
		cfg.Partition.KeyOrdering = true
		return c.fail(sc.SetGroupConfig(group, cfg))
	}
	if err := c.keyOrderingRefused(sc, st, group); err != nil {
		return err
	}
	if err := c.authorizeGroup(ctx, auth.OpAlterConfigs, group, "", nil); err != nil {
		return err
	}
	if err := st.PutShareGroupConfig(ctx, group, map[string]string{sharegroup.KeyKeyOrdering: "true"}, nil); err != nil {
		return c.fail(fmt.Errorf("share group %q: saving %s=true: %w", group, sharegroup.KeyKeyOrdering, err))
	}
	return nil
}

// keyOrderingRefused refuses key ordering for a group without it that a
// stream may not switch on: one with a share.key.ordering setting, or
// with share-partition state saved or held here.
func (c *Core) keyOrderingRefused(sc *sharegroup.Coordinator, st ShareGroupStore, group string) error {
	if v, ok := st.ShareGroupConfig(group)[sharegroup.KeyKeyOrdering]; ok {
		return c.fail(fmt.Errorf("%w: share group %q has %s=%s: a key-ordered stream needs %s=true, set on the group with AlterConfigs", replica.ErrInvalidRequest, group, sharegroup.KeyKeyOrdering, v, sharegroup.KeyKeyOrdering))
	}
	if _, parts := sc.Describe(group); len(parts) > 0 || st.HasShareState(group) {
		return c.fail(keyOrderingDelivering(group))
	}
	return nil
}

func keyOrderingDelivering(group string) error {
	return fmt.Errorf("%w: share group %q already delivers its records without key ordering: a key-ordered stream needs %s=true, set on the group with AlterConfigs (its records in flight are released)", replica.ErrInvalidRequest, group, sharegroup.KeyKeyOrdering)
}

// errKeyOrderingNotYet: a key-ordered member's fetch reached a node whose
// metadata does not hold the group's share.key.ordering=true yet (its
// stream's node saved it just before); retriable.
var errKeyOrderingNotYet = fmt.Errorf("%w: share.key.ordering=true is not in this node's metadata yet", replica.ErrRequestTimedOut)

// shareKeyOrderedCall answers a key-ordered member's fetch or
// acknowledgement of a group this node serves without key ordering. From metadata.version 16 the
// group's saved setting decides on every node: the call is refused,
// for good when the group may not take it on (keyOrderingRefused), else
// until this node's metadata holds the setting. Below 16 the settings
// are per node, so the leader turns it on in its memory as the stream's
// node did.
func (c *Core) shareKeyOrderedCall(ctx context.Context, sc *sharegroup.Coordinator, group string) error {
	st, err := c.shareStore()
	if err != nil {
		return c.ShareGroupRequireKeyOrdering(ctx, group)
	}
	if err := c.keyOrderingRefused(sc, st, group); err != nil {
		return err
	}
	return c.fail(fmt.Errorf("share group %q: %w", group, errKeyOrderingNotYet))
}

// ShareStats are the share groups' counters since the node started, for
// metrics.
type ShareStats struct {
	// InFlight is the records acquired now, over every group.
	InFlight int64
	// Acquired counts the records acquired, Redelivered those acquired
	// more than once (counted again each time).
	Acquired, Redelivered int64
	// Acks counts the records acknowledged, by type (accept, release,
	// reject, renew).
	Acks map[share.AckType]int64
	// DeadLettered counts the records dead-lettered.
	DeadLettered int64
}

// ShareStats returns the share groups' counters; zero when share groups
// are off.
func (c *Core) ShareStats() ShareStats {
	out := c.shareStats.snapshot()
	sc := c.cfg.Shares
	if sc == nil {
		return out
	}
	now := c.cfg.Now()
	for _, g := range sc.Groups() {
		_, parts := sc.Describe(g)
		for _, p := range parts {
			for _, r := range p.Records {
				if r.State == share.Acquired && r.Deadline.After(now) {
					out.InFlight++
				}
			}
		}
	}
	return out
}
