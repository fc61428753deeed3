package assignor

import "slices"

type roundRobin struct{}

func (roundRobin) Name() string { return RoundRobinName }

// Assign deals the partitions of every topic subscribed to, in topic and
// partition order, to the members in turn, as Kafka's round-robin
// assignor does: the members in instance id (static members) or member
// id order, a circle that skips a member not subscribed to a partition's
// topic. With one subscription the members' counts differ by at most
// one, and a member's partitions are spread over the topic, not a
// contiguous range. Not sticky.
func (roundRobin) Assign(members []Member, partitions map[string]int32) Assignment {
	sorted := sortedMembers(members, partitions)
	out := newAssignment(sorted)
	if len(sorted) == 0 {
		return out
	}
	subscribed := map[string]map[string]bool{} // topic -> member ids
	var topics []string
	for _, m := range sorted {
		for _, t := range m.Topics {
			if subscribed[t] == nil {
				subscribed[t] = map[string]bool{}
				topics = append(topics, t)
			}
			subscribed[t][m.ID] = true
		}
	}
	slices.Sort(topics)
	next := 0 // the circle's position, kept from topic to topic
	for _, t := range topics {
		for p := range partitions[t] {
			// Some member is subscribed to t, so the circle stops
			// within one turn.
			for !subscribed[t][sorted[next].ID] {
				next = (next + 1) % len(sorted)
			}
			id := sorted[next].ID
			out[id] = append(out[id], TopicPartition{Topic: t, Partition: p})
			next = (next + 1) % len(sorted)
		}
	}
	out.sort()
	return out
}
