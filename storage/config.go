package storage

import (
	"fmt"
	"math"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/quirelog/quire/internal/atomichist"
)

// LogConfig holds the per-log settings, named after Kafka's topic configs.
type LogConfig struct {
	// SegmentBytes (segment.bytes): roll when the active segment would
	// grow past this size.
	SegmentBytes int64
	// SegmentMs (segment.ms): roll when the newest timestamp is this much
	// later than the first batch of the active segment.
	SegmentMs int64
	// IndexIntervalBytes (index.interval.bytes): bytes of log between
	// offset index entries.
	IndexIntervalBytes int32
	// SegmentIndexBytes (segment.index.bytes): the largest an index file
	// grows to (it is not preallocated); a full index rolls the segment.
	SegmentIndexBytes int32
	// RetentionMs (retention.ms): delete segments whose newest record is
	// older than this; -1 keeps them forever.
	RetentionMs int64
	// RetentionBytes (retention.bytes): delete old segments while the log
	// is larger than this; -1 means no limit.
	RetentionBytes int64
	// FlushMessages (flush.messages): fsync after this many records;
	// 0 or math.MaxInt64 turns it off (the default: replication is the
	// durability).
	FlushMessages int64
	// FlushMs (flush.ms): fsync when the log has been dirty this long,
	// checked by Manager.FlushDirty; 0 or math.MaxInt64 turns it off.
	FlushMs int64
	// MaxMessageBytes (max.message.bytes): largest batch accepted.
	MaxMessageBytes int32
	// Preallocate (preallocate): reserve disk blocks for the active
	// segment ahead of its appends, an eighth of its size at a time
	// (64 KiB to 16 MiB), without
	// changing the file's size (fallocate with FALLOC_FL_KEEP_SIZE on
	// Linux; nothing elsewhere). Writes into reserved blocks skip the
	// filesystem's block allocation (about 8% faster on ext4) and the
	// segment ends up in fewer extents. Unlike Kafka's preallocate, which
	// sizes the file to segment.bytes and is off by default for that
	// reason, at most 16 MiB is held past the data of each active
	// segment, and it is given back when the segment rolls or closes.
	Preallocate bool
	// ProducerIDExpirationMs (producer.id.expiration.ms): forget an
	// idempotent producer's state once its latest batch's timestamp is
	// this old (Log.ExpireProducers).
	ProducerIDExpirationMs int64

	// Compact and Delete are cleanup.policy: compact keeps the latest
	// record of each key (the cleaner, see Log.Clean), delete applies
	// retention.ms and retention.bytes; both may be set
	// ("compact,delete"), not neither.
	Compact, Delete bool
	// MinCleanableDirtyRatio (min.cleanable.dirty.ratio): the share of a
	// log's cleanable bytes that must be dirty (written since its last
	// clean) before the cleaner takes it.
	MinCleanableDirtyRatio float64
	// MinCompactionLagMs (min.compaction.lag.ms): a record younger than
	// this (by its segment's newest timestamp) is never compacted away.
	MinCompactionLagMs int64
	// MaxCompactionLagMs (max.compaction.lag.ms): a log whose dirty
	// section holds a record older than this is cleaned whatever its
	// dirty ratio, and its active segment is rolled at that age so that
	// its records become cleanable.
	MaxCompactionLagMs int64
	// DeleteRetentionMs (delete.retention.ms): a tombstone (a record with
	// a key and a null value) is kept this long after its timestamp, so
	// that consumers see the delete, then cleaned away.
	DeleteRetentionMs int64
}

// DefaultLogConfig returns Kafka's defaults.
func DefaultLogConfig() LogConfig {
	return LogConfig{
		SegmentBytes:       1 << 30,
		SegmentMs:          7 * 24 * time.Hour.Milliseconds(),
		IndexIntervalBytes: 4096,
		SegmentIndexBytes:  10 << 20,
		RetentionMs:        168 * time.Hour.Milliseconds(),
		RetentionBytes:     -1,
		FlushMessages:      math.MaxInt64,
		FlushMs:            math.MaxInt64,
		MaxMessageBytes:    1048588,
		Preallocate:        true,

		ProducerIDExpirationMs: 24 * time.Hour.Milliseconds(),

		Delete:                 true,
		MinCleanableDirtyRatio: 0.5,
		MinCompactionLagMs:     0,
		MaxCompactionLagMs:     math.MaxInt64,
		DeleteRetentionMs:      24 * time.Hour.Milliseconds(),
	}
}

