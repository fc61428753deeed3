package storage

import (
	"fmt"
	"math"
	"sort"

	"github.com/quirelog/quire/record"
)

// ProducerWindow is how many of its latest batches a producer's state
// remembers: a retry of any of them is recognised as a duplicate. It is
// the most batches an idempotent producer may have in flight to one
// partition (Kafka's max.in.flight.requests.per.connection limit of 5).
const ProducerWindow = 5

// batchMeta is what the producer state remembers of one appended batch.
type batchMeta struct {
	firstSeq, lastSeq       int32
	firstOffset, lastOffset int64
	maxTimestamp            int64
}

// producerEntry is the state of one producer id in one log.
type producerEntry struct {
	id    int64
	epoch int16
	// batches are its latest batches at epoch, oldest first, at most
	// ProducerWindow; empty only when the producer's latest batch at
	// epoch is a transaction marker (a coordinator that bumped the epoch
	// as it ended a transaction: the next batch starts at sequence 0).
	batches []batchMeta
	// coordinatorEpoch is the coordinator epoch of its latest marker, -1
	// before any: a marker from an older coordinator is refused.
	coordinatorEpoch int32
	// lastTimestamp is the largest timestamp of its latest batch, which
	// expiry measures silence from (as Kafka does).
	lastTimestamp int64
}

// lastSeq is the last sequence of its latest batch at its epoch, -1 when
// it has none.
func (e *producerEntry) lastSeq() int32 {
	if len(e.batches) == 0 {
		return -1
	}
	return e.batches[len(e.batches)-1].lastSeq
}

// lastOffset is the last offset of its latest data batch, -1 when it has
// none at its epoch.
func (e *producerEntry) lastOffset() int64 {
	if len(e.batches) == 0 {
		return -1
	}
	return e.batches[len(e.batches)-1].lastOffset
}

// duplicateOf returns the remembered batch with the sequence range
// [first, last], if any.
func (e *producerEntry) duplicateOf(first, last int32) (batchMeta, bool) {
	for _, b := range e.batches {
		if b.firstSeq == first && b.lastSeq == last {
			return b, true
		}
	}
	return batchMeta{}, false
}

// add remembers a batch at epoch, dropping the window if the epoch changed
// and the oldest batch when it is full.
func (e *producerEntry) add(epoch int16, b batchMeta) {
	if epoch != e.epoch {
		e.epoch = epoch
		e.batches = e.batches[:0]
	}
	if len(e.batches) == ProducerWindow {
		copy(e.batches, e.batches[1:])
		e.batches = e.batches[:ProducerWindow-1]
	}
	e.batches = append(e.batches, b)
	e.lastTimestamp = b.maxTimestamp
}

// incrementSequence is seq + n with wrap-around past math.MaxInt32 to 0,
// as producers number their records.
func incrementSequence(seq int32, n int32) int32 {
	if seq > math.MaxInt32-n {
		return n - (math.MaxInt32 - seq) - 1
	}
	return seq + n
}

// batchSequences returns a batch's first and last sequence.
func batchSequences(h *record.Header) (first, last int32) {
	return h.BaseSequence, incrementSequence(h.BaseSequence, h.LastOffsetDelta)
}

// producerState is the producer state of a log (Kafka's
// ProducerStateManager): per producer id its epoch and latest batches, as
// of every batch below end. It is a pure state machine: batches and the
// time go in, answers come out; the Log around it does the I/O (snapshots,
// replay) and the locking (appendMu).
type producerState struct {
	producers map[int64]*producerEntry
	// txns holds the producers with an ongoing transaction in this log:
	// producer id to the offset of the transaction's first batch. The
	// smallest is the first unstable offset, which read_committed
	// consumers stop at.
	txns map[int64]int64
	// end is the offset after the last batch the state has seen.
	end int64
}

func newProducerState(end int64) *producerState {
	return &producerState{producers: map[int64]*producerEntry{}, txns: map[int64]int64{}, end: end}
}

// completedTxn is a transaction a marker ended in this log.
type completedTxn struct {
	producerID int64
	// first is the offset of its first batch here, last the marker's.
	first, last int64
	abort       bool
}

