package coordinator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	pb "github.com/quirelog/quire/api/metapb"
	"github.com/quirelog/quire/group"
	"github.com/quirelog/quire/metadata"
)

// How the coordinator writes group state changes without one lock over
// every group across the metadata log's writes.
//
// The Machine computes under coordinator.mu, for a moment; the records of
// each group it changed are then written as that group's own GroupRecords
// command with no lock held, so a slow or stuck write of one group holds
// up no other. A group's changes must reach the log in the order the
// Machine made them: each change takes a ticket per group it touches,
// under coordinator.mu, and writes once the group's earlier tickets are
// done (groupTurns). A change whose write fails, or that waited on one
// that failed, drops the Machine (turns.gen moves on): the changes
// computed on it after are not written (metadata.ErrNotCoordinator, which members
// retry), and the next turn rebuilds it from the log once the writes under
// way have ended. A member is answered only after its change is in the
// log, so it never acts on state the log lacks.

// groupTurns orders each group's writes and counts those under way.
type groupTurns struct {
	gen atomic.Uint64 // the Machine's generation; a failed write moves it on

	mu       sync.Mutex // a leaf: never held while taking another lock
	cond     *sync.Cond
	next     map[string]uint64 // tickets handed out, per group
	done     map[string]uint64 // tickets whose write has ended, per group
	underWay int               // changes holding tickets
}

func (t *groupTurns) init() {
	t.cond = sync.NewCond(&t.mu)
	t.next, t.done = map[string]uint64{}, map[string]uint64{}
}

// take hands out one ticket for each group (caller holds coordinator.mu,
// so tickets follow the order the Machine computed in).
func (t *groupTurns) take(groups []string) map[string]uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]uint64, len(groups))
	for _, g := range groups {
		out[g] = t.next[g]
		t.next[g]++
	}
	t.underWay++
	return out
}

// wait waits until ticket is group g's turn.
func (t *groupTurns) wait(g string, ticket uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for t.done[g] != ticket {
		t.cond.Wait()
	}
}

// end ends the turn of ticket for group g.
func (t *groupTurns) end(g string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.done[g]++
	if t.done[g] == t.next[g] {
		delete(t.done, g)
		delete(t.next, g)
	}
	t.cond.Broadcast()
}

// release says a change has ended all its turns.
func (t *groupTurns) release() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.underWay--
	t.cond.Broadcast()
}

// waitIdle waits until no change holds tickets.
func (t *groupTurns) waitIdle() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for t.underWay > 0 {
		t.cond.Wait()
	}
}

// groupWrite is what a turn of the Machine writes: an optional command
// of its own (before, which concerns group), then the records. A call on
// one group names it (group), so that its answer waits for the group's
// earlier changes to be written, and fails if they failed, even when the
// call changes nothing: a member is never told of state the log may not
// get.
type groupWrite struct {
	group  string
	before *pb.Command
	recs   []group.Record
}

// groupPart is one group's records of a change.
type groupPart struct {
	group string
	recs  []group.Record
}

// splitByGroup splits records by group, keeping each group's in order,
// the groups in the order they first appear.
func splitByGroup(recs []group.Record) []groupPart {
	var parts []groupPart
	for _, r := range recs {
		id := r.GroupID()
		i := slices.IndexFunc(parts, func(p groupPart) bool { return p.group == id })
		if i < 0 {
			parts = append(parts, groupPart{group: id})
			i = len(parts) - 1
		}
		parts[i].recs = append(parts[i].recs, r)
	}
	return parts
}

// doWrite runs fn on the current Machine, with the topics refreshed,
// under coordinator.mu, then writes what it returns, each group's part in
// that group's turn, with no lock held; it returns once every part is
// written. fn's error is returned after the records of the topics' refresh
// are written.
func (co *Coordinator) doWrite(ctx context.Context, fn func(m *group.Machine) (groupWrite, error)) error {
	if err := co.log.Active(ctx); err != nil {
		return err
	}
	co.mu.Lock()
	m, err := co.machine(ctx)
	if err != nil {
		co.mu.Unlock()
		return err
	}
	recs := co.refreshTopics(m)
	w, fnErr := fn(m)
	if fnErr != nil {
		w = groupWrite{}
	}
	parts := splitByGroup(append(recs, w.recs...))
	if id := w.group; id != "" && !slices.ContainsFunc(parts, func(p groupPart) bool { return p.group == id }) {
		// A call on one group answers only once that group's earlier
		// changes are in the log, even when it changes nothing.
		parts = append(parts, groupPart{group: id})
	}
	if len(parts) == 0 {
		co.mu.Unlock()
		return fnErr
	}
	groups := make([]string, len(parts))
	for i, p := range parts {
		groups[i] = p.group
	}
	tickets := co.turns.take(groups)
	gen := co.mgen
	co.mu.Unlock()
	defer co.turns.release()

	errs := make([]error, len(parts))
	one := func(i int) {
		p := parts[i]
		co.turns.wait(p.group, tickets[p.group])
		defer co.turns.end(p.group)
		if co.turns.gen.Load() != gen {
			errs[i] = fmt.Errorf("%w: the group coordinator dropped its state while this change of group %q waited; retry", metadata.ErrNotCoordinator, p.group)
			return
		}
		var err error
		if w.before != nil && p.group == w.group {
			err = co.writeBefore(ctx, w.before)
		}
		if err == nil {
			err = co.write(ctx, p.recs)
		}
		if err != nil {
			// The Machine holds what the log may not: rebuild it.
			co.turns.gen.CompareAndSwap(gen, gen+1)
			errs[i] = err
		}
	}
	if len(parts) == 1 {
		one(0)
	} else {
		var wg sync.WaitGroup
		for i := range parts {
			wg.Go(func() { one(i) })
		}
		wg.Wait()
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return fnErr
}

// writeBefore writes a turn's own command (a DeleteGroup).
func (co *Coordinator) writeBefore(ctx context.Context, cmd *pb.Command) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), co.writeTimeout)
	defer cancel()
	_, err := co.log.Apply(ctx, cmd)
	return err
}
