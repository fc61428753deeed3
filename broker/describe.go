package broker

// Describing logs: the offsets of every partition as its leader knows
// them, and the replicas whose log failed, for DescribeTopics, asking the
// other brokers with DescribeLogs.

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	pb "github.com/quirelog/quire/api/internalv1"
	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/metadata"
)

// describeLog is this broker's view of one replica's offsets.
func (b *Broker) describeLog(topic string, partition int32) *pb.LogDescription {
	d := &pb.LogDescription{Topic: topic, Partition: partition, LogStartOffset: -1, HighWatermark: -1, LogEndOffset: -1}
	part, ok := b.rm.Partition(topic, partition)
	if !ok {
		return d
	}
	st := part.State()
	d.Hosted = true
	d.Leader = st.Leader
	d.LeaderEpoch = st.LeaderEpoch
	d.LogStartOffset = part.LogStartOffset()
	d.HighWatermark = part.HighWatermark()
	d.LogEndOffset = part.LogEndOffset()
	var failure error
	if d.Dir, failure = part.LogFailure(); failure != nil {
		d.Failure = failure.Error()
	}
	return d
}

// recordTimestamps answers LogPartitionRef.timestamp_offsets from the
// leader's log: -1 for an offset with no record below the high
// watermark, or one that could not be read.
func (b *Broker) recordTimestamps(topic string, partition int32, offsets []int64) []int64 {
	part, ok := b.rm.Partition(topic, partition)
	if !ok || len(offsets) == 0 {
		return nil
	}
	out := make([]int64, len(offsets))
	for i, off := range offsets {
		ts, ok, err := part.RecordTimestamp(off)
		if err != nil || !ok {
			ts = -1
		}
		out[i] = ts
	}
	return out
}

// describeLogsTimeout bounds how long DescribeTopics waits for the brokers
// it asks; a leader that does not answer in time shows -1.
const describeLogsTimeout = 2 * time.Second

// logAsk is one partition DescribeTopics asks a broker about: its offsets,
// of its leader, or whether its log failed, of a replica outside the ISR.
type logAsk struct {
	pd      *quirev1.PartitionDescription
	replica int32 // the broker asked
	leader  bool  // offsets (the leader) rather than a failure check
}

