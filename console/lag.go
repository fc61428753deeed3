package console

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"google.golang.org/grpc"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/client"
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
	// LagSeconds is how old the first record the group has not consumed
	// is (0 when it has consumed everything), -1 when unknown.
	LagSeconds float64
	// Err says why a figure is unknown.
	Err string
}

// groupLag gives a group's lag per partition (those it committed and those
// assigned to its members, sorted) and records the total in the lag
// history. d is the group's DescribeGroup answer, nil when the coordinator
// has none.
//
// The figures are worked out here from the public API: committed offsets
// (FetchOffsets), high watermarks (ListOffsets) and, for the lag in
// seconds, the timestamp of the record at the committed offset. This is
// the one place to change when DescribeGroup answers them itself.
func (c *Console) groupLag(ctx context.Context, cl *client.Client, group string, d *quirev1.DescribeGroupResponse) ([]PartitionLag, error) {
	committed, err := cl.FetchOffsets(ctx, group)
	if err != nil {
		return nil, err
	}
	byTP := map[client.TopicPartition]*PartitionLag{}
	add := func(topic string, p int32, off int64) {
		tp := client.TopicPartition{Topic: topic, Partition: p}
		if byTP[tp] == nil {
			byTP[tp] = &PartitionLag{Topic: topic, Partition: p, Committed: -1, HighWatermark: -1, Lag: -1, LagSeconds: -1}
		}
		if off >= 0 {
			byTP[tp].Committed = off
		}
	}
	for _, o := range committed {
		add(o.Topic, o.Partition, o.Offset)
	}
	for _, m := range d.GetMembers() {
		for _, t := range m.GetAssigned().GetTopics() {
			for _, p := range t.GetPartitions() {
				add(t.GetTopic(), p, -1)
			}
		}
	}
	byTopic := map[string][]int32{}
	for tp := range byTP {
		byTopic[tp.Topic] = append(byTopic[tp.Topic], tp.Partition)
	}
	var fetch []client.OffsetCommit // where the first record not consumed is
	for topic, parts := range byTopic {
		hws, err := cl.ListOffsets(ctx, topic, client.AtEnd(), parts...)
		for _, p := range parts {
			pl := byTP[client.TopicPartition{Topic: topic, Partition: p}]
			if err != nil {
				pl.Err = errText(err)
				continue
			}
			pl.HighWatermark = hws[p]
			if pl.Committed < 0 {
				continue
			}
			pl.Lag = max(pl.HighWatermark-pl.Committed, 0)
			if pl.Lag == 0 {
				pl.LagSeconds = 0
			} else {
				fetch = append(fetch, client.OffsetCommit{Topic: topic, Partition: p, Offset: pl.Committed})
			}
		}
	}
	now := time.Now()
	for _, f := range fetch {
		pl := byTP[client.TopicPartition{Topic: f.Topic, Partition: f.Partition}]
		ts, err := c.recordTime(ctx, f.Topic, f.Partition, f.Offset)
		if err != nil {
			pl.Err = errText(err)
			continue
		}
		pl.LagSeconds = max(now.Sub(ts).Seconds(), 0)
	}
	out := make([]PartitionLag, 0, len(byTP))
	for _, pl := range byTP {
		out = append(out, *pl)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	total, known := totalLag(out)
	if known {
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

// recordTime is the timestamp of the first record at or after offset.
func (c *Console) recordTime(ctx context.Context, topic string, p int32, offset int64) (time.Time, error) {
	var res *quirev1.FetchRecordsResponse
	err := c.call(ctx, func(ctx context.Context, cc *grpc.ClientConn) error {
		var err error
		res, err = quirev1.NewConsumerClient(cc).FetchRecords(ctx, &quirev1.FetchRecordsRequest{Topic: topic, Partition: p,
			Offset: offset, MaxRecords: 1, Format: quirev1.RecordFormat_RECORD_FORMAT_BYTES})
		return err
	})
	if err != nil {
		return time.Time{}, err
	}
	for _, r := range res.GetRecords() {
		if r.GetOffset() >= offset {
			return time.UnixMilli(r.GetTimestampMs()), nil
		}
	}
	return time.Time{}, fmt.Errorf("no record at offset %d of %s/%d", offset, topic, p)
}
