package share

import (
	"errors"
	"fmt"
	"time"
)

// Defaults, named after Kafka's configuration keys.
const (
	// DefaultRecordLockDuration is group.share.record.lock.duration.ms.
	DefaultRecordLockDuration = 30 * time.Second
	// DefaultDeliveryCountLimit is group.share.delivery.count.limit.
	DefaultDeliveryCountLimit = 5
	// DefaultMaxRecordLocks is group.share.partition.max.record.locks: the
	// most records one share-partition keeps in its window.
	DefaultMaxRecordLocks = 2000
)

// Config tunes one share-partition.
type Config struct {
	// RecordLockDuration is how long an acquired record stays locked to its
	// member (group.share.record.lock.duration.ms).
	RecordLockDuration time.Duration
	// DeliveryCountLimit is how many times a record is delivered before it
	// is archived as a dead letter (group.share.delivery.count.limit).
	DeliveryCountLimit int
	// MaxRecordLocks bounds the window: records past start+MaxRecordLocks
	// are not taken in until the start offset moves
	// (group.share.partition.max.record.locks).
	MaxRecordLocks int
	// KeyOrdering turns on per-key ordering (share.key.ordering).
	KeyOrdering bool
	// MaxInFlightPerKey bounds how many records of one key one member holds
	// at once with KeyOrdering (max.in.flight.per.key); 0 means no bound.
	MaxInFlightPerKey int
}

// DefaultConfig returns Kafka's defaults, without per-key ordering.
func DefaultConfig() Config {
	return Config{
		RecordLockDuration: DefaultRecordLockDuration,
		DeliveryCountLimit: DefaultDeliveryCountLimit,
		MaxRecordLocks:     DefaultMaxRecordLocks,
	}
}

// ErrInvalidConfig is returned by Validate.
var ErrInvalidConfig = errors.New("share: invalid configuration")

// Validate reports the first setting out of range.
func (c Config) Validate() error {
	switch {
	case c.RecordLockDuration <= 0:
		return fmt.Errorf("%w: group.share.record.lock.duration.ms must be positive, got %v", ErrInvalidConfig, c.RecordLockDuration)
	case c.DeliveryCountLimit < 1:
		return fmt.Errorf("%w: group.share.delivery.count.limit must be at least 1, got %d", ErrInvalidConfig, c.DeliveryCountLimit)
	case c.MaxRecordLocks < 1:
		return fmt.Errorf("%w: group.share.partition.max.record.locks must be at least 1, got %d", ErrInvalidConfig, c.MaxRecordLocks)
	case c.MaxInFlightPerKey < 0:
		return fmt.Errorf("%w: max.in.flight.per.key must not be negative, got %d", ErrInvalidConfig, c.MaxInFlightPerKey)
	}
	return nil
}
