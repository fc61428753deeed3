package config

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/quirelog/quire/replica"
	"github.com/quirelog/quire/request"
	"github.com/quirelog/quire/storage"
)

// topicKey is one per-topic config key, with its default (Kafka's, except
// where its doc says) and the broker key whose value is the topic's
// default.
type topicKey struct {
	name      string
	def       string
	brokerKey string
	doc       string
	// fromBroker gives the default from the node's Config.
	fromBroker func(c *Config) string
	// apply parses v into tc.
	apply func(tc *TopicConfig, v string) error
}

// TopicConfig is a topic's effective configuration.
type TopicConfig struct {
	RetentionMs       int64
	RetentionBytes    int64
	SegmentBytes      int64
	SegmentMs         int64
	CleanupPolicy     string
	MaxMessageBytes   int32
	MinInsyncReplicas int32
	FlushMessages     int64
	FlushMs           int64
	Preallocate       bool

	// DeadLetterGroupEnable lets share groups' dead letters be written
	// to the topic (errors.deadletterqueue.group.enable).
	DeadLetterGroupEnable bool

	MinCleanableDirtyRatio float64
	MinCompactionLagMs     int64
	MaxCompactionLagMs     int64
	DeleteRetentionMs      int64
}

func longTopicKey(name, def, brokerKey, doc string, min int64, from func(c *Config) int64, field func(*TopicConfig) *int64) topicKey {
	return topicKey{name: name, def: def, brokerKey: brokerKey, doc: doc,
		fromBroker: func(c *Config) string { return strconv.FormatInt(from(c), 10) },
		apply: func(tc *TopicConfig, v string) error {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return fmt.Errorf("want an integer")
			}
			if n < min {
				return fmt.Errorf("must be >= %d", min)
			}
			*field(tc) = n
			return nil
		}}
}

func intTopicKey(name, def, brokerKey, doc string, min int64, from func(c *Config) int32, field func(*TopicConfig) *int32) topicKey {
	return topicKey{name: name, def: def, brokerKey: brokerKey, doc: doc,
		fromBroker: func(c *Config) string { return strconv.FormatInt(int64(from(c)), 10) },
		apply: func(tc *TopicConfig, v string) error {
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil {
				return fmt.Errorf("want a 32-bit integer")
			}
			if n < min {
				return fmt.Errorf("must be >= %d", min)
			}
			*field(tc) = int32(n)
			return nil
		}}
}

// boolTopicKey is a true/false topic key; brokerKey "" for one the node
// does not set.
func boolTopicKey(name, def, brokerKey, doc string, from func(c *Config) bool, field func(*TopicConfig) *bool) topicKey {
	return topicKey{name: name, def: def, brokerKey: brokerKey, doc: doc,
		fromBroker: func(c *Config) string { return strconv.FormatBool(from(c)) },
		apply: func(tc *TopicConfig, v string) error {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("want true or false")
			}
			*field(tc) = b
			return nil
		}}
}

// parseCleanupPolicy reads cleanup.policy, a list as Kafka's: compact,
// delete, or both in either order.
func parseCleanupPolicy(v string) (compact, del bool, err error) {
	for _, p := range strings.Split(v, ",") {
		switch strings.TrimSpace(strings.ToLower(p)) {
		case "compact":
			compact = true
		case "delete":
			del = true
		default:
			return false, false, fmt.Errorf("want compact, delete or compact,delete")
		}
	}
	return compact, del, nil
}

