package config

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"gopkg.in/yaml.v3"

	"github.com/quirelog/quire/group"
	"github.com/quirelog/quire/internal/clock"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/replica"
	"github.com/quirelog/quire/request"
	"github.com/quirelog/quire/share"
	"github.com/quirelog/quire/sharegroup"
	"github.com/quirelog/quire/storage"
)

// Config is everything a node needs. Every field but Logger has a Kafka-style
// key (see configKeys); the key table is the single source of defaults,
// documentation, `quire server --help` and docs/configuration.md.
type Config struct {
	// Identity and roles.
	NodeID       int32    // node.id
	ClusterID    string   // cluster.id
	ProcessRoles []string // process.roles: "broker", "controller"
	Rack         string   // broker.rack

	// Network.
	// ListenAddr is listeners: the host:port the gRPC server binds, or a
	// list of named listeners "NAME://host:port,..." (listeners.go).
	ListenAddr string
	// AdvertisedAddr is advertised.listeners: the host:port others dial,
	// or per listener "NAME://host:port,..."; a listener left out
	// advertises its bound address.
	AdvertisedAddr string
	// InterBrokerListenerName is inter.broker.listener.name: the listener
	// other nodes dial; "" = the first of listeners.
	InterBrokerListenerName string
	// KafkaListenerNames is kafka.listener.names: the listeners that
	// speak Kafka's wire protocol instead of gRPC (kafka.go), comma-
	// separated; "" = none.
	KafkaListenerNames string
	// KafkaMaxConnections is max.connections: connections open at once
	// on each Kafka listener; 0 = no cap.
	KafkaMaxConnections int32
	// KafkaMaxConnectionsPerIP is max.connections.per.ip: connections
	// open at once from one client address over the Kafka listeners.
	KafkaMaxConnectionsPerIP int32
	// ControllerQuorumVoters is controller.quorum.voters, "id@host:port,...";
	// empty on a single node means this node alone.
	ControllerQuorumVoters string

	// Storage.
	DataDir        string // log.dirs
	MetadataLogDir string // metadata.log.dir; "" = <log.dirs>/__quire_metadata

	// Topic defaults (topic keys without the "log." prefix override them).
	NumPartitions                int32   // num.partitions
	DefaultReplicationFactor     int16   // default.replication.factor
	AutoCreateTopicsEnable       bool    // auto.create.topics.enable
	DeleteTopicEnable            bool    // delete.topic.enable
	MaxPartitionsPerBroker       int32   // max.partitions.per.broker; 0 = derived at start (capacity.go)
	MessageMaxBytes              int32   // message.max.bytes
	MinInsyncReplicas            int32   // min.insync.replicas
	LogRetentionHours            int64   // log.retention.hours
	LogRetentionMinutes          int64   // log.retention.minutes; 0 = use hours
	LogRetentionMs               int64   // log.retention.ms; 0 = use minutes or hours, -1 = keep forever
	LogRetentionBytes            int64   // log.retention.bytes; -1 = no size limit
	LogSegmentBytes              int64   // log.segment.bytes
	LogRollHours                 int64   // log.roll.hours
	LogRollMs                    int64   // log.roll.ms; 0 = use hours
	LogIndexIntervalBytes        int32   // log.index.interval.bytes
	LogIndexSizeMaxBytes         int32   // log.index.size.max.bytes
	LogFlushIntervalMessages     int64   // log.flush.interval.messages
	LogFlushIntervalMs           int64   // log.flush.interval.ms
	LogCleanupPolicy             string  // log.cleanup.policy: compact, delete or both
	LogCleanerMinCleanableRatio  float64 // log.cleaner.min.cleanable.ratio
	LogCleanerMinCompactionLagMs int64   // log.cleaner.min.compaction.lag.ms
	LogCleanerMaxCompactionLagMs int64   // log.cleaner.max.compaction.lag.ms
	LogCleanerDeleteRetentionMs  int64   // log.cleaner.delete.retention.ms
	LogCleanerEnable             bool    // log.cleaner.enable
	LogCleanerThreads            int32   // log.cleaner.threads
	LogCleanerDedupeBufferSize   int64   // log.cleaner.dedupe.buffer.size
	LogCleanerIOMaxBytesPerSec   float64 // log.cleaner.io.max.bytes.per.second
	LogCleanerBackoffMs          int64   // log.cleaner.backoff.ms
	LogPreallocate               bool    // log.preallocate
	LogOpenFilesMax              int32   // log.open.files.max; 0 = half the open-file limit
	RecoveryThreadsPerDataDir    int32   // num.recovery.threads.per.data.dir
	LogRetentionCheckIntervalMs  int64   // log.retention.check.interval.ms

	// Background work.
	LogFlushSchedulerIntervalMs        int64 // log.flush.scheduler.interval.ms
	LogFlushOffsetCheckpointIntervalMs int64 // log.flush.offset.checkpoint.interval.ms

	// Cluster membership.
	BrokerHeartbeatIntervalMs int64 // broker.heartbeat.interval.ms
	BrokerSessionTimeoutMs    int64 // broker.session.timeout.ms

	// Replication.
	ReplicaLagTimeMaxMs int64 // replica.lag.time.max.ms
	// ReplicaReassignmentThrottle is replica.reassignment.throttle.bytes.per.second
	// (0: unthrottled); a value set at run time in the metadata log wins.
	ReplicaReassignmentThrottle  int64
	ReplicaFetchWaitMaxMs        int32 // replica.fetch.wait.max.ms
	ReplicaFetchMinBytes         int32 // replica.fetch.min.bytes
	ReplicaFetchMaxBytes         int32 // replica.fetch.max.bytes
	ReplicaFetchResponseMaxBytes int32 // replica.fetch.response.max.bytes
	ReplicaFetchBackoffMs        int32 // replica.fetch.backoff.ms

	// Leadership.
	UncleanLeaderElectionEnable      bool  // unclean.leader.election.enable
	AutoLeaderRebalanceEnable        bool  // auto.leader.rebalance.enable
	LeaderImbalanceCheckIntervalSecs int64 // leader.imbalance.check.interval.seconds
	BalancerEnable                   bool  // balancer.enable
	BalancerIntervalSecs             int64 // balancer.interval.seconds
	BalancerMaxPartitionMoves        int32 // balancer.max.partition.moves

	// Consumer groups (the coordinator runs on the controller).
	GroupConsumerSessionTimeoutMs    int64  // group.consumer.session.timeout.ms
	GroupConsumerHeartbeatIntervalMs int64  // group.consumer.heartbeat.interval.ms
	GroupConsumerAssignors           string // group.consumer.assignors, comma-separated
	GroupMaxSize                     int32  // group.max.size
	GroupMinSessionTimeoutMs         int64  // group.min.session.timeout.ms
	GroupMaxSessionTimeoutMs         int64  // group.max.session.timeout.ms
	GroupLagRefreshMs                int64  // group.lag.refresh.ms
	OffsetsRetentionMinutes          int64  // offsets.retention.minutes

	// Transactions (the coordinator runs on the controller).
	TransactionMaxTimeoutMs         int32 // transaction.max.timeout.ms
	TransactionAbortCheckIntervalMs int64 // transaction.abort.timed.out.transaction.cleanup.interval.ms
	TransactionalIDExpirationMs     int64 // transactional.id.expiration.ms
	// Share groups (KIP-932 queues; the share coordinator runs in memory
	// on each node, sharegroup/).
	GroupShareEnable                  bool   // group.share.enable
	GroupShareSessionTimeoutMs        int64  // group.share.session.timeout.ms
	GroupShareHeartbeatIntervalMs     int64  // group.share.heartbeat.interval.ms
	GroupShareRecordLockDurationMs    int64  // group.share.record.lock.duration.ms
	GroupShareDeliveryCountLimit      int32  // group.share.delivery.count.limit
	GroupSharePartitionMaxRecordLocks int32  // group.share.partition.max.record.locks
	ShareKeyOrdering                  bool   // share.key.ordering
	ShareMaxInFlightPerKey            int32  // max.in.flight.per.key
	ShareAutoOffsetReset              string // share.auto.offset.reset
	DeadLetterTopicPrefix             string // errors.deadletterqueue.topic.name.prefix
	DeadLetterAutoCreate              bool   // errors.deadletterqueue.auto.create.topics.enable

	// Logging.
	LogLevel string // log.level

	// Security: TLS, principals and ACLs (security.go, auth.go).
	Security SecurityConfig

	// Monitoring (metrics.go).
	MetricsListen         string // metrics.listen; "" = no HTTP listener
	MetricsPprofEnable    bool   // metrics.pprof.enable
	MetricsRequestsEnable bool   // metrics.requests.enable

	// Logger receives every log line; nil means a new hclog logger at
	// LogLevel on stderr.
	Logger hclog.Logger

	// MetadataWriteTimeoutMs is metadata.write.timeout.ms: how long an
	// admin write (and an auto-create) may wait for the controller,
	// elections included, when the caller set no deadline. Past it the call
	// fails UNAVAILABLE instead of hanging (a majority of voters lost).
	MetadataWriteTimeoutMs int64

	// RaftHeartbeatTimeout shortens the metadata quorum's raft timeouts
	// (the election timeout is set to it, the leader lease to half of it
	// and the commit timeout to a tenth, at most the default); zero keeps
	// raft's defaults. Tests set it; it has no key.
	RaftHeartbeatTimeout time.Duration
	// RaftLeaderLeaseTimeout, with RaftHeartbeatTimeout set, is how long
	// the raft leader goes without hearing from a majority before it steps
	// down (at most RaftHeartbeatTimeout); zero: half of it. Tests on a
	// loaded machine, where a heartbeat's round trip can take a few
	// scheduler delays, raise it; it has no key.
	RaftLeaderLeaseTimeout time.Duration
	// RaftSnapshotThreshold, RaftSnapshotInterval and RaftTrailingLogs tune
	// metadata snapshots (zero: raft's defaults). Tests lower them to force
	// catch-up by snapshot; they have no key.
	RaftSnapshotThreshold uint64
	RaftSnapshotInterval  time.Duration
	RaftTrailingLogs      uint64

	// Listener, when set, is used instead of binding the inter-broker
	// listener of ListenAddr: a caller (the test cluster) pre-binds
	// 127.0.0.1:0 so every node's address is known before any starts.
	// Start takes ownership and closes it.
	Listener net.Listener
	// Dialer, when set, opens every node-to-node connection (raft
	// transport, controller forwarding); nil dials TCP. The test cluster
	// uses it to cut the network between nodes.
	Dialer func(ctx context.Context, addr string) (net.Conn, error)
	// Clock, when set, is the node's clock: the time it stamps on the
	// records it builds (ProduceRecords) and on offset commits, and judges
	// retention.ms, segment.ms, flush.ms, producer expiry and the group
	// coordinator's deadlines and offsets expiry by; nil is the system
	// clock. The fault suite's test build steps it (clock.Jumped). It has
	// no key.
	Clock clock.Clock
	// GroupClock, when set, is the group coordinator's clock (session
	// and rebalance deadlines, offsets retention) instead of Clock, for
	// tests.
	GroupClock metadata.Clock

	// MetadataVersions narrows the metadata.version levels this node
	// supports; the zero value is all this build knows. Tests set an older
	// range to stand for a node not upgraded yet; it has no key.
	MetadataVersions metadata.VersionRange

	// FS is the filesystem the data directory's logs and checkpoints live
	// on; nil is the operating system's. Tests pass a storage.ErrorFS to
	// fail a disk under a running broker. It has no key.
	FS storage.FS
}

