package request

import (
	"context"
	"fmt"
	"slices"

	"github.com/quirelog/quire/auth"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/replica"
	"github.com/quirelog/quire/storage"
)

// ClusterDescriber is what DescribeCluster and Metadata read of the cluster beyond
// the metadata image's topics: the node's view of the quorum and of the
// registered brokers.
type ClusterDescriber interface {
	ClusterID() string
	// ControllerID is the active controller; -1 when none is known.
	ControllerID() int32
	// IsController reports whether broker id is a controller voter.
	IsController(id int32) bool
	Brokers() []metadata.BrokerInfo
	// HostedReplicas counts the partition replicas each broker hosts.
	HostedReplicas() map[int32]int
	// MetadataIndex is the index of this broker's metadata image;
	// WaitForIndex returns once it is want or newer, or ctx's error.
	MetadataIndex() uint64
	WaitForIndex(ctx context.Context, want uint64) error
}

// TopicListing is one topic of ListTopics.
type TopicListing struct {
	Name, ID          string
	Partitions        int32
	ReplicationFactor int32
}

// ListTopics lists the topics the caller may describe.
func (c *Core) ListTopics(ctx context.Context) []TopicListing {
	var out []TopicListing
	for _, t := range c.cfg.Cluster.Topics() {
		if !c.mayDescribe(ctx, t.Name) {
			continue
		}
		rf := 0
		if len(t.Partitions) > 0 {
			rf = len(t.Partitions[0].Replicas)
		}
		out = append(out, TopicListing{Name: t.Name, ID: t.ID, Partitions: int32(len(t.Partitions)), ReplicationFactor: int32(rf)})
	}
	return out
}

// ClusterDescription is DescribeCluster's answer.
type ClusterDescription struct {
	ClusterID    string
	ControllerID int32
	// Brokers, by id.
	Brokers []BrokerDescription
}

// BrokerDescription is one registered broker. Its address depends on
// the listener a client came in on, which only the door knows: Info has
// every endpoint.
type BrokerDescription struct {
	Info       metadata.BrokerInfo
	Controller bool
	// Partitions is how many partition replicas it hosts.
	Partitions int32
}

// DescribeCluster describes the cluster and its brokers; it needs
// Describe on the cluster.
func (c *Core) DescribeCluster(ctx context.Context) (*ClusterDescription, error) {
	if err := c.authorize(ctx, auth.OpDescribe, auth.ResourceCluster, auth.ClusterName, false); err != nil {
		return nil, err
	}
	d := c.cfg.Admin.Describer
	if d == nil {
		return nil, c.fail(fmt.Errorf("%w: this node does not describe its cluster", ErrPolicyViolation))
	}
	out := &ClusterDescription{ClusterID: d.ClusterID(), ControllerID: d.ControllerID()}
	hosted := d.HostedReplicas()
	for _, br := range d.Brokers() {
		out.Brokers = append(out.Brokers, BrokerDescription{Info: br, Controller: d.IsController(br.ID), Partitions: int32(hosted[br.ID])})
	}
	slices.SortFunc(out.Brokers, func(a, b BrokerDescription) int { return int(a.Info.ID) - int(b.Info.ID) })
	return out, nil
}

// UnregisterBroker removes a broker that is gone for good (the
// controller checks that it is not a voter, and fenced and silent past
// the session timeout); it needs Alter on the cluster.
func (c *Core) UnregisterBroker(ctx context.Context, id int32) error {
	if err := c.authorize(ctx, auth.OpAlter, auth.ResourceCluster, auth.ClusterName, false); err != nil {
		return err
	}
	ctl, err := c.controller()
	if err != nil {
		return err
	}
	if id < 0 {
		return c.fail(fmt.Errorf("%w: broker id %d", replica.ErrInvalidRequest, id))
	}
	if id == c.cfg.NodeID {
		return c.fail(fmt.Errorf("%w: broker %d cannot unregister itself", metadata.ErrBrokerNotRemovable, id))
	}
	if _, ok := c.cfg.Cluster.Broker(id); !ok {
		return c.fail(fmt.Errorf("%w: %d", metadata.ErrUnknownBroker, id))
	}
	if err := ctl.UnregisterBroker(ctx, id); err != nil {
		return c.fail(fmt.Errorf("unregister broker %d: %w", id, err))
	}
	return nil
}

// ProducerDescription is one idempotent producer's state in a partition.
type ProducerDescription struct {
	ProducerID    int64
	ProducerEpoch int16
	LastSequence  int32
	LastTimestamp int64
	LastOffset    int64
	// CoordinatorEpoch is its latest transaction marker's coordinator
	// epoch and TxnStartOffset its open transaction's first offset; -1
	// when none.
	CoordinatorEpoch int32
	TxnStartOffset   int64
}

// PartitionProducers is DescribeProducers' answer for one partition:
// its producers, or its error.
type PartitionProducers struct {
	Partition int32
	Producers []ProducerDescription
	Err       *Error
}

// DescribeProducers lists the idempotent producers of the partitions of
// topic this broker leads (all of them for none named), from each log's
// producer state (KIP-664). A partition led elsewhere, or not led by
// anyone, gets its error in its result; an unknown topic or a partition
// past the topic's count fails the call. It needs Read on the topic, as
// Kafka's does.
func (c *Core) DescribeProducers(ctx context.Context, topic string, partitions []int32) ([]PartitionProducers, error) {
	if err := c.authorize(ctx, auth.OpRead, auth.ResourceTopic, topic, false); err != nil {
		return nil, err
	}
	t, ok := c.cfg.Cluster.Topic(topic)
	if !ok {
		return nil, c.fail(unknownTopic(topic))
	}
	parts := partitions
	if len(parts) == 0 {
		for i := range t.Partitions {
			parts = append(parts, int32(i))
		}
	}
	for _, p := range parts {
		if p < 0 || int(p) >= len(t.Partitions) {
			return nil, c.fail(invalidPartition(topic, p, len(t.Partitions)))
		}
	}
	out := make([]PartitionProducers, 0, len(parts))
	for _, p := range parts {
		pp := PartitionProducers{Partition: p}
		part, ok := c.cfg.Replicas.Partition(topic, p)
		var err error
		switch pi := t.Partitions[p]; {
		case !ok || !part.State().Leader:
			if pi.Leader < 0 {
				err = fmt.Errorf("%w: %s-%d has no leader", replica.ErrLeaderNotAvailable, topic, p)
			} else {
				err = &replica.NotLeaderError{Topic: topic, Partition: p, Leader: pi.Leader, Epoch: pi.LeaderEpoch}
			}
		default:
			if _, err = part.LogFailure(); err != nil {
				err = fmt.Errorf("%w: %s-%d: %w", storage.ErrLogFailed, topic, p, err)
			}
		}
		if err != nil {
			pp.Err = c.asError(err)
			out = append(out, pp)
			continue
		}
		for _, in := range part.Producers() {
			pp.Producers = append(pp.Producers, ProducerDescription{ProducerID: in.ProducerID, ProducerEpoch: in.ProducerEpoch,
				LastSequence: in.LastSequence, LastTimestamp: in.LastTimestamp, LastOffset: in.LastOffset,
				CoordinatorEpoch: in.CoordinatorEpoch, TxnStartOffset: in.TxnStartOffset})
		}
		out = append(out, pp)
	}
	return out, nil
}
