package coordinator

import (
	"testing"
	"time"

	"github.com/quirelog/quire/group"
)

// TestGroupLagFigures: lag in records is the high watermark minus the
// committed offset, lag in seconds now minus the timestamp of the record
// at the committed offset (growing with the clock while nothing is
// committed), 0 once caught up, and -1 wherever a figure is unknown.
func TestCoordinatorLagFigures(t *testing.T) {
	t.Parallel()
	tp := group.TopicPartition{Topic: "t", Partition: 3}
	at := time.UnixMilli(1_000_000)
	sample := lagSample{hw: 10, ts: map[int64]int64{4: at.UnixMilli() - 1500, 6: -1}, at: at}
	cases := []struct {
		name      string
		committed int64
		s         lagSample
		ok        bool
		now       time.Time
		lag       int64
		secs      float64
	}{
		{"behind", 4, sample, true, at, 6, 1.5},
		{"behind, later", 4, sample, true, at.Add(2 * time.Second), 6, 3.5},
		{"caught up", 10, sample, true, at, 0, 0},
		{"committed past the sampled high watermark", 12, sample, true, at, 0, 0},
		{"no record timestamp", 6, sample, true, at, 4, -1},
		{"offset not asked", 5, sample, true, at, 5, -1},
		{"never committed", -1, sample, true, at, -1, -1},
		{"no answer from the leader", 4, lagSample{}, false, at, -1, -1},
		{"leader without a high watermark", 4, lagSample{hw: -1, at: at}, true, at, -1, -1},
		{"record timestamp ahead of the clock", 4, sample, true, at.Add(-time.Hour), 6, 0},
	}
	for _, c := range cases {
		l := partitionLag(tp, c.committed, c.s, c.ok, c.now)
		if l.Lag != c.lag || l.LagSeconds != c.secs || l.Committed != c.committed || l.Topic != "t" || l.Partition != 3 {
			t.Errorf("%s: lag %d, %v s (%+v), want %d, %v s", c.name, l.Lag, l.LagSeconds, l, c.lag, c.secs)
		}
		if c.ok != !l.Observed.IsZero() {
			t.Errorf("%s: observed %v", c.name, l.Observed)
		}
	}
}

// TestCoordinatorStableLag: lag against the last stable offset (a
// read_committed consumer's) leaves out the records from the oldest open
// transaction's first offset on; lag against the high watermark counts
// them.
func TestCoordinatorStableLag(t *testing.T) {
	t.Parallel()
	tp := group.TopicPartition{Topic: "t", Partition: 0}
	at := time.UnixMilli(1_000_000)
	open := lagSample{hw: 10, lso: 7, at: at}
	cases := []struct {
		name         string
		committed    int64
		s            lagSample
		lag, stable  int64
		lastStableAt int64
	}{
		{"behind, a transaction open from 7", 4, open, 6, 3, 7},
		{"at the open transaction", 7, open, 3, 0, 7},
		{"no transaction open", 4, lagSample{hw: 10, lso: 10, at: at}, 6, 6, 10},
		{"never committed", -1, open, -1, -1, 7},
		{"leader without offsets", 4, lagSample{hw: -1, lso: -1, at: at}, -1, -1, -1},
	}
	for _, c := range cases {
		l := partitionLag(tp, c.committed, c.s, true, at)
		if l.Lag != c.lag || l.StableLag != c.stable || l.LastStableOffset != c.lastStableAt {
			t.Errorf("%s: lag %d, stable lag %d at %d; want %d, %d at %d", c.name, l.Lag, l.StableLag, l.LastStableOffset, c.lag, c.stable, c.lastStableAt)
		}
	}
	if l := partitionLag(tp, 4, lagSample{}, false, at); l.StableLag != -1 || l.LastStableOffset != -1 {
		t.Errorf("no answer from the leader: stable lag %d at %d, want -1 at -1", l.StableLag, l.LastStableOffset)
	}
}

// TestGroupLagRebalancesCounted: each target assignment written counts
// one rebalance of its group; a deleted group starts again from 0.
func TestCoordinatorLagRebalancesCounted(t *testing.T) {
	t.Parallel()
	var ls lagState
	ls.countRebalances([]group.Record{group.GroupEpoch{Group: "a"}, group.TargetAssignment{Group: "a"}, group.TargetAssignment{Group: "b"}})
	ls.countRebalances([]group.Record{group.TargetAssignment{Group: "a"}})
	if ls.rebalances["a"] != 2 || ls.rebalances["b"] != 1 {
		t.Fatalf("rebalances %v, want a 2, b 1", ls.rebalances)
	}
	ls.countRebalances([]group.Record{group.GroupDeleted{Group: "a"}})
	if _, ok := ls.rebalances["a"]; ok || ls.rebalances["b"] != 1 {
		t.Fatalf("after deleting a: %v", ls.rebalances)
	}
}
