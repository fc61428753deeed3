package group

import (
	"fmt"
	"maps"
	"slices"
	"time"
)

// Tick removes, at now, every member silent past the session timeout and
// every member that still lists partitions to revoke past its rebalance
// timeout, and bumps the epoch of each group that lost members (its
// target is computed at the next heartbeat). It returns the records.
func (m *Machine) Tick(now time.Time) []Record {
	var due []string
	for id, g := range m.groups {
		for _, mem := range g.members {
			if mem.due(now) {
				due = append(due, id)
				break
			}
		}
	}
	slices.Sort(due)
	var recs []Record
	emit := func(r Record) { m.apply(r); recs = append(recs, r) }
	for _, id := range due {
		g := m.groups[id]
		for _, mem := range g.sortedMembers() {
			if mem.due(now) {
				emit(MemberRemoved{Group: id, MemberID: mem.id})
			}
		}
		m.bump(g, now, emit)
	}
	for _, g := range m.groups {
		g.forgetReplaced(now, m.cfg.MaxSessionTimeout)
	}
	return recs
}

// due tells whether the member is to be removed at now: silent past its
// session, or still listing partitions to revoke (or, classic, not
// rejoined when told to) past its rebalance timeout.
func (mem *member) due(now time.Time) bool {
	expired := !now.Before(mem.sessionDeadline)
	slow := mem.state == MemberUnrevokedPartitions && !mem.revokeDeadline.IsZero() && !now.Before(mem.revokeDeadline)
	late := !mem.rejoinDeadline.IsZero() && !now.Before(mem.rejoinDeadline)
	return expired || slow || late
}

// NextDeadline is the earliest time at which Tick would remove a member,
// or false when no group has members.
func (m *Machine) NextDeadline() (time.Time, bool) {
	var next time.Time
	found := false
	for _, g := range m.groups {
		for _, mem := range g.members {
			for _, d := range []time.Time{mem.sessionDeadline, mem.revokeDeadline, mem.rejoinDeadline} {
				if !d.IsZero() && (!found || d.Before(next)) {
					next, found = d, true
				}
			}
		}
	}
	return next, found
}

// SetTopics gives the Machine the cluster's topics and their partition
// counts (all of them, replacing what it had), and bumps the epoch of
// every group whose members' subscriptions now cover other topics or
// other counts: a topic created (also one matching a subscribed regular
// expression), deleted, or given more partitions. It returns the records.
func (m *Machine) SetTopics(topics map[string]int32) []Record {
	m.topics = maps.Clone(topics)
	clear(m.matches)
	var recs []Record
	emit := func(r Record) { m.apply(r); recs = append(recs, r) }
	for _, id := range slices.Sorted(maps.Keys(m.groups)) {
		g := m.groups[id]
		if len(g.members) > 0 && !maps.Equal(m.subscribedCounts(g), g.topics) {
			m.bump(g, time.Time{}, emit) // it has members: no time to stamp
		}
	}
	return recs
}

// Delete deletes an empty group and returns the record of it.
func (m *Machine) Delete(id string) ([]Record, error) {
	if err := ValidateGroupID(id); err != nil {
		return nil, err
	}
	g := m.groups[id]
	if g == nil {
		return nil, fmt.Errorf("%w: %q", ErrUnknownGroup, id)
	}
	if len(g.members) > 0 {
		return nil, fmt.Errorf("%w: group %q has %d members", ErrNonEmptyGroup, id, len(g.members))
	}
	r := GroupDeleted{Group: id}
	m.apply(r)
	return []Record{r}, nil
}

// ValidateCommit tells whether an offset commit may be applied: from a
// member (memberID not "") at its current epoch, or without a member for
// a group with no members (manual assignment). A member behind or ahead
// of its epoch is ErrStaleMemberEpoch; a member the group does not have,
// or a commit without a member to a group that has some, is
// ErrUnknownMemberID; one its instance's next process replaced is
// ErrFencedInstanceID.
func (m *Machine) ValidateCommit(id, memberID string, memberEpoch int32) error {
	if err := ValidateGroupID(id); err != nil {
		return err
	}
	g := m.groups[id]
	if memberID == "" {
		if g != nil && len(g.members) > 0 {
			return fmt.Errorf("%w: a commit to group %q, which has %d members, names no member", ErrUnknownMemberID, id, len(g.members))
		}
		return nil
	}
	var mem *member
	if g != nil {
		mem = g.members[memberID]
	}
	if instance, ok := g.replacedBy(memberID); ok && mem == nil {
		return fmt.Errorf("%w: member %q of group %q was replaced by another process of instance %q", ErrFencedInstanceID, memberID, id, instance)
	}
	if mem == nil {
		return fmt.Errorf("%w: member %q is not in group %q", ErrUnknownMemberID, memberID, id)
	}
	if memberEpoch != mem.epoch {
		return fmt.Errorf("%w: member %q of group %q commits at epoch %d, its epoch is %d", ErrStaleMemberEpoch, memberID, id, memberEpoch, mem.epoch)
	}
	return nil
}

