package sharegroup

import (
	"context"
	"fmt"
	"sync"

	"github.com/quirelog/quire/share"
)

// Share-partition state that outlives its leader. With a Store, the
// coordinator saves each share-partition's state (share.Snapshot: the
// start offset, each record's state and delivery count) when it changes,
// and a node that starts to lead a partition restores it from there:
// nothing acknowledged is delivered again, nothing unacknowledged is
// lost, and the records acquired at the change are released (their
// locks do not outlive the node that granted them) with the delivery
// count of that acquisition.
//
// Persist is the caller's: the request core calls it after a fetch's
// acknowledgements and acquisitions and before it answers, so that an
// acknowledgement is answered only once saved, and a record is handed out
// only once its delivery is. The saves of concurrent calls go together:
// while one Store.Save is under way the others queue, and the next one
// carries all of them, each share-partition once, at its latest state.
//
// A change is saved by saving a state that holds it, not merely a later
// one: the state a call changed can be replaced before the call saves
// it, dropped when another call's save is refused and restored from the
// store, or restored over on a new lease, and what replaces it does not
// hold the change (a record acquired there is free again at the same
// delivery count, a record accepted there is not). So a share-partition
// counts its eras, each begun by such a replacement of a state with
// changes not yet saved; PersistSince answers ErrStateNotSaved for one
// whose era began after its mark, and a write answers only the saves of
// the era it wrote.

// Lease is a node's leadership of a partition: a state is restored and
// saved under one, and restored again when it changes.
type Lease struct {
	// Epoch is the partition's leader epoch.
	Epoch int32
	// Incarnation tells apart topics of one name (its topic id).
	Incarnation string
}

// SavedState is a share-partition's state as Store.Save writes it.
type SavedState struct {
	Group string
	TopicPartition
	Lease Lease
	share.Snapshot
	// DeadLetters are the dead letters not yet known written
	// (deadletters.go).
	DeadLetters []PendingDeadLetter
	// Generation is the group's settings generation the state was
	// decided under (ConfigSource; 0 without one).
	Generation uint64
	// DeadLettered counts the records archived as dead letters since
	// the state was made.
	DeadLettered int64
}

// Store keeps share-partitions' state where the next leader of their
// partition finds it (the metadata log, on a node).
type Store interface {
	// Lease is this node's leadership of tp now; an error (the caller's
	// not-leader error) when this node does not lead it.
	Lease(tp TopicPartition) (Lease, error)
	// Load returns the state last saved for group on tp in the topic
	// incarnation the lease names; false when there is none.
	Load(group string, tp TopicPartition, lease Lease) (SavedState, bool, error)
	// Save writes states, each fenced by its lease (refused when its
	// writer no longer leads the partition under it), and answers each
	// one's refusal in order, or an error for all of them (whether they
	// were written is then unknown).
	Save(ctx context.Context, states []SavedState) ([]error, error)
}

// restore makes p the state saved for it when this node's leadership of
// its partition is not the one p was made under (a new leader, or this
// node again after another one): p.p is then the saved state, or nil when
// none was saved. Without a store it does nothing.
func (c *Coordinator) restore(p *partition, cfg share.Config) error {
	st := c.cfg.Store
	if st == nil {
		return nil
	}
	lease, err := st.Lease(p.tp)
	if err != nil {
		return err
	}
	if p.p != nil && lease == p.lease {
		return nil
	}
	saved, ok, err := st.Load(p.group, p.tp, lease)
	if err != nil {
		return err
	}
	if p.p != nil && p.version > p.saved {
		// Changes made under the old lease and not saved go with the
		// state: the calls that made them must not be answered by a
		// save of the one restored (a state dropped began its era
		// when dropped).
		p.era = c.replaced.Add(1)
	}
	// A dead letter being written (claimed, not finished) stays
	// claimed: handed out again now, its check could run before that
	// write lands and write it a second time.
	busy := map[int64]bool{}
	for _, d := range p.pending {
		if d.busy {
			busy[d.Offset] = true
		}
	}
	p.p, p.lease, p.pending, p.stored, p.deadLettered = nil, lease, nil, ok, 0
	if ok {
		p.deadLettered = saved.DeadLettered
		if p.p, err = share.Restore(cfg, saved.Snapshot); err != nil {
			return fmt.Errorf("sharegroup: restoring %s's state on %s-%d: %w", p.group, p.tp.Topic, p.tp.Partition, err)
		}
		// Saved pending: they may have been written before the
		// change, so each is looked for before it is written again.
		for _, d := range saved.DeadLetters {
			p.pending = append(p.pending, pendingDead{DeadLetter: d.DeadLetter, archived: d.Archived, check: true, busy: busy[d.Offset]})
		}
	}
	return nil
}

