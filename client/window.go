package client

import (
	"fmt"
	"sync/atomic"
	"time"
)

// The in-flight window of a partition. A partition may have up to
// MaxInFlightPerPartition requests out at once (Kafka's
// max.in.flight.requests.per.connection, per partition); an idempotent
// producer also keeps at most maxIdempotentBatches batches of a partition
// unresolved, the ones a broker remembers. Batches leave for the broker in
// the order produced, numbered in that order, and the broker appends a
// stream's requests in the order they arrive. A new batch goes at once
// when nothing of its partition is in flight; with requests out, when one
// is answered, a batch fills up or its linger ends (prodPart.add), so that
// under load the window holds full batches rather than many small ones.
//
// Every batch sent stays in the partition's flight list, in the order sent,
// until its callbacks have run: answers may settle a later batch before an
// earlier one (a retry pending), but callbacks run from the front of the
// list only, so a partition's records are called back in the order
// produced: the batches taken off the front queue up (prodPart.done) and
// one goroutine at a time runs their callbacks (runCallbacks), never the
// metadata goroutine, which runs while a refresh holds the metadata.
//
// A request that fails with a retriable error marks its batches to be sent
// again. Those are resent only once nothing else of the partition is in
// flight, each group of batches that went together going together again
// (a broker writes a request's batches of a partition all or none, so a
// group is all duplicates or all new), the groups one after another, in
// order, with the same sequences: a round of resends. New batches wait for
// the round to finish. With idempotence, the requests that were behind a
// failed one are refused as out of order (the broker misses the failed
// batches): that refusal is explained by the failed batch ahead of them,
// so it is not an error but one more batch to resend. Only an
// OUT_OF_ORDER_SEQUENCE_NUMBER or UNKNOWN_PRODUCER_ID with nothing
// unresolved ahead says the broker lost the producer's state: then the
// batches go again under the producer's next epoch (idempotence.go).
//
// A request whose outcome is unknown (sent, then its stream broke or it
// timed out before an answer; answered with Error.OutcomeUnknown; or
// given up because its partition moved to another leader while it
// waited) may have been written. With idempotence its batches are sent
// again like any others: the broker recognises a duplicate. Without, a
// retry could write them twice, so they fail at once with
// ErrUnknownOutcome unless RetryUnknownOutcome lets them go again.
//
// Each request's share of a partition is a claim: the answer, the
// stream's failure and the partition leaving the broker (leave) all take
// it before they settle its batches, so only the first of them does; a
// request still being encoded is settled by its sink once encoded.

// next returns the batches of pp to put in a request now, numbered for
// (id, epoch) when the producer is idempotent and numberOK: the next group
// of a round of resends, or new batches, in a request already holding used
// bytes. With none it
// returns when to look again (zero: when woken); again says pp may have
// more to send at once. The caller holds pp.mu and sends what it returns.
func (pp *prodPart) next(p *producer, now time.Time, flushing bool, used int, numberOK bool, id int64, epoch int16) (bs []*pbatch, wait time.Time, skipped, again bool) {
	if pp.requests >= p.inFlight {
		return nil, time.Time{}, false, false
	}
	if pp.retrying > 0 {
		return pp.nextResend(p, now, numberOK, id, epoch)
	}
	pp.resending = false
	limit := 1 << 30
	if p.idempotent {
		limit = maxIdempotentBatches - len(pp.flight)
	}
	bytes := 0
	for len(bs) < limit && used+bytes < maxRequestBytes && bytes < maxPartitionRequestBytes {
		// A topic's batches may be large (its max.message.bytes): one
		// that would take the request past the limit waits for the next
		// request, unless it would be alone in this one.
		if n := pp.nextSize(); n > 0 && used+bytes > 0 && used+bytes+n > maxRequestBytes {
			skipped = true
			break
		}
		var b *pbatch
		if b, wait = pp.take(now, p.cfg.linger, flushing); b == nil {
			break
		}
		bs = append(bs, b)
		bytes += b.b.EstimatedSize() // batches are not compressed yet
	}
	if len(bs) == 0 {
		return nil, wait, skipped, false
	}
	pp.groups++
	for _, b := range bs {
		b.state, b.group = batchSent, pp.groups
	}
	if p.idempotent && numberOK {
		pp.number(bs, id, epoch)
	}
	pp.flight = append(pp.flight, bs...)
	pp.requests++
	p.notePeak(pp)
	return bs, time.Time{}, skipped, pp.requests < p.inFlight && (len(pp.sealed) > 0 || pp.cur != nil)
}

