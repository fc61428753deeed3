// Package partitioner holds the partition choices Quire shares with Kafka,
// so that a key lands on the same partition whether a Java Kafka client, a
// Quire client or a Quire broker (ProduceRecords) picks it:
//
//   - Murmur2 is Kafka's Utils.murmur2 (seed 0x9747b28c), bit for bit.
//   - KeyPartition is toPositive(murmur2(key)) % n, as Kafka's
//     DefaultPartitioner and BuiltInPartitioner compute it.
//   - Sticky keeps keyless records on one partition until a batch's worth of
//     bytes has gone there, then moves on (Kafka's KIP-480 / KIP-794 idea),
//     so keyless records fill batches instead of spraying single records.
package partitioner

import (
	"math/rand/v2"
	"sync"
)

// Murmur2 is Kafka's Utils.murmur2: the 32-bit MurmurHash2 with seed
// 0x9747b28c, read little-endian four bytes at a time, returned as Java's
// signed int.
func Murmur2(data []byte) int32 {
	const (
		seed uint32 = 0x9747b28c
		m    uint32 = 0x5bd1e995
		r           = 24
	)
	h := seed ^ uint32(len(data))
	b := data
	for len(b) >= 4 {
		k := uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
		b = b[4:]
	}
	switch len(b) {
	case 3:
		h ^= uint32(b[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(b[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(b[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}

// ToPositive is Kafka's Utils.toPositive: it clears the sign bit (it does
// not take the absolute value).
func ToPositive(n int32) int32 { return n & 0x7fffffff }

// KeyPartition returns the partition Kafka's default partitioner chooses
// for a non-null key among numPartitions partitions. It returns 0 when
// numPartitions is not positive.
func KeyPartition(key []byte, numPartitions int32) int32 {
	if numPartitions <= 0 {
		return 0
	}
	return ToPositive(Murmur2(key)) % numPartitions
}

// Sticky chooses partitions for keyless records: it sticks to one partition
// per topic until SwitchBytes bytes have been sent there, then picks another
// at random. It is safe for concurrent use.
type Sticky struct {
	switchBytes int

	mu     sync.Mutex
	topics map[string]*stickyState
}

type stickyState struct {
	partition int32
	n         int32 // partition count the choice was made for
	bytes     int
}

// NewSticky returns a sticky partitioner that moves on after switchBytes
// bytes (values below 1 mean 16384, Kafka's batch.size default).
func NewSticky(switchBytes int) *Sticky {
	if switchBytes < 1 {
		switchBytes = 16384
	}
	return &Sticky{switchBytes: switchBytes, topics: make(map[string]*stickyState)}
}

// Partition returns the partition for a keyless record of size bytes on
// topic, which has numPartitions partitions.
func (s *Sticky) Partition(topic string, numPartitions int32, size int) int32 {
	if numPartitions <= 1 {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.topics[topic]
	if st == nil {
		st = &stickyState{partition: rand.Int32N(numPartitions), n: numPartitions}
		s.topics[topic] = st
	}
	if st.n != numPartitions || st.partition >= numPartitions {
		st.n = numPartitions
		st.partition = rand.Int32N(numPartitions)
		st.bytes = 0
	}
	if st.bytes >= s.switchBytes {
		next := rand.Int32N(numPartitions - 1)
		if next >= st.partition {
			next++
		}
		st.partition = next
		st.bytes = 0
	}
	st.bytes += size
	return st.partition
}
