package sharegroup

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/quirelog/quire/share"
)

// A share group's own settings, Kafka's GROUP config resource: each
// takes the node's value unless set on the group. Kept in the metadata
// log (the caller's ConfigSource); a change applies to the group's
// share-partitions at once (applyGroupConfig).
const (
	// KeyKeyOrdering is per-key ordering (true or false).
	KeyKeyOrdering = "share.key.ordering"
	// KeyDeadLetterTopic is the group's dead-letter topic (KIP-1191's
	// name); empty: none.
	KeyDeadLetterTopic = "errors.deadletterqueue.topic.name"
	// KeyDeadLetterCopyRecord copies the record's key and value into its
	// dead letter (true or false; KIP-1191's key, false by default: the
	// dead letter's headers name the record).
	KeyDeadLetterCopyRecord = "errors.deadletterqueue.copy.record.enable"
	// KeyRecordLockDuration is the record lock duration in ms (Kafka's
	// group key; the node's is group.share.record.lock.duration.ms).
	KeyRecordLockDuration = "share.record.lock.duration.ms"
	// KeyDeliveryCountLimit is the delivery count limit (Kafka's group
	// key; the node's is group.share.delivery.count.limit).
	KeyDeliveryCountLimit = "share.delivery.count.limit"
	// KeyAutoOffsetReset is where a share-partition with no saved state
	// starts: earliest, latest, or by_duration:<ISO-8601 duration>
	// (the first record at most that old).
	KeyAutoOffsetReset = "share.auto.offset.reset"
	// KeyMaxInFlightPerKey bounds, with key ordering, how many records
	// of one key one member holds at once (a positive count; the node's
	// max.in.flight.per.key, 0 for no bound, when not set).
	KeyMaxInFlightPerKey = "max.in.flight.per.key"
	// KeyIsolationLevel is which records the group reads (Kafka's group
	// key): read_uncommitted (every record below the high watermark,
	// the default) or read_committed (below the last stable offset,
	// the records of aborted transactions left out).
	KeyIsolationLevel = "share.isolation.level"
	// KeyMaxRecordLocks bounds the records one share-partition of the
	// group keeps in flight, its window from the start offset (KIP-1240's
	// group key; the node's is group.share.partition.max.record.locks).
	KeyMaxRecordLocks = "share.partition.max.record.locks"
)

// GroupConfigKeys are the keys a share group may set, sorted.
var GroupConfigKeys = []string{KeyDeadLetterCopyRecord, KeyDeadLetterTopic, KeyMaxInFlightPerKey, KeyAutoOffsetReset, KeyDeliveryCountLimit, KeyIsolationLevel, KeyKeyOrdering, KeyMaxRecordLocks, KeyRecordLockDuration}

// Bounds of the group keys.
const (
	// MaxRecordLockDuration bounds share.record.lock.duration.ms.
	MaxRecordLockDuration = time.Hour
	// MinRecordLockDuration is its lower bound.
	MinRecordLockDuration = time.Second
	// MaxDeliveryCountLimit bounds share.delivery.count.limit.
	MaxDeliveryCountLimit = 100
	// MaxMaxInFlightPerKey bounds max.in.flight.per.key (a
	// share-partition's window holds at most
	// group.share.partition.max.record.locks records anyway).
	MaxMaxInFlightPerKey = 1 << 20
	// MinMaxRecordLocks and MaxMaxRecordLocks bound
	// share.partition.max.record.locks: a share-partition's window is
	// kept in memory, some tens of bytes a record, and saved with each
	// change.
	MinMaxRecordLocks = 100
	MaxMaxRecordLocks = 100000
)

// Reset is share.auto.offset.reset: one of its fields is set (the zero
// value, in SetGroupConfig, is the node's).
type Reset struct {
	// Latest starts at the high watermark.
	Latest bool
	// Earliest starts at the log start offset.
	Earliest bool
	// ByDuration (> 0) starts at the first record no older than it.
	ByDuration time.Duration
}

// String is the value's form as Kafka writes it.
func (r Reset) String() string {
	switch {
	case r.Earliest:
		return "earliest"
	case r.ByDuration > 0:
		return "by_duration:" + isoDuration(r.ByDuration)
	}
	return "latest"
}

