package share

import "fmt"

// Snapshot is what a share-partition keeps across a change of leader or a
// restart: its start offset and, from there on, the state and delivery
// count of each record it has taken in, as runs. Keys, members and lock
// deadlines are not in it: keys are read from the log again when the
// restored partition takes the records in, and a lock does not outlive
// the node that granted it.
type Snapshot struct {
	Start int64
	Runs  []Run
}

// Run is Length consecutive records in one state, each delivered
// DeliveryCount times.
type Run struct {
	Length        int
	State         State
	DeliveryCount int
}

// Records is how many offsets the runs cover.
func (s Snapshot) Records() int {
	n := 0
	for _, r := range s.Runs {
		n += r.Length
	}
	return n
}

// Validate reports a snapshot no partition could have made.
func (s Snapshot) Validate() error {
	if s.Start < 0 {
		return fmt.Errorf("%w: snapshot start offset %d", ErrInvalidRequest, s.Start)
	}
	for i, r := range s.Runs {
		if r.Length < 1 || r.DeliveryCount < 0 || r.State > Archived {
			return fmt.Errorf("%w: snapshot run %d: %d records %v delivered %d times", ErrInvalidRequest, i, r.Length, r.State, r.DeliveryCount)
		}
	}
	return nil
}

// saved is one offset of a restored snapshot not yet taken in again.
type saved struct {
	state State
	count int
}

// Snapshot returns the partition's state to save: the window, then what
// it restored and has not taken in again. Records available and never
// delivered at the end are left out (taking them in again makes them so).
func (p *Partition) Snapshot() Snapshot {
	s := Snapshot{Start: p.start}
	add := func(st State, count int) {
		if n := len(s.Runs); n > 0 && s.Runs[n-1].State == st && s.Runs[n-1].DeliveryCount == count {
			s.Runs[n-1].Length++
			return
		}
		s.Runs = append(s.Runs, Run{Length: 1, State: st, DeliveryCount: count})
	}
	for i := range p.win {
		add(p.win[i].state, p.win[i].count)
	}
	for _, r := range p.restored {
		add(r.state, r.count)
	}
	if n := len(s.Runs); n > 0 && s.Runs[n-1].State == Available && s.Runs[n-1].DeliveryCount == 0 {
		s.Runs = s.Runs[:n-1]
	}
	return s
}

// Restore returns a share-partition as a snapshot saved it, on another
// node or after a restart. Nothing is taken in yet: End is the snapshot's
// start and the caller offers the log from there, as for a new partition;
// each record offered then gets its saved state and delivery count
// instead of available. A record saved acquired is released as its lock
// ran out (its holder's node is gone): it is available again with the
// delivery count of that acquisition, or, at the delivery count limit,
// archived as a dead letter when it is taken in.
func Restore(cfg Config, s Snapshot) (*Partition, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	p, err := New(cfg, s.Start)
	if err != nil {
		return nil, err
	}
	p.restored = make([]saved, 0, s.Records())
	for _, r := range s.Runs {
		for range r.Length {
			p.restored = append(p.restored, saved{state: r.State, count: r.DeliveryCount})
		}
	}
	return p, nil
}

// Restoring reports how many offsets of a restored snapshot the partition
// has not taken in again.
func (p *Partition) Restoring() int { return len(p.restored) }

// takeRestored sets e, just taken in at End, to its restored state, if
// any, and forgets it. A gap (gap true) stays archived.
func (p *Partition) takeRestored(e *entry, gap bool) (released bool) {
	if len(p.restored) == 0 {
		return false
	}
	r := p.restored[0]
	p.restored = p.restored[1:]
	if len(p.restored) == 0 {
		p.restored = nil
	}
	e.count = r.count
	if gap {
		return false
	}
	switch r.state {
	case Acknowledged, Archived:
		e.state = r.state
	case Acquired:
		return true
	}
	return false
}

// dropRestored forgets the restored state of the first n offsets past
// End (the log no longer has them).
func (p *Partition) dropRestored(n int64) {
	if n >= int64(len(p.restored)) {
		p.restored = nil
		return
	}
	p.restored = p.restored[n:]
}
