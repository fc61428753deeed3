package atomichist

import (
	"testing"
	"time"
)

func TestHistogramBuckets(t *testing.T) {
	var h Histogram
	h.Observe(50 * time.Microsecond) // first bucket
	h.Observe(time.Millisecond)      // exactly on a bound: counted at it
	h.Observe(time.Minute)           // past the last bound
	s := h.Snapshot()
	if s.Count != 3 || s.Sum != 50*time.Microsecond+time.Millisecond+time.Minute {
		t.Fatalf("count %d sum %v", s.Count, s.Sum)
	}
	if s.Cumulative[0] != 1 || s.Cumulative[3] != 2 || s.Cumulative[len(Bounds)-1] != 2 {
		t.Fatalf("cumulative %v", s.Cumulative)
	}
}
