package request

import (
	"context"
	"fmt"

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
)

// ConfigEntry is one key of a topic's configuration.
type ConfigEntry struct {
	Name, Value   string
	Source        ConfigSource
	Documentation string
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