// update applies an appended batch (leader, follower or replay alike).
// Batches without a producer id leave the producers alone. A control
// batch (m is its marker, nil for any other batch) ends the producer's
// ongoing transaction, which update returns (ok false when the producer
// had none here: the coordinator writes markers to every partition of a
// transaction, also those it wrote nothing to).
func (ps *producerState) update(h *record.Header, m *record.Marker) (done completedTxn, ok bool) {
	ps.end = h.NextOffset()
	if h.ProducerID < 0 {
		return completedTxn{}, false
	}
	e := ps.producers[h.ProducerID]
	if e == nil {
		e = &producerEntry{id: h.ProducerID, epoch: h.ProducerEpoch, coordinatorEpoch: -1,
			batches: make([]batchMeta, 0, ProducerWindow)}
		ps.producers[h.ProducerID] = e
	}
	if h.Control() && m != nil {
		if h.ProducerEpoch != e.epoch {
			e.epoch = h.ProducerEpoch
			e.batches = e.batches[:0]
		}
		e.coordinatorEpoch = m.CoordinatorEpoch
		e.lastTimestamp = h.MaxTimestamp
		first, open := ps.txns[h.ProducerID]
		if !open {
			return completedTxn{}, false
		}
		delete(ps.txns, h.ProducerID)
		return completedTxn{producerID: h.ProducerID, first: first, last: h.BaseOffset, abort: m.Type == record.ControlAbort}, true
	}
	if h.Transactional() {
		if _, open := ps.txns[h.ProducerID]; !open {
			ps.txns[h.ProducerID] = h.BaseOffset
		}
	}
	first, last := batchSequences(h)
	e.add(h.ProducerEpoch, batchMeta{
		firstSeq: first, lastSeq: last,
		firstOffset: h.BaseOffset, lastOffset: h.LastOffset(),
		maxTimestamp: h.MaxTimestamp,
	})
	return completedTxn{}, false
}

// firstUnstable is the first offset of the oldest ongoing transaction,
// math.MaxInt64 when none is.
func (ps *producerState) firstUnstable() int64 {
	low := int64(math.MaxInt64)
	for _, off := range ps.txns {
		low = min(low, off)
	}
	return low
}

// pendingProducer is what an append's earlier batches did to a producer,
// so that its later batches are checked against them.
type pendingProducer struct {
	id      int64
	epoch   int16
	lastSeq int32
}

// leaderCheck is the outcome of checking an append's batches.
type leaderCheck struct {
	// duplicates counts the batches already in the log; dupFirst and
	// dupLast are the offsets of the first and last of them.
	duplicates        int
	dupFirst, dupLast int64
	dupMaxTimestamp   int64
	dupRecords        int
}

