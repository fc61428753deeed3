package config

import (
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
)

// configKey is one node configuration key: its Kafka name, default, one
// line of documentation and how to read and write it on a Config.
type configKey struct {
	name    string
	def     string
	doc     string
	section string
	set     func(c *Config, v string) error
	get     func(c *Config) string
}

func int64Key(section, name, def, doc string, field func(*Config) *int64, min int64) configKey {
	return configKey{name: name, def: def, doc: doc, section: section,
		set: func(c *Config, v string) error {
			n, err := parseInt(v, 64)
			if err != nil {
				return err
			}
			if n < min {
				return fmt.Errorf("must be >= %d", min)
			}
			*field(c) = n
			return nil
		},
		get: func(c *Config) string { return strconv.FormatInt(*field(c), 10) },
	}
}

func int32Key(section, name, def, doc string, field func(*Config) *int32, min int64) configKey {
	return configKey{name: name, def: def, doc: doc, section: section,
		set: func(c *Config, v string) error {
			n, err := parseInt(v, 32)
			if err != nil {
				return err
			}
			if n < min {
				return fmt.Errorf("must be >= %d", min)
			}
			*field(c) = int32(n)
			return nil
		},
		get: func(c *Config) string { return strconv.FormatInt(int64(*field(c)), 10) },
	}
}

func boolKey(section, name, def, doc string, field func(*Config) *bool) configKey {
	return configKey{name: name, def: def, doc: doc, section: section,
		set: func(c *Config, v string) error {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("want true or false")
			}
			*field(c) = b
			return nil
		},
		get: func(c *Config) string { return strconv.FormatBool(*field(c)) },
	}
}

func float64Key(section, name, def, doc string, field func(*Config) *float64, lo, hi float64) configKey {
	return configKey{name: name, def: def, doc: doc, section: section,
		set: func(c *Config, v string) error {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil || math.IsNaN(f) {
				return fmt.Errorf("want a number")
			}
			if f < lo || f > hi {
				return fmt.Errorf("must be between %v and %v", lo, hi)
			}
			*field(c) = f
			return nil
		},
		get: func(c *Config) string { return strconv.FormatFloat(*field(c), 'G', -1, 64) },
	}
}

func stringKey(section, name, def, doc string, field func(*Config) *string, check func(string) error) configKey {
	return configKey{name: name, def: def, doc: doc, section: section,
		set: func(c *Config, v string) error {
			if check != nil {
				if err := check(v); err != nil {
					return err
				}
			}
			*field(c) = v
			return nil
		},
		get: func(c *Config) string { return *field(c) },
	}
}

// parseInt accepts Kafka's spelling of "no limit" for longs as well as
// plain integers.
func parseInt(v string, bits int) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, bits)
	if err != nil {
		return 0, fmt.Errorf("want an integer")
	}
	return n, nil
}

// checkListeners checks the syntax of a listeners or advertised.listeners
// value; Validate checks them against each other.
func checkListeners(v string) error {
	_, err := parseListenerList(v)
	return err
}

var maxLong = strconv.FormatInt(math.MaxInt64, 10)

