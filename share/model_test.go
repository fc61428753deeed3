package share

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/quirelog/quire/internal/testdepth"
)

// model is a naive account of every offset, kept by the test from what the
// partition answers and the rules alone.
type model struct {
	cfg      Config
	keys     []string // "" is no key
	offered  int64
	accepted []bool
	archived []bool
	holder   []string
	deadline []time.Time
	count    []int
	dead     []DeadLetter // expected, not yet taken
	// before: the records the acquiring member held before the
	// acquisition being checked.
	before map[int64]bool
}

func (m *model) finished(o int64) bool { return m.accepted[o] || m.archived[o] }

func (m *model) release(o int64) {
	if m.count[o] >= m.cfg.DeliveryCountLimit {
		m.archive(o, ReasonDeliveryLimit)
		return
	}
	m.holder[o] = ""
}

func (m *model) archive(o int64, why Reason) {
	d := DeadLetter{Offset: o, DeliveryCount: m.count[o], Reason: why, Member: m.holder[o]}
	if m.keys[o] != "" {
		d.Key = []byte(m.keys[o])
	}
	m.dead = append(m.dead, d)
	m.archived[o], m.holder[o] = true, ""
}

func (m *model) expire(now time.Time) {
	for o := range m.offered {
		if m.holder[o] != "" && !now.Before(m.deadline[o]) {
			m.release(o)
		}
	}
}

// acquirable says whether member may take offset o now, by the rules.
func (m *model) acquirable(member string, o int64) bool {
	if o >= m.offered || m.finished(o) || m.holder[o] != "" {
		return false
	}
	k := m.keys[o]
	if !m.cfg.KeyOrdering || k == "" {
		return true
	}
	held := 0
	for q := range m.offered {
		if m.keys[q] != k || m.finished(q) {
			continue
		}
		if m.holder[q] != "" && m.holder[q] != member {
			return false // the key is someone else's
		}
		if q < o && m.holder[q] != member {
			return false // an earlier record of the key waits
		}
		if q < o && m.before[q] {
			return false // one handed out before waits for its acknowledgement
		}
		if m.holder[q] == member {
			held++
		}
	}
	return m.cfg.MaxInFlightPerKey == 0 || held < m.cfg.MaxInFlightPerKey
}

func (m *model) start() int64 {
	o := int64(0)
	for o < m.offered && m.finished(o) {
		o++
	}
	return o
}

func sortDead(d []DeadLetter) []DeadLetter {
	d = slices.Clone(d)
	slices.SortFunc(d, func(a, b DeadLetter) int { return compareInt64(a.Offset, b.Offset) })
	return d
}

// TestShareModelRandomized drives a partition with random members, keys,
// acquisitions, acknowledgements, expiries and departures, checks each
// answer against the model's rules, then drains it and checks that every
// record was accepted or dead-lettered, and none accepted was redelivered.
func TestShareModelRandomized(t *testing.T) {
	runs := testdepth.Rounds(300, 50)
	for seed := range uint64(runs) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { modelRun(t, seed) })
	}
}

