package group

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/quirelog/quire/group/assignor"
)

// Heartbeat is one ConsumerGroupHeartbeat of a member. Only the member's
// identity, its epoch and the time are always needed; the other fields
// say what changed since the member's last heartbeat, and a join (epoch
// 0) must carry Subscription and RebalanceTimeout.
type Heartbeat struct {
	Group    string
	MemberID string // chosen by the client, kept across rejoins
	// InstanceID makes the member static (group.instance.id), given when
	// it joins; "" afterwards: unchanged (a dynamic member stays one). A
	// leave (LeaveEpoch) may name the member by its InstanceID alone,
	// MemberID "" (Kafka's LeaveGroup by instance).
	InstanceID string
	// MemberEpoch is JoinEpoch to join (or rejoin after being fenced,
	// owning nothing), LeaveEpoch to leave, StaticLeaveEpoch for a static
	// member to leave its place to its next join, else the member's
	// epoch.
	MemberEpoch int32
	// ClientAddress is shown by Describe; "" unchanged.
	ClientAddress string
	// Subscription replaces the member's subscription; nil unchanged.
	Subscription *Subscription
	// Owned lists the partitions the member uses now, when HasOwned. A
	// heartbeat without it is taken as still using everything it was
	// given, so none of its partitions can be freed.
	Owned    []TopicPartition
	HasOwned bool
	// RebalanceTimeout is how long the member may take to give up
	// revoked partitions before it is removed; 0 unchanged.
	RebalanceTimeout time.Duration
	// SessionTimeout is a classic member's own, from its join (Kafka's
	// session.timeout.ms, within MinSessionTimeout and
	// MaxSessionTimeout); 0 unchanged, or the coordinator's.
	SessionTimeout time.Duration
	// Assignor is the server-side assignor the member asks for; ""
	// unchanged (on a join: no preference, the configured default).
	Assignor string
	// Classic is a member of Kafka's classic protocol, which learns of
	// its assignment only when it rejoins (JoinGroup) and revokes by
	// rejoining: a join (JoinEpoch) of a member the group has is a rejoin
	// at its epoch with Owned, and a heartbeat at its epoch without
	// HasOwned (its Heartbeat, SyncGroup) only keeps its session, is
	// answered its assignment and tells whether a rejoin would change it
	// (Response.Rejoin): its epoch and assignment move only in its joins,
	// so its commits at the generation it was given hold until then. One
	// told to rejoin that has not within its rebalance timeout is removed
	// by Tick.
	Classic bool
	Now     time.Time
}

// Subscription is what a member reads: the topics named, and those whose
// whole name matches Regex (RE2 syntax; "" none), including topics
// created later.
type Subscription struct {
	Topics []string
	Regex  string
}

// Response is the answer to a heartbeat.
type Response struct {
	MemberID          string
	MemberEpoch       int32 // LeaveEpoch after a leave
	HeartbeatInterval time.Duration
	// SessionTimeout is how long the member may go unheard before it is
	// removed: its own (a classic member's join's), else the group's
	// (group.consumer.session.timeout.ms).
	SessionTimeout time.Duration
	// Assignment, when HasAssignment (after a change, a new epoch, owned
	// partitions that differ from it, or a full heartbeat: subscription,
	// owned and rebalance timeout), is the complete set of partitions
	// the member may use from now on. The member first stops using (and
	// commits) the partitions it owns that are not in it, then starts
	// on the new ones, and lists exactly what it uses in its next
	// heartbeat.
	Assignment    []TopicPartition
	HasAssignment bool
	// Rejoin, for a classic member's heartbeat, says that the coordinator
	// moved on (a new target, partitions to give up, or partitions now
	// free to take): the member rejoins to learn its assignment.
	Rejoin bool
}

