package assignor

type rangeAssignor struct{}

func (rangeAssignor) Name() string { return RangeName }

// Assign gives, per topic, the subscribers in id order contiguous ranges
// of partitions: with n partitions and m subscribers each takes n/m, and
// the first n%m one more.
func (rangeAssignor) Assign(members []Member, partitions map[string]int32) Assignment {
	sorted := sortedMembers(members, partitions)
	out := newAssignment(sorted)
	subscribers := map[string][]string{}
	for _, m := range sorted {
		for _, t := range m.Topics {
			subscribers[t] = append(subscribers[t], m.ID)
		}
	}
	for topic, ids := range subscribers {
		n, m := partitions[topic], int32(len(ids))
		next := int32(0)
		for i, id := range ids {
			count := n / m
			if int32(i) < n%m {
				count++
			}
			for p := next; p < next+count; p++ {
				out[id] = append(out[id], TopicPartition{Topic: topic, Partition: p})
			}
			next += count
		}
	}
	out.sort()
	return out
}