// ParseReset reads share.auto.offset.reset's value.
func ParseReset(v string) (Reset, error) {
	switch s := strings.ToLower(strings.TrimSpace(v)); {
	case s == "earliest":
		return Reset{Earliest: true}, nil
	case s == "latest":
		return Reset{Latest: true}, nil
	case strings.HasPrefix(s, "by_duration:"):
		d, err := parseISODuration(strings.ToUpper(s[len("by_duration:"):]))
		if err != nil {
			return Reset{}, fmt.Errorf("%w: %s=%q: %w", share.ErrInvalidConfig, KeyAutoOffsetReset, v, err)
		}
		if d <= 0 {
			return Reset{}, fmt.Errorf("%w: %s=%q: the duration must be positive", share.ErrInvalidConfig, KeyAutoOffsetReset, v)
		}
		return Reset{ByDuration: d}, nil
	}
	return Reset{}, fmt.Errorf("%w: %s=%q: want earliest, latest or by_duration:<ISO-8601 duration such as PT1H>", share.ErrInvalidConfig, KeyAutoOffsetReset, v)
}

// parseISODuration reads PnDTnHnMn.nS (each part optional, at least
// one), Kafka's form of by_duration.
func parseISODuration(s string) (time.Duration, error) {
	if !strings.HasPrefix(s, "P") || len(s) < 3 {
		return 0, fmt.Errorf("%q is not an ISO-8601 duration (PnDTnHnMn.nS)", s)
	}
	rest, inTime := s[1:], false
	var d time.Duration
	parts := 0
	for rest != "" {
		if rest[0] == 'T' {
			if inTime {
				return 0, fmt.Errorf("%q: T twice", s)
			}
			inTime, rest = true, rest[1:]
			continue
		}
		i := strings.IndexAny(rest, "DHMS")
		if i <= 0 {
			return 0, fmt.Errorf("%q is not an ISO-8601 duration (PnDTnHnMn.nS)", s)
		}
		n, err := strconv.ParseFloat(rest[:i], 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%q: bad number %q", s, rest[:i])
		}
		unit := map[byte]time.Duration{'D': 24 * time.Hour, 'H': time.Hour, 'M': time.Minute, 'S': time.Second}[rest[i]]
		if (rest[i] == 'D') == inTime {
			return 0, fmt.Errorf("%q: days before T, hours, minutes and seconds after it", s)
		}
		if n*float64(unit) > float64(100*365*24*time.Hour) {
			return 0, fmt.Errorf("%q: too long", s)
		}
		d += time.Duration(n * float64(unit))
		rest = rest[i+1:]
		parts++
	}
	if parts == 0 {
		return 0, fmt.Errorf("%q has no duration", s)
	}
	return d, nil
}

// isoDuration writes d as PTnS (or PnDTnS).
func isoDuration(d time.Duration) string {
	days := d / (24 * time.Hour)
	d -= days * 24 * time.Hour
	out := "P"
	if days > 0 {
		out += strconv.FormatInt(int64(days), 10) + "D"
	}
	if d > 0 || days == 0 {
		out += "T" + strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "S"
	}
	return out
}

// ConfigSource is where the coordinator finds each group's saved
// settings (the metadata image, on a node).
type ConfigSource interface {
	// ShareGroupConfig is group's own settings (nil: none), the
	// generation they were set at (it changes with each change and each
	// delete of the group's state; 0: never set), the generation of the
	// group's last delete (0: never) and the topics that delete named
	// (none: all of the group's state).
	ShareGroupConfig(group string) (configs map[string]string, generation, deleted uint64, deletedTopics []string)
}

// ApplyGroupConfigs returns base with the settings of kv, or the first
// one that is unknown or out of range (share.ErrInvalidConfig).
func ApplyGroupConfigs(base GroupConfig, kv map[string]string) (GroupConfig, error) {
	out := base
	for k, v := range kv {
		if err := setGroupKey(&out, k, v); err != nil {
			return base, err
		}
	}
	return out, out.Partition.Validate()
}

