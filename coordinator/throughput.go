package coordinator

import (
	"math"
	"time"

	"github.com/quirelog/quire/group"
	"github.com/quirelog/quire/metadata"
)

// Group throughput. Lag alone does not tell an operator whether a group
// keeps up: a lag of a million records drains in seconds or never. So
// at every lag refresh the coordinator keeps, per partition a group
// committed in, the committed offset and the high watermark, and over
// the last rateWindowRefreshes refreshes turns them into rates: how fast
// the group consumes, how fast its partitions grow. From those and the
// lag follow the time to drain it and the number of members that would
// keep up (metadata.GroupThroughput).

// rateWindowRefreshes is how many lag refreshes the rates span (a
// minute at the default group.lag.refresh.ms).
const rateWindowRefreshes = 12

// ratePoint is a counter's value at a time.
type ratePoint struct {
	at time.Time
	v  int64
}

// rateSeries is a counter's recent values, oldest first: a committed
// offset or a high watermark.
type rateSeries struct{ pts []ratePoint }

// add records v at at, keeping the values of the last window (and the
// newest one before it, so that the rate spans the whole window). A
// value below the last one (offsets reset back, a log truncated) starts
// the series again: the counter did not run backwards at that rate.
func (s *rateSeries) add(at time.Time, v int64, window time.Duration) {
	if n := len(s.pts); n > 0 {
		switch last := s.pts[n-1]; {
		case v < last.v:
			s.pts = s.pts[:0]
		case !at.After(last.at):
			return // no time passed: nothing to learn
		}
	}
	s.pts = append(s.pts, ratePoint{at, v})
	cut := at.Add(-window)
	drop := 0
	for drop+1 < len(s.pts) && !s.pts[drop+1].at.After(cut) {
		drop++
	}
	if drop > 0 {
		s.pts = append(s.pts[:0], s.pts[drop:]...)
	}
}

// rate is the counter's change per second over its values; ok false
// until it has two.
func (s *rateSeries) rate() (float64, bool) {
	if len(s.pts) < 2 {
		return 0, false
	}
	first, last := s.pts[0], s.pts[len(s.pts)-1]
	return float64(last.v-first.v) / last.at.Sub(first.at).Seconds(), true
}

// groupTP is a partition of a group.
type groupTP struct {
	group string
	tp    group.TopicPartition
}

// rateHistory holds the series of every group partition and partition
// the last refresh saw.
type rateHistory struct {
	committed map[groupTP]*rateSeries
	hw        map[group.TopicPartition]*rateSeries
}

// record adds a refresh's committed offsets (at now) and high watermarks
// (at their samples' time), and forgets the series of partitions no
// longer committed in.
func (h *rateHistory) record(now time.Time, committed map[string][]metadata.CommittedOffset, samples map[group.TopicPartition]lagSample, window time.Duration) {
	seenC := map[groupTP]bool{}
	seenHW := map[group.TopicPartition]bool{}
	if h.committed == nil {
		h.committed, h.hw = map[groupTP]*rateSeries{}, map[group.TopicPartition]*rateSeries{}
	}
	for g, offs := range committed {
		for _, o := range offs {
			tp := group.TopicPartition{Topic: o.Topic, Partition: o.Partition}
			k := groupTP{g, tp}
			seenC[k] = true
			if o.Offset >= 0 {
				s := h.committed[k]
				if s == nil {
					s = &rateSeries{}
					h.committed[k] = s
				}
				s.add(now, o.Offset, window)
			}
			if seenHW[tp] {
				continue
			}
			seenHW[tp] = true
			if smp, ok := samples[tp]; ok && smp.hw >= 0 {
				s := h.hw[tp]
				if s == nil {
					s = &rateSeries{}
					h.hw[tp] = s
				}
				s.add(smp.at, smp.hw, window)
			}
		}
	}
	for k := range h.committed {
		if !seenC[k] {
			delete(h.committed, k)
		}
	}
	for tp := range h.hw {
		if !seenHW[tp] {
			delete(h.hw, tp)
		}
	}
}

// rates sums the consume and produce rates of group id over tps; -1
// where no partition has one yet.
func (h *rateHistory) rates(id string, tps []group.TopicPartition) (consume, produce float64) {
	consume, produce = -1, -1
	for _, tp := range tps {
		if s := h.committed[groupTP{id, tp}]; s != nil {
			if r, ok := s.rate(); ok {
				consume = max(consume, 0) + r
			}
		}
		if s := h.hw[tp]; s != nil {
			if r, ok := s.rate(); ok {
				produce = max(produce, 0) + r
			}
		}
	}
	return consume, produce
}

// throughput works out what a group's lag, rates, members and partition
// count say (metadata.GroupThroughput). Negative rates and lag are
// unknown.
func throughput(lag int64, consume, produce float64, members, partitions int) metadata.GroupThroughput {
	t := metadata.GroupThroughput{Lag: lag, ConsumeRate: consume, ProduceRate: produce, Members: members, Partitions: partitions,
		DrainSeconds: -1, MembersNeeded: -1}
	switch {
	case lag == 0:
		t.DrainSeconds = 0
	case lag > 0 && consume >= 0 && produce >= 0 && consume > produce:
		t.DrainSeconds = float64(lag) / (consume - produce)
	}
	switch {
	case produce < 0 || consume < 0:
	case produce == 0:
		t.MembersNeeded = 0
	case members > 0 && consume > 0:
		perMember := consume / float64(members)
		// A hair's tolerance, so that a quotient of exactly n computed
		// as n plus a rounding error asks for n members, not n+1.
		n := int(math.Ceil(produce/perMember - 1e-9))
		t.MembersNeeded = max(n, 1)
		if partitions > 0 {
			t.MembersNeeded = min(t.MembersNeeded, partitions)
		}
	}
	return t
}

// totalLag sums the known lags of ls; -1 when none is known.
func totalLag(ls []metadata.GroupPartitionLag) int64 {
	total := int64(-1)
	for _, l := range ls {
		if l.Lag >= 0 {
			total = max(total, 0) + l.Lag
		}
	}
	return total
}
