package request

import (
	"context"
	"errors"
	"fmt"

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
	// first not taken in from the log yet.
	StartOffset, EndOffset int64
	// InFlight records are acquired by a member; Available ones wait for
	// one.
	InFlight, Available int
	// OldestLock is the in-flight record whose lock runs out first;
	// OldestLock.Offset is -1 when none is in flight.
	OldestLock share.RecordState
	// DeadLettered counts the records dead-lettered since this node began
	// serving the group.
	DeadLettered int64
}

// ShareGroupDescribe describes a share group: Describe on the group. A
// group this node does not serve is ErrShareGroupNotFound.
func (c *Core) ShareGroupDescribe(ctx context.Context, group string) (*ShareGroupDescription, error) {
	sc, err := c.shares(group)
	if err != nil {
		return nil, err
	}
	if err := c.authorizeGroup(ctx, auth.OpDescribe, group, "", nil); err != nil {
		return nil, err
	}
	if !sc.Has(group) {
		return nil, c.fail(fmt.Errorf("%w: %q", ErrShareGroupNotFound, group))
	}
	cfg := sc.GroupConfig(group)
	out := &ShareGroupDescription{Group: group, KeyOrdering: cfg.Partition.KeyOrdering, DeadLetterTopic: cfg.DeadLetterTopic}
	held := map[string]int{}
	_, parts := sc.Describe(group)
	dead := c.shareStats.deadLettered(group)
	for _, p := range parts {
		d := ShareGroupPartition{Topic: p.Topic, Partition: p.Partition, StartOffset: p.Start, EndOffset: p.End,
			OldestLock: share.RecordState{Offset: -1}, DeadLettered: dead[shareTP{p.Topic, p.Partition}]}
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
	for _, m := range sc.Members(group) {
		out.Members = append(out.Members, ShareGroupMember{MemberID: m.ID, Epoch: m.Epoch, Topics: m.Topics, InFlight: held[m.ID]})
	}
	return out, nil
}

// ShareGroupRequireKeyOrdering turns share.key.ordering on for a share
// group that has not delivered anything yet, and accepts one that has it
// on already: Read on the group, as a joining member needs. The group's
// saved settings decide: one that sets share.key.ordering=false, or has
// no setting and already delivers without it, is ErrInvalidRequest;
// otherwise the setting is saved on the group (metadata.version 16; in
// this node's memory only below it), so every node applies it.
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
	var own map[string]string
	if stErr == nil {
		own = st.ShareGroupConfig(group)
	}
	if v, ok := own[sharegroup.KeyKeyOrdering]; ok {
		return c.fail(fmt.Errorf("%w: share group %q is configured with %s=%s (change it with AlterConfigs on the group)", replica.ErrInvalidRequest, group, sharegroup.KeyKeyOrdering, v))
	}
	_, parts := sc.Describe(group)
	if len(parts) > 0 || (stErr == nil && st.HasShareGroup(group) && own == nil) {
		return c.fail(fmt.Errorf("%w: share group %q already delivers its records without key ordering (set %s=true on the group with AlterConfigs)", replica.ErrInvalidRequest, group, sharegroup.KeyKeyOrdering))
	}
	if stErr != nil {
		cfg.Partition.KeyOrdering = true
		return c.fail(sc.SetGroupConfig(group, cfg))
	}
	if err := st.PutShareGroupConfig(ctx, group, map[string]string{sharegroup.KeyKeyOrdering: "true"}, nil); err != nil {
		return c.fail(fmt.Errorf("share group %q: saving %s=true: %w", group, sharegroup.KeyKeyOrdering, err))
	}
	return nil
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
