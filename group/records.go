package group

import (
	"fmt"
	"maps"
	"slices"
	"time"
)

// Record is one change of a group's state, to be written to the metadata
// log. Records are plain values: the runtime encodes them as it likes.
// Applying the records a Machine returned, in order, to another Machine
// (Replay) gives it the same state.
type Record interface {
	// GroupID names the group the record changes.
	GroupID() string
	isRecord()
}

// MemberMetadata adds a member to its group (creating the group if need
// be), or replaces the metadata of an existing one. A new member is at
// epoch 0 with nothing assigned until a MemberAssignment says otherwise.
type MemberMetadata struct {
	Group            string
	MemberID         string
	InstanceID       string // "" a dynamic member
	ClientAddress    string
	Topics           []string // sorted
	Regex            string   // RE2, matched against whole topic names; "" none
	RebalanceTimeout time.Duration
	// SessionTimeout is a classic member's own (its join's); 0 the
	// coordinator's group.consumer.session.timeout.ms.
	SessionTimeout time.Duration
	Assignor       string // "" no preference
}

// MemberAssignment is a member's current assignment: its epoch, the epoch
// before it (for a heartbeat whose answer was lost), its reconciliation
// state, the partitions it may use and those it must still give up.
type MemberAssignment struct {
	Group             string
	MemberID          string
	Epoch             int32
	PreviousEpoch     int32
	State             MemberState
	Assigned          []TopicPartition // sorted
	PendingRevocation []TopicPartition // sorted
}

// MemberRemoved removes a member, its current assignment and its target.
type MemberRemoved struct {
	Group    string
	MemberID string
}

// GroupEpoch sets a group's epoch (creating the group if need be) and the
// partition counts of the topics its members subscribed to at that epoch.
// EmptySince is when the group was left without members, zero while it
// has some: the bump that removes the last member stamps the time of
// that removal (its heartbeat's or Tick's time), so that whichever
// coordinator replays the records counts the offsets' retention from
// the same moment. A runtime that cannot store it may drop it: the
// group is then empty since an unknown time (zero).
type GroupEpoch struct {
	Group      string
	Epoch      int32
	Topics     map[string]int32
	EmptySince time.Time
}

// TargetAssignment sets the target assignment's epoch and the target
// partitions of the members named (those whose target changed; the
// others keep theirs).
type TargetAssignment struct {
	Group   string
	Epoch   int32
	Members map[string][]TopicPartition // each sorted
}

// GroupDeleted removes an empty group.
type GroupDeleted struct {
	Group string
}

func (r MemberMetadata) GroupID() string   { return r.Group }
func (r MemberAssignment) GroupID() string { return r.Group }
func (r MemberRemoved) GroupID() string    { return r.Group }
func (r GroupEpoch) GroupID() string       { return r.Group }
func (r TargetAssignment) GroupID() string { return r.Group }
func (r GroupDeleted) GroupID() string     { return r.Group }

func (MemberMetadata) isRecord()   {}
func (MemberAssignment) isRecord() {}
func (MemberRemoved) isRecord()    {}
func (GroupEpoch) isRecord()       {}
func (TargetAssignment) isRecord() {}
func (GroupDeleted) isRecord()     {}

// Replay applies records read back from the metadata log (or a
// Snapshot) to a new Machine, gives it the cluster's topics as SetTopics
// does, and starts every member's session timeout at now, and the
// rebalance timeout of every member with partitions still to revoke, so
// that members have that long to heartbeat to the new coordinator. It
// returns the records of the epochs bumped by topics that changed since
// the records were written. A record that does not fit the state (a
// member's assignment before the member, a partition held twice, a
// deleted group with members) is ErrInvalidRecord, and nothing after it
// is applied.
func (m *Machine) Replay(records []Record, topics map[string]int32, now time.Time) ([]Record, error) {
	for i, r := range records {
		if err := m.check(r); err != nil {
			return nil, fmt.Errorf("record %d (%T): %w", i, r, err)
		}
		m.apply(r)
	}
	for _, g := range m.groups {
		for _, mem := range g.members {
			mem.sessionDeadline = now.Add(m.sessionTimeout(mem))
			if mem.state == MemberUnrevokedPartitions {
				mem.revokeDeadline = now.Add(mem.rebalanceTimeout)
			}
		}
	}
	return m.SetTopics(topics), nil
}

