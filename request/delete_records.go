package request

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quirelog/quire/auth"
	"github.com/quirelog/quire/replica"
)

// DefaultDeleteRecordsTimeout is how long DeleteRecords waits for the
// in-sync replicas when the request does not say (Kafka's
// request.timeout.ms).
const DefaultDeleteRecordsTimeout = 30 * time.Second

// DeleteRecordsRequest deletes the records below an offset of each
// partition named (Kafka's DeleteRecords).
type DeleteRecordsRequest struct {
	// Timeout bounds the wait for the in-sync replicas; 0 is
	// DefaultDeleteRecordsTimeout.
	Timeout    time.Duration
	Partitions []DeleteRecordsPartition
	// Route passes the partitions another broker leads on to it.
	Route bool
}

// DeleteRecordsPartition deletes the records of a partition below Offset
// (-1: the high watermark).
type DeleteRecordsPartition struct {
	Topic     string
	Partition int32
	Offset    int64
}

// DeleteRecordsResult is one partition's answer, in request order: its
// low watermark (log start offset) after the deletion, or -1 and Err.
type DeleteRecordsResult struct {
	Topic        string
	Partition    int32
	LowWatermark int64
	// Err is an *Error, or nil.
	Err error
}

// DeleteRecords deletes at each partition's leader: here when this
// broker leads it, else passed on (Route), one call per leader; every
// partition at once. Each partition is answered on its own; a request
// that names nothing, names a partition twice or gives an offset below -1
// is refused whole, as is one whose caller lacks Delete on a topic.
func (c *Core) DeleteRecords(ctx context.Context, req *DeleteRecordsRequest) ([]DeleteRecordsResult, error) {
	if err := c.checkDeleteRecords(ctx, req); err != nil {
		return nil, err
	}
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = DefaultDeleteRecordsTimeout
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out := make([]DeleteRecordsResult, len(req.Partitions))
	var deletedHere atomic.Bool
	var mu sync.Mutex
	var leaders []int32
	byLeader := map[int32][]int{}
	notHere := make([]error, len(req.Partitions))
	var wg sync.WaitGroup
	for i, dp := range req.Partitions {
		wg.Go(func() {
			low, here, err := c.deleteRecordsHere(wctx, dp)
			if here {
				deletedHere.Store(true)
			}
			out[i] = DeleteRecordsResult{Topic: dp.Topic, Partition: dp.Partition, LowWatermark: low}
			if leader, ok := c.routeTo(req.Route, err); ok {
				mu.Lock()
				if _, seen := byLeader[leader]; !seen {
					leaders = append(leaders, leader)
				}
				byLeader[leader] = append(byLeader[leader], i)
				notHere[i] = err
				mu.Unlock()
				return
			}
			out[i].Err = c.fail(err)
		})
	}
	wg.Wait()
	for _, leader := range leaders {
		wg.Go(func() { c.forwardDeletes(wctx, leader, req.Partitions, byLeader[leader], notHere, out) })
	}
	wg.Wait()
	// The new log starts on disk before the answer, rather than at the
	// next periodic checkpoint: a leader that crashed in between would
	// come back with the deleted records readable again.
	if deletedHere.Load() && c.cfg.Checkpoint != nil {
		if err := c.cfg.Checkpoint(); err != nil {
			return nil, c.fail(fmt.Errorf("request: records deleted, but their new log starts not yet durably: %w", err))
		}
	}
	return out, nil
}