// nextResend returns the next group of a round of resends.
func (pp *prodPart) nextResend(p *producer, now time.Time, numberOK bool, id int64, epoch int16) (bs []*pbatch, wait time.Time, skipped, again bool) {
	if pp.requests > 0 && !pp.resending {
		return nil, time.Time{}, false, false // waits for what is out
	}
	i := 0
	for i < len(pp.flight) && pp.flight[i].state != batchResend {
		i++
	}
	if !pp.resending && p.idempotent {
		// A round starts, nothing in flight. Batches behind one that
		// goes under a new epoch follow it there: they were refused
		// (a broker takes nothing after a gap), even those still
		// numbered under the old epoch.
		renumber := false
		for _, b := range pp.flight[i:] {
			if b.state != batchResend {
				continue
			}
			renumber = renumber || !b.numbered
			if renumber {
				b.numbered = false
			}
		}
	}
	j := i
	for j < len(pp.flight) && pp.flight[j].state == batchResend && pp.flight[j].group == pp.flight[i].group {
		j++
	}
	bs = pp.flight[i:j]
	if p.idempotent && !bs[0].numbered && pp.reseq && numberOK && id == pp.pid && epoch == pp.pepoch {
		// The producer's next epoch is not known yet: the sink asks for
		// it on its next pass.
		return nil, now.Add(p.cfg.retryBackoff), false, false
	}
	for _, b := range bs {
		b.state = batchSent
	}
	if p.idempotent && numberOK {
		pp.number(bs, id, epoch)
	}
	pp.retrying -= len(bs)
	pp.resending = true
	pp.requests++
	p.notePeak(pp)
	return bs, time.Time{}, false, pp.retrying > 0 && pp.requests < p.inFlight
}

// notePeak keeps the peaks of requests and batches in flight; the caller
// holds pp.mu.
func (p *producer) notePeak(pp *prodPart) {
	raise := func(a *atomic.Int32, n int32) {
		for old := a.Load(); n > old && !a.CompareAndSwap(old, n); old = a.Load() {
		}
	}
	raise(&p.peakRequests, int32(pp.requests))
	n := 0
	for _, b := range pp.flight {
		if b.state == batchSent {
			n++
		}
	}
	raise(&p.peakBatches, int32(n))
}

// room reports whether pp may send a new request now; the caller holds
// pp.mu.
func (pp *prodPart) room(p *producer) bool {
	return pp.requests < p.inFlight && pp.retrying == 0 && (!p.idempotent || len(pp.flight) < maxIdempotentBatches)
}

// hasWork reports whether pp has batches to send now or later.
func (pp *prodPart) hasWork() bool {
	return pp.cur != nil || len(pp.sealed) > 0 || pp.retrying > 0
}

// explained reports whether a refusal of b for its sequence is explained
// by a batch ahead of it that is not settled (in flight, or to be sent
// again): the broker misses that one, so it took nothing after it.
func (pp *prodPart) explained(b *pbatch) bool {
	for _, f := range pp.flight {
		if f == b {
			return false
		}
		if f.state == batchSent || f.state == batchResend {
			return true
		}
	}
	return false
}

// settle takes the answer to one request for the batches bs of pp (in
// order): acknowledged from baseOffset (err nil; -1 when unknown, with
// acks=0), to be sent again, or failed; unanswered: the request may have
// reached the broker but got no answer (its stream broke or timed out),
// so it may have been written. The caller took the request's claim. The
// callbacks of the partition's oldest settled batches then run, in order
// (runCallbacks).
func (p *producer) settle(pp *prodPart, bs []*pbatch, baseOffset int64, err error, unanswered bool) {
	var now time.Time
	if err != nil {
		if needsMetadata(err) {
			p.c.meta.triggerRefresh()
		}
		now = time.Now()
	}
	pp.mu.Lock()
	p.settleLocked(pp, bs, baseOffset, err, unanswered, now)
	ready := pp.popSettled()
	pp.uncount(ready)
	run := pp.queueDone(ready)
	s := pp.sink
	wake := s != nil && pp.hasWork()
	if wake && pp.queuedOn != s {
		pp.queuedOn = s
		s.enqueue(pp)
	}
	// Batches to send again while no leader is known wait for one.
	park := pp.parkLocked()
	pp.mu.Unlock()
	// The sink first: what waited for this answer (the next request
	// with one in flight) goes out while the callbacks run.
	if wake {
		s.notify()
	}
	if park {
		p.park(pp)
	}
	if run {
		p.runCallbacks(pp)
	}
}