// DefaultConfig returns Kafka's defaults, for a node that is both the only
// controller and a broker, listening on every interface at port 9092.
func DefaultConfig() Config {
	var c Config
	for _, k := range configKeys {
		if err := k.set(&c, k.def); err != nil {
			panic(fmt.Sprintf("broker: default for %s: %v", k.name, err))
		}
	}
	return c
}

// DevConfig returns a single-node configuration for development: data in
// dataDir, listening on 127.0.0.1:9092, topics created on first use.
func DevConfig(dataDir string) Config {
	c := DefaultConfig()
	c.DataDir = dataDir
	c.ListenAddr = "127.0.0.1:9092"
	c.AutoCreateTopicsEnable = true
	c.MetricsListen = "127.0.0.1:9404"
	return c
}

// Set sets one key from its string form, as in a config file, an
// environment variable or `--set key=value`.
func (c *Config) Set(key, value string) error {
	k, ok := configKeyIndex[key]
	if !ok {
		return fmt.Errorf("%w: unknown key %q%s", ErrInvalidConfig, key, unknownKeyHint(key))
	}
	if err := k.set(c, strings.TrimSpace(value)); err != nil {
		return fmt.Errorf("%w: %s=%q: %v", ErrInvalidConfig, key, value, err)
	}
	return nil
}

