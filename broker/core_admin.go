package broker

import (
	"context"
	"fmt"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/config"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/replica"
	"github.com/quirelog/quire/request"
)

// Topic and config administration in the request core: the broker gives
// it the node's topic defaults, its topic keys and a Controller over the
// controller forwarder, each write waited for in this broker's image.

// adminConfig is the request core's request.AdminConfig for this node.
func (b *Broker) adminConfig() request.AdminConfig {
	return request.AdminConfig{
		Controller:        coreController{b},
		Describer:         coreController{b},
		Reassigner:        coreController{b},
		NumPartitions:     b.cfg.NumPartitions,
		ReplicationFactor: int16(b.cfg.DefaultReplicationFactor),
		DeleteTopicEnable: b.cfg.DeleteTopicEnable,
		ValidateConfigs:   config.ValidateTopicConfigs,
		ValidateConfigKey: config.ValidateTopicKey,
		TopicConfigs: func(overrides map[string]string) []request.ConfigEntry {
			return b.cluster.defaults.Describe(overrides)
		},
		BrokerConfigs: b.cfg.BrokerConfigs,
	}
}

// coreController is request.Controller over the controller forwarder.
type coreController struct{ b *Broker }

// ElectLeaders asks the controller to elect the preferred replicas.
func (c coreController) ElectLeaders(ctx context.Context, topics []request.TopicPartitions) ([]request.PartitionResult, error) {
	in := &quirev1.ElectLeadersRequest{Topics: make([]*quirev1.ElectLeadersTopic, len(topics))}
	for i, t := range topics {
		in.Topics[i] = &quirev1.ElectLeadersTopic{Topic: t.Topic, Partitions: t.Partitions}
	}
	resp, err := c.b.cluster.fwd.ElectLeaders(ctx, in)
	if err != nil {
		return nil, err
	}
	out := make([]request.PartitionResult, len(resp.Partitions))
	for i, r := range resp.Partitions {
		out[i] = request.PartitionResult{Topic: r.Topic, Partition: r.Partition, Err: wireError(r.Error)}
	}
	return out, nil
}

func (c coreController) LiveBrokers() int { return liveBrokers(c.b.cluster.image()) }

func (c coreController) PlanTopic(spec metadata.TopicSpec) error {
	_, err := metadata.PlanTopic(c.b.cluster.image(), spec)
	return err
}

func (c coreController) PlanPartitions(topic string, total int32) error {
	_, _, err := metadata.PlanPartitions(c.b.cluster.image(), topic, total)
	return err
}

func (c coreController) CreateTopic(ctx context.Context, spec metadata.TopicSpec) (metadata.TopicInfo, uint64, error) {
	b := c.b
	info, err := b.cluster.fwd.CreateTopic(ctx, spec)
	if err != nil {
		return metadata.TopicInfo{}, 0, err
	}
	b.logger.Info("created topic", "topic", spec.Name, "partitions", spec.Partitions, "replication_factor", spec.ReplicationFactor)
	img, err := b.cluster.waitFor(ctx, func(img *metadata.Image) bool {
		t, ok := img.Topic(spec.Name)
		return ok && t.ID == info.ID
	})
	if err != nil {
		return metadata.TopicInfo{}, 0, fmt.Errorf("waiting for the metadata: %w", err)
	}
	t, _ := img.Topic(spec.Name)
	return t, img.Index(), nil
}

func (c coreController) DeleteTopic(ctx context.Context, name, id string) (uint64, error) {
	b := c.b
	if err := b.cluster.fwd.DeleteTopic(ctx, name, id); err != nil {
		return 0, err
	}
	b.logger.Info("deleted topic", "topic", name, "topic_id", id)
	img, err := b.cluster.waitFor(ctx, func(img *metadata.Image) bool {
		t, ok := img.Topic(name)
		return !ok || (id != "" && t.ID != id)
	})
	if err != nil {
		return 0, fmt.Errorf("waiting for the metadata: %w", err)
	}
	return img.Index(), nil
}

func (c coreController) CreatePartitions(ctx context.Context, topic string, total int32) (metadata.TopicInfo, uint64, error) {
	b := c.b
	if err := b.cluster.fwd.CreatePartitions(ctx, topic, total); err != nil {
		return metadata.TopicInfo{}, 0, err
	}
	b.logger.Info("created partitions", "topic", topic, "total", total)
	img, err := b.cluster.waitFor(ctx, func(img *metadata.Image) bool {
		t, ok := img.Topic(topic)
		return !ok || len(t.Partitions) >= int(total)
	})
	if err != nil {
		return metadata.TopicInfo{}, 0, fmt.Errorf("waiting for the metadata: %w", err)
	}
	t, ok := img.Topic(topic)
	if !ok {
		return metadata.TopicInfo{}, 0, unknownTopic(topic)
	}
	return t, img.Index(), nil
}

func (c coreController) AlterConfigs(ctx context.Context, topic string, set map[string]string, del []string) error {
	b := c.b
	if err := b.cluster.fwd.AlterConfigs(ctx, topic, set, del); err != nil {
		return err
	}
	b.logger.Info("altered topic configs", "topic", topic, "set", set, "delete", del)
	_, err := b.cluster.waitFor(ctx, func(img *metadata.Image) bool {
		t, ok := img.Topic(topic)
		if !ok {
			return true
		}
		for k, v := range set {
			if t.Configs[k] != v {
				return false
			}
		}
		for _, k := range del {
			if _, ok := t.Configs[k]; ok {
				return false
			}
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("waiting for the metadata: %w", err)
	}
	return nil
}

func (c coreController) UnregisterBroker(ctx context.Context, id int32) error {
	b := c.b
	if err := b.cluster.fwd.UnregisterBroker(ctx, id); err != nil {
		return err
	}
	b.logger.Info("unregistered broker", "broker", id)
	if _, err := b.cluster.waitFor(ctx, func(img *metadata.Image) bool { _, ok := img.Broker(id); return !ok }); err != nil {
		return fmt.Errorf("waiting for the metadata: %w", err)
	}
	return nil
}

// coreController is request.ClusterDescriber too, over the node's view
// of the quorum and its metadata image.

func (c coreController) ClusterID() string              { return c.b.cluster.clusterID() }
func (c coreController) ControllerID() int32            { return c.b.cluster.controllerID() }
func (c coreController) IsController(id int32) bool     { return c.b.cluster.isVoter(id) }
func (c coreController) Brokers() []metadata.BrokerInfo { return c.b.cluster.image().Brokers() }
func (c coreController) HostedReplicas() map[int32]int  { return c.b.cluster.image().HostedReplicas() }
func (c coreController) MetadataIndex() uint64          { return c.b.cluster.image().Index() }
func (c coreController) WaitForIndex(ctx context.Context, want uint64) error {
	_, err := c.b.cluster.waitFor(ctx, func(img *metadata.Image) bool { return img.Index() >= want })
	return err
}

// unknownTopic is the error for a topic the metadata does not have:
// UNKNOWN_TOPIC_OR_PARTITION, retriable (it may be being created), unless
// the name is one no topic can have, which is INVALID_TOPIC_EXCEPTION and
// not retriable.
func unknownTopic(topic string) error {
	if err := request.ValidateTopicName(topic); err != nil {
		return err
	}
	return fmt.Errorf("%w: topic %q does not exist", replica.ErrUnknownTopicOrPartition, topic)
}
