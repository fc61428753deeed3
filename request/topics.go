package request

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/quirelog/quire/auth"
	"github.com/quirelog/quire/metadata"
)

// Topic and config administration: the checks a topic write must pass
// (a name Kafka allows, counts in range, known configs, the controller's
// own placement checks made on this broker's image so that a
// validate-only request answers what the real one would), authorized
// once here, then written by the controller through Controller.

// Errors of topic and config administration.
var (
	ErrInvalidPartitions        = errors.New("broker: invalid partitions")
	ErrInvalidReplicationFactor = errors.New("broker: invalid replication factor")
	ErrInvalidConfig            = errors.New("broker: invalid config")
	// ErrBrokersNotReady: no broker is registered and unfenced yet (a
	// cluster starting); retriable, unlike a replication factor too
	// large.
	ErrBrokersNotReady = errors.New("broker: no live brokers")
	ErrPolicyViolation = errors.New("broker: policy violation")
)

// Controller is the cluster's controller as the core reaches it. Each
// write returns once this broker's metadata image includes it, with
// the image's index then, so that the caller's next request here sees
// its change.
type Controller interface {
	CreateTopic(ctx context.Context, spec metadata.TopicSpec) (metadata.TopicInfo, uint64, error)
	// DeleteTopic deletes topic name; with id, only the incarnation of
	// it with that id (the controller refuses another as unknown).
	DeleteTopic(ctx context.Context, name, id string) (uint64, error)
	// CreatePartitions returns the topic with its new partitions.
	CreatePartitions(ctx context.Context, topic string, total int32) (metadata.TopicInfo, uint64, error)
	AlterConfigs(ctx context.Context, topic string, set map[string]string, del []string) error
	// UnregisterBroker returns once this broker's image no longer has
	// the broker.
	UnregisterBroker(ctx context.Context, id int32) error
	// LiveBrokers counts the registered brokers not fenced.
	LiveBrokers() int
	// PlanTopic and PlanPartitions make the controller's own checks (the
	// per-request cap, each chosen broker's budget) on this broker's
	// image; the controller checks again when it writes.
	PlanTopic(spec metadata.TopicSpec) error
	PlanPartitions(topic string, total int32) error
	// ElectLeaders has the controller move the leadership of the
	// partitions named to their preferred replicas, each partition's
	// refusal in its result (ElectLeaders).
	ElectLeaders(ctx context.Context, topics []TopicPartitions) ([]PartitionResult, error)
}

// AdminConfig is what topic and config administration needs; a Core
// whose Controller is nil refuses those operations.
type AdminConfig struct {
	Controller Controller
	// NumPartitions and ReplicationFactor are a new topic's defaults
	// (num.partitions, default.replication.factor).
	NumPartitions     int32
	ReplicationFactor int16
	// DeleteTopicEnable is delete.topic.enable.
	DeleteTopicEnable bool
	// ValidateConfigs checks topic config keys and values a user gives,
	// with errors wrapping ErrInvalidConfig.
	ValidateConfigs func(configs map[string]string) error
	// ValidateConfigKey checks that a key to delete is a topic key.
	ValidateConfigKey func(key string) error
	// TopicConfigs is every topic key of a topic with those overrides:
	// value, source, synonyms and documentation.
	TopicConfigs func(overrides map[string]string) []ConfigEntry
	// BrokerConfigs is every key of this node's configuration.
	BrokerConfigs func() []ConfigEntry
	// Describer answers DescribeCluster; nil: it is refused.
	Describer ClusterDescriber
	// Reassigner reassigns partitions and cordons brokers; nil: refused.
	Reassigner Reassigner
}

// CreateTopicRequest creates one topic.
type CreateTopicRequest struct {
	Name string
	// Partitions and ReplicationFactor: nil for the broker's default.
	Partitions        *int32
	ReplicationFactor *int32
	Configs           map[string]string
	// RequestID, when given, is the client's idempotency key
	// (ValidateCreateRequestID): the controller keeps it with the topic
	// it creates (from metadata.version 18), and a topic of this name
	// created with it is the one an earlier attempt created, answered as
	// created. It is never the topic's id, which the node picks.
	RequestID string
	// ValidateOnly makes every check and creates nothing.
	ValidateOnly bool
}