// Heartbeat handles one heartbeat at hb.Now. It returns the answer and the
// records of the state change (already applied); on an error nothing
// changed.
func (m *Machine) Heartbeat(hb Heartbeat) (Response, []Record, error) {
	if err := ValidateGroupID(hb.Group); err != nil {
		return Response{}, nil, err
	}
	if err := validateInstanceID(hb.InstanceID); err != nil {
		return Response{}, nil, err
	}
	g := m.groups[hb.Group]
	if hb.MemberID == "" && hb.InstanceID != "" && hb.MemberEpoch == LeaveEpoch {
		id, ok := g.staticMember(hb.InstanceID)
		if !ok {
			return Response{}, nil, fmt.Errorf("%w: no member of group %q is instance %q", ErrUnknownMemberID, hb.Group, hb.InstanceID)
		}
		hb.MemberID = id
	}
	if err := validateMemberID(hb.MemberID); err != nil {
		return Response{}, nil, err
	}
	if err := m.validateFields(hb); err != nil {
		return Response{}, nil, err
	}
	var recs []Record
	emit := func(r Record) { m.apply(r); recs = append(recs, r) }
	var mem *member
	if g != nil {
		mem = g.members[hb.MemberID]
	}
	// Only a new member's join takes an instance's place: a member the
	// group has (a heartbeat, a rejoin) naming another's instance is an
	// old process of that instance, or a misconfigured one.
	if holder, ok := g.staticMember(hb.InstanceID); ok && holder != hb.MemberID && (hb.MemberEpoch != JoinEpoch || mem != nil) {
		return Response{}, nil, fmt.Errorf("%w: instance %q of group %q is member %q now, not %q", ErrFencedInstanceID, hb.InstanceID, hb.Group, holder, hb.MemberID)
	}
	if instance, ok := g.replacedBy(hb.MemberID); ok && mem == nil {
		// The instance's old process: taking the place back would fence
		// the new one, and the two would take turns.
		return Response{}, nil, fmt.Errorf("%w: member %q of group %q was replaced by another process of instance %q", ErrFencedInstanceID, hb.MemberID, hb.Group, instance)
	}
	if mem != nil && mem.instanceID != "" && hb.InstanceID != "" && hb.InstanceID != mem.instanceID {
		return Response{}, nil, fmt.Errorf("%w: member %q of group %q is instance %q, not %q: an instance id is the member's for good", ErrInvalidRequest, hb.MemberID, hb.Group, mem.instanceID, hb.InstanceID)
	}
	classicJoin := hb.Classic && hb.MemberEpoch == JoinEpoch
	if classicJoin {
		switch {
		case mem != nil:
			hb.MemberEpoch = mem.epoch // a rejoin keeps what it still owns
		default:
			// A member the group does not have joins as a new one,
			// whatever its subscription lists, as on Kafka, whose
			// coordinator never reads it: refusing it would loop, the
			// client listing the same partitions at its next join. It
			// owns nothing in the group's view, as what it lists may
			// have gone to others; it gives those up when it learns
			// its assignment, and its own are given to it as others
			// release them.
			hb.Owned = nil
		}
	}

	switch {
	case hb.MemberEpoch == LeaveEpoch:
		if mem == nil {
			return Response{}, nil, fmt.Errorf("%w: member %q is not in group %q", ErrUnknownMemberID, hb.MemberID, hb.Group)
		}
		emit(MemberRemoved{Group: g.id, MemberID: mem.id})
		m.bump(g, hb.Now, emit)
		return Response{MemberID: hb.MemberID, MemberEpoch: LeaveEpoch, HeartbeatInterval: m.cfg.HeartbeatInterval, SessionTimeout: m.sessionTimeout(mem)}, recs, nil

	case hb.MemberEpoch == StaticLeaveEpoch && mem != nil && mem.instanceID == "":
		// A dynamic member has no place to keep (it joined without an
		// instance id, or below the level that keeps them): it leaves.
		emit(MemberRemoved{Group: g.id, MemberID: mem.id})
		m.bump(g, hb.Now, emit)
		return Response{MemberID: hb.MemberID, MemberEpoch: LeaveEpoch, HeartbeatInterval: m.cfg.HeartbeatInterval, SessionTimeout: m.sessionTimeout(mem)}, recs, nil

	case hb.MemberEpoch == StaticLeaveEpoch:
		if mem == nil {
			return Response{}, nil, fmt.Errorf("%w: member %q is not in group %q", ErrUnknownMemberID, hb.MemberID, hb.Group)
		}
		// Nothing changes: its partitions stay its own until its session
		// (not renewed) times out or its instance joins again.
		return Response{MemberID: hb.MemberID, MemberEpoch: StaticLeaveEpoch, HeartbeatInterval: m.cfg.HeartbeatInterval, SessionTimeout: m.sessionTimeout(mem)}, nil, nil

	case hb.MemberEpoch == JoinEpoch:
		if hb.Subscription == nil {
			return Response{}, nil, fmt.Errorf("%w: member %q joins group %q without a subscription", ErrInvalidRequest, hb.MemberID, hb.Group)
		}
		if hb.RebalanceTimeout <= 0 {
			return Response{}, nil, fmt.Errorf("%w: member %q joins group %q without a rebalance timeout", ErrInvalidRequest, hb.MemberID, hb.Group)
		}
		if hb.HasOwned && len(hb.Owned) > 0 {
			return Response{}, nil, fmt.Errorf("%w: member %q joins group %q owning %d partitions; a member joins owning none", ErrInvalidRequest, hb.MemberID, hb.Group, len(hb.Owned))
		}
		joined := MemberMetadata{
			Group: hb.Group, MemberID: hb.MemberID, InstanceID: hb.InstanceID, ClientAddress: hb.ClientAddress,
			Topics: normalizeTopics(hb.Subscription.Topics), Regex: hb.Subscription.Regex,
			RebalanceTimeout: hb.RebalanceTimeout, SessionTimeout: hb.SessionTimeout, Assignor: hb.Assignor,
		}
		if holder, ok := g.staticMember(hb.InstanceID); ok && holder != hb.MemberID {
			mem = m.replaceStatic(g, g.members[holder], joined, hb.Now, emit)
			break
		}
		if mem == nil && g != nil && len(g.members) >= m.cfg.MaxSize {
			return Response{}, nil, fmt.Errorf("%w: group %q has %d members, group.max.size is %d", ErrGroupMaxSizeReached, hb.Group, len(g.members), m.cfg.MaxSize)
		}
		if mem != nil {
			// A rejoin: the member gave up all it had when it was fenced
			// or restarted; its old incarnation goes. It stays its
			// instance's (a KIP-848 heartbeat need not repeat the
			// instance id, and a rejoin without it does not make the
			// member dynamic).
			emit(MemberRemoved{Group: g.id, MemberID: mem.id})
			if joined.InstanceID == "" {
				joined.InstanceID = mem.instanceID
			}
		}
		emit(joined)
		g = m.groups[hb.Group]
		mem = g.members[hb.MemberID]
		m.bump(g, hb.Now, emit)

	case hb.MemberEpoch > 0:
		if mem == nil {
			return Response{}, nil, fmt.Errorf("%w: member %q is not in group %q", ErrUnknownMemberID, hb.MemberID, hb.Group)
		}
		if err := checkEpoch(mem, hb); err != nil {
			return Response{}, nil, err
		}
		m.update(g, mem, hb, classicJoin, emit)
		if hb.Classic && !classicJoin && !hb.HasOwned {
			return m.classicHeartbeat(g, mem, hb, emit), recs, nil
		}

	default:
		return Response{}, nil, fmt.Errorf("%w: member epoch %d (0 joins, -1 leaves, -2 leaves a static member's place)", ErrInvalidRequest, hb.MemberEpoch)
	}

	if g.epoch > g.targetEpoch {
		m.computeTarget(g, emit)
	}
	before := mem.assignmentRecord(g.id)
	owned := normalize(hb.Owned)
	after := m.reconcile(g, mem, owned, hb.HasOwned)
	changed := !equalAssignment(before, after)
	if changed {
		emit(after)
	}
	// The rebalance timeout runs from the heartbeat whose answer first
	// names the partitions to give up, so that a member can tell when
	// its time is up from its own clock.
	switch {
	case mem.state != MemberUnrevokedPartitions:
		mem.revokeDeadline = time.Time{}
	case before.State != MemberUnrevokedPartitions || !slices.Equal(before.PendingRevocation, mem.pendingRevocation):
		mem.revokeDeadline = hb.Now.Add(mem.rebalanceTimeout)
	}
	mem.sessionDeadline = hb.Now.Add(m.sessionTimeout(mem))
	mem.rejoinDeadline = time.Time{} // joined, or not classic

	resp := Response{MemberID: mem.id, MemberEpoch: mem.epoch, HeartbeatInterval: m.cfg.HeartbeatInterval, SessionTimeout: m.sessionTimeout(mem)}
	// A full heartbeat (subscription, owned partitions and rebalance
	// timeout all sent, as a client does after a lost answer or a new
	// coordinator) is answered the whole assignment, as Kafka does.
	full := hb.Subscription != nil && hb.HasOwned && hb.RebalanceTimeout > 0
	if changed || full || hb.Classic || hb.MemberEpoch != mem.epoch || (hb.HasOwned && !slices.Equal(owned, mem.assigned)) {
		resp.Assignment, resp.HasAssignment = slices.Clone(mem.assigned), true
	}
	return resp, recs, nil
}