// ValidateTxnCommit tells whether a transaction's offsets may be staged
// for group id as the member a TxnOffsetCommit names (v3 and later:
// member id, generation or member epoch, instance id), for parts. A call
// naming no member (no member id, no instance id: a producer outside the
// group, or a request before v3) is not checked, as Kafka does not. A
// member the group does not have is ErrUnknownMemberID; one its
// instance's next process replaced, or an instance id held by another
// member, ErrFencedInstanceID; an epoch not the member's, or a partition
// the member does not own at its epoch (assigned, or still to revoke),
// ErrIllegalGeneration.
func (m *Machine) ValidateTxnCommit(id, memberID, instanceID string, memberEpoch int32, parts []TopicPartition) error {
	if err := ValidateGroupID(id); err != nil {
		return err
	}
	if memberID == "" && instanceID == "" {
		return nil
	}
	g := m.groups[id]
	if instanceID != "" && g != nil {
		if holder, ok := g.static[instanceID]; ok && holder != memberID {
			return fmt.Errorf("%w: instance %q of group %q is held by another member than %q", ErrFencedInstanceID, instanceID, id, memberID)
		}
	}
	if memberID == "" {
		return fmt.Errorf("%w: offsets sent to group %q for instance %q name no member id", ErrUnknownMemberID, id, instanceID)
	}
	var mem *member
	if g != nil {
		mem = g.members[memberID]
	}
	if instance, ok := g.replacedBy(memberID); ok && mem == nil {
		return fmt.Errorf("%w: member %q of group %q was replaced by another process of instance %q", ErrFencedInstanceID, memberID, id, instance)
	}
	if mem == nil {
		return fmt.Errorf("%w: member %q is not in group %q", ErrUnknownMemberID, memberID, id)
	}
	if memberEpoch != mem.epoch {
		return fmt.Errorf("%w: member %q of group %q sends offsets at epoch %d, its epoch is %d", ErrIllegalGeneration, memberID, id, memberEpoch, mem.epoch)
	}
	for _, tp := range parts {
		if g.owners[tp] != memberID {
			return fmt.Errorf("%w: member %q of group %q sends an offset of %s-%d, not assigned to it at epoch %d",
				ErrIllegalGeneration, memberID, id, tp.Topic, tp.Partition, memberEpoch)
		}
	}
	return nil
}

// Size is the number of members of a group (0 for a group the Machine
// does not have), for the runtime to refuse changing the offsets of a
// group in use.
func (m *Machine) Size(id string) int {
	if g := m.groups[id]; g != nil {
		return len(g.members)
	}
	return 0
}

// Listing is one group in Groups.
type Listing struct {
	Group   string
	State   GroupState
	Members int
	// EmptySince is when the group was left without members (the time
	// of the leave or expiry that removed the last one), as its records
	// say; zero while it has members, or when the records written when
	// it emptied carry no time (GroupEpoch.EmptySince).
	EmptySince time.Time
}

// Groups lists every group in id order.
func (m *Machine) Groups() []Listing {
	out := make([]Listing, 0, len(m.groups))
	for _, id := range slices.Sorted(maps.Keys(m.groups)) {
		g := m.groups[id]
		out = append(out, Listing{Group: id, State: g.state(), Members: len(g.members), EmptySince: g.emptySince})
	}
	return out
}

// Description is a group as Describe shows it.
type Description struct {
	Group       string
	State       GroupState
	Epoch       int32 // the group epoch
	TargetEpoch int32 // the target assignment's epoch
	Assignor    string
	Members     []MemberDescription // in id order
}

// MemberDescription is one member of a Description.
type MemberDescription struct {
	MemberID          string
	InstanceID        string // "" a dynamic member
	ClientAddress     string
	Epoch             int32
	State             MemberState
	Topics            []string
	Regex             string
	Assignor          string // asked for; "" none
	Assigned          []TopicPartition
	PendingRevocation []TopicPartition // to give up before moving on
	// PendingAssignment is the target partitions the member does not
	// have yet (still held by others, or waiting for its revocations).
	PendingAssignment []TopicPartition
	Target            []TopicPartition
}

// Describe describes one group.
func (m *Machine) Describe(id string) (Description, error) {
	if err := ValidateGroupID(id); err != nil {
		return Description{}, err
	}
	g := m.groups[id]
	if g == nil {
		return Description{}, fmt.Errorf("%w: %q", ErrUnknownGroup, id)
	}
	d := Description{Group: id, State: g.state(), Epoch: g.epoch, TargetEpoch: g.targetEpoch, Assignor: m.chosenAssignor(g)}
	for _, mem := range g.sortedMembers() {
		target := slices.Clone(g.target[mem.id])
		if target == nil {
			target = []TopicPartition{}
		}
		d.Members = append(d.Members, MemberDescription{
			MemberID: mem.id, InstanceID: mem.instanceID, ClientAddress: mem.clientAddress, Epoch: mem.epoch, State: mem.state,
			Topics: slices.Clone(mem.topics), Regex: mem.regex, Assignor: mem.assignor,
			Assigned: slices.Clone(mem.assigned), PendingRevocation: slices.Clone(mem.pendingRevocation),
			PendingAssignment: minus(target, mem.assigned), Target: target,
		})
	}
	return d, nil
}
