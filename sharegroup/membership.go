package sharegroup

import (
	"time"

	"github.com/quirelog/quire/share"
)

// Membership across nodes. A member heartbeats to one node (its
// heartbeat node: the group's coordinator on the Kafka listener, the
// node of its stream over gRPC) and fetches from each partition's
// leader. A leader serves only a member the group has: one that
// heartbeats here, or one another node vouched for (Admit) within the
// last confirmation period; the caller asks the other nodes when neither
// holds (request/share_members.go). A member that leaves or times out
// on its heartbeat node is a Departure, which the caller tells every
// other node, and they Forget it: its records there are released at
// once, not when their locks run out.

// Departure is a member that left its group here, or timed out.
type Departure struct {
	Group    string
	MemberID string
}

// TakeDepartures returns the members that left or timed out on this
// node since the last call (members that heartbeat here only).
func (c *Coordinator) TakeDepartures() []Departure {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.departed
	c.departed = nil
	return out
}

// Expire removes the members of every group silent past the session
// timeout, releasing their records, and returns the departures (with
// any not yet taken). It also drops the members marked unknown until
// before now.
func (c *Coordinator) Expire(now time.Time) []Departure {
	c.mu.Lock()
	for _, g := range c.groups {
		c.expireLocked(now, g)
	}
	c.pruneUnknownLocked(now)
	c.mu.Unlock()
	return c.TakeDepartures()
}

// HasMember reports whether member id heartbeats to this node in group.
func (c *Coordinator) HasMember(now time.Time, groupName, id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	g, ok := c.groups[groupName]
	if !ok {
		return false
	}
	c.expireLocked(now, g)
	m, ok := g.members[id]
	return ok && !m.fetcher
}

// HasMembers reports whether some member heartbeats to this node in
// group (not counting those known only from their fetches).
func (c *Coordinator) HasMembers(now time.Time, groupName string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	g, ok := c.groups[groupName]
	if !ok {
		return false
	}
	c.expireLocked(now, g)
	for _, m := range g.members {
		if !m.fetcher {
			return true
		}
	}
	return false
}

// Known reports whether this node may serve member id of group without
// asking: it heartbeats here, or another node vouched for it until after
// now.
func (c *Coordinator) Known(now time.Time, groupName, id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	g, ok := c.groups[groupName]
	if !ok {
		return false
	}
	m, ok := g.members[id]
	return ok && (!m.fetcher || now.Before(m.confirmed))
}

