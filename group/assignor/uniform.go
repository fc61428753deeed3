package assignor

import (
	"slices"
	"strings"
)

type uniform struct{}

func (uniform) Name() string { return UniformName }

// Assign works in three steps:
//
//  1. Every member keeps the partitions of its current assignment that are
//     still valid (topic subscribed and existing, partition in range, not
//     kept already by a member earlier in id order).
//  2. Each partition nobody kept goes to the subscriber of its topic that
//     holds the fewest partitions (lowest id on a tie), the partitions of
//     the topics with the fewest subscribers first, since they have the
//     fewest places to go.
//  3. While a member holds at least two partitions more than another member
//     subscribed to one of its topics, it hands one such partition over,
//     one it received in step 2 if it has one, else one it kept; the most
//     loaded member gives to the least loaded first.
//
// Step 3 ends: each move lowers the sum of the squared counts. When all
// members subscribe to the same topics the result is balanced within one
// partition and keeps as many current partitions as any balanced
// assignment can (a member only gives up kept partitions while it is above
// every other member by two or more). With differing subscriptions no
// member holds two more than another that could take one of its
// partitions.
func (uniform) Assign(members []Member, partitions map[string]int32) Assignment {
	sorted := sortedMembers(members, partitions)
	n := len(sorted)
	subscribed := make([]map[string]bool, n)
	subscribers := map[string][]int{}
	for i, m := range sorted {
		subscribed[i] = make(map[string]bool, len(m.Topics))
		for _, t := range m.Topics {
			subscribed[i][t] = true
			subscribers[t] = append(subscribers[t], i)
		}
	}
	kept := make([][]TopicPartition, n)
	fresh := make([][]TopicPartition, n)
	count := make([]int, n)
	owned := map[TopicPartition]bool{}

	// 1. Keep what is still valid.
	for i, m := range sorted {
		for _, tp := range m.Current {
			if !subscribed[i][tp.Topic] || tp.Partition < 0 || tp.Partition >= partitions[tp.Topic] || owned[tp] {
				continue
			}
			owned[tp] = true
			kept[i] = append(kept[i], tp)
			count[i]++
		}
	}

	// 2. Place the rest on the least loaded subscriber.
	topics := make([]string, 0, len(subscribers))
	for t := range subscribers {
		topics = append(topics, t)
	}
	slices.SortFunc(topics, func(a, b string) int {
		if d := len(subscribers[a]) - len(subscribers[b]); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	for _, t := range topics {
		for p := int32(0); p < partitions[t]; p++ {
			tp := TopicPartition{Topic: t, Partition: p}
			if owned[tp] {
				continue
			}
			best := -1
			for _, i := range subscribers[t] {
				if best < 0 || count[i] < count[best] {
					best = i
				}
			}
			fresh[best] = append(fresh[best], tp)
			count[best]++
		}
	}

	// 3. Even out.
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	for moved := true; moved; {
		moved = false
		slices.SortFunc(order, func(a, b int) int {
			if d := count[b] - count[a]; d != 0 {
				return d
			}
			return a - b
		})
	search:
		for _, d := range order {
			for k := n - 1; k >= 0; k-- {
				r := order[k]
				if count[d]-count[r] < 2 {
					break
				}
				if takeFor(&fresh[d], subscribed[r], &fresh[r]) || takeFor(&kept[d], subscribed[r], &fresh[r]) {
					count[d]--
					count[r]++
					moved = true
					break search
				}
			}
		}
	}

	out := make(Assignment, n)
	for i, m := range sorted {
		ps := make([]TopicPartition, 0, count[i])
		ps = append(append(ps, kept[i]...), fresh[i]...)
		out[m.ID] = ps
	}
	out.sort()
	return out
}

// takeFor moves the last partition of from whose topic is in topics to
// the end of to, and reports whether there was one.
func takeFor(from *[]TopicPartition, topics map[string]bool, to *[]TopicPartition) bool {
	ps := *from
	for j := len(ps) - 1; j >= 0; j-- {
		if topics[ps[j].Topic] {
			*to = append(*to, ps[j])
			*from = slices.Delete(ps, j, j+1)
			return true
		}
	}
	return false
}
