package share

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// State is the state of one record in the window.
type State uint8

// The states of a record.
const (
	Available State = iota
	Acquired
	Acknowledged
	Archived
)

func (s State) String() string {
	switch s {
	case Available:
		return "available"
	case Acquired:
		return "acquired"
	case Acknowledged:
		return "acknowledged"
	case Archived:
		return "archived"
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

func (s State) finished() bool { return s == Acknowledged || s == Archived }

// AckType says what a member did with records it holds. The numbers are
// Kafka's (ShareAcknowledge's AcknowledgeTypes, and 4 for renew).
type AckType int8

// The acknowledgement types.
const (
	Accept  AckType = 1
	Release AckType = 2
	Reject  AckType = 3
	Renew   AckType = 4
)

func (t AckType) String() string {
	switch t {
	case Accept:
		return "accept"
	case Release:
		return "release"
	case Reject:
		return "reject"
	case Renew:
		return "renew"
	}
	return fmt.Sprintf("AckType(%d)", int8(t))
}

// Reason says why a record was dead-lettered.
type Reason uint8

// The dead-letter reasons.
const (
	// ReasonRejected: a member rejected the record.
	ReasonRejected Reason = iota + 1
	// ReasonDeliveryLimit: the record was released or its lock expired
	// after group.share.delivery.count.limit deliveries.
	ReasonDeliveryLimit
)

func (r Reason) String() string {
	switch r {
	case ReasonRejected:
		return "rejected"
	case ReasonDeliveryLimit:
		return "delivery count limit reached"
	}
	return fmt.Sprintf("Reason(%d)", uint8(r))
}

// Errors returned by a Partition.
var (
	// ErrInvalidRecordState: an acknowledgement names a record the member
	// does not hold (never acquired, already acknowledged, its lock expired
	// and it went to someone else). Kafka's INVALID_RECORD_STATE.
	ErrInvalidRecordState = errors.New("share: record not acquired by this member")
	// ErrInvalidRequest: a malformed argument (empty member, ranges out of
	// order or overlapping, unknown acknowledgement type).
	ErrInvalidRequest = errors.New("share: invalid request")
)

// Record is one record the caller read from the log: its offset and key
// (nil for a record without a key).
type Record struct {
	Offset int64
	Key    []byte
}

// AcquiredRange is a run of consecutive offsets locked to a member, all
// delivered the same number of times.
type AcquiredRange struct {
	First, Last   int64
	DeliveryCount int
}

// Ack acknowledges the records First..Last (inclusive).
type Ack struct {
	First, Last int64
	Type        AckType
}

// DeadLetter is a record archived because it was rejected or delivered too
// often. The caller writes it to the group's dead-letter topic.
type DeadLetter struct {
	Offset        int64
	Key           []byte
	DeliveryCount int
	Reason        Reason
	// Member is the member that held it last.
	Member string
}

// RecordState is a read-only view of one record in the window.
type RecordState struct {
	Offset        int64
	State         State
	Member        string
	Deadline      time.Time
	DeliveryCount int
	Key           []byte
}

type entry struct {
	state    State
	hasKey   bool
	count    int
	member   string
	key      string
	deadline time.Time
}

// Partition is the state of one share-partition. It is not safe for
// concurrent use: its owner serializes calls.
type Partition struct {
	cfg   Config
	start int64
	win   []entry // win[i] is offset start+i
	dead  []DeadLetter
	// restored is the saved state of the offsets from End on that a
	// restored partition has not taken in again (Restore).
	restored []saved
}

// New returns a share-partition whose first record to deliver is start.
func New(cfg Config, start int64) (*Partition, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if start < 0 {
		return nil, fmt.Errorf("%w: negative start offset %d", ErrInvalidRequest, start)
	}
	return &Partition{cfg: cfg, start: start}, nil
}

// Config returns the partition's configuration.
func (p *Partition) Config() Config { return p.cfg }

// Start is the share-partition start offset: every record below it is
// finished.
func (p *Partition) Start() int64 { return p.start }

// End is the next offset the partition has not yet taken in: where the
// caller reads the log from for Offer.
func (p *Partition) End() int64 { return p.start + int64(len(p.win)) }

// Room reports how many more offsets the window takes in.
func (p *Partition) Room() int { return p.cfg.MaxRecordLocks - len(p.win) }

// Offer takes in records read from the log at End(), in offset order, as
// available. next is the offset after the last one read: offsets below it
// with no record (control batches, compacted away) are archived as gaps.
// Records below End are ignored (a read that overlaps), as is all past
// Start()+MaxRecordLocks. It returns the new End.
func (p *Partition) Offer(recs []Record, next int64) (int64, error) {
	limit := p.start + int64(p.cfg.MaxRecordLocks)
	last := int64(-1)
	for _, r := range recs {
		if r.Offset <= last {
			return p.End(), fmt.Errorf("%w: offered offsets not ascending (%d after %d)", ErrInvalidRequest, r.Offset, last)
		}
		last = r.Offset
	}
	for _, r := range recs {
		if r.Offset < p.End() {
			continue
		}
		if r.Offset >= limit {
			break
		}
		p.gapTo(r.Offset)
		e := entry{state: Available}
		if r.Key != nil {
			e.hasKey, e.key = true, string(r.Key)
		}
		released := p.takeRestored(&e, false)
		p.win = append(p.win, e)
		if released {
			p.release(len(p.win) - 1)
		}
	}
	p.gapTo(min(next, limit))
	p.advance()
	return p.End(), nil
}

// gapTo archives the offsets from End up to off (exclusive).
func (p *Partition) gapTo(off int64) {
	for p.End() < off {
		e := entry{state: Archived}
		p.takeRestored(&e, true)
		p.win = append(p.win, e)
	}
}

// Acquire releases expired locks, then locks up to maxRecords available
// records to member until now plus the record lock duration, lowest offset
// first, within the per-key ordering rules when they are on.
func (p *Partition) Acquire(now time.Time, member string, maxRecords int) ([]AcquiredRange, error) {
	if member == "" {
		return nil, fmt.Errorf("%w: empty member id", ErrInvalidRequest)
	}
	if maxRecords <= 0 {
		return nil, fmt.Errorf("%w: max records %d, want at least 1", ErrInvalidRequest, maxRecords)
	}
	p.Expire(now)
	var holders map[string]holder
	var blocked map[string]bool
	if p.cfg.KeyOrdering {
		holders = p.holders()
		blocked = make(map[string]bool)
	}
	deadline := now.Add(p.cfg.RecordLockDuration)
	var out []AcquiredRange
	got := 0
	for i := range p.win {
		if got == maxRecords {
			break
		}
		e := &p.win[i]
		if e.state.finished() {
			continue
		}
		if p.cfg.KeyOrdering && e.hasKey {
			if blocked[e.key] {
				continue
			}
			if e.state == Acquired {
				// Held since an earlier acquisition (this one's are
				// behind the scan): by another member, the key is
				// theirs; by this one, later records of the key wait
				// for its acknowledgement, release or expiry, since
				// nothing here knows that its delivery reached the
				// member (a lost answer, a failover) and handing out
				// later records of the key would put them before it.
				blocked[e.key] = true
				continue
			}
			h := holders[e.key]
			if (h.n > 0 && h.member != member) || (p.cfg.MaxInFlightPerKey > 0 && h.n >= p.cfg.MaxInFlightPerKey) {
				// Later records of the key wait for this one.
				blocked[e.key] = true
				continue
			}
			holders[e.key] = holder{member: member, n: h.n + 1}
		} else if e.state != Available {
			continue
		}
		e.state, e.member, e.deadline = Acquired, member, deadline
		e.count++
		got++
		off := p.start + int64(i)
		if n := len(out); n > 0 && out[n-1].Last == off-1 && out[n-1].DeliveryCount == e.count {
			out[n-1].Last = off
		} else {
			out = append(out, AcquiredRange{First: off, Last: off, DeliveryCount: e.count})
		}
	}
	return out, nil
}

type holder struct {
	member string
	n      int
}

// holders maps each key with acquired records to the member holding them
// and how many it holds.
func (p *Partition) holders() map[string]holder {
	h := make(map[string]holder)
	for i := range p.win {
		e := &p.win[i]
		if e.state == Acquired && e.hasKey {
			c := h[e.key]
			h[e.key] = holder{member: e.member, n: c.n + 1}
		}
	}
	return h
}

// Acknowledge applies member's acknowledgements, after releasing expired
// locks. Either every range is applied or, if any names a record the member
// does not hold, none is (ErrInvalidRecordState).
func (p *Partition) Acknowledge(now time.Time, member string, acks []Ack) error {
	if member == "" {
		return fmt.Errorf("%w: empty member id", ErrInvalidRequest)
	}
	sorted := slices.Clone(acks)
	slices.SortFunc(sorted, func(a, b Ack) int { return compareInt64(a.First, b.First) })
	for i, a := range sorted {
		if a.First > a.Last {
			return fmt.Errorf("%w: range %d-%d ends before it starts", ErrInvalidRequest, a.First, a.Last)
		}
		if a.Type < Accept || a.Type > Renew {
			return fmt.Errorf("%w: unknown acknowledgement type %d", ErrInvalidRequest, a.Type)
		}
		if i > 0 && sorted[i-1].Last >= a.First {
			return fmt.Errorf("%w: ranges %d-%d and %d-%d overlap", ErrInvalidRequest, sorted[i-1].First, sorted[i-1].Last, a.First, a.Last)
		}
	}
	p.Expire(now)
	for _, a := range sorted {
		if a.First < p.start || a.Last >= p.End() {
			return fmt.Errorf("%w: offsets %d-%d outside the in-flight window %d-%d", ErrInvalidRecordState, a.First, a.Last, p.start, p.End())
		}
		for off := a.First; off <= a.Last; off++ {
			if e := &p.win[off-p.start]; e.state != Acquired || e.member != member {
				return fmt.Errorf("%w: offset %d is %v", ErrInvalidRecordState, off, e.state)
			}
		}
	}
	deadline := now.Add(p.cfg.RecordLockDuration)
	for _, a := range sorted {
		for off := a.First; off <= a.Last; off++ {
			i := int(off - p.start)
			switch a.Type {
			case Accept:
				p.win[i].state, p.win[i].member = Acknowledged, ""
			case Release:
				p.release(i)
			case Reject:
				p.archive(i, ReasonRejected)
			case Renew:
				p.win[i].deadline = deadline
			}
		}
	}
	p.advance()
	return nil
}

// Expire releases every lock whose deadline is not after now.
func (p *Partition) Expire(now time.Time) {
	for i := range p.win {
		if e := &p.win[i]; e.state == Acquired && !now.Before(e.deadline) {
			p.release(i)
		}
	}
	p.advance()
}

// Leave releases everything member holds.
func (p *Partition) Leave(member string) {
	for i := range p.win {
		if e := &p.win[i]; e.state == Acquired && e.member == member {
			p.release(i)
		}
	}
	p.advance()
}

// SetLogStart archives every record below off: the log no longer has them
// (retention, DeleteRecords). They are not dead letters.
func (p *Partition) SetLogStart(off int64) {
	if off <= p.start {
		return
	}
	if off >= p.End() {
		p.dropRestored(off - p.End())
		p.start, p.win = off, p.win[:0]
		return
	}
	for i := range int(off - p.start) {
		p.win[i] = entry{state: Archived, count: p.win[i].count}
	}
	p.advance()
}

// TakeDeadLetters returns the dead letters since the last call, in the order
// they were archived, and forgets them.
func (p *Partition) TakeDeadLetters() []DeadLetter {
	d := p.dead
	p.dead = nil
	return d
}

// Records returns the state of every record in the window.
func (p *Partition) Records() []RecordState {
	out := make([]RecordState, len(p.win))
	for i, e := range p.win {
		out[i] = RecordState{Offset: p.start + int64(i), State: e.state, Member: e.member, Deadline: e.deadline, DeliveryCount: e.count}
		if e.hasKey {
			out[i].Key = []byte(e.key)
		}
	}
	return out
}

// Held reports how many records member holds.
func (p *Partition) Held(member string) int {
	n := 0
	for i := range p.win {
		if p.win[i].state == Acquired && p.win[i].member == member {
			n++
		}
	}
	return n
}

func (p *Partition) release(i int) {
	if p.win[i].count >= p.cfg.DeliveryCountLimit {
		p.archive(i, ReasonDeliveryLimit)
		return
	}
	p.win[i].state, p.win[i].member, p.win[i].deadline = Available, "", time.Time{}
}

func (p *Partition) archive(i int, why Reason) {
	e := &p.win[i]
	d := DeadLetter{Offset: p.start + int64(i), DeliveryCount: e.count, Reason: why, Member: e.member}
	if e.hasKey {
		d.Key = []byte(e.key)
	}
	p.dead = append(p.dead, d)
	e.state, e.member, e.deadline = Archived, "", time.Time{}
}

// advance moves the start offset past the finished prefix.
func (p *Partition) advance() {
	n := 0
	for n < len(p.win) && p.win[n].state.finished() {
		n++
	}
	if n == 0 {
		return
	}
	p.start += int64(n)
	if n == len(p.win) {
		p.win = p.win[:0]
		return
	}
	p.win = p.win[n:]
}

func compareInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
