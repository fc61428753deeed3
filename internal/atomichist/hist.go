// Package atomichist is a fixed-bucket latency histogram updated with
// atomic adds only, for hot paths; readers take a Snapshot.
package atomichist

import (
	"sync/atomic"
	"time"
)

// Bounds are the upper bounds of the buckets, in seconds (Prometheus'
// "le"), from 100µs to 10s; one more bucket counts everything above.
var Bounds = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

var boundsNanos = func() []int64 {
	out := make([]int64, len(Bounds))
	for i, b := range Bounds {
		out[i] = int64(b * 1e9)
	}
	return out
}()

// Histogram counts durations into Bounds. The zero value is ready.
type Histogram struct {
	buckets [17]atomic.Uint64 // len(Bounds)+1
	sum     atomic.Int64      // nanoseconds
}

// Observe counts one duration.
func (h *Histogram) Observe(d time.Duration) {
	n := int64(d)
	i := 0
	for i < len(boundsNanos) && n > boundsNanos[i] {
		i++
	}
	h.buckets[i].Add(1)
	h.sum.Add(n)
}

// Snapshot is a histogram's state at one moment.
type Snapshot struct {
	// Cumulative holds, for each of Bounds, how many observations were at
	// or below it.
	Cumulative []uint64
	Count      uint64
	Sum        time.Duration
}

// Snapshot reads the histogram (each bucket atomically; the whole only
// approximately consistent while observations go on).
func (h *Histogram) Snapshot() Snapshot {
	s := Snapshot{Cumulative: make([]uint64, len(Bounds))}
	var c uint64
	for i := range h.buckets {
		c += h.buckets[i].Load()
		if i < len(Bounds) {
			s.Cumulative[i] = c
		}
	}
	s.Count, s.Sum = c, time.Duration(h.sum.Load())
	return s
}