// CreateTopicResult is the topic as created (as it would be, for a
// validate-only request: its name and configs only) and the metadata
// index that has it (0 for a validate-only request).
type CreateTopicResult struct {
	Topic         TopicDescription
	MetadataIndex uint64
}

func (c *Core) controller() (Controller, error) {
	if c.cfg.Admin.Controller == nil {
		return nil, c.fail(fmt.Errorf("%w: this node does not serve topic administration", ErrPolicyViolation))
	}
	return c.cfg.Admin.Controller, nil
}

// authorize refuses the operation unless the principal of ctx may do op
// on the resource, or, with orCluster, op on the cluster (Kafka's rule
// for creating topics).
func (c *Core) authorize(ctx context.Context, op auth.Operation, rt auth.ResourceType, name string, orCluster bool) error {
	z := c.cfg.Authorizer
	if z == nil {
		return nil
	}
	r := auth.Request{Principal: Principal(ctx), Operation: op, ResourceType: rt, ResourceName: name}
	if z.Authorize(r) {
		return nil
	}
	if orCluster && z.Authorize(auth.Request{Principal: r.Principal, Operation: op, ResourceType: auth.ResourceCluster, ResourceName: auth.ClusterName}) {
		return nil
	}
	return c.fail(Refusal(r))
}

// CreateTopic creates a topic; it needs Create on the topic or on the
// cluster.
func (c *Core) CreateTopic(ctx context.Context, req *CreateTopicRequest) (*CreateTopicResult, error) {
	if err := c.authorize(ctx, auth.OpCreate, auth.ResourceTopic, req.Name, true); err != nil {
		return nil, err
	}
	ctl, err := c.controller()
	if err != nil {
		return nil, err
	}
	if err := ValidateTopicName(req.Name); err != nil {
		return nil, c.fail(err)
	}
	if req.RequestID != "" {
		if err := ValidateCreateRequestID(req.RequestID); err != nil {
			return nil, c.fail(fmt.Errorf("topic %q: %w", req.Name, err))
		}
	}
	a := c.cfg.Admin
	partitions := a.NumPartitions
	if req.Partitions != nil {
		if *req.Partitions <= 0 {
			return nil, c.fail(fmt.Errorf("%w: topic %q: partitions must be positive, got %d", ErrInvalidPartitions, req.Name, *req.Partitions))
		}
		partitions = *req.Partitions
	}
	rf := int32(a.ReplicationFactor)
	if req.ReplicationFactor != nil {
		if n := *req.ReplicationFactor; n <= 0 || n > math.MaxInt16 {
			return nil, c.fail(fmt.Errorf("%w: topic %q: replication factor must be between 1 and %d, got %d",
				ErrInvalidReplicationFactor, req.Name, math.MaxInt16, n))
		}
		rf = *req.ReplicationFactor
	}
	if a.ValidateConfigs != nil {
		if err := a.ValidateConfigs(req.Configs); err != nil {
			return nil, c.fail(fmt.Errorf("topic %q: %w", req.Name, err))
		}
	}
	if t, ok := c.cfg.Cluster.Topic(req.Name); ok {
		if !t.CreatedBy(req.RequestID) {
			return nil, c.fail(fmt.Errorf("%w: topic %q", metadata.ErrTopicExists, req.Name))
		}
		// A retry of a create that committed: the live brokers and
		// their budgets may have changed since, but the topic is
		// there, in this node's image, which answers it.
		out := &CreateTopicResult{Topic: c.Describe(ctx, []metadata.TopicInfo{t})[0]}
		if d := a.Describer; d != nil && !req.ValidateOnly {
			out.MetadataIndex = d.MetadataIndex()
		}
		return out, nil
	}
	if live := ctl.LiveBrokers(); live == 0 {
		return nil, c.fail(fmt.Errorf("%w: topic %q: no live brokers yet; the cluster is starting", ErrBrokersNotReady, req.Name))
	} else if int(rf) > live {
		return nil, c.fail(fmt.Errorf("%w: topic %q: replication factor %d is larger than the %d live broker(s)",
			ErrInvalidReplicationFactor, req.Name, rf, live))
	}
	spec := metadata.TopicSpec{Name: req.Name, Partitions: partitions, ReplicationFactor: int16(rf), Configs: req.Configs, RequestID: req.RequestID}
	if err := ctl.PlanTopic(spec); err != nil {
		return nil, c.fail(err)
	}
	if req.ValidateOnly {
		return &CreateTopicResult{Topic: TopicDescription{Name: req.Name, Configs: req.Configs}}, nil
	}
	t, index, err := ctl.CreateTopic(ctx, spec)
	if err != nil {
		return nil, c.fail(fmt.Errorf("create topic %q: %w", req.Name, err))
	}
	return &CreateTopicResult{Topic: c.Describe(ctx, []metadata.TopicInfo{t})[0], MetadataIndex: index}, nil
}