// settleLocked is settle's part under pp.mu: the request is no longer in
// flight, and its batches take their outcome.
func (p *producer) settleLocked(pp *prodPart, bs []*pbatch, baseOffset int64, err error, unanswered bool, now time.Time) {
	pp.requests--
	switch {
	case err == nil:
		off := baseOffset
		for _, b := range bs {
			b.state, b.offset = batchAcked, off
			if off >= 0 {
				off += int64(len(b.recs))
			}
		}
	case p.c.ctx.Err() != nil || p.stopped.Load():
		setFailed(bs, ErrClosed)
	default:
		p.settleError(pp, bs, err, unanswered, now)
	}
}

// leave gives up the requests of pp still waiting for the answer of a
// sink other than s, the partition's new leader: the old one was
// replaced, and may never answer (paused, or cut off). Their batches are
// settled as unanswered, oldest first, in the same critical section as
// the move, so that nothing new goes to s before them: sent again at s
// with the same sequences with idempotence, an unknown outcome without
// (unless RetryUnknownOutcome). A late answer from the old leader finds
// the claim taken and is dropped. A request the old sink is still
// encoding is only marked given up: its send settles it once encoded
// (sink.encoded), and no round of resends starts before. The caller
// holds pp.mu and passes the batches returned to queueDone.
func (pp *prodPart) leave(p *producer, s *sink) []*pbatch {
	kept := pp.sent[:0]
	var moved []*claim
	for _, cl := range pp.sent {
		switch {
		case cl.done.Load():
		case cl.sink == s:
			kept = append(kept, cl)
		case cl.phase.CompareAndSwap(claimAssembling, claimGivenUp), cl.phase.Load() == claimGivenUp:
			kept = append(kept, cl)
			pp.resending = false // resends wait for it
			p.givenUpSending.Add(1)
		case cl.take():
			moved = append(moved, cl)
		}
	}
	clear(pp.sent[len(kept):])
	pp.sent = kept
	if len(moved) == 0 {
		return nil
	}
	err := errMoved()
	now := time.Now()
	for _, cl := range moved {
		p.settleLocked(pp, cl.bs, -1, err, true, now)
	}
	ready := pp.popSettled()
	pp.uncount(ready)
	return ready
}

// noteSent keeps the claim of a request carrying batches of pp, dropping
// those settled; the caller holds pp.mu.
func (pp *prodPart) noteSent(cl *claim) {
	kept := pp.sent[:0]
	for _, c := range pp.sent {
		if !c.done.Load() {
			kept = append(kept, c)
		}
	}
	clear(pp.sent[len(kept):])
	pp.sent = append(kept, cl)
}

// settleError decides what becomes of batches whose request failed with
// err (unanswered: see settle); the caller holds pp.mu.
func (p *producer) settleError(pp *prodPart, bs []*pbatch, err error, unanswered bool, now time.Time) {
	again := retriable(err)
	notWritten := false
	if p.idempotent && resequences(err) {
		again, notWritten = true, true
		if !pp.explained(bs[0]) {
			// Nothing ahead explains it: the broker lost the producer's
			// state (expiry, truncation). The batches go again under the
			// next epoch, numbered from 0.
			p.ident.bump(bs[0].pid, bs[0].epoch)
			for _, b := range bs {
				b.numbered = false
			}
			pp.reseq = true
		}
	}
	// The attempt may have been written: sent with no answer, or
	// appended by a leader that could not see it committed.
	ambiguous := !notWritten && (unanswered || outcomeUnknown(err))
	if !p.idempotent && ambiguous && again && !p.cfg.retryUnknown {
		// A retry would not be recognised: the application decides
		// (RetryUnknownOutcome).
		setFailed(bs, fmt.Errorf("%w: %s/%d: %w", ErrUnknownOutcome, pp.topic, pp.partition, err))
		return
	}
	if !again {
		if ambiguous || bs[0].maybeWritten {
			err = fmt.Errorf("%w: %s/%d: %w", ErrUnknownOutcome, pp.topic, pp.partition, err)
		}
		setFailed(bs, err)
		return
	}
	backoff := p.cfg.retryBackoff
	// Each batch goes by its own delivery deadline: the oldest ones may be
	// out of time while records produced since still have theirs.
	expired := 0
	for expired < len(bs) && now.Add(backoff).After(bs[expired].deadline) {
		expired++
	}
	if expired > 0 {
		e := fmt.Errorf("client: %s/%d: delivery timeout: %w", pp.topic, pp.partition, err)
		if p.idempotent && bs[0].numbered && !notWritten || ambiguous || bs[0].maybeWritten {
			// Sent and unanswered: it may be in the log. It is not sent
			// again (the batches behind it keep their sequences: a broker
			// without it refuses them as out of order, and they go under
			// a new epoch).
			e = fmt.Errorf("%w: %w", ErrUnknownOutcome, e)
		}
		setFailed(bs[:expired], e)
	}
	rest := bs[expired:]
	if len(rest) == 0 {
		return
	}
	if ambiguous {
		// With idempotence, or RetryUnknownOutcome: should a later attempt
		// fail for good, the outcome is still unknown.
		for _, b := range rest {
			b.maybeWritten = true
		}
	}
	rest[0].tries++
	p.c.log.Debug("retrying batches", "topic", pp.topic, "partition", pp.partition, "batches", len(rest),
		"try", rest[0].tries, "error", err)
	for _, b := range rest {
		b.state = batchResend
	}
	pp.retrying += len(rest)
	pp.resending = false // a new round, once nothing is in flight
	pp.backoffUntil = now.Add(backoff)
}