// Get returns the string form of one key.
func (c *Config) Get(key string) (string, bool) {
	k, ok := configKeyIndex[key]
	if !ok {
		return "", false
	}
	return k.get(c), true
}

// LoadFile applies a YAML config file: a flat map of keys to values, e.g.
//
//	num.partitions: 3
//	log.dirs: /var/lib/quire
func (c *Config) LoadFile(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("broker: read config: %w", err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInvalidConfig, path, err)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		var s string
		switch v := m[k].(type) {
		case nil:
			s = ""
		case []any:
			parts := make([]string, len(v))
			for i, p := range v {
				parts[i] = fmt.Sprint(p)
			}
			s = strings.Join(parts, ",")
		default:
			s = fmt.Sprint(v)
		}
		if err := c.Set(k, s); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	return nil
}

// EnvName is the environment variable for a key: QUIRE_ and the key
// upper-cased with dots as underscores (num.partitions → QUIRE_NUM_PARTITIONS).
func EnvName(key string) string {
	return "QUIRE_" + strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(key))
}

// LoadEnv applies every key whose environment variable lookup finds.
func (c *Config) LoadEnv(lookup func(string) (string, bool)) error {
	for _, k := range configKeys {
		if v, ok := lookup(EnvName(k.name)); ok {
			if err := c.Set(k.name, v); err != nil {
				return fmt.Errorf("%s: %w", EnvName(k.name), err)
			}
		}
	}
	return nil
}