// configKeys lists every node key in the order the docs show them.
var configKeys = appendSecurityKeys([]configKey{
	int32Key("node", "node.id", "1", "Unique id of this node in the cluster.",
		func(c *Config) *int32 { return &c.NodeID }, 0),
	stringKey("node", "cluster.id", "quire", "Name of the cluster; a node refuses to join metadata of another cluster.",
		func(c *Config) *string { return &c.ClusterID }, nil),
	{name: "process.roles", def: "broker,controller", section: "node",
		doc: "Roles of this node: broker (hosts partitions), controller (votes in the metadata quorum), or both.",
		set: func(c *Config, v string) error {
			c.ProcessRoles = nil
			for _, r := range strings.Split(v, ",") {
				if r = strings.TrimSpace(r); r != "" {
					c.ProcessRoles = append(c.ProcessRoles, r)
				}
			}
			return nil
		},
		get: func(c *Config) string { return strings.Join(c.ProcessRoles, ",") }},
	stringKey("node", "broker.rack", "", "Rack of this broker, used to spread replicas.",
		func(c *Config) *string { return &c.Rack }, nil),
	stringKey("network", "listeners", "0.0.0.0:9092",
		"host:port the gRPC server listens on, or named listeners NAME://host:port,... (Kafka's internal/external pattern: each serves everything, and clients are given the addresses of the listener they connected to); a bare host:port is the listener PLAINTEXT; port 0 picks a free port.",
		func(c *Config) *string { return &c.ListenAddr },
		func(v string) error {
			if strings.TrimSpace(v) == "" {
				return fmt.Errorf("want [NAME://]host:port, comma-separated")
			}
			return checkListeners(v)
		}),
	stringKey("network", "advertised.listeners", "",
		"host:port other nodes and clients dial, or NAME://host:port,... per listener; a listener left out (or an empty value) advertises the address it is bound to.",
		func(c *Config) *string { return &c.AdvertisedAddr }, checkListeners),
	stringKey("network", "inter.broker.listener.name", "",
		"The listener other nodes dial (raft, replication, calls passed on to leaders and the controller); a voter's address in controller.quorum.voters is its advertised address. Empty means the first of listeners.",
		func(c *Config) *string { return &c.InterBrokerListenerName }, nil),
	stringKey("network", "kafka.listener.names", "",
		"Listeners (names from listeners) that speak Kafka's wire protocol instead of gRPC, for Kafka's clients (kcat, librdkafka, franz-go, Java): produce, fetch, list offsets, metadata, idempotent and transactional producers, and consumer groups in both the classic and KIP-848's protocols. TLS and SASL per kafka.listener.security.protocol.map. Not the inter-broker listener. Empty means none.",
		func(c *Config) *string { return &c.KafkaListenerNames }, nil),
	int32Key("network", "max.connections", "4096",
		"Connections open at once on each Kafka listener (kafka.listener.names); one past it is closed as it is accepted, with a log line, and counted in quire_requests_total{rpc=\"kafka/Connection\",code=\"ResourceExhausted\"} when metrics.requests.enable is on. 0 is no cap.",
		func(c *Config) *int32 { return &c.KafkaMaxConnections }, 0),
	int32Key("network", "max.connections.per.ip", "1024",
		"Connections open at once from one client address, over all the Kafka listeners; one past it is closed as it is accepted, as for max.connections. 0 is no cap.",
		func(c *Config) *int32 { return &c.KafkaMaxConnectionsPerIP }, 0),
	stringKey("network", "controller.quorum.voters", "", "Metadata quorum as id@host:port,...; empty on a single node means this node alone.",
		func(c *Config) *string { return &c.ControllerQuorumVoters },
		func(v string) error { _, err := ParseVoters(v); return err }),
	{name: "log.dirs", def: "/var/lib/quire", section: "storage",
		doc: "Directory holding partition logs and checkpoints (one directory; the first of a list is used).",
		set: func(c *Config, v string) error {
			v, _, _ = strings.Cut(v, ",")
			if strings.TrimSpace(v) == "" {
				return fmt.Errorf("must not be empty")
			}
			c.DataDir = strings.TrimSpace(v)
			return nil
		},
		get: func(c *Config) string { return c.DataDir }},
	stringKey("storage", "metadata.log.dir", "", "Directory for the raft log and metadata image; empty means <log.dirs>/__quire_metadata.",
		func(c *Config) *string { return &c.MetadataLogDir }, nil),
	int32Key("storage", "log.open.files.max", "0", "Most segment files (.log, .index, .timeindex) the node keeps open at once, whatever the number of partitions it hosts: files are opened when used and the least recently used closed when room is needed (at least 16). 0 means half the open-file soft limit (RLIMIT_NOFILE) when the node starts.",
		func(c *Config) *int32 { return &c.LogOpenFilesMax }, 0),
	int32Key("storage", "num.recovery.threads.per.data.dir", "2", "Partition logs opened (recovered after an unclean stop) at once when the node starts, and closed (flushed) at once when it stops.",
		func(c *Config) *int32 { return &c.RecoveryThreadsPerDataDir }, 1),
	int32Key("topics", "num.partitions", "1", "Partitions of a topic created without a count (and of auto-created topics).",
		func(c *Config) *int32 { return &c.NumPartitions }, 1),
	{name: "default.replication.factor", def: "1", section: "topics",
		doc: "Replication factor of a topic created without one.",
		set: func(c *Config, v string) error {
			n, err := parseInt(v, 16)
			if err != nil || n < 1 {
				return fmt.Errorf("want a positive integer")
			}
			c.DefaultReplicationFactor = int16(n)
			return nil
		},
		get: func(c *Config) string { return strconv.Itoa(int(c.DefaultReplicationFactor)) }},
	boolKey("topics", "auto.create.topics.enable", "true", "Create a topic on first produce or metadata request that names it.",
		func(c *Config) *bool { return &c.AutoCreateTopicsEnable }),
	boolKey("topics", "delete.topic.enable", "true", "Allow topics to be deleted.",
		func(c *Config) *bool { return &c.DeleteTopicEnable }),
	int32Key("topics", "max.partitions.per.broker", "0", "Partition replicas (leaders and followers) this node can host; the controller refuses a topic create or partition increase that would place more on it (POLICY_VIOLATION, naming the broker and the numbers). 0 derives it at start from the open-file limit (raised to the hard limit) and memory: (limit - max(limit/4, 64)) / 3 files per partition, at most half the memory at 1 MiB per partition; the log says what it came to (docs/operations.md). Enforced from metadata.version 9.",
		func(c *Config) *int32 { return &c.MaxPartitionsPerBroker }, 0),
	int32Key("topics", "message.max.bytes", "1048588", "Largest record batch accepted; default of the topic key max.message.bytes. It also sets the largest request (gRPC message) a broker takes: 2 x message.max.bytes + 1 MiB, at least 8 MiB; a request over it is refused with MESSAGE_TOO_LARGE naming this key (one over twice that, gRPC refuses unread: RESOURCE_EXHAUSTED (received message larger than max) without a quire.v1.Error, which the Go client and the CLI report as MESSAGE_TOO_LARGE naming this key too); raise it too when topics set max.message.bytes well above it.",
		func(c *Config) *int32 { return &c.MessageMaxBytes }, 1),
	int32Key("topics", "min.insync.replicas", "1", "Fewest in-sync replicas for an acks=all produce to be accepted; topic key of the same name.",
		func(c *Config) *int32 { return &c.MinInsyncReplicas }, 1),
	int64Key("topics", "log.retention.hours", "168", "Hours to keep a segment after its last write; default of retention.ms.",
		func(c *Config) *int64 { return &c.LogRetentionHours }, 0),
	int64Key("topics", "log.retention.minutes", "0", "Minutes to keep a segment; 0 means use log.retention.hours.",
		func(c *Config) *int64 { return &c.LogRetentionMinutes }, 0),
	int64Key("topics", "log.retention.ms", "0", "Milliseconds to keep a segment; 0 means use log.retention.minutes or .hours, -1 keeps forever.",
		func(c *Config) *int64 { return &c.LogRetentionMs }, -1),
	int64Key("topics", "log.retention.bytes", "-1", "Largest size of a partition before old segments are deleted; -1 is no limit. Default of retention.bytes.",
		func(c *Config) *int64 { return &c.LogRetentionBytes }, -1),
	int64Key("topics", "log.segment.bytes", "1073741824", "Size at which a segment is rolled; default of segment.bytes.",
		func(c *Config) *int64 { return &c.LogSegmentBytes }, 14),
	int64Key("topics", "log.roll.hours", "168", "Age at which a segment is rolled; default of segment.ms.",
		func(c *Config) *int64 { return &c.LogRollHours }, 1),
	int64Key("topics", "log.roll.ms", "0", "Age in milliseconds at which a segment is rolled; 0 means use log.roll.hours.",
		func(c *Config) *int64 { return &c.LogRollMs }, 0),
	int32Key("topics", "log.index.interval.bytes", "4096", "Bytes of log between two entries of the offset index.",
		func(c *Config) *int32 { return &c.LogIndexIntervalBytes }, 0),
	int32Key("topics", "log.index.size.max.bytes", "10485760", "Largest size of an offset or time index file.",
		func(c *Config) *int32 { return &c.LogIndexSizeMaxBytes }, 4),
	int64Key("topics", "log.flush.interval.messages", maxLong, "Messages appended to a partition before it is fsynced; default of flush.messages.",
		func(c *Config) *int64 { return &c.LogFlushIntervalMessages }, 1),
	int64Key("topics", "log.flush.interval.ms", maxLong, "Milliseconds a write may stay unsynced; default of flush.ms.",
		func(c *Config) *int64 { return &c.LogFlushIntervalMs }, 0),
	boolKey("topics", "log.preallocate", "true", "Reserve disk space for the active segment ahead of its appends (an eighth of its size, 64 KiB to 16 MiB), keeping the file size; default of preallocate.",
		func(c *Config) *bool { return &c.LogPreallocate }),
	stringKey("topics", "log.cleanup.policy", "delete", "Default of cleanup.policy: delete (retention by time and size), compact (keep the latest record of each key) or compact,delete (both).",
		func(c *Config) *string { return &c.LogCleanupPolicy }, func(v string) error { _, _, err := parseCleanupPolicy(v); return err }),
	float64Key("topics", "log.cleaner.min.cleanable.ratio", "0.5", "Default of min.cleanable.dirty.ratio: the share of a compacted partition's cleanable bytes written since its last clean before the cleaner takes it.",
		func(c *Config) *float64 { return &c.LogCleanerMinCleanableRatio }, 0, 1),
	int64Key("topics", "log.cleaner.min.compaction.lag.ms", "0", "Default of min.compaction.lag.ms: the least time a record stays uncompacted.",
		func(c *Config) *int64 { return &c.LogCleanerMinCompactionLagMs }, 0),
	int64Key("topics", "log.cleaner.max.compaction.lag.ms", maxLong, "Default of max.compaction.lag.ms: the most time a record waits before it is eligible for compaction (the active segment is rolled at that age).",
		func(c *Config) *int64 { return &c.LogCleanerMaxCompactionLagMs }, 1),
	int64Key("topics", "log.cleaner.delete.retention.ms", "86400000", "Default of delete.retention.ms: how long a tombstone is kept (after its timestamp) in a compacted partition.",
		func(c *Config) *int64 { return &c.LogCleanerDeleteRetentionMs }, 0),
	boolKey("background", "log.cleaner.enable", "true", "Run the log cleaner, which compacts the partitions whose cleanup.policy includes compact.",
		func(c *Config) *bool { return &c.LogCleanerEnable }),
	int32Key("background", "log.cleaner.threads", "1", "Partitions the log cleaner compacts at once (one goroutine each).",
		func(c *Config) *int32 { return &c.LogCleanerThreads }, 1),
	int64Key("background", "log.cleaner.dedupe.buffer.size", "134217728", "Memory for the cleaner's offset maps, shared by its threads; each key of a pass takes 24 bytes / 0.9, so the default maps about 5.6 million keys a pass (a larger dirty section is cleaned a prefix at a time). Allocated as needed, up to this.",
		func(c *Config) *int64 { return &c.LogCleanerDedupeBufferSize }, 16*24),
	float64Key("background", "log.cleaner.io.max.bytes.per.second", "1.7976931348623157E308", "Bytes each cleaner thread reads plus writes per second, at most (the default: no limit).",
		func(c *Config) *float64 { return &c.LogCleanerIOMaxBytesPerSec }, 1, math.MaxFloat64),
	int64Key("background", "log.cleaner.backoff.ms", "15000", "How long the cleaner sleeps when no partition needs compacting.",
		func(c *Config) *int64 { return &c.LogCleanerBackoffMs }, 1),
	int64Key("background", "log.retention.check.interval.ms", "300000", "How often retention deletes old segments.",
		func(c *Config) *int64 { return &c.LogRetentionCheckIntervalMs }, 1),
	int64Key("background", "log.flush.scheduler.interval.ms", "1000", "How often partitions are checked against flush.ms and flush.messages.",
		func(c *Config) *int64 { return &c.LogFlushSchedulerIntervalMs }, 1),
	int64Key("background", "log.flush.offset.checkpoint.interval.ms", "60000", "How often recovery point, high watermark and log start checkpoints are written.",
		func(c *Config) *int64 { return &c.LogFlushOffsetCheckpointIntervalMs }, 1),
	int64Key("cluster", "broker.heartbeat.interval.ms", "2000", "How often a broker heartbeats to the controller.",
		func(c *Config) *int64 { return &c.BrokerHeartbeatIntervalMs }, 1),
	int64Key("cluster", "broker.session.timeout.ms", "9000", "Silence after which the controller fences a broker; also bounds a stopping broker's controlled shutdown (past it the broker shuts down locally and is fenced).",
		func(c *Config) *int64 { return &c.BrokerSessionTimeoutMs }, 1),
	int64Key("replication", "replica.lag.time.max.ms", "30000", "A follower that has not caught up with the leader's log end for this long leaves the ISR; one that catches up with the high watermark rejoins it.",
		func(c *Config) *int64 { return &c.ReplicaLagTimeMaxMs }, 1),
	int32Key("replication", "replica.fetch.wait.max.ms", "500", "How long a follower's fetch waits at the leader for new records (must stay below replica.lag.time.max.ms).",
		func(c *Config) *int32 { return &c.ReplicaFetchWaitMaxMs }, 1),
	int32Key("replication", "replica.fetch.min.bytes", "1", "Bytes a follower's fetch waits for before the leader answers.",
		func(c *Config) *int32 { return &c.ReplicaFetchMinBytes }, 1),
	int32Key("replication", "replica.fetch.max.bytes", "1048576", "Bytes a follower fetches per partition per call (at least one batch, whatever its size).",
		func(c *Config) *int32 { return &c.ReplicaFetchMaxBytes }, 1),
	int32Key("replication", "replica.fetch.response.max.bytes", "10485760", "Bytes a follower fetches per call over all partitions (at least one batch).",
		func(c *Config) *int32 { return &c.ReplicaFetchResponseMaxBytes }, 1),
	int32Key("replication", "replica.fetch.backoff.ms", "1000", "The least time between the starts of a follower's failed fetch and its next one (a fetch that waited that long for a connection to come back goes again at once), and the longest a partition the leader refused waits before it is asked again.",
		func(c *Config) *int32 { return &c.ReplicaFetchBackoffMs }, 1),
	int64Key("replication", "replica.reassignment.throttle.bytes.per.second", "0", "Bytes a second the replicas this broker is adding by a partition reassignment fetch, together (0: unthrottled); normal replication is never throttled. Set per broker at run time with `quire broker throttle` (kept in the metadata log, over this value).",
		func(c *Config) *int64 { return &c.ReplicaReassignmentThrottle }, 0),
	boolKey("cluster", "unclean.leader.election.enable", "false", "Elect a leader from outside the ISR when no in-sync replica is left, accepting the loss of acknowledged records.",
		func(c *Config) *bool { return &c.UncleanLeaderElectionEnable }),
	boolKey("cluster", "auto.leader.rebalance.enable", "true", "Move leadership back to each partition's preferred (first) replica once it is in sync.",
		func(c *Config) *bool { return &c.AutoLeaderRebalanceEnable }),
	boolKey("cluster", "balancer.enable", "false", "Have the controller even out partition replicas and preferred leaders over the live, uncordoned brokers by reassignment, a few moves at a time, while no other reassignment is pending.",
		func(c *Config) *bool { return &c.BalancerEnable }),
	int64Key("cluster", "balancer.interval.seconds", "300", "How often the balancer (balancer.enable) looks for moves to make.",
		func(c *Config) *int64 { return &c.BalancerIntervalSecs }, 1),
	int32Key("cluster", "balancer.max.partition.moves", "10", "The most partition moves the balancer starts at a time.",
		func(c *Config) *int32 { return &c.BalancerMaxPartitionMoves }, 1),
	int64Key("cluster", "leader.imbalance.check.interval.seconds", "300", "How often the controller checks for partitions not led by their preferred replica.",
		func(c *Config) *int64 { return &c.LeaderImbalanceCheckIntervalSecs }, 1),
	int64Key("groups", "group.consumer.session.timeout.ms", "45000", "Silence after which the group coordinator removes a consumer group member (and after a controller change, how long members have to heartbeat to the new one).",
		func(c *Config) *int64 { return &c.GroupConsumerSessionTimeoutMs }, 1000),
	int64Key("groups", "group.consumer.heartbeat.interval.ms", "5000", "How often consumer group members heartbeat; sent to them in every heartbeat answer.",
		func(c *Config) *int64 { return &c.GroupConsumerHeartbeatIntervalMs }, 1),
	stringKey("groups", "group.consumer.assignors", "uniform,range,roundrobin", "Server-side assignors members may ask for, comma-separated; the first is the default.",
		func(c *Config) *string { return &c.GroupConsumerAssignors }, checkAssignors),
	int64Key("groups", "group.min.session.timeout.ms", "6000", "The shortest session timeout a classic (JoinGroup) consumer group member may ask for; a join asking for less is INVALID_SESSION_TIMEOUT.",
		func(c *Config) *int64 { return &c.GroupMinSessionTimeoutMs }, 1000),
	int64Key("groups", "group.max.session.timeout.ms", "1800000", "The longest session timeout a classic (JoinGroup) consumer group member may ask for (a static member restarting slowly asks for more than group.consumer.session.timeout.ms); a join asking for more is INVALID_SESSION_TIMEOUT.",
		func(c *Config) *int64 { return &c.GroupMaxSessionTimeoutMs }, 1),
	int32Key("groups", "group.max.size", "2147483647", "The most members a consumer group may have; a join past it is GROUP_MAX_SIZE_REACHED.",
		func(c *Config) *int32 { return &c.GroupMaxSize }, 1),
	int64Key("groups", "group.lag.refresh.ms", "5000", "How often the group coordinator asks partition leaders for the high watermarks and record timestamps of consumer group lag (the quire_group_lag_* metrics).",
		func(c *Config) *int64 { return &c.GroupLagRefreshMs }, 10),
	int64Key("groups", "offsets.retention.minutes", "10080", "How long the committed offsets of a group with no members are kept after its last commit, or after its last member left, whichever is later; then they are deleted.",
		func(c *Config) *int64 { return &c.OffsetsRetentionMinutes }, 1),
	int32Key("transactions", "transaction.max.timeout.ms", "900000", "The longest transaction timeout a transactional producer may ask for; InitProducerId asking for more is INVALID_TRANSACTION_TIMEOUT. A transaction open longer than its timeout is aborted by the coordinator, fencing its producer.",
		func(c *Config) *int32 { return &c.TransactionMaxTimeoutMs }, 1),
	int64Key("transactions", "transaction.abort.timed.out.transaction.cleanup.interval.ms", "10000", "How often the transaction coordinator looks for transactions past their timeout (and aborts them), for transactions a previous controller left half ended (and completes them), and for transactional ids idle past transactional.id.expiration.ms (and forgets them).",
		func(c *Config) *int64 { return &c.TransactionAbortCheckIntervalMs }, 1),
	int64Key("transactions", "transactional.id.expiration.ms", "604800000", "How long a transactional id with no transaction in progress is kept after its last change (its last transaction's end, or its producer's InitProducerId); then the coordinator forgets it (a PutTransaction removal through the metadata log), and a producer using it again gets a new producer id. Checked every transaction.abort.timed.out.transaction.cleanup.interval.ms.",
		func(c *Config) *int64 { return &c.TransactionalIDExpirationMs }, 1),
	boolKey("shares", "group.share.enable", "true", "Serve share groups (KIP-932 queues): ShareGroupHeartbeat, ShareFetch and ShareAcknowledge on the Kafka listener and in the request core. Each share-partition's state is saved in the metadata log by the partition's leader (from metadata.version 15; below it, in memory only) and restored by the next one (docs/share-groups.md).",
		func(c *Config) *bool { return &c.GroupShareEnable }),
	int64Key("shares", "group.share.session.timeout.ms", "45000", "Silence after which the share coordinator removes a share group member and releases the records it holds.",
		func(c *Config) *int64 { return &c.GroupShareSessionTimeoutMs }, 1000),
	int64Key("shares", "group.share.heartbeat.interval.ms", "5000", "How often share group members heartbeat; sent to them in every heartbeat answer.",
		func(c *Config) *int64 { return &c.GroupShareHeartbeatIntervalMs }, 1),
	int64Key("shares", "group.share.record.lock.duration.ms", "30000", "How long a record acquired by a share group member stays locked to it before it is released for redelivery. A share group may set its own (1000-3600000, docs/share-groups.md).",
		func(c *Config) *int64 { return &c.GroupShareRecordLockDurationMs }, 1),
	int32Key("shares", "group.share.delivery.count.limit", "5", "How many times a record is delivered to a share group before it is archived as a dead letter (and written to the group's dead-letter topic, errors.deadletterqueue.topic.name, a group setting). A share group may set its own (1-100, docs/share-groups.md).",
		func(c *Config) *int32 { return &c.GroupShareDeliveryCountLimit }, 1),
	int32Key("shares", "group.share.partition.max.record.locks", "2000", "The most records a share-partition keeps in flight (its window from the start offset).",
		func(c *Config) *int32 { return &c.GroupSharePartitionMaxRecordLocks }, 1),
	boolKey("shares", "share.key.ordering", "false", "Per-key ordering in share groups: the records of one key are never in flight to two members at once and are delivered in offset order. A share group's own setting, when it has one, decides (docs/share-groups.md).",
		func(c *Config) *bool { return &c.ShareKeyOrdering }),
	int32Key("shares", "max.in.flight.per.key", "0", "With share.key.ordering, the most records of one key one member holds at once; 0 is no bound. A share group may set its own (a positive count, docs/share-groups.md).",
		func(c *Config) *int32 { return &c.ShareMaxInFlightPerKey }, 0),
	stringKey("shares", "share.auto.offset.reset", "latest", "Where a share group starts reading a partition it has not read before: latest (the high watermark) or earliest (the log start offset). A share group may set its own, also by_duration:<ISO-8601 duration> (docs/share-groups.md).",
		func(c *Config) *string { return &c.ShareAutoOffsetReset }, checkShareReset),
	stringKey("shares", "errors.deadletterqueue.topic.name.prefix", "dlq.", "What a share group's dead-letter topic (errors.deadletterqueue.topic.name, a group setting) must start with, KIP-1191's guard: the node writes dead letters itself, so a group cannot name any topic. The topic must also have errors.deadletterqueue.group.enable=true. Empty allows any name.",
		func(c *Config) *string { return &c.DeadLetterTopicPrefix }, nil),
	boolKey("shares", "errors.deadletterqueue.auto.create.topics.enable", "false", "Create a share group's dead-letter topic when it does not exist at its first dead letter (KIP-1191's): num.partitions partitions, default.replication.factor replicas and errors.deadletterqueue.group.enable=true. The name must still start with errors.deadletterqueue.topic.name.prefix.",
		func(c *Config) *bool { return &c.DeadLetterAutoCreate }),
	int64Key("cluster", "metadata.write.timeout.ms", "10000", "How long an admin write waits for the controller (elections included) before failing UNAVAILABLE.",
		func(c *Config) *int64 { return &c.MetadataWriteTimeoutMs }, 1),
	stringKey("logging", "log.level", "info", "Log level: trace, debug, info, warn or error.",
		func(c *Config) *string { return &c.LogLevel }, nil),
	stringKey("monitoring", "metrics.listen", "", "host:port of the HTTP listener serving /metrics (Prometheus), /healthz and /readyz; empty means none (`--dev`: 127.0.0.1:9404).",
		func(c *Config) *string { return &c.MetricsListen }, checkHostPort),
	boolKey("monitoring", "metrics.pprof.enable", "false", "Serve Go's profiler at /debug/pprof/ on metrics.listen.",
		func(c *Config) *bool { return &c.MetricsPprofEnable }),
	boolKey("monitoring", "metrics.requests.enable", "true", "Count gRPC calls by method and code (and Kafka requests by API), with latency histograms (quire_requests_total, quire_request_duration_seconds), and time produce and fetch queues (quire_request_queue_seconds).",
		func(c *Config) *bool { return &c.MetricsRequestsEnable }),
})