// describeTopics describes topics with the offsets of every partition as
// its leader knows them, and the replicas outside the ISR whose log
// failed: this broker's own replicas directly, every other broker asked
// at once with DescribeLogs (one call per broker, within
// describeLogsTimeout). Partitions without a leader, or whose leader could
// not be asked or no longer leads them, show -1.
func (b *Broker) describeTopics(ctx context.Context, img *metadata.Image, topics []metadata.TopicInfo) []*quirev1.TopicDescription {
	out := make([]*quirev1.TopicDescription, 0, len(topics))
	asks := map[int32][]logAsk{}
	refs := map[int32][]*pb.LogPartitionRef{}
	self := b.cfg.NodeID
	for _, t := range topics {
		d := &quirev1.TopicDescription{Name: t.Name, TopicId: t.ID, Configs: t.Configs}
		for _, p := range t.Partitions {
			pd := &quirev1.PartitionDescription{
				Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
				Replicas: p.Replicas, Isr: p.ISR,
				LogStartOffset: -1, HighWatermark: -1, LogEndOffset: -1,
			}
			var want []logAsk
			if p.Leader >= 0 {
				want = append(want, logAsk{pd: pd, replica: p.Leader, leader: true})
			}
			for _, r := range p.Replicas {
				// A fenced broker (down, or cut off from the controller)
				// is not waited for.
				if br, ok := img.Broker(r); ok && !br.Fenced && r != p.Leader && !slices.Contains(p.ISR, r) {
					want = append(want, logAsk{pd: pd, replica: r})
				}
			}
			for _, a := range want {
				if a.replica == self {
					applyLog(a, b.describeLog(t.Name, p.Partition))
					continue
				}
				asks[a.replica] = append(asks[a.replica], a)
				refs[a.replica] = append(refs[a.replica], &pb.LogPartitionRef{Topic: t.Name, Partition: p.Partition})
			}
			d.Partitions = append(d.Partitions, pd)
		}
		out = append(out, d)
	}
	if len(asks) == 0 {
		return out
	}
	ctx, cancel := context.WithTimeout(ctx, describeLogsTimeout)
	defer cancel()
	// Answers for one partition may come from several brokers at once.
	var mu sync.Mutex
	var wg sync.WaitGroup
	for id, as := range asks {
		br, ok := img.Broker(id)
		if !ok || br.Addr == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			logs, err := b.cluster.describeLogs(ctx, br.Addr, refs[id])
			if err != nil {
				b.logger.Debug("cannot ask a broker for its logs", "broker", id, "addr", br.Addr, "error", err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for i, a := range as {
				if i < len(logs) {
					applyLog(a, logs[i])
				}
			}
		}()
	}
	wg.Wait()
	for _, d := range out {
		for _, pd := range d.Partitions {
			slices.SortFunc(pd.OfflineReplicas, func(x, y *quirev1.OfflineReplica) int { return int(x.BrokerId) - int(y.BrokerId) })
		}
	}
	return out
}

// applyLog puts what broker a.replica said of its replica into a.pd: a
// leader's offsets (a replica not hosted or not led there, leadership
// having moved since the image, leaves -1), or a failed log.
func applyLog(a logAsk, l *pb.LogDescription) {
	if l == nil || !l.Hosted || l.Partition != a.pd.Partition {
		return
	}
	if a.leader {
		if l.Leader {
			a.pd.LogStartOffset, a.pd.HighWatermark, a.pd.LogEndOffset = l.LogStartOffset, l.HighWatermark, l.LogEndOffset
		}
		return
	}
	if l.Failure != "" {
		a.pd.OfflineReplicas = append(a.pd.OfflineReplicas, &quirev1.OfflineReplica{BrokerId: a.replica, Dir: l.Dir, Error: l.Failure})
	}
}

// ReadPositions asks broker b for high watermarks and record timestamps
// (coordinator.LogReader, for consumer group lag) with DescribeLogs, over
// the node-to-node connection to it (this node's own included).
func (c *cluster) ReadPositions(ctx context.Context, b metadata.BrokerInfo, qs []metadata.PositionQuery) ([]metadata.Position, error) {
	if b.Addr == "" {
		return nil, fmt.Errorf("broker: broker %d has no address", b.ID)
	}
	refs := make([]*pb.LogPartitionRef, len(qs))
	for i, q := range qs {
		refs[i] = &pb.LogPartitionRef{Topic: q.Topic, Partition: q.Partition, TimestampOffsets: q.Offsets}
	}
	logs, err := c.describeLogs(ctx, b.Addr, refs)
	if err != nil {
		return nil, err
	}
	out := make([]metadata.Position, len(qs))
	for i, l := range logs {
		if l.Hosted && l.Leader && l.Topic == qs[i].Topic && l.Partition == qs[i].Partition {
			out[i] = metadata.Position{Leader: true, HighWatermark: l.HighWatermark, Timestamps: l.Timestamps}
		}
	}
	return out, nil
}

// describeLogs asks the broker at addr for the offsets of refs, over the
// node-to-node connection to it.
func (c *cluster) describeLogs(ctx context.Context, addr string, refs []*pb.LogPartitionRef) ([]*pb.LogDescription, error) {
	cc, err := c.peer(addr)
	if err != nil {
		return nil, err
	}
	resp, err := pb.NewReplicaServiceClient(cc).DescribeLogs(ctx, &pb.DescribeLogsRequest{Partitions: refs})
	if err != nil {
		return nil, fmt.Errorf("broker: describe logs at %s: %w", addr, err)
	}
	if len(resp.Logs) != len(refs) {
		return nil, fmt.Errorf("broker: describe logs at %s: %d answers for %d partitions", addr, len(resp.Logs), len(refs))
	}
	return resp.Logs, nil
}