// saveItem is one share-partition's state to save, at version of era.
type saveItem struct {
	p       *partition
	version uint64
	era     uint64
	state   SavedState
}

type saveRequest struct {
	items []saveItem
	done  chan []error // one per item
}

// saver writes the queued saves, one Store.Save at a time.
type saver struct {
	mu       sync.Mutex
	pending  []*saveRequest
	flushing bool
	saves    uint64 // Store.Save calls
	states   uint64 // states they carried
}

// Persist saves the state of group's share-partitions tps that changed
// since last saved, with the saves of concurrent calls, and answers each
// one's error in tps' order once written: nil when saved (or unchanged,
// or unknown here), else why not (a partition whose save was refused is
// restored again at its next use). Without a Store it does nothing.
func (c *Coordinator) Persist(ctx context.Context, group string, tps []TopicPartition) []error {
	return c.PersistSince(ctx, group, tps, Mark{})
}

// Mark is where a group's share-partitions stood when a call began
// changing them (MarkGroup).
type Mark struct {
	drops    uint64
	replaced uint64
	set      bool
}

// MarkGroup is the mark to take before changing share-partitions of
// group and to pass to PersistSince with them.
func (c *Coordinator) MarkGroup(group string) Mark {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Mark{drops: c.drops[group], replaced: c.replaced.Load(), set: true}
}

// PersistSince is Persist of changes made since mark: a share-partition
// this node dropped since (the group's state deleted, the group
// forgotten), gone or made anew, is ErrStateNotSaved, since what the
// call changed in it went with it; so is one whose state was replaced
// since with changes not saved (a save refused, a new lease), since the
// call's may have been among them. That can refuse a change made after
// the replacement, in the same call (its restore on a new lease): it
// was saved, and is then handled as any save whose answer was lost.
func (c *Coordinator) PersistSince(ctx context.Context, group string, tps []TopicPartition, mark Mark) []error {
	out := make([]error, len(tps))
	if c.cfg.Store == nil {
		return out
	}
	var items []saveItem
	var at []int // items[i] answers tps[at[i]]
	for i, tp := range tps {
		p, dropped := c.lookupSince(group, tp, mark)
		if dropped {
			out[i] = fmt.Errorf("%w: group %s on %s-%d: its state was deleted meanwhile", ErrStateNotSaved, group, tp.Topic, tp.Partition)
			continue
		}
		if p == nil {
			continue
		}
		p.mu.Lock()
		if mark.set && p.era > mark.replaced {
			p.mu.Unlock()
			out[i] = fmt.Errorf("%w: group %s on %s-%d: its state was replaced meanwhile (a save refused, or a new lease)", ErrStateNotSaved, group, tp.Topic, tp.Partition)
			continue
		}
		if p.p == nil && p.version > p.saved {
			// Dropped when a save under its lease was refused: what
			// changed since the last save is lost, not saved.
			out[i] = fmt.Errorf("%w: group %s on %s-%d", ErrStateNotSaved, group, tp.Topic, tp.Partition)
		}
		if p.p != nil && p.version > p.saved {
			p.stored = true
			items = append(items, saveItem{p: p, version: p.version, era: p.era,
				state: SavedState{Group: group, TopicPartition: tp, Lease: p.lease, Snapshot: p.p.Snapshot(),
					DeadLetters: p.pendingSnapshot(), Generation: p.gen, DeadLettered: p.deadLettered}})
			at = append(at, i)
		}
		p.mu.Unlock()
	}
	if len(items) == 0 {
		return out
	}
	req := &saveRequest{items: items, done: make(chan []error, 1)}
	s := &c.saver
	s.mu.Lock()
	s.pending = append(s.pending, req)
	if !s.flushing {
		s.flushing = true
		go c.flushSaves(context.WithoutCancel(ctx))
	}
	s.mu.Unlock()
	select {
	case errs := <-req.done:
		for i, err := range errs {
			out[at[i]] = err
		}
	case <-ctx.Done():
		for _, i := range at {
			out[i] = fmt.Errorf("sharegroup: saving the share-partition state: %w", ctx.Err())
		}
	}
	return out
}

