package storage

import (
	"hash/maphash"
	"math/bits"
)

// offsetMap maps the keys of a log's dirty section to the offset of their
// latest record, in bounded memory (Kafka's SkimpyOffsetMap): an open
// addressing table of 24-byte slots, a 128-bit hash of the key (two
// maphash sums with different seeds) and the offset. Keys themselves are
// not kept; two keys colliding in 128 bits would count as one, which at
// 2^-128 per pair is far below the odds of an undetected disk error.
//
// The table grows by doubling up to maxSlots (the memory it may use, all
// of it: a slot is found by multiplying the hash by the table size, so
// the size need not be a power of two); it is full when it holds
// offsetMapLoadFactor of its largest size, and then refuses new keys
// (put returns false) so that the cleaner cleans the prefix of the dirty
// section it has mapped.
type offsetMap struct {
	seed1, seed2 maphash.Seed
	slots        []mapSlot
	used         int
	maxSlots     int
	// latest is the largest offset put, -1 if none.
	latest int64
}

// mapSlot is one entry; off is -1 in an empty slot.
type mapSlot struct {
	h1, h2 uint64
	off    int64
}

// offsetMapSlotBytes is the memory of one slot.
const offsetMapSlotBytes = 24

// offsetMapLoadFactor is the most of its slots the table fills (Kafka's
// log.cleaner.io.buffer.load.factor default).
const offsetMapLoadFactor = 0.9

// newOffsetMap returns a map using at most memBytes of slots (at least
// 16 slots).
func newOffsetMap(memBytes int64) *offsetMap {
	maxSlots := int(max(memBytes/offsetMapSlotBytes, 16))
	m := &offsetMap{seed1: maphash.MakeSeed(), seed2: maphash.MakeSeed(), maxSlots: maxSlots, latest: -1}
	m.slots = newSlots(min(1024, maxSlots))
	return m
}

func newSlots(n int) []mapSlot {
	s := make([]mapSlot, n)
	for i := range s {
		s[i].off = -1
	}
	return s
}

// capacity is the most keys the map takes.
func (m *offsetMap) capacity() int { return int(float64(m.maxSlots) * offsetMapLoadFactor) }

// reset empties the map, keeping its memory.
func (m *offsetMap) reset() {
	for i := range m.slots {
		m.slots[i].off = -1
	}
	m.used, m.latest = 0, -1
}

func (m *offsetMap) hash(key []byte) (uint64, uint64) {
	return maphash.Bytes(m.seed1, key), maphash.Bytes(m.seed2, key)
}

// find returns the slot of (h1, h2) or the empty slot where it would go.
func (m *offsetMap) find(h1, h2 uint64) int {
	n := len(m.slots)
	hi, _ := bits.Mul64(h1, uint64(n))
	i := int(hi)
	for {
		s := &m.slots[i]
		if s.off < 0 || (s.h1 == h1 && s.h2 == h2) {
			return i
		}
		if i++; i == n {
			i = 0
		}
	}
}

// put records offset as the latest of key. It returns false, changing
// nothing, when key is new and the map is full.
func (m *offsetMap) put(key []byte, offset int64) bool {
	h1, h2 := m.hash(key)
	i := m.find(h1, h2)
	if m.slots[i].off < 0 {
		if m.used+1 > int(float64(len(m.slots))*offsetMapLoadFactor) {
			if len(m.slots) >= m.maxSlots || !m.grow() {
				return false
			}
			i = m.find(h1, h2)
		}
		m.used++
		m.slots[i] = mapSlot{h1: h1, h2: h2}
	}
	m.slots[i].off = offset
	m.latest = max(m.latest, offset)
	return true
}

// grow doubles the table, up to maxSlots.
func (m *offsetMap) grow() bool {
	if len(m.slots) >= m.maxSlots {
		return false
	}
	n := min(len(m.slots)*2, m.maxSlots)
	old := m.slots
	m.slots = newSlots(n)
	for _, s := range old {
		if s.off >= 0 {
			m.slots[m.find(s.h1, s.h2)] = s
		}
	}
	return true
}

// get returns the latest offset of key, or -1.
func (m *offsetMap) get(key []byte) int64 {
	h1, h2 := m.hash(key)
	return m.slots[m.find(h1, h2)].off
}

// memory is the bytes the map's slots take now.
func (m *offsetMap) memory() int64 { return int64(len(m.slots)) * offsetMapSlotBytes }
