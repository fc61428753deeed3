package replica

import (
	"errors"
	"fmt"

	"github.com/quirelog/quire/storage"
)

// DeleteRecordsBefore deletes the leader's records below offset (Kafka's
// DeleteRecords): the log start offset moves up to it and the segments
// wholly below it go. -1 is the high watermark. It returns the log start
// offset after the deletion; deleting below it changes nothing. Only what
// every in-sync replica holds may go (offset at most the HW: above it is
// storage.ErrOffsetOutOfRange), so a new leader elected from the ISR has
// every record the deletion kept. Followers move their log start up to
// the leader's when their next fetch answers it (follower.go); their long
// polls are woken for that, as by an append.
func (p *Partition) DeleteRecordsBefore(offset int64) (int64, error) {
	if offset < -1 {
		return -1, fmt.Errorf("%w: %s-%d: delete records before %d (an offset, or -1 for the high watermark)",
			storage.ErrOffsetOutOfRange, p.topic, p.id, offset)
	}
	// No append, truncation or leadership change meanwhile.
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	st := p.state()
	if !st.leader {
		return -1, &NotLeaderError{Topic: p.topic, Partition: p.id, Leader: st.leaderID, Epoch: st.leaderEpoch}
	}
	if offset == -1 {
		offset = st.hw
	}
	if offset > st.hw {
		return -1, fmt.Errorf("%w: %s-%d: delete records before %d, above the high watermark %d",
			storage.ErrOffsetOutOfRange, p.topic, p.id, offset, st.hw)
	}
	if err := p.log.DeleteRecordsBefore(offset); err != nil {
		if errors.Is(err, storage.ErrLogFailed) {
			p.logFailed(err)
		}
		return -1, fmt.Errorf("%s-%d: %w", p.topic, p.id, err)
	}
	p.mu.Lock()
	p.leoWaiters.signal()
	p.mu.Unlock()
	return p.log.LogStartOffset(), nil
}
