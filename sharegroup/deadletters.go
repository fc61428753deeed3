package sharegroup

import (
	"slices"
	"time"

	"github.com/quirelog/quire/share"
)

// Dead letters written exactly once. A record archived as a dead letter
// (rejected, or past the delivery limit) of a group with a dead-letter
// topic is kept as pending in its share-partition's saved state until
// it is known written: the caller writes only pending dead letters
// whose mark is saved (ClaimDeadLetters), so that a dead letter is never
// written for a record whose archiving a next leader does not know of,
// and reports each write (FinishDeadLetters). A next leader restores
// the pending marks and writes them again, as does this node after a
// write whose outcome it does not know; those carry Check, for the
// caller to look for an earlier write in the dead-letter topic first.

// maxPendingDead bounds the dead letters a share-partition keeps pending
// (a dead-letter topic that cannot be written to, for long): past it the
// oldest are dropped, unwritten.
const maxPendingDead = 10000

type pendingDead struct {
	share.DeadLetter
	archived time.Time
	// version is p.version when it was marked: it is written only once a
	// save has carried that version.
	version uint64
	// check: an earlier write may have happened; busy: being written.
	check, busy bool
}

// PendingDeadLetter is a dead letter to write to the group's dead-letter
// topic: the record's offset, delivery count and reason, when it was
// archived, and whether an earlier write may have happened (Check).
type PendingDeadLetter struct {
	share.DeadLetter
	Archived time.Time
	Check    bool
}

// addPending counts dead letters and marks them to write, at p's current
// version.
func (p *partition) addPending(now time.Time, dlq string, dead []share.DeadLetter) {
	p.deadLettered += int64(len(dead))
	if dlq == "" {
		return
	}
	for _, d := range dead {
		p.pending = append(p.pending, pendingDead{DeadLetter: d, archived: now, version: p.version})
	}
	if n := len(p.pending) - maxPendingDead; n > 0 {
		p.pending = append(p.pending[:0:0], p.pending[n:]...)
	}
}

// pendingSnapshot is the pending dead letters as saved.
func (p *partition) pendingSnapshot() []PendingDeadLetter {
	if len(p.pending) == 0 {
		return nil
	}
	out := make([]PendingDeadLetter, len(p.pending))
	for i, d := range p.pending {
		out[i] = PendingDeadLetter{DeadLetter: d.DeadLetter, Archived: d.archived}
	}
	return out
}

