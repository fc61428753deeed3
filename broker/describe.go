package broker

// Describing logs: the offsets of every partition as its leader knows
// them, and the replicas whose log failed, for DescribeTopics, asking the
// other brokers with DescribeLogs.

import (
	"context"
	"fmt"

	pb "github.com/quirelog/quire/api/internalv1"
	"github.com/quirelog/quire/metadata"
)

// describeLog is this broker's view of one replica's offsets, as the
// request core sees it.
func (b *Broker) describeLog(topic string, partition int32) *pb.LogDescription {
	d := b.core.DescribeLog(topic, partition)
	return &pb.LogDescription{Topic: d.Topic, Partition: d.Partition, Hosted: d.Hosted, Leader: d.Leader, LeaderEpoch: d.LeaderEpoch,
		LogStartOffset: d.LogStartOffset, HighWatermark: d.HighWatermark, LogEndOffset: d.LogEndOffset, Dir: d.Dir, Failure: d.Failure,
		SizeBytes: d.SizeBytes, Compacted: d.Compacted, DirtyRatio: d.DirtyRatio, LastStableOffset: &d.LastStableOffset}
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
			out[i] = metadata.Position{Leader: true, HighWatermark: l.HighWatermark, LastStableOffset: lastStable(l), Timestamps: l.Timestamps}
		}
	}
	return out, nil
}

// lastStable is l's last stable offset; from a node that predates it,
// its high watermark.
func lastStable(l *pb.LogDescription) int64 {
	if l.LastStableOffset == nil {
		return l.HighWatermark
	}
	return l.GetLastStableOffset()
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
