package metadata

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// applyPlan is parts with the plan's moves applied.
func applyPlan(parts []PlanPartition, moves []PlanPartition) []PlanPartition {
	out := slices.Clone(parts)
	for _, m := range moves {
		for i := range out {
			if out[i].Topic == m.Topic && out[i].Partition == m.Partition {
				out[i].Replicas = m.Replicas
			}
		}
	}
	return out
}

// checkPlan asserts what every plan keeps: each partition's replication
// factor, distinct replicas, none on a broker that may not hold them, and
// a rack spread no narrower than the racks allow.
func checkPlan(t *testing.T, brokers []PlanBroker, before, after []PlanPartition) (replicas, leaders map[int32]int) {
	t.Helper()
	eligible := map[int32]string{}
	racks := map[string]bool{}
	for _, b := range brokers {
		if !b.Fenced && !b.Cordoned {
			eligible[b.ID] = b.Rack
			racks[b.Rack] = true
		}
	}
	replicas, leaders = map[int32]int{}, map[int32]int{}
	for i, p := range after {
		if len(p.Replicas) != len(before[i].Replicas) {
			t.Fatalf("%s-%d: replication factor %d, was %d", p.Topic, p.Partition, len(p.Replicas), len(before[i].Replicas))
		}
		used := map[string]bool{}
		for j, r := range p.Replicas {
			if slices.Contains(p.Replicas[:j], r) {
				t.Fatalf("%s-%d: broker %d twice in %v", p.Topic, p.Partition, r, p.Replicas)
			}
			rk, ok := eligible[r]
			if !ok {
				t.Fatalf("%s-%d: replica on broker %d, which may not hold one: %v", p.Topic, p.Partition, r, p.Replicas)
			}
			used[rk] = true
			replicas[r]++
		}
		if len(racks) > 1 && len(used) < min(len(racks), len(p.Replicas)) {
			t.Fatalf("%s-%d: replicas %v on %d racks, %d possible", p.Topic, p.Partition, p.Replicas, len(used), min(len(racks), len(p.Replicas)))
		}
		leaders[p.Replicas[0]]++
	}
	return replicas, leaders
}

func spreadOf(m map[int32]int, ids ...int32) int {
	lo, hi := -1, 0
	for _, id := range ids {
		n := m[id]
		if lo == -1 || n < lo {
			lo = n
		}
		hi = max(hi, n)
	}
	return hi - lo
}

// A fourth broker joins three: the plan gives it its share of replicas
// and preferred leaders, and moves no more than that share.
func TestPlanReassignmentBalancesANewBroker(t *testing.T) {
	t.Parallel()
	brokers := []PlanBroker{{ID: 1}, {ID: 2}, {ID: 3}, {ID: 4}}
	var parts []PlanPartition
	for i := range int32(12) {
		parts = append(parts, PlanPartition{Topic: "t", Partition: i, Replicas: []int32{1 + i%3, 1 + (i+1)%3, 1 + (i+2)%3}})
	}
	moves := PlanReassignment(brokers, parts, PlanOptions{Balance: true})
	after := applyPlan(parts, moves)
	replicas, leaders := checkPlan(t, brokers, parts, after)
	if s := spreadOf(replicas, 1, 2, 3, 4); s > 1 || replicas[4] != 9 {
		t.Fatalf("replicas per broker %v", replicas)
	}
	if s := spreadOf(leaders, 1, 2, 3, 4); s > 1 {
		t.Fatalf("preferred leaders per broker %v", leaders)
	}
	moved := 0
	for i, p := range after {
		for _, r := range p.Replicas {
			if !slices.Contains(parts[i].Replicas, r) {
				moved++
			}
		}
	}
	if moved != 9 {
		t.Fatalf("%d replicas moved, the new broker's share is 9", moved)
	}
	// Balanced already: nothing to do.
	if again := PlanReassignment(brokers, after, PlanOptions{Balance: true}); len(again) != 0 {
		t.Fatalf("a balanced cluster planned %v", again)
	}
}