// IsController reports whether process.roles includes controller.
func (c *Config) IsController() bool { return hasRole(c.ProcessRoles, "controller") }

func hasRole(roles []string, r string) bool {
	for _, x := range roles {
		if x == r {
			return true
		}
	}
	return false
}

// Voter is one entry of controller.quorum.voters.
type Voter struct {
	ID   int32
	Addr string
}

func ParseVoters(s string) ([]Voter, error) {
	var out []Voter
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		id, addr, ok := strings.Cut(part, "@")
		if !ok {
			return nil, fmt.Errorf("voter %q: want id@host:port", part)
		}
		n, err := strconv.ParseInt(id, 10, 32)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("voter %q: bad id", part)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("voter %q: %v", part, err)
		}
		out = append(out, Voter{ID: int32(n), Addr: addr})
	}
	return out, nil
}

// Validate checks the configuration as a whole.
func (c *Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %s: %s", ErrInvalidConfig, key, fmt.Sprintf(format, args...)))
	}
	// Every key's value must be one its own parser accepts (ranges,
	// enumerations): a Config built in Go, not parsed, is checked the
	// same way.
	probe := *c
	for _, k := range configKeys {
		if err := k.set(&probe, k.get(c)); err != nil {
			bad(k.name, "%v", err)
		}
	}
	if c.DataDir == "" {
		bad("log.dirs", "must be set")
	}
	if _, err := c.ListenerPlan(); err != nil {
		errs = append(errs, err)
	}
	if len(c.ProcessRoles) == 0 {
		bad("process.roles", "must name broker and/or controller")
	}
	for _, r := range c.ProcessRoles {
		if r != "broker" && r != "controller" {
			bad("process.roles", "unknown role %q", r)
		}
	}
	if !hasRole(c.ProcessRoles, "broker") {
		bad("process.roles", "a node without the broker role is not supported yet")
	}
	voters, err := ParseVoters(c.ControllerQuorumVoters)
	if err != nil {
		bad("controller.quorum.voters", "%v", err)
	}
	if len(voters) == 0 && !c.IsController() {
		bad("controller.quorum.voters", "must be set when this node is not a controller")
	}
	if c.IsController() && len(voters) > 0 {
		found := false
		for _, v := range voters {
			found = found || v.ID == c.NodeID
		}
		if !found {
			bad("controller.quorum.voters", "node.id %d has the controller role but is not a voter", c.NodeID)
		}
	}
	if int64(c.ReplicaFetchWaitMaxMs) >= c.ReplicaLagTimeMaxMs {
		bad("replica.fetch.wait.max.ms", "%d must be below replica.lag.time.max.ms (%d): a follower waiting at the leader would count as lagging",
			c.ReplicaFetchWaitMaxMs, c.ReplicaLagTimeMaxMs)
	}
	if c.BrokerSessionTimeoutMs <= c.BrokerHeartbeatIntervalMs {
		bad("broker.session.timeout.ms", "must exceed broker.heartbeat.interval.ms")
	}
	if c.GroupMinSessionTimeoutMs > c.GroupMaxSessionTimeoutMs {
		bad("group.min.session.timeout.ms", "%d must not be above group.max.session.timeout.ms (%d)", c.GroupMinSessionTimeoutMs, c.GroupMaxSessionTimeoutMs)
	}
	if c.GroupConsumerHeartbeatIntervalMs >= c.GroupConsumerSessionTimeoutMs {
		bad("group.consumer.heartbeat.interval.ms", "%d must be below group.consumer.session.timeout.ms (%d)",
			c.GroupConsumerHeartbeatIntervalMs, c.GroupConsumerSessionTimeoutMs)
	}
	errs = append(errs, c.validateSecurity()...)
	if hclog.LevelFromString(c.LogLevel) == hclog.NoLevel {
		bad("log.level", "unknown level %q", c.LogLevel)
	}
	// The broker-level topic defaults must be valid topic configs.
	if _, err := c.TopicDefaults().Resolve(nil); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// MetadataDir is where raft and the metadata image live.