// replaceStatic gives old's place (its epoch, assignment and target) to
// the member joining with its instance id, described by joined: old is
// removed, and nothing moves unless joined subscribes to something else
// or asks for another assignor (a new group epoch, as any such change).
func (m *Machine) replaceStatic(g *group, old *member, joined MemberMetadata, now time.Time, emit func(Record)) *member {
	was := old.metadataRecord(g.id)
	assignment := old.assignmentRecord(g.id)
	target, targeted := g.target[old.id]
	target = slices.Clone(target)
	g.noteReplaced(joined.InstanceID, old.id)
	emit(MemberRemoved{Group: g.id, MemberID: old.id})
	emit(joined)
	assignment.MemberID = joined.MemberID
	emit(assignment)
	if targeted {
		emit(TargetAssignment{Group: g.id, Epoch: g.targetEpoch, Members: map[string][]TopicPartition{joined.MemberID: target}})
	}
	mem := g.members[joined.MemberID]
	// Its place's deadlines too: partitions still to give up are given
	// up within the old member's rebalance timeout, not never.
	mem.revokeDeadline, mem.rejoinDeadline = old.revokeDeadline, old.rejoinDeadline
	if !slices.Equal(was.Topics, joined.Topics) || was.Regex != joined.Regex || was.Assignor != joined.Assignor {
		m.bump(g, now, emit)
	}
	return mem
}

