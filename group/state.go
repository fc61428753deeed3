package group

import (
	"maps"
	"slices"
	"time"

	"github.com/quirelog/quire/group/assignor"
)

// group is one consumer group. Everything but the members' deadlines is
// built by applying records.
type group struct {
	id    string
	epoch int32
	// topics are the partition counts of the topics the members
	// subscribe to, as they were when the group epoch was last bumped.
	topics      map[string]int32
	targetEpoch int32
	target      map[string][]TopicPartition
	members     map[string]*member
	// owners maps every partition a member holds (assigned or pending
	// revocation) to that member: derived from the members.
	owners map[TopicPartition]string
	// emptySince is when the group was left without members (zero while
	// it has some, or unknown): from its last GroupEpoch.
	emptySince time.Time
	// static maps the instance id of each static member to its member id:
	// derived from the members.
	static map[string]string
	// replaced maps the member ids that joins of their instance replaced
	// to that instance, so that an old process is fenced however it comes
	// back (a heartbeat without its instance id, a join); history holds
	// them per instance. In memory only.
	replaced map[string]string
	history  map[string]*instanceHistory
}

// instanceHistory is what a group remembers of an instance whose joins
// replaced members.
type instanceHistory struct {
	replaced []string // the last maxReplaced member ids, oldest first
	// unheldSince is since when no member has held the instance (zero
	// while one does): its ids are forgotten MaxSessionTimeout after.
	unheldSince time.Time
}

// maxReplaced is how many replaced member ids of one instance a group
// remembers.
const maxReplaced = 8

func newGroup(id string) *group {
	return &group{
		id:      id,
		topics:  map[string]int32{},
		target:  map[string][]TopicPartition{},
		members: map[string]*member{},
		owners:  map[TopicPartition]string{},
		static:  map[string]string{},

		replaced: map[string]string{},
		history:  map[string]*instanceHistory{},
	}
}

// member is one member of a group.
type member struct {
	id               string
	instanceID       string // "" dynamic
	clientAddress    string
	topics           []string // sorted, no duplicates
	regex            string
	rebalanceTimeout time.Duration
	sessionTimeout   time.Duration // a classic member's own; 0 the group's
	assignor         string

	epoch             int32
	previousEpoch     int32
	state             MemberState
	assigned          []TopicPartition // sorted
	pendingRevocation []TopicPartition // sorted

	// In memory only.
	sessionDeadline time.Time
	revokeDeadline  time.Time // while in MemberUnrevokedPartitions
	// rejoinDeadline, for a classic member told to rejoin, is when its
	// rebalance timeout from the first such answer runs out: a member
	// that heartbeats but never rejoins is removed then, not left
	// holding partitions others wait for.
	rejoinDeadline time.Time
}

func (g *group) sortedMembers() []*member {
	out := make([]*member, 0, len(g.members))
	for _, id := range slices.Sorted(maps.Keys(g.members)) {
		out = append(out, g.members[id])
	}
	return out
}

func (g *group) state() GroupState {
	if len(g.members) == 0 {
		return GroupEmpty
	}
	if g.epoch > g.targetEpoch {
		return GroupAssigning
	}
	for _, mem := range g.members {
		if mem.epoch != g.targetEpoch || mem.state != MemberStable {
			return GroupReconciling
		}
	}
	return GroupStable
}

