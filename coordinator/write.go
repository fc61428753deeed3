package coordinator

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	pb "github.com/quirelog/quire/api/metapb"
	"github.com/quirelog/quire/group"
	"github.com/quirelog/quire/metadata"
)

// How the coordinator writes group state changes with no lock held
// across the metadata log's writes.
//
// A group's Machine computes under the group's lock (groupRun.mu), for a
// moment; the records of the change are then written as the group's own
// GroupRecords command with no lock held, so a slow or stuck write holds
// up no other group, nor the group's own calls that are not waiting for
// it. A group's changes must reach the log in the order its Machine made
// them: each change takes a ticket under the group's lock, and writes
// once the group's earlier tickets are done (groupTurns). A change whose
// write fails, or that waited on one that failed, drops the group's
// Machine (turns.gen moves on): the changes computed on it after are not
// written (metadata.ErrNotCoordinator, which members retry), and the
// next turn rebuilds it from the log once the writes under way have
// ended. A member is answered only after its change is in the log, so it
// never acts on state the log lacks.

// groupTurns orders one group's writes and counts those under way.
type groupTurns struct {
	gen atomic.Uint64 // the Machine's generation; a failed write moves it on
	// failed says a write failed since the last barrier: the Machine's
	// rebuild waits for one.
	failed atomic.Bool

	mu       sync.Mutex // a leaf: never held while taking another lock
	cond     *sync.Cond
	next     uint64 // tickets handed out
	done     uint64 // tickets whose write has ended
	underWay int    // changes holding a ticket
}

func (t *groupTurns) init() {
	t.cond = sync.NewCond(&t.mu)
}

// take hands out the next ticket (caller holds the group's lock, so
// tickets follow the order the Machine computed in).
func (t *groupTurns) take() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	ticket := t.next
	t.next++
	t.underWay++
	return ticket
}

// wait waits until ticket's turn.
func (t *groupTurns) wait(ticket uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for t.done != ticket {
		t.cond.Wait()
	}
}

// end ends the turn of a ticket, and says its change has ended.
func (t *groupTurns) end() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.done++
	t.underWay--
	t.cond.Broadcast()
}

// waitIdle waits until no change holds a ticket.
func (t *groupTurns) waitIdle() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for t.underWay > 0 {
		t.cond.Wait()
	}
}

// idle tells whether no change holds a ticket.
func (t *groupTurns) idle() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.underWay == 0
}

// groupWrite is what a turn of a group's Machine writes: an optional
// command of its own (before), then the records.
type groupWrite struct {
	before *pb.Command
	recs   []group.Record
}

// pendingWrite is a change computed, to be written in its group's turn.
type pendingWrite struct {
	g      *groupRun
	ticket uint64
	gen    uint64 // the Machine's generation it was computed on
	w      groupWrite
}

// begin checks this node is the active controller and its term's groups
// are loaded, and returns the term.
func (co *Coordinator) begin(ctx context.Context) (uint64, error) {
	if err := co.log.Active(ctx); err != nil {
		return 0, err
	}
	term := co.log.Term()
	return term, co.load(ctx, term)
}

// doWrite runs fn on group id's Machine of the current term, with the
// topics refreshed, under the group's lock, then writes what it returns
// in the group's turn with no lock held; it returns once that is written
// (and the group's earlier changes are: a call that changes nothing still
// waits for them, so no member is told of state the log may not get).
// fn's error is returned after the records of the topics' refresh are
// written.
func (co *Coordinator) doWrite(ctx context.Context, id string, fn func(g *groupRun) (groupWrite, error)) error {
	term, err := co.begin(ctx)
	if err != nil {
		return err
	}
	if err := group.ValidateGroupID(id); err != nil {
		return err
	}
	p, fnErr, err := co.compute(ctx, id, term, true, fn)
	if err != nil {
		return err
	}
	if err := co.finish(ctx, p); err != nil {
		return err
	}
	return fnErr
}

// compute runs fn on group id's Machine for term under the group's lock,
// building the Machine if need be, and takes the change's ticket: always
// when wait is set (a call on the group), else only when there is
// something to write (nil otherwise).
func (co *Coordinator) compute(ctx context.Context, id string, term uint64, wait bool, fn func(g *groupRun) (groupWrite, error)) (*pendingWrite, error, error) {
	g := co.lock(id)
	defer g.mu.Unlock()
	if _, err := co.machine(ctx, g, term); err != nil {
		return nil, nil, err
	}
	recs := co.refreshTopics(g)
	w, fnErr := fn(g)
	if fnErr != nil {
		w = groupWrite{}
	}
	w.recs = append(recs, w.recs...)
	if !wait && w.before == nil && len(w.recs) == 0 {
		return nil, fnErr, nil
	}
	return &pendingWrite{g: g, ticket: g.turns.take(), gen: g.mgen, w: w}, fnErr, nil
}

// finish writes p in its group's turn, with no lock held.
func (co *Coordinator) finish(ctx context.Context, p *pendingWrite) error {
	t := &p.g.turns
	t.wait(p.ticket)
	defer t.end()
	if t.gen.Load() != p.gen {
		return fmt.Errorf("%w: the group coordinator dropped its state of group %q while this change waited; retry", metadata.ErrNotCoordinator, p.g.id)
	}
	var err error
	if p.w.before != nil {
		err = co.writeBefore(ctx, p.w.before)
	}
	if err == nil {
		err = co.write(ctx, p.w.recs)
	}
	if err != nil {
		// The Machine holds what the log may not: rebuild it.
		t.failed.Store(true)
		t.gen.CompareAndSwap(p.gen, p.gen+1)
	}
	return err
}

// writeBefore writes a turn's own command (a DeleteGroup).
func (co *Coordinator) writeBefore(ctx context.Context, cmd *pb.Command) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), co.writeTimeout)
	defer cancel()
	_, err := co.log.Apply(ctx, cmd)
	return err
}