func setFailed(bs []*pbatch, err error) {
	for _, b := range bs {
		b.state, b.err = batchFailed, err
	}
}

// popSettled removes the settled batches at the front of the window; the
// caller holds pp.mu and then passes them to queueDone.
func (pp *prodPart) popSettled() []*pbatch {
	n := 0
	for n < len(pp.flight) && (pp.flight[n].state == batchAcked || pp.flight[n].state == batchFailed) {
		n++
	}
	if n == 0 {
		return nil
	}
	ready := pp.flight[:n:n]
	if n == len(pp.flight) {
		pp.flight = make([]*pbatch, 0, maxIdempotentBatches) // not over ready's array
	} else {
		pp.flight = append(make([]*pbatch, 0, len(pp.flight)-n+maxIdempotentBatches), pp.flight[n:]...)
	}
	return ready
}

// queueDone adds batches popped off the window (popSettled) to those
// whose callbacks are to run, and reports whether the caller runs them
// (runCallbacks, once it released pp.mu): not when a goroutine already
// does, which then runs these too, after the earlier ones. The caller
// holds pp.mu.
func (pp *prodPart) queueDone(ready []*pbatch) bool {
	if len(ready) == 0 {
		return false
	}
	pp.done = append(pp.done, ready...)
	if pp.finishing {
		return false
	}
	pp.finishing = true
	return true
}

// runCallbacks runs the callbacks queued for pp until none is left; the
// caller got true from queueDone.
func (p *producer) runCallbacks(pp *prodPart) {
	for {
		pp.mu.Lock()
		bs := pp.done
		pp.done = nil
		if len(bs) == 0 {
			pp.finishing = false
			pp.mu.Unlock()
			return
		}
		pp.mu.Unlock()
		p.finish(pp, bs)
	}
}

// runCallbacksLater is runCallbacks on a goroutine of its own, for the
// metadata goroutine (setSink, expire): it runs while a refresh holds the
// metadata, which a callback producing to a topic not used yet waits
// for. Once the client is closing, failAll runs them.
func (p *producer) runCallbacksLater(pp *prodPart) {
	if !p.c.spawn(func() { p.runCallbacks(pp) }) {
		pp.mu.Lock()
		pp.finishing = false
		pp.mu.Unlock()
	}
}

// finish runs the callbacks of settled batches, in order, and frees
// them; only runCallbacks and failAll call it.
func (p *producer) finish(pp *prodPart, bs []*pbatch) {
	if len(bs) == 0 {
		return
	}
	var bytes int64
	for _, b := range bs {
		for i := range b.recs {
			pr := &b.recs[i]
			pr.r.Offset = -1
			if b.state == batchAcked {
				if b.offset >= 0 {
					pr.r.Offset = b.offset + int64(i)
				}
				pr.cb(pr.r, nil)
			} else {
				pr.cb(pr.r, b.err)
			}
		}
		bytes += b.bytes
		p.recycle(b)
	}
	p.release(bytes)
}

// uncount takes settled batches out of the partition's buffered count;
// the caller holds pp.mu.
func (pp *prodPart) uncount(bs []*pbatch) {
	for _, b := range bs {
		pp.buffered -= int64(len(b.recs))
	}
}