// checkHostPort accepts "" or host:port.
func checkHostPort(v string) error {
	if v == "" {
		return nil
	}
	if _, _, err := net.SplitHostPort(v); err != nil {
		return fmt.Errorf("want host:port: %v", err)
	}
	return nil
}

var configKeyIndex = func() map[string]configKey {
	m := make(map[string]configKey, len(configKeys))
	for _, k := range configKeys {
		if _, dup := m[k.name]; dup {
			panic("broker: duplicate config key " + k.name)
		}
		m[k.name] = k
	}
	return m
}()

// ConfigHelp is the key list shown by `quire server --help`.
func ConfigHelp() string {
	var b strings.Builder
	b.WriteString("Configuration keys (YAML file, --set key=value, or env QUIRE_KEY_NAME):\n")
	for _, k := range configKeys {
		def := k.def
		if def == "" {
			def = `""`
		}
		fmt.Fprintf(&b, "  %-40s %s (default %s)\n", k.name, k.doc, def)
	}
	b.WriteString("\nTopic keys (CreateTopic configs, AlterConfigs):\n")
	for _, k := range topicKeys {
		if k.brokerKey == "" {
			fmt.Fprintf(&b, "  %-40s %s (default %s)\n", k.name, k.doc, k.def)
			continue
		}
		fmt.Fprintf(&b, "  %-40s %s (default %s, from %s)\n", k.name, k.doc, k.def, k.brokerKey)
	}
	return b.String()
}

