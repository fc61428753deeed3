package metadata

import (
	"context"
	"slices"
	"sort"
	"strconv"

	pb "github.com/quirelog/quire/api/metapb"
)

// A reassignment plan: where each partition's replicas should be so that
// replicas and preferred leaders spread evenly over the brokers that may
// take new ones, moving as few as it can. It is pure (the CLI's `quire
// partition reassign --plan` and `quire broker decommission` run it on what
// DescribeCluster and DescribeTopics answer).

// PlanBroker is a broker as a plan sees it. Only a broker neither fenced
// nor cordoned takes replicas; the replicas of any other (or of a broker
// the list lacks) are moved off it.
type PlanBroker struct {
	ID       int32
	Rack     string
	Fenced   bool
	Cordoned bool
}

// PlanPartition is one partition's current replicas, the preferred
// leader first.
type PlanPartition struct {
	Topic     string
	Partition int32
	Replicas  []int32
}

// PlanOptions: with Balance unset, a plan only moves replicas off the
// brokers that may not hold them (a decommission); set, it also evens out
// replicas and preferred leaders over the others.
type PlanOptions struct {
	Balance bool
}

// PlanReassignment returns the partitions whose replicas should change,
// each with its new replicas (in the input's order). A partition keeps
// its replication factor. A replacement replica goes to the eligible
// broker with the fewest replicas, on a rack the partition has no replica
// on when there is one; balancing moves a replica from the fullest broker
// to the emptiest only when the partition's replicas stay spread over as
// many racks; preferred leaders are evened out by changing only the order
// of replicas (a reorder moves no data). A partition that cannot keep its
// replication factor on the eligible brokers keeps what it can: those
// replicas stay where they are.
func PlanReassignment(brokers []PlanBroker, parts []PlanPartition, opts PlanOptions) []PlanPartition {
	rack := map[int32]string{}
	var eligible []int32
	for _, b := range brokers {
		rack[b.ID] = b.Rack
		if b.Rack == "" {
			rack[b.ID] = "\x00" + string(rune(b.ID)) // its own rack
		}
		if !b.Fenced && !b.Cordoned {
			eligible = append(eligible, b.ID)
		}
	}
	slices.Sort(eligible)
	ok := func(id int32) bool { _, found := slices.BinarySearch(eligible, id); return found }
	count := map[int32]int{}
	for _, id := range eligible {
		count[id] = 0
	}
	out := make([]PlanPartition, len(parts))
	for i, p := range parts {
		out[i] = PlanPartition{Topic: p.Topic, Partition: p.Partition, Replicas: slices.Clone(p.Replicas)}
		for _, r := range p.Replicas {
			if ok(r) {
				count[r]++
			}
		}
	}
	racksOf := func(replicas []int32, skip int) map[string]bool {
		m := map[string]bool{}
		for j, r := range replicas {
			if j != skip {
				m[rack[r]] = true
			}
		}
		return m
	}
	// Moving off the brokers that may not hold replicas.
	for i := range out {
		reps := out[i].Replicas
		for j, r := range reps {
			if ok(r) {
				continue
			}
			used := racksOf(reps, j)
			best := int32(-1)
			for _, c := range eligible {
				if slices.Contains(reps, c) {
					continue
				}
				if best == -1 || better(c, best, used, rack, count) {
					best = c
				}
			}
			if best == -1 {
				continue // nowhere to go: it stays
			}
			reps[j] = best
			count[best]++
		}
	}
	if opts.Balance && len(eligible) > 1 {
		balanceReplicas(out, eligible, count, rack, ok)
		balanceLeaders(out, eligible, ok)
	}
	var moves []PlanPartition
	for i, p := range parts {
		if !slices.Equal(p.Replicas, out[i].Replicas) {
			moves = append(moves, out[i])
		}
	}
	return moves
}

// better reports whether c is a better home than best for a replica of a
// partition whose other replicas use racks used: a new rack first, then
// fewer replicas, then the lower id.
func better(c, best int32, used map[string]bool, rack map[int32]string, count map[int32]int) bool {
	cn, bn := !used[rack[c]], !used[rack[best]]
	if cn != bn {
		return cn
	}
	if count[c] != count[best] {
		return count[c] < count[best]
	}
	return c < best
}