// classicHeartbeat keeps a classic member's session and answers its
// assignment, and whether its next join would change it: reconciling as
// its rejoin would, without the change.
func (m *Machine) classicHeartbeat(g *group, mem *member, hb Heartbeat, emit func(Record)) Response {
	if g.epoch > g.targetEpoch {
		m.computeTarget(g, emit)
	}
	cur := mem.assignmentRecord(g.id)
	next := m.reconcile(g, mem, nil, false)
	rejoin := mem.state == MemberUnrevokedPartitions || !equalAssignment(cur, next)
	mem.sessionDeadline = hb.Now.Add(m.sessionTimeout(mem))
	switch {
	case !rejoin:
		mem.rejoinDeadline = time.Time{}
	case mem.rejoinDeadline.IsZero():
		// Its rebalance timeout runs from the first answer that tells
		// it to rejoin (as the revocation's does for KIP-848's members).
		mem.rejoinDeadline = hb.Now.Add(mem.rebalanceTimeout)
	}
	return Response{MemberID: mem.id, MemberEpoch: mem.epoch, HeartbeatInterval: m.cfg.HeartbeatInterval, SessionTimeout: m.sessionTimeout(mem),
		Assignment: slices.Clone(mem.assigned), HasAssignment: true, Rejoin: rejoin}
}