// ConfigMarkdown renders docs/configuration.md.
func ConfigMarkdown() string {
	var b strings.Builder
	b.WriteString(`# Configuration

<!-- Generated from config/configkeys.go and config/topicconfig.go by
     "make docs"; a test fails when this file is out of date. -->

A node reads its configuration, later sources winning, from:

1. the defaults below (` + "`quire server --dev`" + ` starts from development
   defaults instead: ` + "`log.dirs=./quire-data`, `listeners=127.0.0.1:9092`, `auto.create.topics.enable=true`, `metrics.listen=127.0.0.1:9404`" + `);
2. a YAML file given with ` + "`--config FILE`" + `, a flat map of keys to values:

   ` + "```yaml" + `
   log.dirs: /var/lib/quire
   num.partitions: 3
   log.retention.hours: 24
   ` + "```" + `
3. environment variables: ` + "`QUIRE_`" + ` and the key upper-cased with dots
   as underscores (` + "`QUIRE_NUM_PARTITIONS=3`" + `);
4. ` + "`--data-dir DIR`" + ` (same as ` + "`log.dirs`" + `), then every ` + "`--set key=value`" + `.

An unknown key or a bad value stops the node with an error naming the key;
an unknown one with the key it probably meant (` + "`num.partition`" + `: did you mean
` + "`num.partitions`" + `? A topic key such as ` + "`retention.ms`" + `: its server default,
` + "`log.retention.ms`" + `).

`)
	section := ""
	for _, k := range configKeys {
		if k.section != section {
			section = k.section
			fmt.Fprintf(&b, "\n## %s\n\n| key | default | environment | meaning |\n|---|---|---|---|\n", sectionTitles[section])
		}
		def := "`" + k.def + "`"
		if k.def == "" {
			def = "(empty)"
		}
		fmt.Fprintf(&b, "| `%s` | %s | `%s` | %s |\n", k.name, def, EnvName(k.name), k.doc)
	}
	b.WriteString(`
## Topic configuration

Set per topic with CreateTopic's ` + "`configs`" + ` or AlterConfigs; DescribeConfigs
shows each key's value and where it comes from (topic, broker key, or Kafka's
default). An unknown key or a bad value is rejected with INVALID_ARGUMENT
(INVALID_CONFIG), an unknown key with the topic key it probably meant (a
typo's closest, or ` + "`retention.ms`" + ` for the server key ` + "`log.retention.ms`" + `).
Every key, ` + "`cleanup.policy`" + ` included, may be changed on a live topic: each
replica's log takes the new value at once.

A topic whose ` + "`cleanup.policy`" + ` includes ` + "`compact`" + ` is compacted: every
replica's log cleaner (the ` + "`log.cleaner.*`" + ` keys above) keeps, below the active
segment, only the latest record of each key, and removes tombstones (a key
with a null value) ` + "`delete.retention.ms`" + ` after their timestamp; a record
without a key is refused with INVALID_RECORD. ` + "`docs/storage.md`" + ` (Log
compaction) says how, and what a consumer can count on.

| key | Kafka default | broker key | meaning |
|---|---|---|---|
`)
	for _, k := range topicKeys {
		bk := "-"
		if k.brokerKey != "" {
			bk = "`" + k.brokerKey + "`"
		}
		fmt.Fprintf(&b, "| `%s` | `%s` | %s | %s |\n", k.name, k.def, bk, k.doc)
	}
	return b.String()
}

var sectionTitles = map[string]string{
	"node":       "Node",
	"network":    "Network",
	"storage":    "Storage",
	"topics":     "Topic defaults",
	"background": "Background work",
	"cluster":    "Cluster membership",
	"groups":     "Consumer groups",
	"shares":     "Share groups",
	"logging":    "Logging",
	"monitoring": "Monitoring",
	"security":   "Security",
}

// KeyDefault is a node key's default value; false for a name that is not
// a node key.
func KeyDefault(name string) (string, bool) {
	k, ok := configKeyIndex[name]
	return k.def, ok
}

func checkShareReset(v string) error {
	if v != "latest" && v != "earliest" {
		return fmt.Errorf("must be latest or earliest, not %q", v)
	}
	return nil
}
