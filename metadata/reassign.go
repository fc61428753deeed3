package metadata

import (
	"context"
	"fmt"
	"slices"

	pb "github.com/quirelog/quire/api/metapb"
)

// Partition reassignment (Kafka's KIP-455), through the metadata log.
//
// A partition being reassigned has AddingReplicas and RemovingReplicas;
// its Replicas hold the target followed by the replicas being removed.
// The brokers of the adding replicas create them and follow the leader;
// the leader adds each to the ISR once caught up (AlterPartition, the
// usual path). The PartitionChange (or any command) that leaves every
// target replica in the ISR completes the reassignment as it applies
// (completeReassignment): the replicas become the target, the ISR keeps
// only target replicas, and a leader being removed hands leadership to a
// live target replica, all in the same command. The removed replicas'
// brokers then see they no longer host the partition and delete its log.
// Everything is in the image, so a new controller or a restarted broker
// carries on from where the log stands.

// Reassigning reports whether a reassignment of p is pending.
func (p PartitionInfo) Reassigning() bool {
	return len(p.AddingReplicas) > 0 || len(p.RemovingReplicas) > 0
}

// TargetReplicas is what the replicas will be once a pending reassignment
// completes: Replicas without RemovingReplicas (Replicas when none is
// pending).
func (p PartitionInfo) TargetReplicas() []int32 {
	return minus(p.Replicas, p.RemovingReplicas)
}

// OriginalReplicas is what the replicas were before a pending
// reassignment: Replicas without AddingReplicas.
func (p PartitionInfo) OriginalReplicas() []int32 {
	return minus(p.Replicas, p.AddingReplicas)
}

// Reassignments returns every partition with a pending reassignment,
// sorted by topic and partition.
func (img *Image) Reassignments() []PartitionInfo {
	var out []PartitionInfo
	for _, name := range sortedTopicNames(img) {
		for _, p := range img.topics[name].Partitions {
			if p.Reassigning() {
				out = append(out, p.clone())
			}
		}
	}
	return out
}

// Reassignment asks for one partition's new replicas (the preferred
// leader first), or, with Cancel, for its pending reassignment to be
// undone.
type Reassignment struct {
	Topic     string
	Partition int32
	Replicas  []int32
	Cancel    bool
}

