package request

import (
	"context"
	"errors"
	"time"

	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/partitioner"
	"github.com/quirelog/quire/replica"
	"github.com/quirelog/quire/sharegroup"
)

// Replicas is the replica manager's side: the replicas this broker hosts.
type Replicas interface {
	Partition(topic string, p int32) (*replica.Partition, bool)
	// Stats is a snapshot of every hosted replica (DescribeLogDirs).
	Stats() replica.Stats
}

// Cluster is what the core needs of the cluster beyond the replicas: the
// metadata image's topics and this broker's session with the controller.
type Cluster interface {
	// Topic is a topic as this broker's metadata image has it, Topics
	// every topic, Broker a broker's registration.
	Topic(name string) (metadata.TopicInfo, bool)
	Topics() []metadata.TopicInfo
	Broker(id int32) (metadata.BrokerInfo, bool)
	// SessionLost reports whether this broker has not reached the
	// controller for broker.session.timeout.ms: another broker leads its
	// partitions by now, or is about to.
	SessionLost() bool
	// SessionDeadline is when the session runs out unless renewed; false
	// when there is no session to lose (a node of its own).
	SessionDeadline() (time.Time, bool)
}

// TopicCreator creates a topic with the broker's defaults (or finds it
// created by someone else) and returns it once this broker's view has it.
type TopicCreator interface {
	AutoCreateTopic(ctx context.Context, topic string) (metadata.TopicInfo, error)
}

// DeadLetterCreator creates a dead-letter topic with the broker's
// defaults and the topic configs given (or finds it created by someone
// else) and returns it once this broker's view has it. It logs a
// failure.
type DeadLetterCreator interface {
	CreateDeadLetterTopic(ctx context.Context, topic string, configs map[string]string) (metadata.TopicInfo, error)
}

// Forwarder carries the partitions of a request led by another broker to
// that broker, one call per leader with all of its partitions. An error
// wrapping ErrLeaderUnreachable means nothing was sent; any other error
// means the call failed once sent. A leader answers each partition as the
// core would (its errors as *Error with the leader's code).
type Forwarder interface {
	Produce(ctx context.Context, leader int32, req *ProduceRequest) ([]ProduceResult, error)
	// Fetch has the leader read the partitions of req (not passed on
	// again), long-polled as req says.
	Fetch(ctx context.Context, leader int32, req *FetchRequest) ([]FetchResult, error)
	DeleteRecords(ctx context.Context, leader int32, timeout time.Duration, parts []DeleteRecordsPartition) ([]DeleteRecordsResult, error)
	// WriteTxnMarkers has the leader append markers to the partitions it
	// leads (not passed on again): per marker, per partition, nil or an
	// *Error.
	WriteTxnMarkers(ctx context.Context, leader int32, markers []TxnMarker) ([][]error, error)
}

// Observer times requests on their way in (the produce and fetch queue
// times); the zero time is a request not timed.
type Observer interface {
	ObserveProduce(received, started time.Time)
	ObserveFetch(received time.Time)
}

// Config is what New needs.
type Config struct {
	NodeID   int32
	Replicas Replicas
	Cluster  Cluster
	// Creator auto-creates topics a produce names; nil: auto-creation off.
	Creator TopicCreator
	// Forwarder passes on what other brokers lead; nil: such partitions
	// are answered NOT_LEADER_OR_FOLLOWER.
	Forwarder Forwarder
	// ProducerIDs hands out blocks of producer ids (InitProducerID);
	// nil: none are handed out.
	ProducerIDs ProducerIDBlocks
	// Logs asks other brokers to describe their logs (DescribeTopics);
	// nil: their partitions show -1.
	Logs LogDescriber
	// Partitioner places ProduceRecords' records that name neither a
	// partition nor a key; nil: a sticky partitioner of the core's own.
	Partitioner Partitioner
	// MaxMessageBytes is the largest batch a topic takes (its
	// max.message.bytes); nil: Kafka's default for every topic.
	MaxMessageBytes func(t metadata.TopicInfo) int
	// Now is the broker's clock (record timestamps left 0); nil: the
	// wall clock.
	Now func() time.Time
	// Authorizer decides every operation; nil: authorization off.
	Authorizer Authorizer
	// Codes is the one table of error codes.
	Codes Codes
	// Checkpoint writes this node's log start offsets durably (after
	// DeleteRecords); nil: nothing to do.
	Checkpoint func() error
	Observer   Observer
	// LogDir is this node's log directory (log.dirs), which
	// DescribeLogDirs describes; "": it is refused.
	LogDir string

	// Groups and security administration (groups.go, group_reset.go,
	// security.go).

	// Groups is the group coordinator; nil: the group calls are refused.
	Groups GroupCoordinator
	// Shares is the share coordinator of this node's share groups
	// (share.go); nil: the share-group calls are refused.
	Shares *sharegroup.Coordinator
	// ShareCluster reaches the other nodes for the share groups: whether
	// a member heartbeats elsewhere, who left, and the share fetches and
	// acknowledgements of partitions led elsewhere (share_members.go);
	// nil: a member must heartbeat to this node.
	ShareCluster ShareCluster
	// ShareStore keeps share groups' settings and saved state in the
	// metadata log (share_config.go); nil: group settings are refused.
	ShareStore ShareGroupStore
	// DeadLetterTopicPrefix is what a share group's dead-letter topic's
	// name must start with (errors.deadletterqueue.topic.name.prefix,
	// KIP-1191's; "": any name).
	DeadLetterTopicPrefix string
	// DeadLetterCreator creates a share group's dead-letter topic that
	// does not exist (errors.deadletterqueue.auto.create.topics.enable);
	// nil: one that does not exist keeps the dead letters pending.
	DeadLetterCreator DeadLetterCreator
	// OffsetLister asks a partition's leader elsewhere for an offset (an
	// offset reset's targets); nil: only partitions led here are reset.
	OffsetLister OffsetLister
	// Security stores users and ACLs; nil: security administration is
	// refused.
	Security SecurityStore
	// Topic and config administration (topics.go, configs.go).
	Admin AdminConfig
	// Transactions is the transaction coordinator (transactions.go);
	// nil: the transactional calls are refused.
	Transactions Transactions
}

// Core serves the operations; it is safe for concurrent use.
type Core struct {
	cfg   Config
	codes Codes
	pids  producerIDs // producer_ids.go
	// shareStats counts the share operations (share_stats.go).
	shareStats shareStats
}

// New returns a core over cfg.
func New(cfg Config) (*Core, error) {
	if cfg.Replicas == nil || cfg.Cluster == nil || cfg.Codes == nil {
		return nil, errors.New("request: Config needs Replicas, Cluster and Codes")
	}
	if cfg.Observer == nil {
		cfg.Observer = noObserver{}
	}
	if cfg.Partitioner == nil {
		cfg.Partitioner = partitioner.NewSticky(0)
	}
	if cfg.MaxMessageBytes == nil {
		cfg.MaxMessageBytes = defaultMaxMessageBytes
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Core{cfg: cfg, codes: cfg.Codes}, nil
}

type noObserver struct{}

func (noObserver) ObserveProduce(time.Time, time.Time) {}
func (noObserver) ObserveFetch(time.Time)              {}