// update records what a heartbeat changes of a member's metadata, and
// bumps the group epoch when its subscription or assignor changed.
func (m *Machine) update(g *group, mem *member, hb Heartbeat, joining bool, emit func(Record)) {
	old := mem.metadataRecord(g.id)
	updated := old
	updated.Topics = slices.Clone(old.Topics)
	if hb.ClientAddress != "" {
		updated.ClientAddress = hb.ClientAddress
	}
	// An instance id and a classic member's session timeout are a
	// join's: a member that joined dynamic (below the level that keeps
	// them) becomes static by its next join, and its heartbeats, which
	// may carry them too (Kafka's Java consumer sends the instance id
	// with every KIP-848 heartbeat, and classic ones send both), change
	// neither.
	if joining && hb.InstanceID != "" {
		updated.InstanceID = hb.InstanceID
	}
	if hb.Subscription != nil {
		updated.Topics, updated.Regex = normalizeTopics(hb.Subscription.Topics), hb.Subscription.Regex
	}
	if hb.RebalanceTimeout > 0 {
		updated.RebalanceTimeout = hb.RebalanceTimeout
	}
	if joining && hb.SessionTimeout > 0 {
		updated.SessionTimeout = hb.SessionTimeout
	}
	if hb.Assignor != "" {
		updated.Assignor = hb.Assignor
	}
	if equalMetadata(old, updated) {
		return
	}
	emit(updated)
	if !slices.Equal(old.Topics, updated.Topics) || old.Regex != updated.Regex || old.Assignor != updated.Assignor {
		m.bump(g, hb.Now, emit)
	}
}

// validateFields checks the optional fields a heartbeat carries.
func (m *Machine) validateFields(hb Heartbeat) error {
	if hb.Subscription != nil {
		for _, t := range hb.Subscription.Topics {
			if t == "" {
				return fmt.Errorf("%w: member %q subscribes to an empty topic name", ErrInvalidRequest, hb.MemberID)
			}
		}
		if hb.Subscription.Regex != "" {
			if _, err := m.regex(hb.Subscription.Regex); err != nil {
				return err
			}
		}
	}
	if hb.Assignor != "" {
		if _, ok := m.assignors[hb.Assignor]; !ok {
			return fmt.Errorf("%w: %q; group.consumer.assignors allows %s", ErrUnsupportedAssignor, hb.Assignor, strings.Join(m.cfg.Assignors, ", "))
		}
	}
	if hb.RebalanceTimeout < 0 {
		return fmt.Errorf("%w: rebalance timeout %v is negative", ErrInvalidRequest, hb.RebalanceTimeout)
	}
	if hb.SessionTimeout != 0 && !hb.Classic {
		return fmt.Errorf("%w: member %q asks for a session timeout of %v: a KIP-848 member has the group's (group.consumer.session.timeout.ms), only a classic one its own", ErrInvalidRequest, hb.MemberID, hb.SessionTimeout)
	}
	if t := hb.SessionTimeout; t != 0 && (t < m.cfg.MinSessionTimeout || t > m.cfg.MaxSessionTimeout) {
		return fmt.Errorf("%w: member %q asks for a session timeout of %v; group.min.session.timeout.ms and group.max.session.timeout.ms allow %v to %v",
			ErrInvalidSessionTimeout, hb.MemberID, t, m.cfg.MinSessionTimeout, m.cfg.MaxSessionTimeout)
	}
	for _, tp := range hb.Owned {
		if tp.Topic == "" || tp.Partition < 0 {
			return fmt.Errorf("%w: member %q owns %v, not a partition", ErrInvalidRequest, hb.MemberID, tp)
		}
	}
	return nil
}

// checkEpoch accepts a heartbeat at the member's epoch, or at the epoch
// before it when the member owns nothing beyond its current assignment:
// the answer that moved it on was lost. Anything else is fenced.
func checkEpoch(mem *member, hb Heartbeat) error {
	if hb.MemberEpoch == mem.epoch {
		return nil
	}
	if hb.MemberEpoch == mem.previousEpoch && hb.HasOwned && subset(normalize(hb.Owned), mem.assigned) {
		return nil
	}
	return fmt.Errorf("%w: member %q of group %q sent epoch %d, its epoch is %d", ErrFencedMemberEpoch, mem.id, hb.Group, hb.MemberEpoch, mem.epoch)
}

// bump moves g to the next group epoch, recording the partition counts
// of the topics its members subscribe to and, for a group left without
// members, since when (now, the moment of the change that emptied it).
func (m *Machine) bump(g *group, now time.Time, emit func(Record)) {
	var emptySince time.Time
	if len(g.members) == 0 {
		emptySince = g.emptySince
		if emptySince.IsZero() {
			emptySince = now
		}
	}
	emit(GroupEpoch{Group: g.id, Epoch: g.epoch + 1, Topics: m.subscribedCounts(g), EmptySince: emptySince})
}

