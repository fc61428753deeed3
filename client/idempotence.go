package client

import (
	"context"
	"fmt"
	"math"
	"sync"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/record"
)

// Idempotence (on by default, see Idempotent). The producer gets a
// producer id and epoch from InitProducerId when the client is made (or,
// if that fails, at its first send). Each partition numbers its records: a batch's base sequence is fixed the
// first time it is sent, and retries resend the same bytes, so a broker
// answers a retry of a batch it already has with the original offsets
// instead of writing it twice.
//
// The rules the producer keeps (the window's mechanics are in window.go):
//   - A partition has at most 5 batches unresolved, the ones a broker
//     remembers, in up to MaxInFlightPerPartition requests. A request
//     carries either batches already sent (a resent group, with their
//     sequences) or new ones, never both: a broker refuses an append
//     mixing the two.
//   - OUT_OF_ORDER_SEQUENCE_NUMBER behind a batch that is not settled is
//     that batch's consequence: resent in order, same sequences.
//   - OUT_OF_ORDER_SEQUENCE_NUMBER or UNKNOWN_PRODUCER_ID with nothing
//     unsettled ahead mean the broker lost the producer's state and the
//     batches were not written. The producer asks for the next epoch
//     (KIP-360: InitProducerId with the id and epoch it holds) and sends
//     them, and the ones behind them, again under it, numbered from 0,
//     once nothing of the partition is in flight.
//   - A partition moves to a new epoch, at sequence 0, only when none of
//     its batches is unresolved; until then its new batches go on
//     numbering under the epoch of the ones being retried.
//   - A batch whose delivery timeout passes after it was sent is failed
//     with ErrUnknownOutcome: it may or may not be in the log, and it is
//     never sent again under another sequence. So is a batch retried
//     after an attempt with no definite answer whose retry then fails
//     for good (pbatch.maybeWritten).

// maxIdempotentBatches is the most batches of a partition an idempotent
// request carries: a broker remembers a producer's latest 5 batches per
// partition (storage.ProducerWindow, Kafka's too), and a retry of more
// could not be told from a gap.
const maxIdempotentBatches = 5

// producerIdentity is the producer id and epoch of an idempotent
// producer.
type producerIdentity struct {
	mu    sync.Mutex
	id    int64 // -1 until InitProducerId answered
	epoch int16
	stale bool // a partition asked for the next epoch
}

// current returns the id and epoch to number new batches with, asking a
// broker (over cc's connection to addr) first when there is none yet or a
// partition asked for the next epoch.
func (pi *producerIdentity) current(ctx context.Context, c *Client, addr string) (int64, int16, error) {
	pi.mu.Lock()
	defer pi.mu.Unlock()
	if pi.id >= 0 && !pi.stale {
		return pi.id, pi.epoch, nil
	}
	req := &quirev1.InitProducerIdRequest{}
	if pi.id >= 0 {
		req.OptionalProducerId = &quirev1.InitProducerIdRequest_ProducerId{ProducerId: pi.id}
		req.ProducerEpoch = int32(pi.epoch)
	}
	cc, err := c.conn(addr)
	if err != nil {
		return -1, -1, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.requestTimeout)
	defer cancel()
	resp, err := quirev1.NewProducerClient(cc).InitProducerId(ctx, req)
	if err != nil {
		return -1, -1, fmt.Errorf("client: init producer id: %w", fromStatus(err))
	}
	if resp.ProducerEpoch < 0 || resp.ProducerEpoch > math.MaxInt16 {
		return -1, -1, fmt.Errorf("client: init producer id: epoch %d out of range", resp.ProducerEpoch)
	}
	if pi.id >= 0 {
		c.log.Debug("bumped producer epoch", "producer", resp.ProducerId, "epoch", resp.ProducerEpoch, "was", pi.epoch)
	}
	pi.id, pi.epoch, pi.stale = resp.ProducerId, int16(resp.ProducerEpoch), false
	return pi.id, pi.epoch, nil
}

// prefetchID asks a seed broker for the producer id ahead of the first
// send. Failures are left for the send path, which asks again.
func (p *producer) prefetchID() {
	for _, addr := range p.cfg.seeds {
		_, _, err := p.ident.current(p.c.ctx, p.c, addr)
		if err == nil || p.c.ctx.Err() != nil {
			return
		}
		p.c.log.Debug("no producer id yet", "broker", addr, "error", err)
	}
}

// bump asks for the epoch after epoch of id, unless the producer has
// moved past it already.
func (pi *producerIdentity) bump(id int64, epoch int16) {
	pi.mu.Lock()
	if pi.id == id && pi.epoch == epoch {
		pi.stale = true
	}
	pi.mu.Unlock()
}

// resequences reports whether err says batches were not written because
// of their sequence state, so that they go again under a new epoch.
func resequences(err error) bool {
	switch ErrorCode(err) {
	case quirev1.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER, quirev1.ErrorCode_UNKNOWN_PRODUCER_ID:
		return true
	}
	return false
}

// number gives the batches of pp about to be sent their producer fields:
// a batch sent before keeps its own; the others take the partition's next
// sequences. The partition starts again at 0 under (id, epoch) when that
// is not what it numbers under and none of its batches is unresolved
// (sent, numbered and not settled). The caller holds pp.mu.
func (pp *prodPart) number(bs []*pbatch, id int64, epoch int16) {
	for _, b := range bs {
		if b.numbered {
			continue
		}
		if (pp.pid != id || pp.pepoch != epoch) && !pp.unresolved() {
			pp.pid, pp.pepoch, pp.nextSeq = id, epoch, 0
			pp.reseq = false
		}
		if b.built {
			record.SetProducerParts(b.hdr, b.body, pp.pid, pp.pepoch, pp.nextSeq)
		} else {
			b.b.SetProducer(pp.pid, pp.pepoch, pp.nextSeq)
		}
		b.numbered, b.pid, b.epoch = true, pp.pid, pp.pepoch
		pp.nextSeq = nextSequence(pp.nextSeq, len(b.recs))
	}
}

// unresolved reports whether a numbered batch of pp's window is not
// settled yet; the caller holds pp.mu.
func (pp *prodPart) unresolved() bool {
	for _, b := range pp.flight {
		if b.numbered && (b.state == batchSent || b.state == batchResend) {
			return true
		}
	}
	return false
}

// nextSequence is seq advanced by n records, wrapping from 2^31-1 to 0.
func nextSequence(seq int32, n int) int32 {
	return int32((int64(seq) + int64(n)) % (math.MaxInt32 + 1))
}
