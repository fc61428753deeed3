package replica

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/quirelog/quire/storage"
)

// DeleteRecordsBefore deletes the leader's records below offset (Kafka's
// DeleteRecords): the log start offset moves up to it and the segments
// wholly below it go. -1 is the high watermark. Only what every in-sync
// replica holds may go (offset at most the HW: above it is
// storage.ErrOffsetOutOfRange). Followers move their log start up to the
// leader's when a fetch answers it (follower.go), at once for a follower
// in a long poll (startsAhead), and say theirs in their next fetch; the
// call returns once every in-sync follower's is at or past offset, so that
// a leader elected from the ISR afterwards has deleted the same records,
// with the lowest log start among the ISR (Kafka's low watermark).
// Deleting below the log start changes nothing. When ctx ends first the
// leader has deleted the records but some in-sync follower may not have:
// ErrRequestTimedOut (asking again is safe).
func (p *Partition) DeleteRecordsBefore(ctx context.Context, offset int64) (int64, error) {
	if offset < -1 {
		return -1, fmt.Errorf("%w: %s-%d: delete records before %d (an offset, or -1 for the high watermark)",
			storage.ErrOffsetOutOfRange, p.topic, p.id, offset)
	}
	epoch, offset, err := p.deleteRecordsBefore(offset)
	if err != nil {
		return -1, err
	}
	ch := make(chan struct{}, 1)
	p.Watch(ch)
	defer p.Unwatch(ch)
	for {
		low, lagging, err := p.lowWatermark(epoch, offset)
		if err != nil || len(lagging) == 0 {
			return low, err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return -1, fmt.Errorf("%w: %s-%d: records deleted below %d on the leader, not yet on in-sync replicas %v",
				ErrRequestTimedOut, p.topic, p.id, offset, lagging)
		}
	}
}

// deleteRecordsBefore moves the leader's log start up to offset (-1: the
// HW) and returns the epoch it led at and the offset.
func (p *Partition) deleteRecordsBefore(offset int64) (int32, int64, error) {
	// No append, truncation or leadership change meanwhile.
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	st := p.state()
	if !st.leader {
		return 0, 0, &NotLeaderError{Topic: p.topic, Partition: p.id, Leader: st.leaderID, Epoch: st.leaderEpoch}
	}
	if offset == -1 {
		offset = st.hw
	}
	if offset > st.hw {
		return 0, 0, fmt.Errorf("%w: %s-%d: delete records before %d, above the high watermark %d",
			storage.ErrOffsetOutOfRange, p.topic, p.id, offset, st.hw)
	}
	if err := p.log.DeleteRecordsBefore(offset); err != nil {
		if errors.Is(err, storage.ErrLogFailed) {
			p.logFailed(err)
		}
		return 0, 0, fmt.Errorf("%s-%d: %w", p.topic, p.id, err)
	}
	p.mu.Lock()
	p.leoWaiters.signal() // followers in a long poll answered at once
	p.mu.Unlock()
	return st.leaderEpoch, offset, nil
}

// lowWatermark is the lowest log start over the ISR, and the in-sync
// followers whose log start is not yet at offset, while this replica
// leads at epoch.
func (p *Partition) lowWatermark(epoch int32, offset int64) (int64, []int32, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.leader || p.leaderEpoch != epoch {
		return -1, nil, &NotLeaderError{Topic: p.topic, Partition: p.id, Leader: p.leaderID, Epoch: p.leaderEpoch}
	}
	low := p.log.LogStartOffset()
	var lagging []int32
	for _, id := range p.isr {
		if id == p.leaderID {
			continue
		}
		f, ok := p.followers[id]
		if !ok || f.logStart < offset {
			lagging = append(lagging, id)
			continue
		}
		low = min(low, f.logStart)
	}
	slices.Sort(lagging)
	return low, lagging, nil
}
