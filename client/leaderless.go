package client

import (
	"context"
	"fmt"
	"time"
)

// Partitions without a known leader. A partition whose metadata names no
// leader (none elected yet, or a fenced broker: a node coming back after
// a crash) has no sink, so nothing sends its records, and no answer or
// stream failure will come to ask for metadata again. Such a partition is
// parked as soon as it holds records (add, setSink, settle): while any is,
// the producer's leader watch asks for the metadata every retry backoff
// (the refresh loop's own pace), so the records go as soon as an answer
// names the leader, whatever the answers between said (no leader, the
// topic unknown, or none at all); and it fails their batches at their
// delivery timeout itself, without waiting for a metadata answer, which
// may never come. A partition leaves the watch once it has a sink again
// (setSink enqueues its batches there) or holds nothing.

// park hands pp to the leader watch, starting it if it is not running,
// and asks for the metadata at once. The caller set pp.parked under pp.mu
// and released it.
func (p *producer) park(pp *prodPart) {
	p.parkMu.Lock()
	if p.parked == nil {
		p.parked = map[*prodPart]struct{}{}
	}
	p.parked[pp] = struct{}{}
	start := !p.watching
	if start {
		p.watching = p.c.spawn(p.watchLeaders)
	}
	p.parkMu.Unlock()
	if !start {
		select {
		case p.parkWake <- struct{}{}:
		default:
		}
	}
	p.c.meta.triggerRefresh()
}

// parkLocked reports whether pp is to be parked now (the caller then calls
// park once it released pp.mu): it holds records and has no sink. The
// caller holds pp.mu.
func (pp *prodPart) parkLocked() bool {
	if pp.parked || pp.sink != nil || !pp.holdsRecords() {
		return false
	}
	pp.parked = true
	return true
}

// holdsRecords reports whether pp has batches to send, in flight or to
// send again; the caller holds pp.mu.
func (pp *prodPart) holdsRecords() bool {
	return pp.hasWork() || len(pp.flight) > 0
}

// watchLeaders is the leader watch: it runs while partitions are parked,
// asking for the metadata every retry backoff and failing their batches
// as their delivery timeouts pass, and ends when none is left or the
// client closes.
func (p *producer) watchLeaders() {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := time.Now()
		p.parkMu.Lock()
		parts := make([]*prodPart, 0, len(p.parked))
		for pp := range p.parked {
			parts = append(parts, pp)
		}
		p.parkMu.Unlock()
		next := now.Add(p.cfg.retryBackoff)
		for _, pp := range parts {
			if d := pp.expire(p, now); !d.IsZero() && d.Before(next) {
				next = d
			}
		}
		p.parkMu.Lock()
		if len(p.parked) == 0 {
			// A partition parked from now on starts a new watch.
			p.watching = false
			p.parkMu.Unlock()
			return
		}
		p.parkMu.Unlock()
		p.c.meta.triggerRefresh()
		timer.Reset(time.Until(next))
		select {
		case <-p.c.ctx.Done():
			// Close fails what is left (failAll).
			return
		case <-p.parkWake:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// expire fails the batches of a parked partition whose delivery timeout
// passed, oldest first: those to be sent again, then, once the window is
// empty, the ones never sent. It returns when the next one's passes
// (zero: none, or not while requests of pp are out: their answers settle
// them). A partition that has a sink again, or holds nothing, leaves the
// watch, its batches untouched.
func (pp *prodPart) expire(p *producer, now time.Time) time.Time {
	pp.mu.Lock()
	if pp.sink != nil || !pp.holdsRecords() {
		// Under pp.mu, so that a park after this one finds the flag
		// down and hands pp over again.
		pp.parked = false
		p.parkMu.Lock()
		delete(p.parked, pp)
		p.parkMu.Unlock()
		pp.mu.Unlock()
		return time.Time{}
	}
	var base error
	timedOut := func() error {
		if base == nil {
			base = fmt.Errorf("client: %s/%d: delivery timeout with no leader: %w", pp.topic, pp.partition, context.DeadlineExceeded)
		}
		return base
	}
	if pp.requests == 0 {
		for _, b := range pp.flight {
			if b.state != batchResend || !now.After(b.deadline) {
				break
			}
			err := timedOut()
			if b.numbered || b.maybeWritten {
				// Sent before: it may be in the log.
				err = fmt.Errorf("%w: %w", ErrUnknownOutcome, err)
			}
			b.state, b.err = batchFailed, err
			pp.retrying--
		}
	}
	ready := pp.popSettled()
	if len(pp.flight) == 0 {
		for len(pp.sealed) > 0 && now.After(pp.sealed[0].deadline) {
			b := pp.sealed[0]
			pp.sealed[0] = nil
			pp.sealed = pp.sealed[1:]
			b.state, b.err = batchFailed, timedOut()
			ready = append(ready, b)
		}
		if len(pp.sealed) == 0 {
			pp.sealed = nil
			if pp.cur != nil && now.After(pp.cur.deadline) {
				pp.cur.state, pp.cur.err = batchFailed, timedOut()
				ready = append(ready, pp.cur)
				pp.cur = nil
			}
		}
	}
	pp.uncount(ready)
	run := pp.queueDone(ready)
	next := pp.nextDeadline()
	pp.mu.Unlock()
	if run {
		p.runCallbacksLater(pp)
	}
	return next
}

// nextDeadline is when expire will fail pp's oldest batch (zero: not
// while requests of pp are out: their answers settle them); the caller
// holds pp.mu. Batches are failed oldest first, and a batch's deadline is
// fixed when it is made, so the front batch's is the earliest.
func (pp *prodPart) nextDeadline() time.Time {
	switch {
	case len(pp.flight) > 0:
		if pp.requests > 0 {
			return time.Time{}
		}
		return pp.flight[0].deadline
	case len(pp.sealed) > 0:
		return pp.sealed[0].deadline
	case pp.cur != nil:
		return pp.cur.deadline
	}
	return time.Time{}
}