func setGroupKey(c *GroupConfig, k, v string) error {
	switch k {
	case KeyKeyOrdering:
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("%w: %s=%q: want true or false", share.ErrInvalidConfig, k, v)
		}
		c.Partition.KeyOrdering = b
	case KeyDeadLetterTopic:
		c.DeadLetterTopic = strings.TrimSpace(v)
	case KeyDeadLetterCopyRecord:
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("%w: %s=%q: want true or false", share.ErrInvalidConfig, k, v)
		}
		c.DeadLetterCopyRecord = b
	case KeyRecordLockDuration:
		ms, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		d := time.Duration(ms) * time.Millisecond
		if err != nil || d < MinRecordLockDuration || d > MaxRecordLockDuration {
			return fmt.Errorf("%w: %s=%q: want milliseconds from %d to %d", share.ErrInvalidConfig, k, v, MinRecordLockDuration.Milliseconds(), MaxRecordLockDuration.Milliseconds())
		}
		c.Partition.RecordLockDuration = d
	case KeyDeliveryCountLimit:
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 || n > MaxDeliveryCountLimit {
			return fmt.Errorf("%w: %s=%q: want a count from 1 to %d", share.ErrInvalidConfig, k, v, MaxDeliveryCountLimit)
		}
		c.Partition.DeliveryCountLimit = n
	case KeyAutoOffsetReset:
		r, err := ParseReset(v)
		if err != nil {
			return err
		}
		c.Reset = r
	case KeyMaxInFlightPerKey:
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 || n > MaxMaxInFlightPerKey {
			return fmt.Errorf("%w: %s=%q: want a positive count of records, at most %d", share.ErrInvalidConfig, k, v, MaxMaxInFlightPerKey)
		}
		c.Partition.MaxInFlightPerKey = n
	case KeyMaxRecordLocks:
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < MinMaxRecordLocks || n > MaxMaxRecordLocks {
			return fmt.Errorf("%w: %s=%q: want a count of records from %d to %d", share.ErrInvalidConfig, k, v, MinMaxRecordLocks, MaxMaxRecordLocks)
		}
		c.Partition.MaxRecordLocks = n
	case KeyIsolationLevel:
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "read_uncommitted":
			c.ReadCommitted = false
		case "read_committed":
			c.ReadCommitted = true
		default:
			return fmt.Errorf("%w: %s=%q: want read_uncommitted or read_committed", share.ErrInvalidConfig, k, v)
		}
	default:
		return fmt.Errorf("%w: unknown share group config %q (a share group takes %s)", share.ErrInvalidConfig, k, strings.Join(GroupConfigKeys, ", "))
	}
	return nil
}

// GroupConfigValue is key's value in c, as the config describes it.
func GroupConfigValue(c GroupConfig, key string) string {
	switch key {
	case KeyKeyOrdering:
		return strconv.FormatBool(c.Partition.KeyOrdering)
	case KeyDeadLetterTopic:
		return c.DeadLetterTopic
	case KeyDeadLetterCopyRecord:
		return strconv.FormatBool(c.DeadLetterCopyRecord)
	case KeyRecordLockDuration:
		return strconv.FormatInt(c.Partition.RecordLockDuration.Milliseconds(), 10)
	case KeyDeliveryCountLimit:
		return strconv.Itoa(c.Partition.DeliveryCountLimit)
	case KeyAutoOffsetReset:
		return c.Reset.String()
	case KeyMaxInFlightPerKey:
		return strconv.Itoa(c.Partition.MaxInFlightPerKey)
	case KeyMaxRecordLocks:
		return strconv.Itoa(c.Partition.MaxRecordLocks)
	case KeyIsolationLevel:
		if c.ReadCommitted {
			return "read_committed"
		}
		return "read_uncommitted"
	}
	return ""
}

// DefaultGroupConfig is a group's settings when it sets none: the node's.
func (c *Coordinator) DefaultGroupConfig() GroupConfig {
	return GroupConfig{Partition: c.cfg.Partition, Reset: c.nodeReset()}
}

func (c *Coordinator) nodeReset() Reset {
	return Reset{Earliest: c.cfg.ResetEarliest, Latest: !c.cfg.ResetEarliest}
}
