package storage

import (
	"fmt"

	"github.com/quirelog/quire/record"
)

// AppendMarker appends, as the leader at leaderEpoch, the marker that ends
// producerID's transaction in this log: commit or abort, written for a
// coordinator at coordinatorEpoch, as a control batch in Kafka's layout
// (record.BuildMarker). The producer's ongoing transaction here (if any)
// ends with it: an abort is added to the aborted-transactions index, and
// the first unstable offset moves on. A marker at a producer epoch older
// than the log's for that producer gets ErrInvalidProducerEpoch (a zombie),
// one from an older coordinator epoch ErrCoordinatorFenced. A marker with
// a newer producer epoch starts that epoch: the producer's next batch
// starts at sequence 0 (the coordinator bumps the epoch at each
// transaction's end). It returns the append like AppendAsLeader.
func (l *Log) AppendMarker(producerID int64, producerEpoch int16, m record.Marker, leaderEpoch int32) (AppendInfo, error) {
	if producerID < 0 || producerEpoch < 0 {
		return AppendInfo{}, fmt.Errorf("%w: marker for producer %d epoch %d", ErrInvalidProducerEpoch, producerID, producerEpoch)
	}
	batch := record.BuildMarker(producerID, producerEpoch, m, l.opts.Now().UnixMilli())
	cfg := l.Config()
	bs, err := validate(batch, cfg, true)
	if err != nil {
		return bs.info, err
	}
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.checkWritable(); err != nil {
		return AppendInfo{}, err
	}
	if latest, ok := l.epochs.latest(); ok && leaderEpoch < latest {
		return bs.info, fmt.Errorf("%w: epoch %d, log has %d", ErrStaleEpoch, leaderEpoch, latest)
	}
	if err := l.producers.checkMarker(producerID, producerEpoch, m.CoordinatorEpoch); err != nil {
		return AppendInfo{FirstOffset: -1, LastOffset: -1, MaxTimestamp: -1, LogAppendTime: -1}, err
	}
	off := l.leo.Load()
	record.SetBaseOffset(batch, off)
	record.SetPartitionLeaderEpoch(batch, leaderEpoch)
	bs.info.FirstOffset, bs.info.LastOffset = off, off
	if err := l.appendLocked(batch, bs, cfg); err != nil {
		return AppendInfo{}, err
	}
	return bs.info, nil
}

// InTransaction reports whether producerID has a transaction open in
// this log at producer epoch epoch. One open at an older epoch is a
// previous transaction whose marker has not come yet (the coordinator
// bumps the epoch when it decides a transaction's end, and may write the
// markers later): a batch of the next transaction must not join it.
func (l *Log) InTransaction(producerID int64, epoch int16) bool {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	_, open := l.producers.txns[producerID]
	e := l.producers.producers[producerID]
	return open && e != nil && e.epoch == epoch
}
