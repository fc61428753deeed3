// Package assignor holds the server-side partition assignors of consumer
// groups: pure functions from the members of a group (their subscriptions
// and current partitions) and the partition counts of the topics they
// subscribe to, to a target assignment, member -> partitions.
//
// Three are built in, under Kafka's names:
//
//   - uniform (the default): balanced within one partition among the members
//     subscribed to each topic, and sticky: a partition stays with its current
//     owner unless balance needs it elsewhere, so a member joining or leaving
//     moves as few partitions as possible.
//   - range: per topic, the subscribers sorted by instance id (static
//     members) or member id take contiguous ranges,
//     the first (partitions mod subscribers) one partition more than the
//     others, as Kafka's range assignor does. Not sticky.
//   - roundrobin: the partitions of all the topics subscribed to, in
//     order, dealt to the members in turn (skipping a member not
//     subscribed to a partition's topic), as Kafka's round-robin assignor
//     does. Not sticky.
//
// An assignor never sees time, the network or anything but its arguments,
// and the same arguments always give the same assignment.
package assignor

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrUnsupportedAssignor is returned by Lookup for a name no assignor has.
var ErrUnsupportedAssignor = errors.New("assignor: unsupported assignor")

// Names of the built-in assignors.
const (
	UniformName    = "uniform"
	RangeName      = "range"
	RoundRobinName = "roundrobin"
	// DefaultName is the assignor used when a group asks for none.
	DefaultName = UniformName
)

// TopicPartition names one partition of a topic.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// String is "topic-partition", as Kafka prints partitions.
func (tp TopicPartition) String() string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }

// Compare orders partitions by topic, then partition number.
func Compare(a, b TopicPartition) int {
	if c := strings.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return cmp.Compare(a.Partition, b.Partition)
}

// Member is one group member as an assignor sees it.
type Member struct {
	ID string
	// InstanceID is a static member's instance id, "" a dynamic one's.
	// Members are ordered by it where set (else by ID), as Kafka's
	// assignors order them, so that an instance's next process, a new
	// member id, keeps its place in the order (its range).
	InstanceID string
	// Topics are the names of the topics the member subscribes to
	// (regular expressions already resolved). A topic absent from the
	// partition counts given to Assign is ignored.
	Topics []string
	// Current is the member's current assignment, which a sticky assignor
	// keeps as far as balance allows. Partitions of topics the member no
	// longer subscribes to, or that no longer exist, are ignored; a
	// partition listed by two members counts as current only for the
	// first of them in id order.
	Current []TopicPartition
}

// Assignment is a target assignment: every member's id maps to its
// partitions, sorted (an empty slice for a member given nothing).
type Assignment map[string][]TopicPartition

// Assignor computes a target assignment. partitions maps a topic name to
// its number of partitions. Every partition of a topic that some member
// subscribes to is given to exactly one member subscribed to it; a member
// id appears in members once.
type Assignor interface {
	Name() string
	Assign(members []Member, partitions map[string]int32) Assignment
}

// Uniform is the uniform assignor.
var Uniform Assignor = uniform{}

// Range is the range assignor.
var Range Assignor = rangeAssignor{}

// RoundRobin is the round-robin assignor.
var RoundRobin Assignor = roundRobin{}

// Names lists the built-in assignors, the default first.
func Names() []string { return []string{UniformName, RangeName, RoundRobinName} }

// Lookup returns the assignor of that name.
func Lookup(name string) (Assignor, error) {
	switch name {
	case UniformName:
		return Uniform, nil
	case RangeName:
		return Range, nil
	case RoundRobinName:
		return RoundRobin, nil
	}
	return nil, fmt.Errorf("%w: %q (known: %s)", ErrUnsupportedAssignor, name, strings.Join(Names(), ", "))
}

// sortedMembers returns the members in id order, each with its topics
// deduplicated, sorted and limited to those in partitions.
func sortedMembers(members []Member, partitions map[string]int32) []Member {
	out := make([]Member, len(members))
	for i, m := range members {
		topics := make([]string, 0, len(m.Topics))
		for _, t := range m.Topics {
			if partitions[t] > 0 {
				topics = append(topics, t)
			}
		}
		slices.Sort(topics)
		out[i] = Member{ID: m.ID, InstanceID: m.InstanceID, Topics: slices.Compact(topics), Current: m.Current}
	}
	slices.SortFunc(out, func(a, b Member) int {
		return cmp.Or(strings.Compare(cmp.Or(a.InstanceID, a.ID), cmp.Or(b.InstanceID, b.ID)), strings.Compare(a.ID, b.ID))
	})
	return out
}

// newAssignment has an empty partition list for every member.
func newAssignment(members []Member) Assignment {
	a := make(Assignment, len(members))
	for _, m := range members {
		a[m.ID] = []TopicPartition{}
	}
	return a
}

func (a Assignment) sort() {
	for _, ps := range a {
		slices.SortFunc(ps, Compare)
	}
}