// ClaimDeadLetters returns group's dead-letter topic and the dead letters
// of tp to write now: those pending whose mark is saved (any, without a
// Store) and that no other call is writing. The caller writes them, then calls
// FinishDeadLetters with the same letters. A group without a dead-letter
// topic (any more) drops its pending dead letters.
func (c *Coordinator) ClaimDeadLetters(group string, tp TopicPartition) (string, []PendingDeadLetter) {
	c.mu.Lock()
	g := c.groups[group]
	var (
		p   *partition
		dlq string
	)
	if g != nil {
		c.syncLocked(group, g)
		p, dlq = g.parts[tp], g.settings.DeadLetterTopic
	}
	c.mu.Unlock()
	if p == nil {
		return "", nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if dlq == "" {
		if len(p.pending) > 0 {
			p.pending = nil
			p.version++
		}
		return "", nil
	}
	var out []PendingDeadLetter
	for i := range p.pending {
		d := &p.pending[i]
		if d.busy || (c.cfg.Store != nil && d.version > p.saved) || p.p == nil {
			continue
		}
		d.busy = true
		out = append(out, PendingDeadLetter{DeadLetter: d.DeadLetter, Archived: d.archived, Check: d.check})
	}
	return dlq, out
}

// FinishDeadLetters ends a claim: the letters written[i] are no longer
// pending (saved so with the share-partition's next save: until then a
// next leader writes them again, after checking), the others are
// written again later, after checking.
func (c *Coordinator) FinishDeadLetters(group string, tp TopicPartition, letters []PendingDeadLetter, written []bool) {
	p := c.lookup(group, tp)
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	done := map[int64]bool{}
	for i, l := range letters {
		done[l.Offset] = written[i]
	}
	kept := p.pending[:0]
	removed := false
	for _, d := range p.pending {
		if ok, claimed := done[d.Offset]; claimed && d.busy {
			if ok {
				removed = true
				continue
			}
			d.busy, d.check = false, true
		}
		kept = append(kept, d)
	}
	p.pending = kept
	if removed {
		p.version++
	}
}

// PendingDeadLetters counts group's dead letters not yet known written,
// per share-partition.
func (c *Coordinator) PendingDeadLetters(group string) map[TopicPartition]int {
	c.mu.Lock()
	g := c.groups[group]
	var parts []*partition
	if g != nil {
		for _, p := range g.parts {
			parts = append(parts, p)
		}
	}
	c.mu.Unlock()
	out := map[TopicPartition]int{}
	for _, p := range parts {
		p.mu.Lock()
		if len(p.pending) > 0 {
			out[p.tp] = len(p.pending)
		}
		p.mu.Unlock()
	}
	return out
}

// replacedSince says whether p's state was deleted or replaced in the
// store after generation applied: p's state may be there (restored from
// it or sent to it in a save) and the store holds none, or one written
// under a later generation (this node saves under those it applied, at
// most applied; a state written by a later delete's entry, or by
// another leader, is under a later one). A save of p still under way is
// under applied at most, refused once the store is past it: p goes
// whether or not it lands. One never sent stays: nothing of it was
// deleted. Without a store it is false.
func (c *Coordinator) replacedSince(p *partition, applied uint64) bool {
	st := c.cfg.Store
	if st == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.p == nil || !p.stored {
		return false
	}
	saved, ok, err := st.Load(p.group, p.tp, p.lease)
	return err != nil || !ok || saved.Generation > applied
}

// syncLocked applies group's saved settings when they changed since
// last applied: a delete of its saved state drops what this node holds
// of it; changed share-partition settings (key ordering, the lock
// duration, the delivery limit) rebuild each share-partition from its
// state under them at once, the records in flight released as after a
// leader change.
func (c *Coordinator) syncLocked(name string, g *group) {
	if c.cfg.Configs == nil {
		return
	}
	kv, gen, deleted, topics := c.cfg.Configs.ShareGroupConfig(name)
	if gen == g.gen {
		return
	}
	if deleted != g.deleted {
		// What this node holds of the state deleted goes: the whole
		// group's, or its share-partitions on the topics named only
		// (DeleteShareGroupOffsets), the others kept as they are. The
		// entry names the last delete's topics only, and others may
		// have come since the generation applied: a share-partition
		// whose saved state is gone from the store, or replaced there
		// (AlterShareGroupOffsets), goes too.
		for tp, p := range g.parts {
			if len(topics) == 0 || slices.Contains(topics, tp.Topic) || c.replacedSince(p, g.gen) {
				delete(g.parts, tp)
			}
		}
		g.deleted = deleted
		c.drops[name]++
	}
	cfg, err := ApplyGroupConfigs(c.DefaultGroupConfig(), kv)
	if err != nil {
		// Checked when written; a key this node does not know is left
		// out rather than the group stopped.
		cfg = c.DefaultGroupConfig()
		for k, v := range kv {
			if next, err := ApplyGroupConfigs(cfg, map[string]string{k: v}); err == nil {
				cfg = next
			}
		}
	}
	changed := cfg.Partition != g.settings.Partition
	g.settings, g.gen = cfg, gen
	for _, p := range g.parts {
		p.mu.Lock()
		p.gen = gen
		if changed && p.p != nil {
			if np, err := share.Restore(g.settings.Partition, p.p.Snapshot()); err == nil {
				p.p = np
				p.version++
			}
		}
		p.mu.Unlock()
	}
}
