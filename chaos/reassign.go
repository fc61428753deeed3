package chaos

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/quirelog/quire/client"
)

// reassign is the reassign fault: a partition's replicas move while the
// workload writes to it. With a node that holds no replica of it, one
// replica (the leader half the time) moves there; without one, a
// replica is dropped and, once that move is done, added back, its log
// fetched again from nothing. A quarter of the moves are cancelled
// right after they start. The fault ends once the partition has no
// reassignment pending and every node serves. The partition is one of
// the workload's topic or, with the transactional workload, of its
// topics.
func (n *nemesis) reassign(ctx, heal context.Context) error {
	topic := n.topic
	if len(n.moveTopics) > 0 {
		topic = n.moveTopics[n.rng.IntN(len(n.moveTopics))]
	}
	p := int32(n.rng.IntN(int(n.parts)))
	replicas, leader, err := n.replicas(ctx, topic, p)
	if err != nil {
		n.logf("reassign: no view of %s-%d (%v): skipped", topic, p, err)
		return nil
	}
	var spare []int
	for _, id := range n.ids() {
		if !slices.Contains(replicas, int32(id)) {
			spare = append(spare, id)
		}
	}
	var targets [][]int32
	var involved []int
	switch {
	case len(spare) > 0:
		out := replicas[n.rng.IntN(len(replicas))]
		if n.rng.IntN(2) == 0 && leader > 0 {
			out = leader
		}
		to := int32(spare[n.rng.IntN(len(spare))])
		target := slices.Clone(replicas)
		target[slices.Index(target, out)] = to
		targets = [][]int32{target}
		involved = []int{int(out), int(to)}
	case len(replicas) > 2:
		// min.insync.replicas is 2: never fewer replicas than that.
		out := replicas[n.rng.IntN(len(replicas))]
		targets = [][]int32{slices.DeleteFunc(slices.Clone(replicas), func(id int32) bool { return id == out }), replicas}
		involved = []int{int(out)}
	default:
		n.logf("reassign: %s-%d has nowhere to move: skipped", topic, p)
		return nil
	}
	end := n.begin(FaultReassign, involved...)
	defer end()
	for _, target := range targets {
		n.logf("reassign: %s-%d from %v to %v", topic, p, replicas, target)
		err := n.cl.AlterPartitionReassignments(heal, []client.ReassignmentTarget{{Topic: topic, Partition: p, Replicas: target}})
		if err != nil {
			// Refused (a broker fenced by an earlier fault, say): nothing
			// started, which the history need not know about.
			n.logf("reassign: %s-%d: %v", topic, p, err)
			return nil
		}
		if n.rng.IntN(4) == 0 {
			n.sleep(ctx, n.hold(0, 500*time.Millisecond))
			if err := n.cl.AlterPartitionReassignments(heal, []client.ReassignmentTarget{{Topic: topic, Partition: p, Cancel: true}}); err != nil {
				n.logf("reassign: cancel of %s-%d: %v (completed first?)", topic, p, err)
			} else {
				n.logf("reassign: %s-%d cancelled", topic, p)
			}
		}
		if err := n.waitMoved(heal, topic, p); err != nil {
			return err
		}
		if replicas, _, err = n.replicas(heal, topic, p); err != nil {
			return err
		}
	}
	for _, nd := range n.c.nodes {
		if err := n.c.WaitServing(heal, nd); err != nil {
			return err
		}
	}
	return nil
}

// replicas is partition p's replicas and leader as the cluster says.
func (n *nemesis) replicas(ctx context.Context, topic string, p int32) ([]int32, int32, error) {
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	ds, err := n.cl.DescribeTopics(rctx, topic)
	if err != nil {
		return nil, 0, err
	}
	if len(ds) != 1 || int(p) >= len(ds[0].Partitions) {
		return nil, 0, fmt.Errorf("no partition %s-%d in %v", topic, p, ds)
	}
	return ds[0].Partitions[p].Replicas, ds[0].Partitions[p].Leader, nil
}

// waitMoved waits until partition p of topic has no reassignment
// pending.
func (n *nemesis) waitMoved(ctx context.Context, topic string, p int32) error {
	for {
		pending, err := n.cl.ListPartitionReassignments(ctx, topic, p)
		if err == nil && len(pending) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s-%d still moving: %v (%w)", topic, p, pending, ctx.Err())
		case <-time.After(100 * time.Millisecond): // polling the cluster
		}
	}
}
