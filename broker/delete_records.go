package broker

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/group"
)

// defaultDeleteRecordsTimeout is how long DeleteRecords waits for the
// in-sync replicas when the request does not say (Kafka's
// request.timeout.ms).
const defaultDeleteRecordsTimeout = 30 * time.Second

// DeleteRecords deletes the records below an offset of each partition
// named (Kafka's DeleteRecords), at the partition's leader: here when this
// broker leads it, else passed on to the leader; every partition at once.
// Each partition is answered on its own; a request that names nothing,
// names a partition twice or gives an offset below -1 is refused whole.
func (s *adminService) DeleteRecords(ctx context.Context, req *quirev1.DeleteRecordsRequest) (*quirev1.DeleteRecordsResponse, error) {
	if len(req.Partitions) == 0 {
		return nil, toStatus(fmt.Errorf("%w: DeleteRecords names no partitions", ErrInvalidRequest))
	}
	if req.TimeoutMs < 0 {
		return nil, toStatus(fmt.Errorf("%w: timeout_ms %d is negative", ErrInvalidRequest, req.TimeoutMs))
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
	timeout := defaultDeleteRecordsTimeout
	if req.TimeoutMs > 0 {
		timeout = time.Duration(req.TimeoutMs) * time.Millisecond
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp := &quirev1.DeleteRecordsResponse{Partitions: make([]*quirev1.DeleteRecordsResult, len(req.Partitions))}
	var deletedHere atomic.Bool
	var wg sync.WaitGroup
	for i, dp := range req.Partitions {
		wg.Go(func() {
			low, here, e := s.b.deleteRecords(wctx, dp)
			resp.Partitions[i] = &quirev1.DeleteRecordsResult{Topic: dp.Topic, Partition: dp.Partition, LowWatermark: low, Error: e}
			if here {
				deletedHere.Store(true)
			}
		})
	}
	wg.Wait()
	// The new log starts on disk before the answer, rather than at the
	// next periodic checkpoint: a leader that crashed in between would
	// come back with the deleted records readable again.
	if deletedHere.Load() {
		if err := s.b.storage.Checkpoint(); err != nil {
			return nil, toStatus(fmt.Errorf("broker: records deleted, but their new log starts not yet durably: %w", err))
		}
	}
	return resp, nil
}

// deleteRecords deletes one partition's records below dp.Offset at its
// leader and returns the low watermark after it, or -1 and why not; here
// says this broker moved its own log start.
func (b *Broker) deleteRecords(ctx context.Context, dp *quirev1.DeleteRecordsPartition) (low int64, here bool, _ *quirev1.Error) {
	low, here, err := b.deleteRecordsHere(ctx, dp)
	if err == nil {
		return low, here, nil
	}
	addr, ok := b.routeTo(ctx, err)
	if !ok {
		return -1, here, toError(err)
	}
	// A leader that cannot be reached now is the leadership error, which
	// the client retries after refreshing its metadata.
	cc, cerr := b.cluster.peer(addr)
	if cerr != nil {
		return -1, here, toError(err)
	}
	fwd := &quirev1.DeleteRecordsRequest{Partitions: []*quirev1.DeleteRecordsPartition{dp}}
	if d, ok := ctx.Deadline(); ok {
		// The leader's wait ends first, so that it answers for the
		// partition rather than the call running out here.
		fwd.TimeoutMs = int32(max(time.Until(d).Milliseconds()*4/5, 1))
	}
	resp, cerr := quirev1.NewAdminClient(cc).DeleteRecords(b.forwardContext(ctx), fwd)
	switch {
	case status.Code(cerr) == codes.DeadlineExceeded:
		return -1, here, toError(fmt.Errorf("%w: %s-%d: the leader at %s did not answer DeleteRecords in time", ErrRequestTimedOut, dp.Topic, dp.Partition, addr))
	case cerr != nil:
		return -1, here, toError(fmt.Errorf("%w (passed on to %s: %v)", err, addr, cerr))
	case len(resp.Partitions) != 1:
		return -1, here, toError(fmt.Errorf("broker: the leader at %s answered %d partitions for 1", addr, len(resp.Partitions)))
	case resp.Partitions[0].Error != nil:
		return -1, here, resp.Partitions[0].Error
	}
	return resp.Partitions[0].LowWatermark, here, nil
}

// deleteRecordsHere is deleteRecords on this broker: a NotLeaderError
// when another broker leads the partition. here says this broker's log
// start moved (even if the in-sync replicas did not follow in time).
func (b *Broker) deleteRecordsHere(ctx context.Context, dp *quirev1.DeleteRecordsPartition) (low int64, here bool, _ error) {
	t, ok := b.cluster.image().Topic(dp.Topic)
	if !ok {
		return -1, false, unknownTopic(dp.Topic)
	}
	if dp.Partition < 0 || int(dp.Partition) >= len(t.Partitions) {
		return -1, false, invalidPartition(dp.Topic, dp.Partition, len(t.Partitions))
	}
	if err := b.ledElsewhere(dp.Topic, dp.Partition); err != nil {
		return -1, false, err
	}
	part, ok := b.rm.Partition(dp.Topic, dp.Partition)
	if !ok {
		return -1, false, fmt.Errorf("%w: %s-%d has no leader", ErrLeaderNotAvailable, dp.Topic, dp.Partition)
	}
	before := part.LogStartOffset()
	low, err := part.DeleteRecordsBefore(ctx, dp.Offset)
	return low, part.LogStartOffset() != before, err
}