// subscribedTopics lists the existing topics a member subscribes to, by
// name or through its regular expression.
func (m *Machine) subscribedTopics(mem *member) []string {
	var out []string
	for _, t := range mem.topics {
		if m.topics[t] > 0 {
			out = append(out, t)
		}
	}
	if mem.regex != "" {
		out = append(out, m.matching(mem.regex)...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// matching lists the existing topics whose whole name matches expr.
func (m *Machine) matching(expr string) []string {
	if ts, ok := m.matches[expr]; ok {
		return ts
	}
	re, err := m.regex(expr)
	if err != nil {
		return nil // checked when the member subscribed
	}
	ts := []string{}
	for t, n := range m.topics {
		if n > 0 && re.MatchString(t) {
			ts = append(ts, t)
		}
	}
	if len(m.matches) >= maxRegexes {
		clear(m.matches)
	}
	m.matches[expr] = ts
	return ts
}

// subscribedCounts is the partition count of every existing topic some
// member of g subscribes to.
func (m *Machine) subscribedCounts(g *group) map[string]int32 {
	out := map[string]int32{}
	for _, mem := range g.members {
		for _, t := range m.subscribedTopics(mem) {
			out[t] = m.topics[t]
		}
	}
	return out
}

// chosenAssignor is the assignor most members ask for (the earlier in
// the config on a tie), or the default when none asks.
func (m *Machine) chosenAssignor(g *group) string {
	votes := map[string]int{}
	for _, mem := range g.members {
		if _, ok := m.assignors[mem.assignor]; ok {
			votes[mem.assignor]++
		}
	}
	best := m.cfg.Assignors[0]
	for _, name := range m.cfg.Assignors {
		if votes[name] > votes[best] {
			best = name
		}
	}
	return best
}

// Sorted partition sets.

func normalize(ps []TopicPartition) []TopicPartition {
	out := slices.Clone(ps)
	slices.SortFunc(out, comparePartitions)
	return slices.Compact(out)
}

var comparePartitions = assignor.Compare

func contains(set []TopicPartition, tp TopicPartition) bool {
	_, ok := slices.BinarySearchFunc(set, tp, comparePartitions)
	return ok
}

// intersect is a ∩ b; minus a − b; both keep a's order.
func intersect(a, b []TopicPartition) []TopicPartition {
	out := []TopicPartition{}
	for _, tp := range a {
		if contains(b, tp) {
			out = append(out, tp)
		}
	}
	return out
}

func minus(a, b []TopicPartition) []TopicPartition {
	out := []TopicPartition{}
	for _, tp := range a {
		if !contains(b, tp) {
			out = append(out, tp)
		}
	}
	return out
}

func subset(a, b []TopicPartition) bool {
	for _, tp := range a {
		if !contains(b, tp) {
			return false
		}
	}
	return true
}

func overlaps(a, b []TopicPartition) bool {
	for _, tp := range a {
		if contains(b, tp) {
			return true
		}
	}
	return false
}

// staticMember is the member id of the static member with instance id
// instance, if g has one.
func (g *group) staticMember(instance string) (string, bool) {
	if g == nil || instance == "" {
		return "", false
	}
	id, ok := g.static[instance]
	return id, ok
}

// replacedBy is the instance whose join replaced member id, if one did
// (since this Machine was built, among the last maxReplaced).
func (g *group) replacedBy(id string) (string, bool) {
	if g == nil {
		return "", false
	}
	instance, ok := g.replaced[id]
	return instance, ok
}

// noteReplaced remembers that a join of instance replaced member id.
func (g *group) noteReplaced(instance, id string) {
	h := g.history[instance]
	if h == nil {
		h = &instanceHistory{}
		g.history[instance] = h
	}
	h.replaced = append(h.replaced, id)
	if len(h.replaced) > maxReplaced {
		delete(g.replaced, h.replaced[0])
		h.replaced = h.replaced[1:]
	}
	g.replaced[id] = instance
}

// forgetReplaced forgets, at now, the replaced ids of the instances no
// member has held for longest: their processes are gone for good.
// Sooner, a process cut off while replaced could come back and push out
// the instance's next one.
func (g *group) forgetReplaced(now time.Time, longest time.Duration) {
	for instance, h := range g.history {
		switch {
		case g.static[instance] != "":
			h.unheldSince = time.Time{}
		case h.unheldSince.IsZero():
			h.unheldSince = now
		case now.Sub(h.unheldSince) >= longest:
			for _, id := range h.replaced {
				delete(g.replaced, id)
			}
			delete(g.history, instance)
		}
	}
}