// Admit takes member id into group as a fetcher, another node having
// vouched for it, until until (then the caller asks again). It refuses
// (false) without Config.AdmitFetchers or an id.
func (c *Coordinator) Admit(now time.Time, groupName, id string, until time.Time) bool {
	if !c.cfg.AdmitFetchers || id == "" {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groupLocked(groupName)
	m, ok := g.members[id]
	if !ok {
		m = &member{fetcher: true}
		g.members[id] = m
	}
	m.lastSeen = now
	if m.fetcher {
		m.confirmed = until
	}
	delete(c.unknown, Departure{Group: groupName, MemberID: id})
	return true
}

// maxUnknown bounds the members marked unknown at once: ids made up by
// clients cost no more memory than that, and past it they are asked
// about each time, as without the mark.
const maxUnknown = 4096

// MarkUnknown records that no node had member id of group when asked,
// so that the caller may refuse it without asking again until until. A
// member that joins here (Heartbeat) or is vouched for (Admit) loses
// the mark at once; one that joins on another node keeps it until then.
// A member this node has is not marked.
func (c *Coordinator) MarkUnknown(now time.Time, groupName, id string, until time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g, ok := c.groups[groupName]; ok {
		if _, ok := g.members[id]; ok {
			return // it joined here, or was vouched for, meanwhile
		}
	}
	key := Departure{Group: groupName, MemberID: id}
	if _, ok := c.unknown[key]; !ok && len(c.unknown) >= maxUnknown {
		c.pruneUnknownLocked(now)
		if len(c.unknown) >= maxUnknown {
			return
		}
	}
	c.unknown[key] = until
}

// Unknown reports whether member id of group is marked unknown until
// after now (MarkUnknown).
func (c *Coordinator) Unknown(now time.Time, groupName, id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	until, ok := c.unknown[Departure{Group: groupName, MemberID: id}]
	return ok && now.Before(until)
}

func (c *Coordinator) pruneUnknownLocked(now time.Time) {
	for k, until := range c.unknown {
		if !now.Before(until) {
			delete(c.unknown, k)
		}
	}
}

// Forget removes the members of group known here only from their
// fetches, releasing what they hold: they left the group on their
// heartbeat node, or no node has them. A member that heartbeats here is
// kept (it joined here meanwhile).
func (c *Coordinator) Forget(groupName string, ids []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g, ok := c.groups[groupName]
	if !ok {
		return
	}
	for _, id := range ids {
		if m, ok := g.members[id]; ok && m.fetcher {
			c.leaveLocked(time.Now(), g, id)
		}
	}
}

// ForgetUnknown forgets member id of group as Forget does, no node
// having vouched for it when asked, unless this node may serve it
// without asking by now (Known): it joined here, or another node
// vouched for it, while the others were asked, and their "no" is older
// than that. It reports whether the member is unknown here (forgotten,
// or never known).
func (c *Coordinator) ForgetUnknown(now time.Time, groupName, id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	g, ok := c.groups[groupName]
	if !ok {
		return true
	}
	m, ok := g.members[id]
	if !ok {
		return true
	}
	if !m.fetcher || now.Before(m.confirmed) {
		return false
	}
	c.leaveLocked(now, g, id)
	return true
}

// Unconfirmed returns the members known here only from their fetches
// whose confirmation has run out, for the caller to ask about again
// (Confirm, or Forget), so that a member whose heartbeat node failed
// does not keep its records here until its locks run out.
func (c *Coordinator) Unconfirmed(now time.Time) []Departure {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Departure
	for name, g := range c.groups {
		for id, m := range g.members {
			if m.fetcher && !now.Before(m.confirmed) {
				out = append(out, Departure{Group: name, MemberID: id})
			}
		}
	}
	return out
}

// Confirm extends the confirmation of a member known here from its
// fetches.
func (c *Coordinator) Confirm(groupName, id string, until time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g, ok := c.groups[groupName]; ok {
		if m, ok := g.members[id]; ok && m.fetcher {
			m.confirmed = until
		}
	}
}

// Release releases the records member id holds on group's
// share-partitions tps here, at once, for the other members to acquire:
// its share session on this node closed (the client closed it, or its
// connection ended), so nothing it was handed there will be acknowledged.
// The member stays in the group; it may open another session and fetch
// again. A record released past the delivery limit is archived as any
// release archives it; those dead letters are answered per partition,
// with its error (restoring the state on a new lease), for the caller
// to persist (PersistSince) and write. A share-partition the group does
// not have here, or where the member holds nothing, is left as it is.
func (c *Coordinator) Release(now time.Time, groupName, id string, tps []TopicPartition) ([][]share.DeadLetter, []error) {
	dead := make([][]share.DeadLetter, len(tps))
	errs := make([]error, len(tps))
	c.mu.Lock()
	g, ok := c.groups[groupName]
	if !ok {
		c.mu.Unlock()
		return dead, errs
	}
	c.syncLocked(groupName, g)
	cfg, dlq := g.settings.Partition, g.settings.DeadLetterTopic
	parts := make([]*partition, len(tps))
	for i, tp := range tps {
		parts[i] = g.parts[tp]
	}
	c.mu.Unlock()
	for i, p := range parts {
		if p == nil {
			continue
		}
		dead[i], errs[i] = c.releaseMember(now, p, cfg, dlq, id)
	}
	return dead, errs
}

func (c *Coordinator) releaseMember(now time.Time, p *partition, cfg share.Config, dlq, id string) ([]share.DeadLetter, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	// On a new lease the state is the saved one, where what the member
	// held under the old lease is free already.
	if err := c.restore(p, cfg); err != nil {
		return nil, err
	}
	if p.p == nil || p.p.Held(id) == 0 {
		return nil, nil
	}
	p.p.Leave(id)
	dead := p.p.TakeDeadLetters()
	p.version++
	p.addPending(now, dlq, dead)
	return dead, nil
}