// check runs the sequence rules of a leader append on batches (validated,
// offsets not yet assigned) without changing anything. A batch already
// in the log (its producer's epoch and sequence range match one of the
// producer's latest ProducerWindow batches) is a duplicate; an append made
// only of duplicates is answered with their offsets and not written, one
// mixing them with new batches is refused (ErrDuplicateSequence).
// numBatches is how many batches there are (1 takes a shorter path; any
// other value works it out).
func (ps *producerState) check(batches []byte, numBatches int) (leaderCheck, error) {
	var res leaderCheck
	if numBatches == 1 {
		// The usual append: one batch, nothing earlier in it to follow.
		h, _ := record.ParseHeader(batches)
		if h.ProducerID < 0 {
			return res, nil
		}
		if err := ps.checkTxn(&h); err != nil {
			return res, err
		}
		first, last := batchSequences(&h)
		dup, isDup, err := ps.checkBatch(&h, first, last)
		if err != nil || !isDup {
			return res, err
		}
		return leaderCheck{duplicates: 1, dupFirst: dup.firstOffset, dupLast: dup.lastOffset,
			dupMaxTimestamp: dup.maxTimestamp, dupRecords: int(h.NumRecords)}, nil
	}
	var pending []pendingProducer
	n := 0
	var err error
	forEachBatch(batches, func(b []byte) {
		n++
		if err != nil {
			return
		}
		h, _ := record.ParseHeader(b)
		if h.ProducerID < 0 {
			return
		}
		if err = ps.checkTxn(&h); err != nil {
			return
		}
		var p *pendingProducer
		for i := range pending {
			if pending[i].id == h.ProducerID {
				p = &pending[i]
			}
		}
		first, last := batchSequences(&h)
		if p == nil {
			var dup batchMeta
			var isDup bool
			if dup, isDup, err = ps.checkBatch(&h, first, last); err != nil {
				return
			}
			if isDup {
				if res.duplicates == 0 {
					res.dupFirst = dup.firstOffset
				}
				res.duplicates++
				res.dupLast = dup.lastOffset
				res.dupMaxTimestamp = max(res.dupMaxTimestamp, dup.maxTimestamp)
				res.dupRecords += int(h.NumRecords)
				return
			}
			pending = append(pending, pendingProducer{id: h.ProducerID, epoch: h.ProducerEpoch, lastSeq: last})
			return
		}
		// A later batch of a producer this append already has.
		switch {
		case h.ProducerEpoch < p.epoch:
			err = fmt.Errorf("%w: producer %d epoch %d after a batch at epoch %d", ErrInvalidProducerEpoch, h.ProducerID, h.ProducerEpoch, p.epoch)
		case h.ProducerEpoch > p.epoch && first != 0:
			err = fmt.Errorf("%w: producer %d starts epoch %d at sequence %d, not 0", ErrOutOfOrderSequence, h.ProducerID, h.ProducerEpoch, first)
		case h.ProducerEpoch == p.epoch && first != incrementSequence(p.lastSeq, 1):
			err = fmt.Errorf("%w: producer %d sequence %d after %d", ErrOutOfOrderSequence, h.ProducerID, first, p.lastSeq)
		}
		p.epoch, p.lastSeq = h.ProducerEpoch, last
	})
	if err != nil {
		return leaderCheck{}, err
	}
	if res.duplicates > 0 && res.duplicates < n {
		return leaderCheck{}, fmt.Errorf("%w: %d of %d batches already appended", ErrDuplicateSequence, res.duplicates, n)
	}
	return res, nil
}

// checkBatch applies the sequence rules to one batch of a producer
// against the state: whether it is a duplicate (and of which batch), or
// why it is refused.
func (ps *producerState) checkBatch(h *record.Header, first, last int32) (batchMeta, bool, error) {
	if h.ProducerEpoch < 0 {
		return batchMeta{}, false, fmt.Errorf("%w: producer %d with epoch %d", ErrInvalidProducerEpoch, h.ProducerID, h.ProducerEpoch)
	}
	if first < 0 {
		return batchMeta{}, false, fmt.Errorf("%w: producer %d with base sequence %d", ErrOutOfOrderSequence, h.ProducerID, first)
	}
	e := ps.producers[h.ProducerID]
	switch {
	case e == nil:
		if first != 0 {
			return batchMeta{}, false, fmt.Errorf("%w: producer %d (epoch %d, sequence %d) has no state in this log",
				ErrUnknownProducerID, h.ProducerID, h.ProducerEpoch, first)
		}
	case h.ProducerEpoch < e.epoch:
		return batchMeta{}, false, fmt.Errorf("%w: producer %d epoch %d, log has epoch %d",
			ErrInvalidProducerEpoch, h.ProducerID, h.ProducerEpoch, e.epoch)
	case h.ProducerEpoch > e.epoch:
		if first != 0 {
			return batchMeta{}, false, fmt.Errorf("%w: producer %d starts epoch %d at sequence %d, not 0",
				ErrOutOfOrderSequence, h.ProducerID, h.ProducerEpoch, first)
		}
	default:
		if dup, ok := e.duplicateOf(first, last); ok {
			return dup, true, nil
		}
		if len(e.batches) == 0 {
			// Its latest batch at this epoch is a marker that bumped it.
			if first != 0 {
				return batchMeta{}, false, fmt.Errorf("%w: producer %d starts epoch %d at sequence %d, not 0",
					ErrOutOfOrderSequence, h.ProducerID, h.ProducerEpoch, first)
			}
			return batchMeta{}, false, nil
		}
		if want := incrementSequence(e.lastSeq(), 1); first != want {
			return batchMeta{}, false, fmt.Errorf("%w: producer %d epoch %d sequence %d, expected %d",
				ErrOutOfOrderSequence, h.ProducerID, h.ProducerEpoch, first, want)
		}
	}
	return batchMeta{}, false, nil
}