// Validate reports the first out-of-range field.
func (c LogConfig) Validate() error {
	switch {
	case c.SegmentBytes < 14:
		return fmt.Errorf("%w: segment.bytes %d < 14", ErrInvalidConfig, c.SegmentBytes)
	case c.SegmentMs < 1:
		return fmt.Errorf("%w: segment.ms %d < 1", ErrInvalidConfig, c.SegmentMs)
	case c.IndexIntervalBytes < 0:
		return fmt.Errorf("%w: index.interval.bytes %d < 0", ErrInvalidConfig, c.IndexIntervalBytes)
	case c.SegmentIndexBytes < 4*timeIndexEntrySize:
		return fmt.Errorf("%w: segment.index.bytes %d < %d", ErrInvalidConfig, c.SegmentIndexBytes, 4*timeIndexEntrySize)
	case c.RetentionMs < -1:
		return fmt.Errorf("%w: retention.ms %d < -1", ErrInvalidConfig, c.RetentionMs)
	case c.RetentionBytes < -1:
		return fmt.Errorf("%w: retention.bytes %d < -1", ErrInvalidConfig, c.RetentionBytes)
	case c.FlushMessages < 0 || c.FlushMs < 0:
		return fmt.Errorf("%w: flush.messages and flush.ms must be >= 0", ErrInvalidConfig)
	case c.ProducerIDExpirationMs < 1:
		return fmt.Errorf("%w: producer.id.expiration.ms %d < 1", ErrInvalidConfig, c.ProducerIDExpirationMs)
	case c.MaxMessageBytes < 0:
		return fmt.Errorf("%w: max.message.bytes %d < 0", ErrInvalidConfig, c.MaxMessageBytes)
	case !c.Compact && !c.Delete:
		return fmt.Errorf("%w: cleanup.policy must be compact, delete or both", ErrInvalidConfig)
	case !(c.MinCleanableDirtyRatio >= 0 && c.MinCleanableDirtyRatio <= 1):
		return fmt.Errorf("%w: min.cleanable.dirty.ratio %v not in [0, 1]", ErrInvalidConfig, c.MinCleanableDirtyRatio)
	case c.MinCompactionLagMs < 0:
		return fmt.Errorf("%w: min.compaction.lag.ms %d < 0", ErrInvalidConfig, c.MinCompactionLagMs)
	case c.MaxCompactionLagMs < 1:
		return fmt.Errorf("%w: max.compaction.lag.ms %d < 1", ErrInvalidConfig, c.MaxCompactionLagMs)
	case c.DeleteRetentionMs < 0:
		return fmt.Errorf("%w: delete.retention.ms %d < 0", ErrInvalidConfig, c.DeleteRetentionMs)
	}
	return nil
}

func (c LogConfig) flushMessagesOn() bool {
	return c.FlushMessages > 0 && c.FlushMessages != math.MaxInt64
}
func (c LogConfig) flushMsOn() bool { return c.FlushMs > 0 && c.FlushMs != math.MaxInt64 }

// Options are the process-wide dependencies of a log.
type Options struct {
	// FS is the filesystem; nil means the operating system's.
	FS FS
	// Logger may be nil.
	Logger hclog.Logger
	// Now is the clock for retention, rolling and flush.ms; nil means
	// time.Now.
	Now func() time.Time
	// Files bounds the segment files the logs hold open; nil means a
	// cache of DefaultFileCacheCapacity for each Manager (its logs share
	// it) or for each log opened alone.
	Files *FileCache
	// RecoveryThreads (num.recovery.threads.per.data.dir) is how many logs
	// OpenManager opens (recovers) at once and Manager.Close closes
	// (flushes) at once; 0 means 2, Kafka's default.
	RecoveryThreads int

	// flushLatency times the fsyncs of Log.Flush; shared by the logs of one
	// Manager (Manager.Stats).
	flushLatency *atomichist.Histogram
}

func (o Options) recoveryThreads() int {
	if o.RecoveryThreads <= 0 {
		return 2
	}
	return o.RecoveryThreads
}

func (o Options) withDefaults() Options {
	if o.FS == nil {
		o.FS = OSFS{}
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Files == nil {
		o.Files = NewFileCache(0)
	}
	if o.flushLatency == nil {
		o.flushLatency = &atomichist.Histogram{}
	}
	return o
}