// check tells whether r can be applied to the current state.
func (m *Machine) check(r Record) error {
	if err := ValidateGroupID(r.GroupID()); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidRecord, err)
	}
	g := m.groups[r.GroupID()]
	switch r := r.(type) {
	case MemberMetadata:
		if err := validateMemberID(r.MemberID); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidRecord, err)
		}
		if err := validateInstanceID(r.InstanceID); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidRecord, err)
		}
		if holder, ok := g.staticMember(r.InstanceID); ok && holder != r.MemberID {
			return fmt.Errorf("%w: group %q: instance %q given to member %q is member %q", ErrInvalidRecord, r.Group, r.InstanceID, r.MemberID, holder)
		}
	case MemberAssignment:
		if g == nil || g.members[r.MemberID] == nil {
			return fmt.Errorf("%w: assignment of member %q, unknown in group %q", ErrInvalidRecord, r.MemberID, r.Group)
		}
		for _, tp := range slices.Concat(r.Assigned, r.PendingRevocation) {
			if owner, ok := g.owners[tp]; ok && owner != r.MemberID {
				return fmt.Errorf("%w: group %q: %v given to %q is held by %q", ErrInvalidRecord, r.Group, tp, r.MemberID, owner)
			}
		}
		if overlaps(normalize(r.Assigned), normalize(r.PendingRevocation)) {
			return fmt.Errorf("%w: group %q: member %q has a partition both assigned and pending revocation", ErrInvalidRecord, r.Group, r.MemberID)
		}
	case MemberRemoved:
		if g == nil || g.members[r.MemberID] == nil {
			return fmt.Errorf("%w: removal of member %q, unknown in group %q", ErrInvalidRecord, r.MemberID, r.Group)
		}
	case GroupEpoch, TargetAssignment:
	case GroupDeleted:
		if g == nil {
			return fmt.Errorf("%w: deletion of unknown group %q", ErrInvalidRecord, r.Group)
		}
		if len(g.members) > 0 {
			return fmt.Errorf("%w: deletion of group %q, which has %d members", ErrInvalidRecord, r.Group, len(g.members))
		}
	default:
		return fmt.Errorf("%w: unknown record type %T", ErrInvalidRecord, r)
	}
	return nil
}

// apply changes the state by one record that check accepted.
func (m *Machine) apply(r Record) {
	id := r.GroupID()
	g := m.groups[id]
	if g == nil {
		g = newGroup(id)
		m.groups[id] = g
	}
	switch r := r.(type) {
	case MemberMetadata:
		mem := g.members[r.MemberID]
		if mem == nil {
			mem = &member{id: r.MemberID, assigned: []TopicPartition{}, pendingRevocation: []TopicPartition{}}
			g.members[r.MemberID] = mem
		}
		if g.static[mem.instanceID] == mem.id {
			delete(g.static, mem.instanceID)
		}
		mem.instanceID = r.InstanceID
		if mem.instanceID != "" {
			g.static[mem.instanceID] = mem.id
		}
		mem.clientAddress = r.ClientAddress
		mem.topics = slices.Compact(slices.Sorted(slices.Values(r.Topics)))
		mem.regex = r.Regex
		mem.rebalanceTimeout = r.RebalanceTimeout
		mem.sessionTimeout = r.SessionTimeout
		mem.assignor = r.Assignor
	case MemberAssignment:
		mem := g.members[r.MemberID]
		g.release(mem)
		mem.epoch, mem.previousEpoch, mem.state = r.Epoch, r.PreviousEpoch, r.State
		mem.assigned = normalize(r.Assigned)
		mem.pendingRevocation = normalize(r.PendingRevocation)
		for _, tp := range slices.Concat(mem.assigned, mem.pendingRevocation) {
			g.owners[tp] = mem.id
		}
	case MemberRemoved:
		mem := g.members[r.MemberID]
		g.release(mem)
		if g.static[mem.instanceID] == mem.id {
			delete(g.static, mem.instanceID)
		}
		delete(g.members, r.MemberID)
		delete(g.target, r.MemberID)
	case GroupEpoch:
		g.epoch = r.Epoch
		g.emptySince = r.EmptySince
		g.topics = maps.Clone(r.Topics)
		if g.topics == nil {
			g.topics = map[string]int32{}
		}
	case TargetAssignment:
		g.targetEpoch = r.Epoch
		for id, ps := range r.Members {
			g.target[id] = normalize(ps)
		}
	case GroupDeleted:
		delete(m.groups, id)
	}
}

// release forgets the partitions mem holds.
func (g *group) release(mem *member) {
	for _, tp := range slices.Concat(mem.assigned, mem.pendingRevocation) {
		if g.owners[tp] == mem.id {
			delete(g.owners, tp)
		}
	}
}

// Snapshot returns records that rebuild the current state of every
// group with Replay: per group, in group id order, its epoch, each
// member's metadata and assignment in member id order, and its target
// assignment.
func (m *Machine) Snapshot() []Record {
	var out []Record
	for _, id := range slices.Sorted(maps.Keys(m.groups)) {
		g := m.groups[id]
		out = append(out, GroupEpoch{Group: id, Epoch: g.epoch, Topics: maps.Clone(g.topics), EmptySince: g.emptySince})
		members := g.sortedMembers()
		for _, mem := range members {
			out = append(out, mem.metadataRecord(id))
		}
		for _, mem := range members {
			out = append(out, mem.assignmentRecord(id))
		}
		target := TargetAssignment{Group: id, Epoch: g.targetEpoch, Members: map[string][]TopicPartition{}}
		for mid, ps := range g.target {
			target.Members[mid] = slices.Clone(ps)
		}
		out = append(out, target)
	}
	return out
}

func (mem *member) metadataRecord(group string) MemberMetadata {
	return MemberMetadata{
		Group: group, MemberID: mem.id, InstanceID: mem.instanceID, ClientAddress: mem.clientAddress,
		Topics: slices.Clone(mem.topics), Regex: mem.regex,
		RebalanceTimeout: mem.rebalanceTimeout, SessionTimeout: mem.sessionTimeout, Assignor: mem.assignor,
	}
}

func (mem *member) assignmentRecord(group string) MemberAssignment {
	return MemberAssignment{
		Group: group, MemberID: mem.id, Epoch: mem.epoch, PreviousEpoch: mem.previousEpoch, State: mem.state,
		Assigned: slices.Clone(mem.assigned), PendingRevocation: slices.Clone(mem.pendingRevocation),
	}
}
