package replica

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quirelog/quire/record"
	"github.com/quirelog/quire/storage"
)

// Transactions on a replica: the leader appends the markers a transaction
// coordinator sends, and read_committed consumers read up to the last
// stable offset. Followers learn both from the batches they copy.

// AppendMarker appends, as the leader, the marker ending producerID's
// transaction in this partition (storage.Log.AppendMarker), after the
// same in-sync replica check as an acks=all produce; the caller waits
// with AwaitReplicated, as a coordinator counts a marker written only once
// every in-sync replica has it.
func (p *Partition) AppendMarker(producerID int64, producerEpoch int16, m record.Marker) (AppendResult, error) {
	tc, _ := p.rm.topicConfig(p.topic)
	minISR := tc.MinInsyncReplicas
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	st := p.state()
	if !st.leader {
		return AppendResult{}, &NotLeaderError{Topic: p.topic, Partition: p.id, Leader: st.leaderID, Epoch: st.leaderEpoch}
	}
	if int32(len(st.isr)) < minISR {
		return AppendResult{}, fmt.Errorf("%w: %s-%d has %d in-sync replicas, min.insync.replicas is %d",
			ErrNotEnoughReplicas, p.topic, p.id, len(st.isr), minISR)
	}
	info, err := p.log.AppendMarker(producerID, producerEpoch, m, st.leaderEpoch)
	if errors.Is(err, storage.ErrLogFailed) {
		p.logFailed(err)
	}
	if err != nil {
		return AppendResult{AppendInfo: info, LeaderEpoch: st.leaderEpoch, MinInsyncReplicas: minISR}, fmt.Errorf("%s-%d: %w", p.topic, p.id, err)
	}
	now := time.Now()
	p.mu.Lock()
	p.trace.add(info.LastOffset, now)
	p.maybeAdvanceHWLocked()
	p.leoWaiters.signal()
	p.mu.Unlock()
	return AppendResult{AppendInfo: info, LeaderEpoch: st.leaderEpoch, MinInsyncReplicas: minISR, AppendedAt: now}, nil
}

// WriteMarker appends a marker and waits until every in-sync replica has
// it (or ctx ends).
func (p *Partition) WriteMarker(ctx context.Context, producerID int64, producerEpoch int16, m record.Marker) (int64, error) {
	res, err := p.AppendMarker(producerID, producerEpoch, m)
	if err != nil {
		return -1, err
	}
	if err := p.AwaitReplicated(ctx, res); err != nil {
		return -1, err
	}
	return res.LastOffset, nil
}

// LastStableOffset is the offset read_committed consumers read up to:
// the smaller of the HW and the first offset of the oldest open
// transaction.
func (p *Partition) LastStableOffset() int64 {
	return p.log.LastStableOffset(p.state().hw)
}

// ReadCommittedAppend is ReadAppend for a read_committed consumer: never
// at or past the last stable offset, which it returns with the HW, and
// with the aborted transactions the batches read overlap (the consumer
// drops their records).
func (p *Partition) ReadCommittedAppend(buf []byte, offset int64, maxBytes int) (storage.ReadResult, int64, int64, []storage.AbortedTxn, error) {
	st := p.state()
	if !st.leader {
		return storage.ReadResult{}, st.hw, -1, nil, &NotLeaderError{Topic: p.topic, Partition: p.id, Leader: st.leaderID, Epoch: st.leaderEpoch}
	}
	lso := p.log.LastStableOffset(st.hw)
	res, err := p.log.ReadAppend(buf, offset, maxBytes, lso)
	if err != nil {
		return res, st.hw, lso, nil, fmt.Errorf("%s-%d: %w", p.topic, p.id, err)
	}
	p.io.countRead(res.Batches[len(buf):])
	if len(res.Batches) > len(buf) {
		p.delivered(StageDelivered, res)
	}
	var aborted []storage.AbortedTxn
	if res.HighOffset > offset {
		aborted = p.log.AbortedTransactions(offset, res.HighOffset)
	}
	return res, st.hw, lso, aborted, nil
}

// InTransaction reports whether producerID has a transaction open in
// this partition's log at producer epoch epoch (storage.Log.InTransaction).
func (p *Partition) InTransaction(producerID int64, epoch int16) bool {
	return p.log.InTransaction(producerID, epoch)
}