func (c *Core) checkDeleteRecords(ctx context.Context, req *DeleteRecordsRequest) error {
	if len(req.Partitions) == 0 {
		return c.fail(fmt.Errorf("%w: DeleteRecords names no partitions", replica.ErrInvalidRequest))
	}
	if req.Timeout < 0 {
		return c.fail(fmt.Errorf("%w: timeout %v is negative", replica.ErrInvalidRequest, req.Timeout))
	}
	type key struct {
		topic string
		part  int32
	}
	seen := make(map[key]bool, len(req.Partitions))
	for _, dp := range req.Partitions {
		if dp.Offset < -1 {
			return c.fail(fmt.Errorf("%w: %s-%d: offset %d; records are deleted below an offset, or below the high watermark with -1",
				replica.ErrInvalidRequest, dp.Topic, dp.Partition, dp.Offset))
		}
		k := key{dp.Topic, dp.Partition}
		if seen[k] {
			return c.fail(fmt.Errorf("%w: %s-%d is named twice", replica.ErrInvalidRequest, dp.Topic, dp.Partition))
		}
		seen[k] = true
	}
	return c.authorizeEach(ctx, auth.OpDelete, len(req.Partitions), func(i int) string { return req.Partitions[i].Topic }, nil)
}

// forwardDeletes passes the partitions at idx on to leader and fills in
// their answers. A leader that cannot be reached now leaves the
// leadership error, which the client retries after refreshing its
// metadata.
func (c *Core) forwardDeletes(ctx context.Context, leader int32, parts []DeleteRecordsPartition, idx []int, notHere []error, out []DeleteRecordsResult) {
	fwd := make([]DeleteRecordsPartition, len(idx))
	for j, i := range idx {
		fwd[j] = parts[i]
	}
	// The leader's wait ends first, so that it answers for the
	// partitions rather than the call running out here.
	timeout := DefaultDeleteRecordsTimeout
	if d, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(d)*4/5, time.Millisecond)
	}
	got, err := c.cfg.Forwarder.DeleteRecords(ctx, leader, timeout, fwd)
	if err == nil && len(got) != len(idx) {
		err = fmt.Errorf("request: the leader %d answered %d partitions for %d", leader, len(got), len(idx))
	}
	for j, i := range idx {
		dp := parts[i]
		switch {
		case errors.Is(err, ErrLeaderUnreachable):
			out[i].Err = c.fail(notHere[i])
		case errors.Is(err, replica.ErrRequestTimedOut):
			out[i].Err = c.fail(fmt.Errorf("%w: %s-%d: the leader %d did not answer DeleteRecords in time", replica.ErrRequestTimedOut, dp.Topic, dp.Partition, leader))
		case err != nil:
			out[i].Err = c.fail(fmt.Errorf("%w (passed on to %d: %v)", notHere[i], leader, err))
		default:
			out[i].LowWatermark, out[i].Err = got[j].LowWatermark, c.fail(got[j].Err)
			if got[j].Err != nil {
				out[i].LowWatermark = -1
			}
		}
	}
}

// deleteRecordsHere deletes on this broker: a NotLeaderError when
// another broker leads the partition. here says this broker's log start
// moved (even if the in-sync replicas did not follow in time).
func (c *Core) deleteRecordsHere(ctx context.Context, dp DeleteRecordsPartition) (low int64, here bool, _ error) {
	t, ok := c.cfg.Cluster.Topic(dp.Topic)
	if !ok {
		return -1, false, unknownTopic(dp.Topic)
	}
	if dp.Partition < 0 || int(dp.Partition) >= len(t.Partitions) {
		return -1, false, invalidPartition(dp.Topic, dp.Partition, len(t.Partitions))
	}
	if pi := t.Partitions[dp.Partition]; pi.Leader >= 0 && pi.Leader != c.cfg.NodeID {
		return -1, false, &replica.NotLeaderError{Topic: dp.Topic, Partition: dp.Partition, Leader: pi.Leader, Epoch: pi.LeaderEpoch}
	}
	part, ok := c.cfg.Replicas.Partition(dp.Topic, dp.Partition)
	if !ok {
		return -1, false, fmt.Errorf("%w: %s-%d has no leader", replica.ErrLeaderNotAvailable, dp.Topic, dp.Partition)
	}
	before := part.LogStartOffset()
	low, err := part.DeleteRecordsBefore(ctx, dp.Offset)
	return low, part.LogStartOffset() != before, err
}