// topicKeys are the topic configs Quire knows, in the docs' order.
var topicKeys = []topicKey{
	longTopicKey("retention.ms", "604800000", "log.retention.ms", "Milliseconds a segment is kept after its newest record; -1 keeps forever.", -1,
		func(c *Config) int64 { return c.retentionMs() }, func(tc *TopicConfig) *int64 { return &tc.RetentionMs }),
	longTopicKey("retention.bytes", "-1", "log.retention.bytes", "Partition size above which the oldest segments are deleted; -1 is no limit.", -1,
		func(c *Config) int64 { return c.LogRetentionBytes }, func(tc *TopicConfig) *int64 { return &tc.RetentionBytes }),
	longTopicKey("segment.bytes", "1073741824", "log.segment.bytes", "Segment size at which a new segment is rolled.", 14,
		func(c *Config) int64 { return c.LogSegmentBytes }, func(tc *TopicConfig) *int64 { return &tc.SegmentBytes }),
	longTopicKey("segment.ms", "604800000", "log.roll.ms", "Segment age at which a new segment is rolled.", 1,
		func(c *Config) int64 { return c.rollMs() }, func(tc *TopicConfig) *int64 { return &tc.SegmentMs }),
	{name: "cleanup.policy", def: "delete", brokerKey: "log.cleanup.policy",
		doc:        "What happens to old records: delete (segments past retention.ms or retention.bytes are deleted), compact (only the latest record of each key is kept) or compact,delete (both).",
		fromBroker: func(c *Config) string { return c.LogCleanupPolicy },
		apply: func(tc *TopicConfig, v string) error {
			if _, _, err := parseCleanupPolicy(v); err != nil {
				return err
			}
			tc.CleanupPolicy = v
			return nil
		}},
	{name: "min.cleanable.dirty.ratio", def: "0.5", brokerKey: "log.cleaner.min.cleanable.ratio",
		doc:        "Share of a compacted partition's cleanable bytes written since its last clean before the cleaner takes it.",
		fromBroker: func(c *Config) string { return strconv.FormatFloat(c.LogCleanerMinCleanableRatio, 'G', -1, 64) },
		apply: func(tc *TopicConfig, v string) error {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil || !(f >= 0 && f <= 1) {
				return fmt.Errorf("want a number between 0 and 1")
			}
			tc.MinCleanableDirtyRatio = f
			return nil
		}},
	longTopicKey("min.compaction.lag.ms", "0", "log.cleaner.min.compaction.lag.ms", "Least time a record stays uncompacted.", 0,
		func(c *Config) int64 { return c.LogCleanerMinCompactionLagMs }, func(tc *TopicConfig) *int64 { return &tc.MinCompactionLagMs }),
	longTopicKey("max.compaction.lag.ms", maxLong, "log.cleaner.max.compaction.lag.ms", "Most time a record waits before it is eligible for compaction.", 1,
		func(c *Config) int64 { return c.LogCleanerMaxCompactionLagMs }, func(tc *TopicConfig) *int64 { return &tc.MaxCompactionLagMs }),
	longTopicKey("delete.retention.ms", "86400000", "log.cleaner.delete.retention.ms", "How long a tombstone is kept in a compacted partition after its timestamp, so that consumers see the delete.", 0,
		func(c *Config) int64 { return c.LogCleanerDeleteRetentionMs }, func(tc *TopicConfig) *int64 { return &tc.DeleteRetentionMs }),
	intTopicKey("max.message.bytes", "1048588", "message.max.bytes", "Largest record batch accepted.", 1,
		func(c *Config) int32 { return c.MessageMaxBytes }, func(tc *TopicConfig) *int32 { return &tc.MaxMessageBytes }),
	intTopicKey("min.insync.replicas", "1", "min.insync.replicas", "Fewest in-sync replicas for an acks=all produce.", 1,
		func(c *Config) int32 { return c.MinInsyncReplicas }, func(tc *TopicConfig) *int32 { return &tc.MinInsyncReplicas }),
	longTopicKey("flush.messages", maxLong, "log.flush.interval.messages", "Messages after which a partition is fsynced.", 1,
		func(c *Config) int64 { return c.LogFlushIntervalMessages }, func(tc *TopicConfig) *int64 { return &tc.FlushMessages }),
	longTopicKey("flush.ms", maxLong, "log.flush.interval.ms", "Milliseconds after which unsynced writes are fsynced.", 0,
		func(c *Config) int64 { return c.LogFlushIntervalMs }, func(tc *TopicConfig) *int64 { return &tc.FlushMs }),
	boolTopicKey("preallocate", "true", "log.preallocate", "Reserve disk space for the active segment ahead of its appends (an eighth of its size at a time, 64 KiB to 16 MiB, the file size unchanged, given back when the segment rolls); Kafka's preallocate sizes the whole segment and defaults to false.",
		func(c *Config) bool { return c.LogPreallocate }, func(tc *TopicConfig) *bool { return &tc.Preallocate }),
	boolTopicKey(request.DeadLetterGroupEnable, "false", "", "Whether share groups may name this topic as their dead-letter topic (errors.deadletterqueue.topic.name), KIP-1191's guard: the node writes the dead letters itself, without the members' ACLs, so only a topic its administrator enabled takes them. No broker key.",
		func(*Config) bool { return false }, func(tc *TopicConfig) *bool { return &tc.DeadLetterGroupEnable }),
}

var topicKeyIndex = func() map[string]topicKey {
	m := make(map[string]topicKey, len(topicKeys))
	for _, k := range topicKeys {
		m[k.name] = k
	}
	return m
}()

