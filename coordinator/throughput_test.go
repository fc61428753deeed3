package coordinator

import (
	"math"
	"testing"
	"time"

	"github.com/quirelog/quire/group"
	"github.com/quirelog/quire/metadata"
)

// TestCoordinatorThroughputArithmetic: the time to drain is the lag over
// the consume rate less the produce rate; the members needed are the
// produce rate over what one member reads now, rounded up, at least 1
// while records come in and at most the partition count; a figure that
// cannot be known is -1.
func TestCoordinatorThroughputArithmetic(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name             string
		lag              int64
		consume, produce float64
		members, parts   int
		drain            float64
		needed           int
	}{
		{"draining", 1000, 300, 100, 2, 8, 5, 1},
		{"falling behind", 1000, 100, 300, 2, 8, -1, 6},
		{"keeping up exactly", 1000, 200, 200, 4, 8, -1, 4},
		{"caught up", 0, 200, 200, 4, 8, 0, 4},
		{"capped by the partitions", 500, 100, 1000, 1, 3, -1, 3},
		{"nothing produced", 500, 50, 0, 3, 8, 10, 0},
		{"quotient exactly whole", 10, 0.3, 0.9, 3, 12, -1, 9},
		{"no members", 500, 0, 100, 0, 8, -1, -1},
		{"members reading nothing", 500, 0, 100, 2, 8, -1, -1},
		{"rates unknown", 500, -1, -1, 2, 8, -1, -1},
		{"produce rate unknown", 500, 100, -1, 2, 8, -1, -1},
		{"lag unknown", -1, 300, 100, 2, 8, -1, 1},
		{"few records, many members", 5, 1000, 10, 10, 8, 5.0 / 990, 1},
	}
	for _, c := range cases {
		got := throughput(c.lag, c.consume, c.produce, c.members, c.parts)
		if math.Abs(got.DrainSeconds-c.drain) > 1e-9 || got.MembersNeeded != c.needed {
			t.Errorf("%s: drain %v s, %d members needed; want %v s, %d", c.name, got.DrainSeconds, got.MembersNeeded, c.drain, c.needed)
		}
		if got.Lag != c.lag || got.ConsumeRate != c.consume || got.ProduceRate != c.produce || got.Members != c.members || got.Partitions != c.parts {
			t.Errorf("%s: inputs not carried: %+v", c.name, got)
		}
	}
}

// TestCoordinatorRateSeries: a rate spans the window's values (the
// newest one before the window kept, so it spans the whole window), is
// unknown with fewer than two, and starts again when the counter goes
// back.
func TestCoordinatorRateSeries(t *testing.T) {
	t.Parallel()
	var s rateSeries
	t0 := time.UnixMilli(1_000_000)
	const window = 10 * time.Second
	if _, ok := s.rate(); ok {
		t.Fatal("a rate with no values")
	}
	s.add(t0, 100, window)
	if _, ok := s.rate(); ok {
		t.Fatal("a rate with one value")
	}
	s.add(t0, 150, window) // no time passed: ignored
	s.add(t0.Add(5*time.Second), 150, window)
	if r, ok := s.rate(); !ok || r != 10 {
		t.Fatalf("rate %v %v, want 10/s", r, ok)
	}
	// 20 s on: the values older than the window go but the newest of
	// them, at t0+15s.
	s.add(t0.Add(15*time.Second), 350, window)
	s.add(t0.Add(25*time.Second), 450, window)
	if r, _ := s.rate(); len(s.pts) != 2 || r != 10 {
		t.Fatalf("rate %v over %d values, want 10/s over 2", r, len(s.pts))
	}
	s.add(t0.Add(30*time.Second), 10, window) // reset back
	if _, ok := s.rate(); ok || len(s.pts) != 1 {
		t.Fatalf("after going back: %d values", len(s.pts))
	}
}

// TestCoordinatorRateHistory: a group's consume rate sums its partitions'
// committed offset rates, the produce rate their high watermarks'; a
// partition no longer committed in is forgotten.
func TestCoordinatorRateHistory(t *testing.T) {
	t.Parallel()
	var h rateHistory
	t0 := time.UnixMilli(1_000_000)
	p0, p1 := group.TopicPartition{Topic: "t", Partition: 0}, group.TopicPartition{Topic: "t", Partition: 1}
	look := func(sec int, c0, c1, hw0, hw1 int64) {
		at := t0.Add(time.Duration(sec) * time.Second)
		h.record(at, map[string][]metadata.CommittedOffset{"g": {{Topic: "t", Partition: 0, Offset: c0}, {Topic: "t", Partition: 1, Offset: c1}}},
			map[group.TopicPartition]lagSample{p0: {hw: hw0, at: at}, p1: {hw: hw1, at: at}}, time.Minute)
	}
	look(0, 0, 10, 100, 100)
	if c, p := h.rates("g", []group.TopicPartition{p0, p1}); c != -1 || p != -1 {
		t.Fatalf("after one look: consume %v, produce %v; want -1, -1", c, p)
	}
	look(10, 50, 30, 200, 150)
	if c, p := h.rates("g", []group.TopicPartition{p0, p1}); c != 7 || p != 15 {
		t.Fatalf("consume %v, produce %v; want 7/s, 15/s", c, p)
	}
	if c, _ := h.rates("other", []group.TopicPartition{p0, p1}); c != -1 {
		t.Fatalf("another group's consume rate %v", c)
	}
	h.record(t0.Add(20*time.Second), map[string][]metadata.CommittedOffset{"g": {{Topic: "t", Partition: 0, Offset: 60}}},
		map[group.TopicPartition]lagSample{p0: {hw: 300, at: t0.Add(20 * time.Second)}}, time.Minute)
	if _, ok := h.committed[groupTP{"g", p1}]; ok || h.hw[p1] != nil {
		t.Fatal("partition 1 kept after the group stopped committing in it")
	}
	if c, p := h.rates("g", []group.TopicPartition{p0, p1}); c != 3 || p != 10 {
		t.Fatalf("consume %v, produce %v; want 3/s, 10/s", c, p)
	}
}
