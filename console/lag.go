package console

import (
	"fmt"
	"sort"
	"sync"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

// PartitionLag is how far a group is behind on one partition.
type PartitionLag struct {
	Topic     string
	Partition int32
	// Committed is the group's committed offset, -1 when it has none.
	Committed int64
	// HighWatermark is the partition's high watermark, -1 when unknown.
	HighWatermark int64
	// Lag is HighWatermark - Committed in records, -1 when unknown.
	Lag int64
	// StableLag is the lag against the partition's last stable offset,
	// a read_committed consumer's (open transactions' records left
	// out), -1 when unknown; Lag from a broker that predates it.
	StableLag int64
	// LagSeconds is how old the first record the group has not consumed
	// is (0 when it has consumed everything), -1 when unknown.
	LagSeconds float64
	// Err says why a figure is unknown.
	Err string
}

// groupLag gives a group's lag per partition, as the coordinator's
// DescribeGroup answer d has it (those the group committed and those
// assigned to its members, sorted), and records the total in the lag
// history. d is nil when the group could not be described.
func (c *Console) groupLag(group string, d *quirev1.DescribeGroupResponse) ([]PartitionLag, error) {
	if d == nil {
		return nil, fmt.Errorf("group %q could not be described", group)
	}
	out := make([]PartitionLag, 0, len(d.GetPartitions()))
	for _, p := range d.GetPartitions() {
		pl := PartitionLag{Topic: p.GetTopic(), Partition: p.GetPartition(), Committed: p.GetCommittedOffset(),
			HighWatermark: p.GetHighWatermark(), Lag: p.GetLag(), StableLag: p.GetLag(), LagSeconds: p.GetLagSeconds()}
		if p.OptionalStableLag != nil {
			pl.StableLag = p.GetStableLag()
		}
		if pl.HighWatermark < 0 {
			pl.Err = "the partition's leader has not reported its high watermark yet"
		}
		out = append(out, pl)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	if total, known := totalLag(out); known {
		c.hist.add(group, time.Now(), total)
	}
	return out, nil
}

// totalLag sums the known lags; known is false when none is.
func totalLag(ps []PartitionLag) (total int64, known bool) {
	for _, p := range ps {
		if p.Lag >= 0 {
			total += p.Lag
			known = true
		}
	}
	return total, known
}

// lagSample is a group's total lag at a time.
type lagSample struct {
	At  time.Time
	Lag int64
}

// lagHistory keeps the last samples of each group's total lag, in memory
// only: it starts empty with each console.
type lagHistory struct {
	mu     sync.Mutex
	max    int
	groups map[string][]lagSample
}

func newLagHistory(max int) *lagHistory {
	return &lagHistory{max: max, groups: map[string][]lagSample{}}
}

// add records a sample; one within a second of the last replaces it.
func (h *lagHistory) add(group string, at time.Time, lag int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.groups[group]
	if n := len(s); n > 0 && at.Sub(s[n-1].At) < time.Second {
		s[n-1] = lagSample{at, lag}
		return
	}
	s = append(s, lagSample{at, lag})
	if len(s) > h.max {
		s = append(s[:0:0], s[len(s)-h.max:]...)
	}
	h.groups[group] = s
}

func (h *lagHistory) get(group string) []lagSample {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]lagSample(nil), h.groups[group]...)
}
