package request

import (
	"context"
	"fmt"

	"github.com/quirelog/quire/auth"
)

// TopicPartitions names partitions of one topic; none named stands for
// every partition the topic has.
type TopicPartitions struct {
	Topic      string
	Partitions []int32
}

// PartitionResult is one partition's answer of an operation that answers
// each partition on its own: Err is nil for one done.
type PartitionResult struct {
	Topic     string
	Partition int32
	Err       *Error
}

// ElectLeaders moves the leadership of the partitions named (every
// partition of the cluster for none) to their preferred (first) replicas
// on the controller now. Each partition's refusal (election not needed,
// preferred replica not available, unknown) is in its result; the call's
// error is the controller's. It needs Alter on the cluster, as Kafka's
// does.
func (c *Core) ElectLeaders(ctx context.Context, topics []TopicPartitions) ([]PartitionResult, error) {
	if err := c.authorize(ctx, auth.OpAlter, auth.ResourceCluster, auth.ClusterName, false); err != nil {
		return nil, err
	}
	ctl, err := c.controller()
	if err != nil {
		return nil, err
	}
	res, err := ctl.ElectLeaders(ctx, topics)
	if err != nil {
		return nil, c.fail(fmt.Errorf("elect leaders: %w", err))
	}
	return res, nil
}