// computeTarget runs the group's assignor at the group epoch, starting
// from the previous target so that a sticky assignor moves little, and
// records the members whose target changed.
func (m *Machine) computeTarget(g *group, emit func(Record)) {
	members := g.sortedMembers()
	in := make([]assignor.Member, len(members))
	for i, mem := range members {
		in[i] = assignor.Member{ID: mem.id, InstanceID: mem.instanceID, Topics: m.subscribedTopics(mem), Current: g.target[mem.id]}
	}
	got := m.assignors[m.chosenAssignor(g)].Assign(in, g.topics)
	rec := TargetAssignment{Group: g.id, Epoch: g.epoch, Members: map[string][]TopicPartition{}}
	for _, mem := range members {
		ps, had := g.target[mem.id]
		if !had || !slices.Equal(ps, got[mem.id]) {
			rec.Members[mem.id] = got[mem.id]
		}
	}
	emit(rec)
}

// reconcile computes a member's next current assignment from its target,
// the partitions it reports (if any) and those other members still hold,
// as KIP-848's reconciliation does:
//
//   - Partitions it holds that are not in its target must be revoked first:
//     while its heartbeat still lists any of them it stays at its epoch in
//     MemberUnrevokedPartitions, keeping only the others.
//   - Then it moves to the target epoch and receives the target partitions
//     no other member holds; if some are still held it waits for them in
//     MemberUnreleasedPartitions, else it is stable.
func (m *Machine) reconcile(g *group, mem *member, owned []TopicPartition, hasOwned bool) MemberAssignment {
	cur := mem.assignmentRecord(g.id)
	switch mem.state {
	case MemberStable:
		if mem.epoch == g.targetEpoch {
			return cur
		}
	case MemberUnrevokedPartitions:
		if !hasOwned || overlaps(owned, mem.pendingRevocation) {
			return cur
		}
	}
	target := g.target[mem.id]
	kept := intersect(mem.assigned, target)
	revoke := minus(mem.assigned, kept)
	next := cur
	if len(revoke) > 0 && (!hasOwned || overlaps(owned, revoke)) {
		next.State = MemberUnrevokedPartitions
		next.Assigned = kept
		next.PendingRevocation = revoke
		return next
	}
	assigned, unreleased := kept, false
	for _, tp := range minus(target, kept) {
		if owner, held := g.owners[tp]; held && owner != mem.id {
			unreleased = true
			continue
		}
		assigned = append(assigned, tp)
	}
	if next.Epoch != g.targetEpoch {
		next.PreviousEpoch, next.Epoch = next.Epoch, g.targetEpoch
	}
	next.Assigned = normalize(assigned)
	next.PendingRevocation = []TopicPartition{}
	next.State = MemberStable
	if unreleased {
		next.State = MemberUnreleasedPartitions
	}
	return next
}

func normalizeTopics(ts []string) []string {
	return slices.Compact(slices.Sorted(slices.Values(ts)))
}

func equalMetadata(a, b MemberMetadata) bool {
	return a.InstanceID == b.InstanceID && a.SessionTimeout == b.SessionTimeout && a.ClientAddress == b.ClientAddress && slices.Equal(a.Topics, b.Topics) && a.Regex == b.Regex &&
		a.RebalanceTimeout == b.RebalanceTimeout && a.Assignor == b.Assignor
}

func equalAssignment(a, b MemberAssignment) bool {
	return a.Epoch == b.Epoch && a.PreviousEpoch == b.PreviousEpoch && a.State == b.State &&
		slices.Equal(a.Assigned, b.Assigned) && slices.Equal(a.PendingRevocation, b.PendingRevocation)
}

// sessionTimeout is how long mem may go unheard: its own (a classic
// member's), else the group's.
func (m *Machine) sessionTimeout(mem *member) time.Duration {
	if mem != nil && mem.sessionTimeout > 0 {
		return mem.sessionTimeout
	}
	return m.cfg.SessionTimeout
}