func (c *Config) MetadataDir() string {
	if c.MetadataLogDir != "" {
		return c.MetadataLogDir
	}
	return filepath.Join(c.DataDir, "__quire_metadata")
}

func (c *Config) retentionMs() int64 {
	if c.LogRetentionMs != 0 {
		return c.LogRetentionMs
	}
	if c.LogRetentionMinutes != 0 {
		return c.LogRetentionMinutes * int64(time.Minute/time.Millisecond)
	}
	return c.LogRetentionHours * int64(time.Hour/time.Millisecond)
}

func (c *Config) rollMs() int64 {
	if c.LogRollMs != 0 {
		return c.LogRollMs
	}
	return c.LogRollHours * int64(time.Hour/time.Millisecond)
}

// NodeClock is Clock, or the system clock.
func (c *Config) NodeClock() clock.Clock {
	if c.Clock != nil {
		return c.Clock
	}
	return clock.System{}
}

// NodeLogger is Logger, or a logger at log.level.
func (c *Config) NodeLogger() hclog.Logger {
	if c.Logger != nil {
		return c.Logger
	}
	return hclog.New(&hclog.LoggerOptions{Name: "quire", Level: hclog.LevelFromString(c.LogLevel)})
}

func ms(v int64) time.Duration { return time.Duration(v) * time.Millisecond }

// BaseLogConfig is the storage configuration every log starts from before
// topic overrides.
func (c *Config) BaseLogConfig() storage.LogConfig {
	lc := storage.DefaultLogConfig()
	lc.IndexIntervalBytes = c.LogIndexIntervalBytes
	lc.SegmentIndexBytes = c.LogIndexSizeMaxBytes
	return lc
}