// TopicDefaults are the topic key values a node's Config implies.
type TopicDefaults map[string]string

func (c *Config) TopicDefaults() TopicDefaults {
	d := make(TopicDefaults, len(topicKeys))
	for _, k := range topicKeys {
		d[k.name] = k.fromBroker(c)
	}
	return d
}

// ValidateTopicConfigs checks keys and values given by a user.
func ValidateTopicConfigs(m map[string]string) error {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var tc TopicConfig
	for _, name := range keys {
		k, ok := topicKeyIndex[name]
		if !ok {
			return fmt.Errorf("%w: unknown topic config %q%s", ErrInvalidConfig, name, unknownTopicKeyHint(name))
		}
		if err := k.apply(&tc, m[name]); err != nil {
			return fmt.Errorf("%w: %s=%q: %v", ErrInvalidConfig, name, m[name], err)
		}
	}
	return nil
}

// Resolve returns the effective config: overrides on top of the defaults.
func (d TopicDefaults) Resolve(overrides map[string]string) (TopicConfig, error) {
	var tc TopicConfig
	for _, k := range topicKeys {
		v, ok := overrides[k.name]
		if !ok {
			v = d[k.name]
		}
		if err := k.apply(&tc, v); err != nil {
			return tc, fmt.Errorf("%w: %s=%q: %v", ErrInvalidConfig, k.name, v, err)
		}
	}
	return tc, nil
}

// Describe lists every topic key with its value, source and synonyms.
func (d TopicDefaults) Describe(overrides map[string]string) []request.ConfigEntry {
	out := make([]request.ConfigEntry, 0, len(topicKeys))
	for _, k := range topicKeys {
		e := request.ConfigEntry{Name: k.name, Documentation: k.doc}
		switch v, ok := overrides[k.name]; {
		case ok:
			e.Value, e.Source = v, request.SourceTopic
		case d[k.name] != k.def:
			e.Value, e.Source = d[k.name], request.SourceBroker
		default:
			e.Value, e.Source = k.def, request.SourceDefault
		}
		// The synonyms: the topic's own value, the broker key it
		// defaults to when the node's configuration sets it, and the
		// default.
		if e.Source == request.SourceTopic {
			e.Synonyms = append(e.Synonyms, request.ConfigSynonym{Name: k.name, Value: e.Value, Source: request.SourceTopic})
		}
		if k.brokerKey == "" {
			out = append(out, e) // no broker key: only the topic's value
			continue
		}
		if v := d[k.name]; v != k.def {
			e.Synonyms = append(e.Synonyms, request.ConfigSynonym{Name: k.brokerKey, Value: v, Source: request.SourceBroker})
		}
		e.Synonyms = append(e.Synonyms, request.ConfigSynonym{Name: k.brokerKey, Value: k.def, Source: request.SourceDefault})
		out = append(out, e)
	}
	return out
}

// ReplicaConfig is what the replicas need of a topic config.
func (tc TopicConfig) ReplicaConfig(base storage.LogConfig) replica.TopicConfig {
	return replica.TopicConfig{Log: tc.LogConfig(base), MinInsyncReplicas: tc.MinInsyncReplicas}
}

// LogConfig turns a topic config into the storage engine's settings.
func (tc TopicConfig) LogConfig(base storage.LogConfig) storage.LogConfig {
	base.RetentionMs = tc.RetentionMs
	base.RetentionBytes = tc.RetentionBytes
	base.SegmentBytes = tc.SegmentBytes
	base.SegmentMs = tc.SegmentMs
	base.MaxMessageBytes = tc.MaxMessageBytes
	base.FlushMessages = tc.FlushMessages
	base.FlushMs = tc.FlushMs
	base.Preallocate = tc.Preallocate
	base.Compact, base.Delete, _ = parseCleanupPolicy(tc.CleanupPolicy)
	base.MinCleanableDirtyRatio = tc.MinCleanableDirtyRatio
	base.MinCompactionLagMs = tc.MinCompactionLagMs
	base.MaxCompactionLagMs = tc.MaxCompactionLagMs
	base.DeleteRetentionMs = tc.DeleteRetentionMs
	return base
}

// ValidateTopicKey refuses a key that is not a topic key.
func ValidateTopicKey(k string) error {
	if _, ok := topicKeyIndex[k]; !ok {
		return fmt.Errorf("%w: unknown topic config %q%s", ErrInvalidConfig, k, unknownTopicKeyHint(k))
	}
	return nil
}