// checkTxn applies the transaction rules of a leader append to a
// producer's batch: a control batch comes only from a coordinator's
// marker (Log.AppendMarker), never from a producer, and a producer with
// an ongoing transaction here writes only transactional batches until a
// marker ends it.
func (ps *producerState) checkTxn(h *record.Header) error {
	if h.Control() {
		return corrupt(fmt.Errorf("%w: producer %d sent a control batch", record.ErrBadControl, h.ProducerID))
	}
	if _, open := ps.txns[h.ProducerID]; open && !h.Transactional() {
		return fmt.Errorf("%w: producer %d wrote a non-transactional batch inside its ongoing transaction",
			ErrInvalidTxnState, h.ProducerID)
	}
	return nil
}

// checkMarker applies the rules of a marker to the state: the producer
// epoch may not go back (a zombie's end of transaction: a newer epoch has
// written since), nor the coordinator epoch (a deposed coordinator).
func (ps *producerState) checkMarker(producerID int64, epoch int16, coordinatorEpoch int32) error {
	e := ps.producers[producerID]
	if e == nil {
		return nil
	}
	if epoch < e.epoch {
		return fmt.Errorf("%w: marker of producer %d at epoch %d, log has epoch %d",
			ErrInvalidProducerEpoch, producerID, epoch, e.epoch)
	}
	if coordinatorEpoch < e.coordinatorEpoch {
		return fmt.Errorf("%w: marker of producer %d from coordinator epoch %d, log has %d",
			ErrCoordinatorFenced, producerID, coordinatorEpoch, e.coordinatorEpoch)
	}
	return nil
}

// expire forgets the producers silent for at least expirationMs at nowMs
// (judged by their latest batch's largest timestamp, as in Kafka), and
// returns how many. A producer with an ongoing transaction is kept: its
// marker is still to come.
func (ps *producerState) expire(nowMs, expirationMs int64) int {
	n := 0
	for id, e := range ps.producers {
		if _, open := ps.txns[id]; open {
			continue
		}
		if nowMs-e.lastTimestamp >= expirationMs {
			delete(ps.producers, id)
			n++
		}
	}
	return n
}

// ProducerInfo describes one producer active on a partition.
type ProducerInfo struct {
	ProducerID    int64
	ProducerEpoch int16
	// LastSequence is the last sequence of its latest batch.
	LastSequence int32
	// LastTimestamp is the largest timestamp of its latest batch.
	LastTimestamp int64
	// LastOffset is the offset of its latest batch's last record; -1
	// when its latest batch at its epoch is a marker.
	LastOffset int64
	// CoordinatorEpoch is the coordinator epoch of its latest marker, -1
	// before any.
	CoordinatorEpoch int32
	// TxnStartOffset is the first offset of its ongoing transaction, -1
	// when it has none.
	TxnStartOffset int64
}

// list returns the producers ordered by id.
func (ps *producerState) list() []ProducerInfo {
	out := make([]ProducerInfo, 0, len(ps.producers))
	for _, e := range ps.producers {
		txn, open := ps.txns[e.id]
		if !open {
			txn = -1
		}
		out = append(out, ProducerInfo{ProducerID: e.id, ProducerEpoch: e.epoch,
			LastSequence: e.lastSeq(), LastTimestamp: e.lastTimestamp, LastOffset: e.lastOffset(),
			CoordinatorEpoch: e.coordinatorEpoch, TxnStartOffset: txn})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ProducerID < out[j].ProducerID })
	return out
}
