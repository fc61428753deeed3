package broker

import (
	"context"
	"fmt"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/group"
)

// DeleteRecords deletes the records below an offset of each partition
// named (Kafka's DeleteRecords), at the partition's leader: here when this
// broker leads it, else passed on to the leader. Each partition is
// answered on its own; a request that names nothing, names a partition
// twice or gives an offset below -1 is refused whole.
func (s *adminService) DeleteRecords(ctx context.Context, req *quirev1.DeleteRecordsRequest) (*quirev1.DeleteRecordsResponse, error) {
	if len(req.Partitions) == 0 {
		return nil, toStatus(fmt.Errorf("%w: DeleteRecords names no partitions", ErrInvalidRequest))
	}
	seen := make(map[group.TopicPartition]bool, len(req.Partitions))
	for _, dp := range req.Partitions {
		if dp.Offset < -1 {
			return nil, toStatus(fmt.Errorf("%w: %s-%d: offset %d; records are deleted below an offset, or below the high watermark with -1",
				ErrInvalidRequest, dp.Topic, dp.Partition, dp.Offset))
		}
		key := group.TopicPartition{Topic: dp.Topic, Partition: dp.Partition}
		if seen[key] {
			return nil, toStatus(fmt.Errorf("%w: %s-%d is named twice", ErrInvalidRequest, dp.Topic, dp.Partition))
		}
		seen[key] = true
	}
	resp := &quirev1.DeleteRecordsResponse{Partitions: make([]*quirev1.DeleteRecordsResult, len(req.Partitions))}
	for i, dp := range req.Partitions {
		low, e := s.b.deleteRecords(ctx, dp)
		resp.Partitions[i] = &quirev1.DeleteRecordsResult{Topic: dp.Topic, Partition: dp.Partition, LowWatermark: low, Error: e}
	}
	return resp, nil
}

// deleteRecords deletes one partition's records below dp.Offset at its
// leader and returns the leader's log start offset after it, or -1 and
// why not.
func (b *Broker) deleteRecords(ctx context.Context, dp *quirev1.DeleteRecordsPartition) (int64, *quirev1.Error) {
	start, err := b.deleteRecordsHere(ctx, dp)
	if err == nil {
		return start, nil
	}
	addr, ok := b.routeTo(ctx, err)
	if !ok {
		return -1, toError(err)
	}
	// A leader that cannot be reached now is the leadership error, which
	// the client retries after refreshing its metadata.
	cc, cerr := b.cluster.peer(addr)
	if cerr != nil {
		return -1, toError(err)
	}
	resp, cerr := quirev1.NewAdminClient(cc).DeleteRecords(b.forwardContext(ctx),
		&quirev1.DeleteRecordsRequest{Partitions: []*quirev1.DeleteRecordsPartition{dp}})
	switch {
	case cerr != nil:
		return -1, toError(fmt.Errorf("%w (passed on to %s: %v)", err, addr, cerr))
	case len(resp.Partitions) != 1:
		return -1, toError(fmt.Errorf("broker: the leader at %s answered %d partitions for 1", addr, len(resp.Partitions)))
	case resp.Partitions[0].Error != nil:
		return -1, resp.Partitions[0].Error
	}
	return resp.Partitions[0].LowWatermark, nil
}

// deleteRecordsHere is deleteRecords on this broker: a NotLeaderError
// when another broker leads the partition.
func (b *Broker) deleteRecordsHere(_ context.Context, dp *quirev1.DeleteRecordsPartition) (int64, error) {
	t, ok := b.cluster.image().Topic(dp.Topic)
	if !ok {
		return -1, unknownTopic(dp.Topic)
	}
	if dp.Partition < 0 || int(dp.Partition) >= len(t.Partitions) {
		return -1, invalidPartition(dp.Topic, dp.Partition, len(t.Partitions))
	}
	if err := b.ledElsewhere(dp.Topic, dp.Partition); err != nil {
		return -1, err
	}
	part, ok := b.rm.Partition(dp.Topic, dp.Partition)
	if !ok {
		return -1, fmt.Errorf("%w: %s-%d has no leader", ErrLeaderNotAvailable, dp.Topic, dp.Partition)
	}
	start, err := part.DeleteRecordsBefore(dp.Offset)
	if err != nil {
		return -1, err
	}
	// On disk before the answer, rather than at the next periodic
	// checkpoint: a leader that crashes in between would come back with
	// the deleted records readable again (its followers learn the new
	// start at their next fetch and checkpoint it on their own period).
	if err := b.storage.Checkpoint(); err != nil {
		return -1, fmt.Errorf("%s-%d: records deleted below %d, but not yet durably: %w", dp.Topic, dp.Partition, start, err)
	}
	return start, nil
}
