package request

import (
	"context"
	"fmt"
	"strconv"

	"github.com/quirelog/quire/auth"
	"github.com/quirelog/quire/replica"
)

// ConfigSource is where a key's value comes from.
type ConfigSource int8

const (
	// SourceDefault: the key's default.
	SourceDefault ConfigSource = iota
	// SourceBroker: the node's configuration (a broker key the topic
	// key defaults to).
	SourceBroker
	// SourceTopic: the topic's own value.
	SourceTopic
	// SourceGroup: the share group's own value (Kafka's GROUP_CONFIG).
	SourceGroup
)

// ConfigEntry is one key of a topic's or a broker's configuration.
type ConfigEntry struct {
	Name, Value   string
	Source        ConfigSource
	Documentation string
	// ReadOnly: the key cannot be changed while the node runs (every
	// broker key: read from the node's file when it starts).
	ReadOnly bool
	// Synonyms are where the value could come from, the one in effect
	// first (Kafka's KIP-226).
	Synonyms []ConfigSynonym
}

// ConfigSynonym is one source of a key's value.
type ConfigSynonym struct {
	Name, Value string
	Source      ConfigSource
}

// DescribeBrokerConfigs is the configuration of the broker named by its
// id, "" for the cluster-wide defaults (there are none that are not a
// node's own: every key is static); a broker other than this one is
// refused, as a client asks each broker for its own. It needs
// DescribeConfigs on the cluster, as Kafka's does.
func (c *Core) DescribeBrokerConfigs(ctx context.Context, broker string) ([]ConfigEntry, error) {
	if err := c.authorize(ctx, auth.OpDescribeConfigs, auth.ResourceCluster, auth.ClusterName, false); err != nil {
		return nil, err
	}
	if broker == "" {
		return nil, nil
	}
	id, err := strconv.ParseInt(broker, 10, 32)
	if err != nil {
		return nil, c.fail(fmt.Errorf("%w: broker resource %q: want a broker id", replica.ErrInvalidRequest, broker))
	}
	if int32(id) != c.cfg.NodeID {
		return nil, c.fail(fmt.Errorf("%w: broker resource %d: this is broker %d; ask broker %d for its configuration",
			replica.ErrInvalidRequest, id, c.cfg.NodeID, id))
	}
	if c.cfg.Admin.BrokerConfigs == nil {
		return nil, nil
	}
	return c.cfg.Admin.BrokerConfigs(), nil
}

// DescribeConfigs is every key of a topic with its value and source; it
// needs DescribeConfigs on the topic.
func (c *Core) DescribeConfigs(ctx context.Context, topic string) ([]ConfigEntry, error) {
	if err := c.authorize(ctx, auth.OpDescribeConfigs, auth.ResourceTopic, topic, false); err != nil {
		return nil, err
	}
	if err := ValidateTopicName(topic); err != nil {
		return nil, c.fail(err)
	}
	t, ok := c.cfg.Cluster.Topic(topic)
	if !ok {
		return nil, c.fail(unknownTopic(topic))
	}
	if c.cfg.Admin.TopicConfigs == nil {
		return nil, nil
	}
	return c.cfg.Admin.TopicConfigs(t.Configs), nil
}

// AlterConfigsRequest sets and deletes keys of a topic's configuration;
// the keys not named keep their values.
type AlterConfigsRequest struct {
	Topic        string
	Set          map[string]string
	Delete       []string
	ValidateOnly bool
}

// AlterConfigs changes a topic's configuration; it needs AlterConfigs on
// the topic.
func (c *Core) AlterConfigs(ctx context.Context, req *AlterConfigsRequest) error {
	if err := c.authorize(ctx, auth.OpAlterConfigs, auth.ResourceTopic, req.Topic, false); err != nil {
		return err
	}
	ctl, err := c.controller()
	if err != nil {
		return err
	}
	if _, ok := c.cfg.Cluster.Topic(req.Topic); !ok {
		return c.fail(unknownTopic(req.Topic))
	}
	if len(req.Set) == 0 && len(req.Delete) == 0 {
		return c.fail(fmt.Errorf("%w: nothing to set or delete", replica.ErrInvalidRequest))
	}
	a := c.cfg.Admin
	if a.ValidateConfigs != nil {
		if err := a.ValidateConfigs(req.Set); err != nil {
			return c.fail(fmt.Errorf("topic %q: %w", req.Topic, err))
		}
	}
	for _, k := range req.Delete {
		if a.ValidateConfigKey != nil {
			if err := a.ValidateConfigKey(k); err != nil {
				return c.fail(fmt.Errorf("topic %q: %w", req.Topic, err))
			}
		}
		if _, ok := req.Set[k]; ok {
			return c.fail(fmt.Errorf("topic %q: %w: %q is both set and deleted", req.Topic, ErrInvalidConfig, k))
		}
	}
	if req.ValidateOnly {
		return nil
	}
	if err := ctl.AlterConfigs(ctx, req.Topic, req.Set, req.Delete); err != nil {
		return c.fail(fmt.Errorf("alter configs of topic %q: %w", req.Topic, err))
	}
	return nil
}