// minus is a without the members of b, in a's order.
func minus(a, b []int32) []int32 {
	out := make([]int32, 0, len(a))
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// orNil is s, or nil when empty: as a stored record reads back, so that
// every node's image compares equal.
func orNil(s []int32) []int32 {
	if len(s) == 0 {
		return nil
	}
	return s
}

// applyReassignPartitions starts, replaces or cancels reassignments, all
// or none: every partition is checked before any is changed.
func (d *draft) applyReassignPartitions(c *pb.ReassignPartitions, _ uint64) any {
	if len(c.Partitions) == 0 {
		return fmt.Errorf("%w: no partitions", ErrInvalidReassignment)
	}
	type change struct {
		topic string
		p     PartitionInfo
	}
	seen := map[TopicPartition]bool{}
	changes := make([]change, 0, len(c.Partitions))
	for _, r := range c.Partitions {
		key := TopicPartition{Topic: r.Topic, Partition: r.Partition}
		if seen[key] {
			return fmt.Errorf("%w: %s-%d named twice", ErrInvalidReassignment, r.Topic, r.Partition)
		}
		seen[key] = true
		t, ok := d.img.topics[r.Topic]
		if !ok || r.Partition < 0 || int(r.Partition) >= len(t.Partitions) {
			return fmt.Errorf("%w: %s-%d", ErrUnknownTopic, r.Topic, r.Partition)
		}
		np, err := d.reassigned(t.Partitions[r.Partition], r)
		if err != nil {
			return err
		}
		changes = append(changes, change{r.Topic, np})
	}
	out := make([]PartitionInfo, 0, len(changes))
	for _, ch := range changes {
		t, _ := d.topic(ch.topic)
		if np := ch.p; !samePartition(np, t.Partitions[np.Partition]) {
			out = append(out, d.putPartition(t, np).clone())
			continue
		}
		out = append(out, ch.p.clone())
	}
	return out
}

// samePartition reports whether a and b are the same state.
func samePartition(a, b PartitionInfo) bool {
	return a.PartitionEpoch == b.PartitionEpoch && a.LeaderEpoch == b.LeaderEpoch && a.Leader == b.Leader &&
		slices.Equal(a.Replicas, b.Replicas) && slices.Equal(a.ISR, b.ISR) &&
		slices.Equal(a.AddingReplicas, b.AddingReplicas) && slices.Equal(a.RemovingReplicas, b.RemovingReplicas)
}

// reassigned is p with the reassignment r applied (not completed yet: see
// putPartition), or why r is refused. A new target is taken from the
// original replicas, so it replaces a pending reassignment (KIP-455); a
// cancel's target is the original replicas.
func (d *draft) reassigned(p PartitionInfo, r *pb.PartitionReassignment) (PartitionInfo, error) {
	name := fmt.Sprintf("%s-%d", p.Topic, p.Partition)
	orig := p.OriginalReplicas()
	var target []int32
	if r.Cancel {
		if !p.Reassigning() {
			return p, fmt.Errorf("%w: %s", ErrNoReassignmentInProgress, name)
		}
		if len(r.TargetReplicas) > 0 {
			return p, fmt.Errorf("%w: %s: a cancel names no replicas", ErrInvalidReassignment, name)
		}
		target = orig
	} else {
		target = r.TargetReplicas
		if len(target) == 0 {
			return p, fmt.Errorf("%w: %s: no replicas", ErrInvalidReassignment, name)
		}
		for i, id := range target {
			if slices.Contains(target[:i], id) {
				return p, fmt.Errorf("%w: %s: broker %d named twice", ErrInvalidReassignment, name, id)
			}
			b, ok := d.img.brokers[id]
			if !ok {
				return p, fmt.Errorf("%w: %s: broker %d is not registered", ErrInvalidReassignment, name, id)
			}
			if slices.Contains(p.Replicas, id) {
				continue // a replica already: it may stay whatever its state
			}
			if b.Fenced {
				return p, fmt.Errorf("%w: %s: broker %d is fenced", ErrInvalidReassignment, name, id)
			}
			if b.Cordoned {
				return p, fmt.Errorf("%w: %s: broker %d is cordoned", ErrInvalidReassignment, name, id)
			}
		}
		if int32(len(target)) < r.MinInsyncReplicas {
			return p, fmt.Errorf("%w: %s: %d replicas, below min.insync.replicas %d", ErrInvalidReassignment, name, len(target), r.MinInsyncReplicas)
		}
	}
	if !p.Reassigning() && slices.Equal(target, p.Replicas) {
		return p, nil // nothing to do
	}
	replicas := append(slices.Clone(target), minus(orig, target)...)
	isr := orNil(minus(p.ISR, minus(p.ISR, replicas)))
	need := min(int(max(r.MinInsyncReplicas, 1)), len(p.ISR))
	if len(isr) < need {
		return p, fmt.Errorf("%w: %s: %d of the %d in-sync replicas %v would stay in sync, fewer than min(min.insync.replicas %d, ISR size)",
			ErrInvalidReassignment, name, len(isr), len(p.ISR), p.ISR, r.MinInsyncReplicas)
	}
	leader := p.Leader
	if leader != -1 && !slices.Contains(replicas, leader) {
		leader = -1
		for _, id := range replicas {
			if slices.Contains(isr, id) && d.img.isLive(id) {
				leader = id
				break
			}
		}
		if leader == -1 {
			return p, fmt.Errorf("%w: %s: no live in-sync replica of %v would lead", ErrInvalidReassignment, name, replicas)
		}
	}
	np := changed(p, leader, isr)
	np.Replicas = replicas
	np.AddingReplicas = orNil(minus(target, orig))
	np.RemovingReplicas = orNil(minus(orig, target))
	return np, nil
}

// completeReassignment completes p's pending reassignment once every
// target replica is in the ISR: the replicas become the target, the ISR
// keeps only target replicas, and a leader not in the target hands
// leadership to the first live target replica (all in the ISR, so each
// holds every committed record), the leader epoch bumped. With no live
// target replica to lead, it waits. Anything else is p unchanged.
func (d *draft) completeReassignment(p PartitionInfo) PartitionInfo {
	if !p.Reassigning() {
		return p
	}
	target := p.TargetReplicas()
	for _, id := range target {
		if !slices.Contains(p.ISR, id) {
			return p
		}
	}
	leader := p.Leader
	if !slices.Contains(target, leader) {
		leader = -1
		for _, id := range target {
			if d.img.isLive(id) {
				leader = id
				break
			}
		}
		if leader == -1 {
			return p
		}
	}
	np := changed(p, leader, minus(p.ISR, p.RemovingReplicas))
	np.Replicas = target
	np.AddingReplicas, np.RemovingReplicas = nil, nil
	return np
}

// applyCordonBroker marks a broker cordoned or not.
func (d *draft) applyCordonBroker(c *pb.CordonBroker, _ uint64) any {
	b, ok := d.img.brokers[c.BrokerId]
	if !ok {
		return fmt.Errorf("%w: %d", ErrUnknownBroker, c.BrokerId)
	}
	if b.Cordoned != c.Cordoned {
		b.Cordoned = c.Cordoned
		d.putBroker(b)
	}
	return nil
}

// applyBrokerThrottle sets or resets brokers' reassignment throttle, all
// named brokers or none.
func (d *draft) applyBrokerThrottle(c *pb.BrokerThrottle, _ uint64) any {
	if len(c.BrokerIds) == 0 {
		return fmt.Errorf("%w: no brokers named", ErrUnknownBroker)
	}
	if !c.Unset && c.BytesPerSecond < 0 {
		return fmt.Errorf("%w: negative throttle %d", ErrInvalidReassignment, c.BytesPerSecond)
	}
	for _, id := range c.BrokerIds {
		if _, ok := d.img.brokers[id]; !ok {
			return fmt.Errorf("%w: %d", ErrUnknownBroker, id)
		}
	}
	for _, id := range c.BrokerIds {
		b := d.img.brokers[id]
		b.ReassignmentThrottle = c.BytesPerSecond
		if c.Unset {
			b.ReassignmentThrottle = -1
		}
		d.putBroker(b)
	}
	return nil
}

// SetReassignmentThrottle sets the named brokers' (none named: every
// registered broker's) reassignment throttle, or resets it to their
// configuration's.
func (c *Controller) SetReassignmentThrottle(ctx context.Context, ids []int32, bytesPerSecond int64, reset bool) error {
	if err := c.active(ctx); err != nil {
		return err
	}
	if len(ids) == 0 {
		for _, b := range c.n.Image().Brokers() {
			ids = append(ids, b.ID)
		}
	}
	_, err := c.raftApply(ctx, &pb.Command{Cmd: &pb.Command_BrokerThrottle{BrokerThrottle: &pb.BrokerThrottle{
		BrokerIds: ids, BytesPerSecond: bytesPerSecond, Unset: reset}}})
	if err == nil {
		c.n.logger.Info("reassignment throttle set", "brokers", ids, "bytes_per_second", bytesPerSecond, "reset", reset)
	}
	return err
}

// AlterPartitionReassignments starts, replaces or cancels reassignments,
// all or none (applyReassignPartitions says what is refused). minISR
// gives each topic's effective min.insync.replicas (the caller knows the
// broker default); a topic it does not name counts as 1.
//
// It returns the applied index once the change is applied here.
func (c *Controller) AlterPartitionReassignments(ctx context.Context, rs []Reassignment, minISR map[string]int32) (uint64, error) {
	if err := c.active(ctx); err != nil {
		return 0, err
	}
	cmd := &pb.ReassignPartitions{Partitions: make([]*pb.PartitionReassignment, len(rs))}
	for i, r := range rs {
		cmd.Partitions[i] = &pb.PartitionReassignment{Topic: r.Topic, Partition: r.Partition, TargetReplicas: r.Replicas,
			Cancel: r.Cancel, MinInsyncReplicas: minISR[r.Topic]}
	}
	resp, err := c.raftApply(ctx, &pb.Command{Cmd: &pb.Command_ReassignPartitions{ReassignPartitions: cmd}})
	if err != nil {
		return 0, err
	}
	index := c.n.AppliedIndex()
	for _, p := range resp.([]PartitionInfo) {
		c.n.logger.Info("partition reassignment", "topic", p.Topic, "partition", p.Partition, "replicas", p.Replicas,
			"adding", p.AddingReplicas, "removing", p.RemovingReplicas, "isr", p.ISR, "leader", p.Leader)
	}
	return index, nil
}

// CordonBroker cordons a broker (no new replica is placed on it) or
// uncordons it.
func (c *Controller) CordonBroker(ctx context.Context, id int32, cordoned bool) error {
	_, err := c.propose(ctx, &pb.Command{Cmd: &pb.Command_CordonBroker{CordonBroker: &pb.CordonBroker{BrokerId: id, Cordoned: cordoned}}})
	if err == nil {
		c.n.logger.Info("broker cordon changed", "broker", id, "cordoned", cordoned)
	}
	return err
}
