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
	// ProducerWindow; never empty.
	batches []batchMeta
	// lastTimestamp is the largest timestamp of its latest batch, which
	// expiry measures silence from (as Kafka does).
	lastTimestamp int64
}

func (e *producerEntry) last() *batchMeta { return &e.batches[len(e.batches)-1] }

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
	// end is the offset after the last batch the state has seen.
	end int64
}

func newProducerState(end int64) *producerState {
	return &producerState{producers: map[int64]*producerEntry{}, end: end}
}

// update applies an appended batch (leader, follower or replay alike).
// Batches without a producer id leave the producers alone.
func (ps *producerState) update(h *record.Header) {
	ps.end = h.NextOffset()
	if h.ProducerID < 0 {
		return
	}
	first, last := batchSequences(h)
	e := ps.producers[h.ProducerID]
	if e == nil {
		e = &producerEntry{id: h.ProducerID, epoch: h.ProducerEpoch, batches: make([]batchMeta, 0, ProducerWindow)}
		ps.producers[h.ProducerID] = e
	}
	e.add(h.ProducerEpoch, batchMeta{
		firstSeq: first, lastSeq: last,
		firstOffset: h.BaseOffset, lastOffset: h.LastOffset(),
		maxTimestamp: h.MaxTimestamp,
	})
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
		if want := incrementSequence(e.last().lastSeq, 1); first != want {
			return batchMeta{}, false, fmt.Errorf("%w: producer %d epoch %d sequence %d, expected %d",
				ErrOutOfOrderSequence, h.ProducerID, h.ProducerEpoch, first, want)
		}
	}
	return batchMeta{}, false, nil
}

// expire forgets the producers silent for at least expirationMs at nowMs
// (judged by their latest batch's largest timestamp, as in Kafka), and
// returns how many.
func (ps *producerState) expire(nowMs, expirationMs int64) int {
	n := 0
	for id, e := range ps.producers {
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
	// LastOffset is the offset of its latest batch's last record.
	LastOffset int64
}

// list returns the producers ordered by id.
func (ps *producerState) list() []ProducerInfo {
	out := make([]ProducerInfo, 0, len(ps.producers))
	for _, e := range ps.producers {
		b := e.last()
		out = append(out, ProducerInfo{ProducerID: e.id, ProducerEpoch: e.epoch,
			LastSequence: b.lastSeq, LastTimestamp: e.lastTimestamp, LastOffset: b.lastOffset})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ProducerID < out[j].ProducerID })
	return out
}