// lookup returns group's share-partition tp, nil if it has none.
// lookupSince is lookup, and whether the group dropped share-partitions
// since mark and tp's is not the one it had then (gone or made anew).
func (c *Coordinator) lookupSince(group string, tp TopicPartition, mark Mark) (*partition, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var p *partition
	if g := c.groups[group]; g != nil {
		if mark.set {
			c.syncLocked(group, g) // a delete this node has not applied yet
		}
		p = g.parts[tp]
	}
	if !mark.set || c.drops[group] == mark.drops {
		return p, false
	}
	return p, p == nil || p.born > mark.drops
}

func (c *Coordinator) lookup(group string, tp TopicPartition) *partition {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g := c.groups[group]; g != nil {
		return g.parts[tp]
	}
	return nil
}

// flushSaves writes what is queued, one Store.Save after another, until
// nothing is.
func (c *Coordinator) flushSaves(ctx context.Context) {
	s := &c.saver
	for {
		s.mu.Lock()
		reqs := s.pending
		s.pending = nil
		if len(reqs) == 0 {
			s.flushing = false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		c.save(ctx, reqs)
	}
}

// save writes the latest state of each partition the requests name, in
// one Store.Save, and answers them: a save of an era before the one
// written is ErrStateNotSaved (its change is not in the state written).
func (c *Coordinator) save(ctx context.Context, reqs []*saveRequest) {
	latest := map[*partition]int{} // partition -> index in batch
	var batch []saveItem
	for _, r := range reqs {
		for _, it := range r.items {
			if i, ok := latest[it.p]; ok {
				if it.era > batch[i].era || (it.era == batch[i].era && it.version > batch[i].version) {
					batch[i] = it
				}
				continue
			}
			latest[it.p] = len(batch)
			batch = append(batch, it)
		}
	}
	errs := make([]error, len(batch))
	for from := 0; from < len(batch); {
		// At most maxSaveRuns runs a write (one at least), so that an
		// entry stays small whatever the windows hold.
		to, runs := from, 0
		for to < len(batch) && (to == from || runs+len(batch[to].state.Runs) <= maxSaveRuns) {
			runs += len(batch[to].state.Runs)
			to++
		}
		c.saveChunk(ctx, batch[from:to], errs[from:to])
		from = to
	}
	for _, r := range reqs {
		out := make([]error, len(r.items))
		for j, it := range r.items {
			i := latest[it.p]
			out[j] = errs[i]
			if it.era != batch[i].era {
				out[j] = fmt.Errorf("%w: group %s on %s-%d: its state was replaced before it was saved (a save refused, or a new lease)",
					ErrStateNotSaved, it.state.Group, it.state.Topic, it.state.Partition)
			}
		}
		r.done <- out
	}
}

// maxSaveRuns bounds the runs one Store.Save carries: about 8 bytes each
// in the metadata log.
const maxSaveRuns = 32 << 10

// saveChunk writes batch in one Store.Save and sets errs.
func (c *Coordinator) saveChunk(ctx context.Context, batch []saveItem, errs []error) {
	states := make([]SavedState, len(batch))
	for i, it := range batch {
		states[i] = it.state
	}
	results, err := c.cfg.Store.Save(ctx, states)
	if err == nil && len(results) != len(states) {
		err = fmt.Errorf("sharegroup: %d states saved, %d answers", len(states), len(results))
	}
	c.saver.mu.Lock()
	c.saver.saves++
	c.saver.states += uint64(len(states))
	c.saver.mu.Unlock()
	for i, it := range batch {
		errs[i] = err
		if err == nil {
			errs[i] = results[i]
		}
		it.p.mu.Lock()
		switch {
		case it.era != it.p.era:
			// Of a state replaced since: nothing of the one held now.
		case errs[i] == nil:
			it.p.saved = max(it.p.saved, it.version)
		case err == nil && it.p.lease == it.state.Lease:
			// Refused: this node no longer leads the partition under
			// that lease (or the group's settings changed). Whatever
			// it holds of it is stale, and the changes not saved go
			// with it (a new era); its pending dead letters are
			// replaced by the saved ones at the restore, those being
			// written kept claimed.
			it.p.p = nil
			it.p.era = c.replaced.Add(1)
		}
		it.p.mu.Unlock()
	}
}

// SaveStats is how many Store.Save calls the coordinator made and how
// many share-partition states they carried.
func (c *Coordinator) SaveStats() (saves, states uint64) {
	c.saver.mu.Lock()
	defer c.saver.mu.Unlock()
	return c.saver.saves, c.saver.states
}