// balanceReplicas moves replicas from the fullest eligible broker to the
// emptiest until their counts differ by at most one, or no move keeps a
// partition's rack spread.
func balanceReplicas(out []PlanPartition, eligible []int32, count map[int32]int, rack map[int32]string, ok func(int32) bool) {
	spread := func(reps []int32) int {
		m := map[string]bool{}
		for _, r := range reps {
			m[rack[r]] = true
		}
		return len(m)
	}
	for range 100000 { // bounded: each move lowers the spread of counts
		byCount := slices.Clone(eligible)
		sort.SliceStable(byCount, func(a, b int) bool { return count[byCount[a]] > count[byCount[b]] })
		moved := false
	pairs:
		for _, hi := range byCount {
			for k := len(byCount) - 1; k >= 0; k-- {
				lo := byCount[k]
				if count[hi]-count[lo] <= 1 {
					break
				}
				for i := range out {
					reps := out[i].Replicas
					j := slices.Index(reps, hi)
					if j < 0 || slices.Contains(reps, lo) {
						continue
					}
					before := spread(reps)
					reps[j] = lo
					if spread(reps) < before {
						reps[j] = hi
						continue
					}
					count[hi]--
					count[lo]++
					moved = true
					break pairs
				}
			}
		}
		if !moved {
			return
		}
	}
}

// balanceLeaders evens out how many partitions prefer each eligible
// broker as leader, by moving a replica to the front of its list.
func balanceLeaders(out []PlanPartition, eligible []int32, ok func(int32) bool) {
	leaders := map[int32]int{}
	for _, id := range eligible {
		leaders[id] = 0
	}
	for _, p := range out {
		if len(p.Replicas) > 0 && ok(p.Replicas[0]) {
			leaders[p.Replicas[0]]++
		}
	}
	for range 100000 {
		byCount := slices.Clone(eligible)
		sort.SliceStable(byCount, func(a, b int) bool { return leaders[byCount[a]] > leaders[byCount[b]] })
		moved := false
	pairs:
		for _, hi := range byCount {
			for k := len(byCount) - 1; k >= 0; k-- {
				lo := byCount[k]
				if leaders[hi]-leaders[lo] <= 1 {
					break
				}
				for i := range out {
					reps := out[i].Replicas
					if len(reps) == 0 || reps[0] != hi {
						continue
					}
					j := slices.Index(reps, lo)
					if j < 0 {
						continue
					}
					reps[0], reps[j] = reps[j], reps[0]
					leaders[hi]--
					leaders[lo]++
					moved = true
					break pairs
				}
			}
		}
		if !moved {
			return
		}
	}
}

// balance is the controller's balancer (Config.Balancer): while no
// reassignment is pending, no broker is fenced and the cluster is at
// metadata.version 12, it starts the first BalanceMaxMoves moves of a
// balancing plan over the image; the next round waits for them to
// complete.
func (c *Controller) balance(ctx context.Context) {
	img := c.n.Image()
	if img.MetadataVersion() < MetadataVersionReassignment || len(img.Reassignments()) > 0 {
		return
	}
	var brokers []PlanBroker
	for _, b := range img.Brokers() {
		if b.Fenced {
			// A broker down (restarting, say) is no reason to move
			// everything it holds: no round until it is back, or gone
			// for good (unregistered).
			return
		}
		brokers = append(brokers, PlanBroker{ID: b.ID, Rack: b.Rack, Cordoned: b.Cordoned})
	}
	var parts []PlanPartition
	for _, name := range sortedTopicNames(img) {
		for _, p := range img.topics[name].Partitions {
			parts = append(parts, PlanPartition{Topic: p.Topic, Partition: p.Partition, Replicas: p.Replicas})
		}
	}
	moves := PlanReassignment(brokers, parts, PlanOptions{Balance: true})
	if len(moves) == 0 {
		return
	}
	moves = moves[:min(len(moves), c.n.cfg.BalanceMaxMoves)]
	cmd := &pb.ReassignPartitions{}
	for _, m := range moves {
		minISR := int32(0) // a plan keeps each replication factor
		if v, err := strconv.ParseInt(img.topics[m.Topic].Configs["min.insync.replicas"], 10, 32); err == nil {
			minISR = int32(v)
		}
		cmd.Partitions = append(cmd.Partitions, &pb.PartitionReassignment{Topic: m.Topic, Partition: m.Partition,
			TargetReplicas: m.Replicas, MinInsyncReplicas: minISR})
	}
	if _, err := c.raftApply(ctx, &pb.Command{Cmd: &pb.Command_ReassignPartitions{ReassignPartitions: cmd}}); err != nil {
		c.n.logger.Warn("balancer: cannot start moves", "moves", len(moves), "error", err)
		return
	}
	c.n.logger.Info("balancer: started partition moves", "moves", len(moves))
}
