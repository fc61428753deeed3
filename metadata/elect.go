package metadata

import (
	"context"
	"fmt"
	"slices"

	pb "github.com/quirelog/quire/api/metapb"
)

// ElectionResult is one partition's answer to ElectPreferredLeaders: Err
// nil when its preferred replica leads now.
type ElectionResult struct {
	Topic     string
	Partition int32
	Err       error
}

// ElectPreferredLeaders moves each partition's leadership to its
// preferred (first assigned) replica, as rebalance does on its own
// (auto.leader.rebalance.enable), with a PartitionChange that bumps the
// leader epoch. Each partition is answered on its own:
// ErrElectionNotNeeded when the preferred replica leads already,
// ErrPreferredLeaderNotAvailable when it is not live or not in the ISR,
// ErrUnknownTopic for a partition that does not exist. No partitions
// means every partition of the cluster. The results are in the order
// asked.
func (c *Controller) ElectPreferredLeaders(ctx context.Context, partitions []TopicPartition) ([]ElectionResult, error) {
	if err := c.active(ctx); err != nil {
		return nil, err
	}
	img := c.n.Image()
	if partitions == nil {
		for _, name := range sortedTopicNames(img) {
			for _, p := range img.topics[name].Partitions {
				partitions = append(partitions, TopicPartition{Topic: name, Partition: p.Partition})
			}
		}
	}
	out := make([]ElectionResult, len(partitions))
	for i, tp := range partitions {
		out[i] = ElectionResult{Topic: tp.Topic, Partition: tp.Partition, Err: c.electPreferred(ctx, tp)}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w: %w", ErrNoQuorum, ctx.Err())
		}
	}
	return out, nil
}

// electPreferred moves one partition's leadership to its preferred
// replica, judged on the image as it is now.
func (c *Controller) electPreferred(ctx context.Context, tp TopicPartition) error {
	img := c.n.Image()
	t, ok := img.topics[tp.Topic]
	if !ok {
		return fmt.Errorf("%w: topic %q does not exist", ErrUnknownTopic, tp.Topic)
	}
	if tp.Partition < 0 || int(tp.Partition) >= len(t.Partitions) {
		return fmt.Errorf("%w: topic %q has no partition %d (it has %d)", ErrUnknownTopic, tp.Topic, tp.Partition, len(t.Partitions))
	}
	p := t.Partitions[tp.Partition]
	if len(p.Replicas) == 0 {
		return fmt.Errorf("%w: %s-%d has no replicas", ErrPreferredLeaderNotAvailable, tp.Topic, tp.Partition)
	}
	pref := p.Replicas[0]
	switch {
	case p.Leader == pref:
		return fmt.Errorf("%w: %s-%d: its preferred replica %d leads it (epoch %d)", ErrElectionNotNeeded, tp.Topic, tp.Partition, pref, p.LeaderEpoch)
	case !img.isLive(pref):
		return fmt.Errorf("%w: %s-%d: preferred replica %d is not alive", ErrPreferredLeaderNotAvailable, tp.Topic, tp.Partition, pref)
	case !slices.Contains(p.ISR, pref):
		return fmt.Errorf("%w: %s-%d: preferred replica %d is not in the ISR %v", ErrPreferredLeaderNotAvailable, tp.Topic, tp.Partition, pref, p.ISR)
	}
	_, err := c.raftApply(ctx, &pb.Command{Cmd: &pb.Command_PartitionChange{PartitionChange: &pb.PartitionChange{
		Topic: p.Topic, Partition: p.Partition, Leader: pref, LeaderEpoch: p.LeaderEpoch,
		Isr: p.ISR, PartitionEpoch: p.PartitionEpoch,
	}}})
	if err == nil {
		c.n.logger.Info("preferred leader election on demand", "topic", p.Topic, "partition", p.Partition, "leader", pref)
	}
	return err
}