// A decommission: every replica of the cordoned broker moves, nothing
// else does.
func TestPlanReassignmentDecommission(t *testing.T) {
	t.Parallel()
	brokers := []PlanBroker{{ID: 1}, {ID: 2, Cordoned: true}, {ID: 3}, {ID: 4}}
	parts := []PlanPartition{
		{"a", 0, []int32{1, 2, 3}}, {"a", 1, []int32{2, 3, 4}}, {"a", 2, []int32{3, 4, 1}}, {"b", 0, []int32{2, 1}},
	}
	moves := PlanReassignment(brokers, parts, PlanOptions{})
	after := applyPlan(parts, moves)
	replicas, _ := checkPlan(t, brokers, parts, after)
	if replicas[2] != 0 || len(moves) != 3 {
		t.Fatalf("moves %v", moves)
	}
	for _, m := range moves {
		if m.Topic == "a" && m.Partition == 2 {
			t.Fatalf("a partition without the broker moved: %v", m)
		}
	}
	// Nowhere to go (RF 3 on three eligible brokers, one being a replica
	// already): what cannot move stays.
	brokers = []PlanBroker{{ID: 1}, {ID: 2, Fenced: true}, {ID: 3}}
	if moves := PlanReassignment(brokers, []PlanPartition{{"a", 0, []int32{1, 2, 3}}}, PlanOptions{Balance: true}); len(moves) != 0 {
		t.Fatalf("moves %v", moves)
	}
}

// With racks, every partition keeps a replica in as many racks as it can.
func TestPlanReassignmentRespectsRacks(t *testing.T) {
	t.Parallel()
	brokers := []PlanBroker{{ID: 1, Rack: "a"}, {ID: 2, Rack: "a"}, {ID: 3, Rack: "b"}, {ID: 4, Rack: "b"}, {ID: 5, Rack: "c"}, {ID: 6, Rack: "c"}}
	var parts []PlanPartition
	for i := range int32(30) {
		// Everything on racks a and b to start with.
		parts = append(parts, PlanPartition{Topic: "t", Partition: i, Replicas: []int32{1 + i%2, 3 + i%2}})
	}
	moves := PlanReassignment(brokers, parts, PlanOptions{Balance: true})
	replicas, leaders := checkPlan(t, brokers, parts, applyPlan(parts, moves))
	if s := spreadOf(replicas, 1, 2, 3, 4, 5, 6); s > 1 {
		t.Fatalf("replicas per broker %v", replicas)
	}
	if s := spreadOf(leaders, 1, 2, 3, 4, 5, 6); s > 1 {
		t.Fatalf("leaders per broker %v", leaders)
	}
}

// Randomised: any cluster, any assignment; the plan's invariants hold and
// the replica counts end within one of each other where no rack rule
// stands in the way (no racks).
func TestPlanReassignmentRandomised(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		n := 2 + rng.IntN(6)
		var brokers []PlanBroker
		var live []int32
		for id := int32(1); id <= int32(n); id++ {
			b := PlanBroker{ID: id, Cordoned: rng.IntN(6) == 0}
			brokers = append(brokers, b)
			if !b.Cordoned {
				live = append(live, id)
			}
		}
		if len(live) == 0 {
			continue
		}
		var parts []PlanPartition
		for i := range int32(1 + rng.IntN(40)) {
			rf := 1 + rng.IntN(min(len(live), 3))
			perm := rng.Perm(n)
			var reps []int32
			for _, k := range perm[:rf] {
				reps = append(reps, int32(k+1))
			}
			parts = append(parts, PlanPartition{Topic: "t", Partition: i, Replicas: reps})
		}
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			moves := PlanReassignment(brokers, parts, PlanOptions{Balance: true})
			replicas, _ := checkPlan(t, brokers, parts, applyPlan(parts, moves))
			if s := spreadOf(replicas, live...); s > 1 {
				t.Fatalf("replicas per broker %v over %v", replicas, live)
			}
		})
	}
}