// CleanerConfig is the log cleaner's settings.
func (c *Config) CleanerConfig() storage.CleanerConfig {
	return storage.CleanerConfig{
		Enable:              c.LogCleanerEnable,
		Threads:             int(c.LogCleanerThreads),
		DedupeBufferSize:    c.LogCleanerDedupeBufferSize,
		IOMaxBytesPerSecond: c.LogCleanerIOMaxBytesPerSec,
		BackoffMs:           c.LogCleanerBackoffMs,
	}
}

// GroupConfig is the consumer group coordinator's settings.
func (c *Config) GroupConfig() group.Config {
	return group.Config{
		SessionTimeout:    ms(c.GroupConsumerSessionTimeoutMs),
		HeartbeatInterval: ms(c.GroupConsumerHeartbeatIntervalMs),
		MaxSize:           int(c.GroupMaxSize),
		MinSessionTimeout: ms(c.GroupMinSessionTimeoutMs),
		MaxSessionTimeout: ms(c.GroupMaxSessionTimeoutMs),
		Assignors:         splitAssignors(c.GroupConsumerAssignors),
	}
}

// ShareGroupConfig is the share coordinator's settings.
func (c *Config) ShareGroupConfig() sharegroup.Config {
	return sharegroup.Config{
		Partition: share.Config{
			RecordLockDuration: ms(c.GroupShareRecordLockDurationMs),
			DeliveryCountLimit: int(c.GroupShareDeliveryCountLimit),
			MaxRecordLocks:     int(c.GroupSharePartitionMaxRecordLocks),
			KeyOrdering:        c.ShareKeyOrdering,
			MaxInFlightPerKey:  int(c.ShareMaxInFlightPerKey),
		},
		SessionTimeout:    ms(c.GroupShareSessionTimeoutMs),
		HeartbeatInterval: ms(c.GroupShareHeartbeatIntervalMs),
		ResetEarliest:     c.ShareAutoOffsetReset == "earliest",
	}
}

func splitAssignors(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// checkAssignors checks group.consumer.assignors: known names, none
// twice, at least one.
func checkAssignors(v string) error {
	cfg := group.DefaultConfig()
	cfg.Assignors = splitAssignors(v)
	return cfg.Validate()
}

// FetchConfig is the follower fetch tuning from the replica.fetch.* keys.
func (c *Config) FetchConfig() replica.FetchConfig {
	return replica.FetchConfig{
		MaxWait:      ms(int64(c.ReplicaFetchWaitMaxMs)),
		MinBytes:     c.ReplicaFetchMinBytes,
		PartitionMax: c.ReplicaFetchMaxBytes,
		ResponseMax:  c.ReplicaFetchResponseMaxBytes,
		Backoff:      ms(int64(c.ReplicaFetchBackoffMs)),
		// Past the long poll, a fetch gets two seconds: a connection
		// that silently stopped carrying packets is found by the
		// keepalive pings (peers.go) within about that, and replaced.
		CallTimeoutSlop: min(ms(c.BrokerSessionTimeoutMs), 2*time.Second),
	}
}

// BrokerConfigs is every node key, read-only (read from the node's file
// when it starts: static, in Kafka's terms), with its synonyms.
func (c *Config) BrokerConfigs() []request.ConfigEntry {
	out := make([]request.ConfigEntry, 0, len(configKeys))
	for _, key := range configKeys {
		v := key.get(c)
		e := request.ConfigEntry{Name: key.name, Value: v, Source: request.SourceDefault, ReadOnly: true, Documentation: key.doc}
		if v != key.def {
			e.Source = request.SourceBroker
			e.Synonyms = append(e.Synonyms, request.ConfigSynonym{Name: key.name, Value: v, Source: request.SourceBroker})
		}
		e.Synonyms = append(e.Synonyms, request.ConfigSynonym{Name: key.name, Value: key.def, Source: request.SourceDefault})
		out = append(out, e)
	}
	return out
}

// ErrInvalidConfig: a key's value is refused, or keys that disagree
// (request.ErrInvalidConfig: INVALID_CONFIG).
var ErrInvalidConfig = request.ErrInvalidConfig
