package client

import (
	"context"
	"errors"
	"slices"
)

// PollFunc is Poll without a Record allocation per record, as
// Consumer.PollFunc is: it waits for records of owned partitions and calls
// fn for each, in offset order within a partition, reusing one Record, and
// returns how many it passed. Key, Value and Headers stay valid after fn
// returns; the Record itself does not. Positions move past each record
// passed to fn, as Poll moves them past the records it returns. Errors
// are those of Poll.
//
// fn runs on the caller's goroutine, without the member's lock: it may
// call Commit, CommitAsync, Seek, Pause, Resume and Assignment, but not
// Poll, PollFunc, Close or Leave (Close waits for the heartbeat loop,
// which may be waiting for fn).
//
// Revocation: fn is called for a record only while the member owns its
// partition. Once a heartbeat's answer takes a partition away, fn is not
// called again for it, and the member gives it up (OnRevoked, the commit
// of its position, then the heartbeat that releases it to the group) only
// after the fn call in progress, if any, has returned; the position
// committed counts every record fn was given. So no record of a revoked
// partition reaches fn once another member can own it. The price is that
// the heartbeat loop waits for that one call: an fn that takes longer than
// the session timeout gets the member removed, as a slow poll loop does in
// Kafka. Pause, Seek and Close stop the records in hand the same way.
//
// Ownership is looked up once per partition run (the records of one fetch
// of one partition), not per record: between two records fn pays one
// atomic load and an offset comparison.
func (g *GroupConsumer) PollFunc(ctx context.Context, fn func(r *Record)) (int, error) {
	for {
		g.mu.Lock()
		cons, gen, changed, fatal := g.cons, g.consGen.Load(), g.changed, g.fatal
		g.mu.Unlock()
		if fatal != nil {
			return 0, fatal
		}
		if g.ctx.Err() != nil {
			return 0, ErrClosed
		}
		n := 0
		var errs []error
		err := cons.pollResults(ctx, changed, func(r fetchResult) {
			m, err := g.deliver(cons, &r, gen, fn)
			n += m
			if err != nil {
				errs = append(errs, err)
			}
		})
		switch {
		case n > 0 || len(errs) > 0:
			return n, errors.Join(errs...)
		case ctx.Err() != nil:
			return 0, ctx.Err()
		case err == nil, errors.Is(err, errStopped), errors.Is(err, ErrClosed):
			// Nothing to deliver (from a consumer since replaced, or of
			// partitions no longer owned), the assignment changed, or
			// the consumer was replaced: poll the current one.
		default:
			return 0, err
		}
	}
}

// deliver passes fn the records of one fetch result of cons, read at
// generation gen: none when the generation moved on since (the consumer
// was replaced or what it may deliver changed) or the partition is not
// owned, and none from the moment the generation moves. It then moves the
// partition's position past the last record passed, unless the partition
// was sought meanwhile. It holds runMu throughout, and mu only to look
// and to move the position.
func (g *GroupConsumer) deliver(cons *Consumer, r *fetchResult, gen uint64, fn func(*Record)) (int, error) {
	g.runMu.Lock()
	defer g.runMu.Unlock()
	tp := TopicPartition{r.tp.topic, r.tp.partition}
	g.mu.Lock()
	if g.consGen.Load() != gen || g.ctx.Err() != nil {
		g.mu.Unlock()
		return 0, nil
	}
	if r.err != nil {
		g.mu.Unlock()
		return 0, cons.decode(r, nil, nil) // the error, named as Poll names it
	}
	if _, owned := slices.BinarySearchFunc(g.owned, tp, compareTP); !owned {
		g.mu.Unlock()
		return 0, nil
	}
	from, hasPos := g.pos[tp]
	sought := g.sought[tp]
	fencing := g.fencing[tp]
	g.mu.Unlock()

	n := 0
	var next int64
	var epoch int32
	err := cons.decode(r, nil, func(rec *Record) bool {
		if g.consGen.Load() != gen {
			return false
		}
		if hasPos && rec.Offset < from {
			return true
		}
		rec.FencingEpoch = fencing
		fn(rec)
		n++
		next, epoch = rec.Offset+1, rec.LeaderEpoch
		return true
	})
	if n > 0 {
		g.mu.Lock()
		if g.sought[tp] == sought {
			g.pos[tp], g.posEpoch[tp] = next, epoch
		}
		g.mu.Unlock()
	}
	return n, err
}