func modelRun(t *testing.T, seed uint64) {
	rnd := rand.New(rand.NewPCG(seed, seed*7919+1))
	cfg := Config{
		RecordLockDuration: 10 * time.Second,
		DeliveryCountLimit: 1 + rnd.IntN(4),
		MaxRecordLocks:     3 + rnd.IntN(20),
		KeyOrdering:        rnd.IntN(4) != 0,
		MaxInFlightPerKey:  rnd.IntN(4),
	}
	const n = 80
	nkeys := 1 + rnd.IntN(5)
	m := &model{cfg: cfg, keys: make([]string, n), accepted: make([]bool, n), archived: make([]bool, n),
		holder: make([]string, n), deadline: make([]time.Time, n), count: make([]int, n)}
	for i := range m.keys {
		if rnd.IntN(6) != 0 {
			m.keys[i] = fmt.Sprintf("k%d", rnd.IntN(nkeys))
		}
	}
	p, err := New(cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	members := []string{"a", "b", "c", "d"}
	now := t0

	check := func(step int, what string) {
		t.Helper()
		if got, want := sortDead(p.TakeDeadLetters()), sortDead(m.dead); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("step %d %s: dead letters %v, want %v", step, what, got, want)
		}
		m.dead = nil
		if p.Start() != m.start() {
			t.Fatalf("step %d %s: start %d, model %d", step, what, p.Start(), m.start())
		}
		for _, r := range p.Records() {
			o := r.Offset
			want := Available
			switch {
			case m.accepted[o]:
				want = Acknowledged
			case m.archived[o]:
				want = Archived
			case m.holder[o] != "":
				want = Acquired
			}
			if r.State != want || r.Member != m.holder[o] || r.DeliveryCount != m.count[o] {
				t.Fatalf("step %d %s: offset %d is %v/%q/%d, model %v/%q/%d", step, what, o, r.State, r.Member, r.DeliveryCount, want, m.holder[o], m.count[o])
			}
		}
		if m.cfg.KeyOrdering {
			owner := map[string]string{}
			for o := range m.offered {
				k, h := m.keys[o], m.holder[o]
				if k == "" || h == "" {
					continue
				}
				if prev, ok := owner[k]; ok && prev != h {
					t.Fatalf("step %d %s: key %s held by %s and %s", step, what, k, prev, h)
				}
				owner[k] = h
			}
		}
	}

	doAcquire := func(step int, member string, max int) {
		got, err := p.Acquire(now, member, max)
		if err != nil {
			t.Fatal(err)
		}
		m.expire(now)
		m.before = map[int64]bool{}
		for o := range m.offered {
			if m.holder[o] == member {
				m.before[o] = true
			}
		}
		defer func() { m.before = nil }()
		total := 0
		for _, r := range got {
			for o := r.First; o <= r.Last; o++ {
				if m.accepted[o] {
					t.Fatalf("step %d: acknowledged offset %d delivered again", step, o)
				}
				if !m.acquirable(member, o) {
					t.Fatalf("step %d: %s acquired %d (key %q) against the rules", step, member, o, m.keys[o])
				}
				m.holder[o], m.deadline[o] = member, now.Add(cfg.RecordLockDuration)
				m.count[o]++
				if m.count[o] != r.DeliveryCount || m.count[o] > cfg.DeliveryCountLimit {
					t.Fatalf("step %d: offset %d delivery count %d, model %d, limit %d", step, o, r.DeliveryCount, m.count[o], cfg.DeliveryCountLimit)
				}
				total++
			}
		}
		if total > max {
			t.Fatalf("step %d: acquired %d records, asked for %d", step, total, max)
		}
		if total < max {
			for o := range m.offered {
				if m.acquirable(member, o) {
					t.Fatalf("step %d: %s got %d of %d records but could take offset %d", step, member, total, max, o)
				}
			}
		}
	}

	// restore replaces the partition with one restored from its snapshot,
	// as a new leader does, and takes the log in again up to where it was:
	// every lock is released (the model's holders are forgotten first, so
	// a dead letter names no member).
	restore := func(step int) {
		snap := p.Snapshot()
		if snap.Start != p.Start() || int64(snap.Records()) > p.End()-p.Start() {
			t.Fatalf("step %d: snapshot %+v of a window %d-%d", step, snap, p.Start(), p.End())
		}
		if p, err = Restore(cfg, snap); err != nil {
			t.Fatal(err)
		}
		var rs []Record
		for o := p.End(); o < m.offered; o++ {
			r := Record{Offset: o}
			if m.keys[o] != "" {
				r.Key = []byte(m.keys[o])
			}
			rs = append(rs, r)
		}
		if end, err := p.Offer(rs, m.offered); err != nil || end != m.offered {
			t.Fatalf("step %d: restored partition took in up to %d of %d: %v", step, end, m.offered, err)
		}
		if p.Restoring() != 0 {
			t.Fatalf("step %d: %d restored offsets not taken in again", step, p.Restoring())
		}
		for o := range m.offered {
			if m.holder[o] != "" {
				m.holder[o] = ""
				m.release(o)
			}
		}
	}

	for step := range 400 {
		switch op := rnd.IntN(10); {
		case op < 2: // the coordinator reads more of the log
			to := min(int64(n), m.offered+int64(1+rnd.IntN(10)))
			var rs []Record
			for o := p.End(); o < to; o++ {
				r := Record{Offset: o}
				if m.keys[o] != "" {
					r.Key = []byte(m.keys[o])
				}
				rs = append(rs, r)
			}
			end, err := p.Offer(rs, to)
			if err != nil {
				t.Fatal(err)
			}
			if end > to || end < m.offered {
				t.Fatalf("step %d: end %d after offering up to %d (offered before %d)", step, end, to, m.offered)
			}
			m.offered = end
		case op < 5:
			doAcquire(step, members[rnd.IntN(len(members))], 1+rnd.IntN(6))
		case op < 8: // a member acknowledges a run of what it holds
			member := members[rnd.IntN(len(members))]
			m.expire(now)
			var held []int64
			for o := range m.offered {
				if m.holder[o] == member {
					held = append(held, o)
				}
			}
			if len(held) == 0 {
				err := p.Acknowledge(now, member, []Ack{{First: m.offered, Last: m.offered, Type: Accept}})
				if !errors.Is(err, ErrInvalidRecordState) {
					t.Fatalf("step %d: ack of a record not held: %v", step, err)
				}
				break
			}
			i := rnd.IntN(len(held))
			j := i
			for j+1 < len(held) && held[j+1] == held[j]+1 && rnd.IntN(3) != 0 {
				j++
			}
			typ := AckType(1 + rnd.IntN(4))
			if err := p.Acknowledge(now, member, []Ack{{First: held[i], Last: held[j], Type: typ}}); err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
			for _, o := range held[i : j+1] {
				switch typ {
				case Accept:
					m.accepted[o], m.holder[o] = true, ""
				case Release:
					m.release(o)
				case Reject:
					m.archive(o, ReasonRejected)
				case Renew:
					m.deadline[o] = now.Add(cfg.RecordLockDuration)
				}
			}
		case op < 9:
			now = now.Add(time.Duration(rnd.IntN(8)) * time.Second)
			p.Expire(now)
			m.expire(now)
		case rnd.IntN(3) == 0: // a new leader restores the saved state
			restore(step)
		default:
			member := members[rnd.IntN(len(members))]
			p.Leave(member)
			for o := range m.offered {
				if m.holder[o] == member {
					m.release(o)
				}
			}
		}
		check(step, "")
	}

	// Drain: one member takes in and accepts everything left.
	now = now.Add(time.Hour)
	for i := 0; p.Start() < n; i++ {
		if i > 10*n {
			t.Fatalf("drain stuck at start %d, end %d", p.Start(), p.End())
		}
		var rs []Record
		for o := p.End(); o < n; o++ {
			r := Record{Offset: o}
			if m.keys[o] != "" {
				r.Key = []byte(m.keys[o])
			}
			rs = append(rs, r)
		}
		end, err := p.Offer(rs, n)
		if err != nil {
			t.Fatal(err)
		}
		m.offered = end
		doAcquire(-1, "z", 7)
		for o := range m.offered {
			if m.holder[o] == "z" {
				if err := p.Acknowledge(now, "z", []Ack{{First: o, Last: o, Type: Accept}}); err != nil {
					t.Fatal(err)
				}
				m.accepted[o], m.holder[o] = true, ""
			}
		}
		check(-1, "drain")
	}
	for o := range int64(n) {
		if m.accepted[o] == m.archived[o] {
			t.Fatalf("offset %d accepted=%v archived=%v: want exactly one", o, m.accepted[o], m.archived[o])
		}
	}
}