// DeleteTopic deletes a topic and returns the metadata index without
// it; it needs Delete on the topic.
func (c *Core) DeleteTopic(ctx context.Context, name string) (uint64, error) {
	return c.DeleteTopicIncarnation(ctx, name, "")
}

// DeleteTopicIncarnation deletes topic name as DeleteTopic does, but
// with a topic id only the incarnation with that id, as Kafka's
// DeleteTopics by id does: the id goes to the controller, so a topic
// deleted and created again since the caller looked the id up is left
// alone, and answered unknown.
func (c *Core) DeleteTopicIncarnation(ctx context.Context, name, id string) (uint64, error) {
	if err := c.authorize(ctx, auth.OpDelete, auth.ResourceTopic, name, false); err != nil {
		return 0, err
	}
	ctl, err := c.controller()
	if err != nil {
		return 0, err
	}
	if err := ValidateTopicName(name); err != nil {
		return 0, c.fail(err)
	}
	if !c.cfg.Admin.DeleteTopicEnable {
		return 0, c.fail(fmt.Errorf("%w: topic deletion is disabled (delete.topic.enable=false)", ErrPolicyViolation))
	}
	if _, ok := c.cfg.Cluster.Topic(name); !ok {
		return 0, c.fail(unknownTopic(name))
	}
	index, err := ctl.DeleteTopic(ctx, name, id)
	if err != nil {
		return 0, c.fail(fmt.Errorf("delete topic %q: %w", name, err))
	}
	return index, nil
}

// CreatePartitionsRequest grows a topic to TotalCount partitions.
type CreatePartitionsRequest struct {
	Topic        string
	TotalCount   int32
	ValidateOnly bool
}

// CreatePartitionsResult is the topic with its partitions (as they are,
// for a validate-only request) and the metadata index that has them.
type CreatePartitionsResult struct {
	Topic         TopicDescription
	MetadataIndex uint64
}

// CreatePartitions adds partitions to a topic; it needs Alter on the
// topic.
func (c *Core) CreatePartitions(ctx context.Context, req *CreatePartitionsRequest) (*CreatePartitionsResult, error) {
	if err := c.authorize(ctx, auth.OpAlter, auth.ResourceTopic, req.Topic, false); err != nil {
		return nil, err
	}
	ctl, err := c.controller()
	if err != nil {
		return nil, err
	}
	t, ok := c.cfg.Cluster.Topic(req.Topic)
	if !ok {
		return nil, c.fail(unknownTopic(req.Topic))
	}
	if int(req.TotalCount) <= len(t.Partitions) {
		return nil, c.fail(fmt.Errorf("%w: topic %q has %d partitions; the new total %d must be larger",
			ErrInvalidPartitions, req.Topic, len(t.Partitions), req.TotalCount))
	}
	if err := ctl.PlanPartitions(req.Topic, req.TotalCount); err != nil {
		return nil, c.fail(err)
	}
	if req.ValidateOnly {
		return &CreatePartitionsResult{Topic: c.Describe(ctx, []metadata.TopicInfo{t})[0]}, nil
	}
	t, index, err := ctl.CreatePartitions(ctx, req.Topic, req.TotalCount)
	if err != nil {
		return nil, c.fail(fmt.Errorf("create partitions of topic %q: %w", req.Topic, err))
	}
	return &CreatePartitionsResult{Topic: c.Describe(ctx, []metadata.TopicInfo{t})[0], MetadataIndex: index}, nil
}
