package replica

import (
	"fmt"
	"math/bits"
	"strings"
	"sync/atomic"
	"time"
)

// Stage is one step of the way a leader's append takes to its readers.
// Each is timed from the append, so a record that waits somewhere shows
// in that step and every later one.
type Stage int

// The stages, in the order records pass them.
const (
	// StageFollowerRead: a follower's fetch read the append.
	StageFollowerRead Stage = iota
	// StageReplicated: the high watermark passed it (every in-sync
	// replica has it; consumers may read it).
	StageReplicated
	// StageAcked: its acks=all produce was answered.
	StageAcked
	// StageDelivered: a consumer's fetch read it.
	StageDelivered
	// NumStages is how many stages there are.
	NumStages
)

var stageNames = [NumStages]string{"follower_read", "replicated", "acked", "delivered"}

func (s Stage) String() string {
	if s < 0 || s >= NumStages {
		return fmt.Sprintf("stage(%d)", int(s))
	}
	return stageNames[s]
}

// Stages lists every stage in order.
func Stages() []Stage { return []Stage{StageFollowerRead, StageReplicated, StageAcked, StageDelivered} }

// histBuckets log2 buckets of microseconds: bucket 0 counts durations
// under 1 µs, bucket i in [2^(i-1), 2^i) µs; the last takes everything
// longer (over 2^(histBuckets-2) µs, about 18 minutes).
const histBuckets = 32

// Histogram is a latency distribution in log2 buckets of microseconds.
type Histogram struct {
	Counts [histBuckets]uint64
	Sum    time.Duration
}

// Count is the number of samples.
func (h Histogram) Count() uint64 {
	var n uint64
	for _, c := range h.Counts {
		n += c
	}
	return n
}

// Sub is h minus an earlier snapshot of the same histogram.
func (h Histogram) Sub(earlier Histogram) Histogram {
	for i := range h.Counts {
		h.Counts[i] -= earlier.Counts[i]
	}
	h.Sum -= earlier.Sum
	return h
}

// BucketBound is the upper bound of bucket i (exclusive).
func BucketBound(i int) time.Duration { return time.Duration(uint64(1)<<uint(i)) * time.Microsecond }

// Quantile is the upper bound of the bucket holding quantile q (0 to 1):
// a bound within a factor of two. 0 when there is no sample.
func (h Histogram) Quantile(q float64) time.Duration {
	n := h.Count()
	if n == 0 {
		return 0
	}
	rank := uint64(q*float64(n) + 0.5)
	rank = min(max(rank, 1), n)
	var seen uint64
	for i, c := range h.Counts {
		if seen += c; seen >= rank {
			return BucketBound(i)
		}
	}
	return BucketBound(histBuckets - 1)
}

// stageHist is a Histogram filled concurrently with atomics.
type stageHist struct {
	counts [histBuckets]atomic.Uint64
	sum    atomic.Int64
}

func (h *stageHist) observe(d time.Duration) {
	us := uint64(max(d, 0) / time.Microsecond)
	h.counts[min(bits.Len64(us), histBuckets-1)].Add(1)
	h.sum.Add(int64(d))
}

func (h *stageHist) snapshot() Histogram {
	var out Histogram
	for i := range h.counts {
		out.Counts[i] = h.counts[i].Load()
	}
	out.Sum = time.Duration(h.sum.Load())
	return out
}

// StageLatencies is how long the leader's appends took to reach each
// stage, over every partition this broker has led since it started.
func (rm *Manager) StageLatencies() [NumStages]Histogram {
	var out [NumStages]Histogram
	for s := range out {
		out[s] = rm.stages[s].snapshot()
	}
	return out
}

// FormatStages renders a set of stage histograms for a log line:
// "replicated p50 1ms p99 4ms (n 12000)" for each stage with samples.
func FormatStages(hs [NumStages]Histogram) string {
	var parts []string
	for s, h := range hs {
		if h.Count() == 0 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s p50 %v p99 %v p99.9 %v (n %d)", Stage(s), h.Quantile(0.5), h.Quantile(0.99), h.Quantile(0.999), h.Count()))
	}
	return strings.Join(parts, ", ")
}

// traceCap bounds the appends a partition follows at once; past it the
// oldest is let go (its later stages then go uncounted).
const traceCap = 64

// traced is one append being followed through the stages it has left.
type traced struct {
	last int64 // its last offset
	at   time.Time
	done [NumStages]bool
}

// tracer follows a leader's recent appends, oldest first; the partition's
// mu guards it.
type tracer struct {
	pending []traced
}

func (t *tracer) add(last int64, at time.Time) {
	if len(t.pending) == traceCap {
		t.pending = t.pending[1:]
	}
	t.pending = append(t.pending, traced{last: last, at: at})
}

// passed records that every append at or below upTo reached stage s now,
// each the first time, and lets go of appends past every traced stage.
func (t *tracer) passed(hists *[NumStages]stageHist, s Stage, upTo int64, now time.Time) {
	for i := range t.pending {
		a := &t.pending[i]
		if a.last > upTo {
			break
		}
		if !a.done[s] {
			a.done[s] = true
			hists[s].observe(now.Sub(a.at))
		}
	}
	for len(t.pending) > 0 {
		d := t.pending[0].done
		if !d[StageFollowerRead] || !d[StageReplicated] || !d[StageDelivered] {
			break
		}
		t.pending = t.pending[1:]
	}
}

// reset forgets every traced append (leadership changed).
func (t *tracer) reset() { t.pending = t.pending[:0] }
