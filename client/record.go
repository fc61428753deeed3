package client

import (
	"cmp"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/quirelog/quire/partitioner"
	"github.com/quirelog/quire/record"
)

// RecordHeader is one record header; a nil Value is null.
type RecordHeader = record.RecordHeader

// Record is one record, produced or consumed.
//
// To produce, set Topic, Value and optionally Key, Headers and Timestamp
// (zero means now: the producer's clock reading, refreshed every
// millisecond while it is busy, so up to about a millisecond early);
// Partition is only read by ManualPartitioner. When the
// produce completes, Partition and Offset say where the record landed.
// Consumed records have every field set; their Key and Value share memory
// with the fetch response and stay valid as long as the record is held.
type Record struct {
	Topic     string
	Partition int32
	Offset    int64
	Timestamp time.Time
	Key       []byte
	Value     []byte
	Headers   []RecordHeader
	// LeaderEpoch is the leader epoch of the batch a consumed record came in.
	LeaderEpoch int32
	// FencingEpoch is, for a record of a GroupConsumer, the member epoch
	// at which the group gave the member the record's partition; 0
	// otherwise. See FencingToken.
	FencingEpoch int32
}

// FencingToken is a consumed record's fencing token: (FencingEpoch,
// Offset), compared in that order. For a partition of a group it only
// grows, across rebalances and coordinator failovers: a member is given a
// partition at an epoch above every epoch at which any earlier owner held
// it, so a database that stores the highest token beside the results it
// derived from the partition can refuse the late writes of a member that
// lost it (docs/transactions.md, Exactly-once into a database). Deleting
// the group and creating it again starts the epochs again.
type FencingToken struct {
	Epoch  int32
	Offset int64
}

// FencingToken is r's fencing token.
func (r *Record) FencingToken() FencingToken {
	return FencingToken{Epoch: r.FencingEpoch, Offset: r.Offset}
}

// Compare is -1, 0 or +1 as t is below, equal to or above u.
func (t FencingToken) Compare(u FencingToken) int {
	return cmp.Or(cmp.Compare(t.Epoch, u.Epoch), cmp.Compare(t.Offset, u.Offset))
}

// StringRecord returns a record with a string value for topic.
func StringRecord(topic, value string) *Record {
	return &Record{Topic: topic, Value: []byte(value)}
}

// KeyStringRecord returns a record with a string key and value for topic.
func KeyStringRecord(topic, key, value string) *Record {
	return &Record{Topic: topic, Key: []byte(key), Value: []byte(value)}
}

// size estimates the encoded size of r inside a batch.
func (r *Record) size() int {
	n := 21 + len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += 10 + len(h.Key) + len(h.Value)
	}
	return n
}

// Partitioner chooses the partition of each produced record. Partition is
// called with the topic's current partition count (at least 1) and must
// return a partition in [0, numPartitions). It is called from the
// goroutine calling Produce and must be safe for concurrent use.
type Partitioner interface {
	Partition(r *Record, numPartitions int32) int32
}

// PartitionerFunc adapts a function to a Partitioner.
type PartitionerFunc func(r *Record, numPartitions int32) int32

// Partition calls f.
func (f PartitionerFunc) Partition(r *Record, n int32) int32 { return f(r, n) }

// DefaultPartitioner is Kafka's default: records with a key go to
// murmur2(key) % partitions (the partition Kafka's Java client picks),
// keyless records stick to one partition until stickyBytes bytes went
// there, then move on.
func DefaultPartitioner(stickyBytes int) Partitioner {
	s := partitioner.NewSticky(stickyBytes)
	return PartitionerFunc(func(r *Record, n int32) int32 {
		if r.Key != nil {
			return partitioner.KeyPartition(r.Key, n)
		}
		return s.Partition(r.Topic, n, r.size())
	})
}

// ManualPartitioner sends each record to its Partition field.
func ManualPartitioner() Partitioner {
	return PartitionerFunc(func(r *Record, _ int32) int32 { return r.Partition })
}

// KeyPartitioner hashes keys like DefaultPartitioner but sends keyless
// records round-robin.
func KeyPartitioner() Partitioner {
	var next atomic.Uint32
	next.Store(rand.Uint32())
	return PartitionerFunc(func(r *Record, n int32) int32 {
		if r.Key != nil {
			return partitioner.KeyPartition(r.Key, n)
		}
		return int32(next.Add(1) % uint32(n))
	})
}

// RoundRobinPartitioner ignores keys and cycles over the partitions.
func RoundRobinPartitioner() Partitioner {
	var next atomic.Uint32
	return PartitionerFunc(func(_ *Record, n int32) int32 {
		return int32((next.Add(1) - 1) % uint32(n))
	})
}
