package share

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newPart(t *testing.T, mod func(*Config)) *Partition {
	t.Helper()
	cfg := DefaultConfig()
	if mod != nil {
		mod(&cfg)
	}
	p, err := New(cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// recs makes records at offsets from, from+1, ... with the given keys ("" is
// no key).
func recs(from int64, keys ...string) []Record {
	out := make([]Record, len(keys))
	for i, k := range keys {
		out[i] = Record{Offset: from + int64(i)}
		if k != "" {
			out[i].Key = []byte(k)
		}
	}
	return out
}

func offer(t *testing.T, p *Partition, rs []Record) {
	t.Helper()
	next := p.End()
	if len(rs) > 0 {
		next = rs[len(rs)-1].Offset + 1
	}
	if _, err := p.Offer(rs, next); err != nil {
		t.Fatal(err)
	}
}

func acquire(t *testing.T, p *Partition, now time.Time, m string, n int) []AcquiredRange {
	t.Helper()
	got, err := p.Acquire(now, m, n)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func ack(t *testing.T, p *Partition, now time.Time, m string, first, last int64, typ AckType) {
	t.Helper()
	if err := p.Acknowledge(now, m, []Ack{{First: first, Last: last, Type: typ}}); err != nil {
		t.Fatal(err)
	}
}

func rng(first, last int64, count int) AcquiredRange {
	return AcquiredRange{First: first, Last: last, DeliveryCount: count}
}

func expectRanges(t *testing.T, got []AcquiredRange, want ...AcquiredRange) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("acquired %v, want %v", got, want)
	}
}

func TestShareConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Config)
	}{
		{"lock", func(c *Config) { c.RecordLockDuration = 0 }},
		{"delivery", func(c *Config) { c.DeliveryCountLimit = 0 }},
		{"locks", func(c *Config) { c.MaxRecordLocks = 0 }},
		{"perkey", func(c *Config) { c.MaxInFlightPerKey = -1 }},
	} {
		cfg := DefaultConfig()
		tc.mod(&cfg)
		if _, err := New(cfg, 0); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: New = %v, want ErrInvalidConfig", tc.name, err)
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestShareAcquireAcceptAdvancesStart(t *testing.T) {
	p := newPart(t, nil)
	offer(t, p, recs(0, "", "", "", "", ""))
	expectRanges(t, acquire(t, p, t0, "a", 3), rng(0, 2, 1))
	expectRanges(t, acquire(t, p, t0, "b", 10), rng(3, 4, 1))
	ack(t, p, t0, "b", 3, 4, Accept)
	if p.Start() != 0 {
		t.Fatalf("start %d after acknowledging 3-4 with 0-2 in flight, want 0", p.Start())
	}
	ack(t, p, t0, "a", 0, 2, Accept)
	if p.Start() != 5 || p.End() != 5 {
		t.Fatalf("start/end %d/%d, want 5/5", p.Start(), p.End())
	}
	if got := acquire(t, p, t0, "a", 10); len(got) != 0 {
		t.Fatalf("acquired %v after everything was acknowledged", got)
	}
}

func TestShareLockExpiryRedelivers(t *testing.T) {
	p := newPart(t, nil)
	offer(t, p, recs(0, "", ""))
	expectRanges(t, acquire(t, p, t0, "a", 10), rng(0, 1, 1))
	// Just before the deadline nothing is free.
	if got := acquire(t, p, t0.Add(DefaultRecordLockDuration-time.Millisecond), "b", 10); len(got) != 0 {
		t.Fatalf("b acquired %v while a's lock holds", got)
	}
	expectRanges(t, acquire(t, p, t0.Add(DefaultRecordLockDuration), "b", 10), rng(0, 1, 2))
	// a's acknowledgement comes too late.
	err := p.Acknowledge(t0.Add(DefaultRecordLockDuration), "a", []Ack{{First: 0, Last: 1, Type: Accept}})
	if !errors.Is(err, ErrInvalidRecordState) {
		t.Fatalf("late ack = %v, want ErrInvalidRecordState", err)
	}
}

func TestShareRenewExtendsLock(t *testing.T) {
	p := newPart(t, nil)
	offer(t, p, recs(0, ""))
	acquire(t, p, t0, "a", 1)
	half := t0.Add(DefaultRecordLockDuration / 2)
	ack(t, p, half, "a", 0, 0, Renew)
	if got := acquire(t, p, t0.Add(DefaultRecordLockDuration), "b", 1); len(got) != 0 {
		t.Fatalf("b acquired %v after a renewed", got)
	}
	ack(t, p, t0.Add(DefaultRecordLockDuration), "a", 0, 0, Accept)
	if p.Start() != 1 {
		t.Fatalf("start %d, want 1", p.Start())
	}
}

func TestShareDeliveryCountLimitDeadLetters(t *testing.T) {
	p := newPart(t, func(c *Config) { c.DeliveryCountLimit = 3 })
	offer(t, p, recs(7, "k")) // 0-6 are a gap
	if p.Start() != 7 {
		t.Fatalf("start %d after a gap 0-6, want 7", p.Start())
	}
	for i := 1; i <= 3; i++ {
		expectRanges(t, acquire(t, p, t0, "a", 1), rng(7, 7, i))
		if d := p.TakeDeadLetters(); len(d) != 0 {
			t.Fatalf("dead letters %v after %d deliveries", d, i)
		}
		ack(t, p, t0, "a", 7, 7, Release)
	}
	d := p.TakeDeadLetters()
	want := []DeadLetter{{Offset: 7, Key: []byte("k"), DeliveryCount: 3, Reason: ReasonDeliveryLimit, Member: "a"}}
	if fmt.Sprint(d) != fmt.Sprint(want) {
		t.Fatalf("dead letters %v, want %v", d, want)
	}
	if p.Start() != 8 {
		t.Fatalf("start %d, want 8", p.Start())
	}
	if got := acquire(t, p, t0, "a", 1); len(got) != 0 {
		t.Fatalf("dead-lettered record delivered again: %v", got)
	}
}

func TestShareExpiryAtLimitDeadLetters(t *testing.T) {
	p := newPart(t, func(c *Config) { c.DeliveryCountLimit = 1 })
	offer(t, p, recs(0, ""))
	acquire(t, p, t0, "a", 1)
	p.Expire(t0.Add(time.Hour))
	d := p.TakeDeadLetters()
	if len(d) != 1 || d[0].Reason != ReasonDeliveryLimit || d[0].Offset != 0 {
		t.Fatalf("dead letters %v, want offset 0 for the delivery limit", d)
	}
}

func TestShareRejectDeadLetters(t *testing.T) {
	p := newPart(t, nil)
	offer(t, p, recs(0, "x", "y"))
	acquire(t, p, t0, "a", 2)
	ack(t, p, t0, "a", 0, 0, Reject)
	d := p.TakeDeadLetters()
	if len(d) != 1 || d[0].Reason != ReasonRejected || d[0].Offset != 0 || d[0].DeliveryCount != 1 || string(d[0].Key) != "x" {
		t.Fatalf("dead letters %v, want offset 0 rejected once", d)
	}
	if p.TakeDeadLetters() != nil {
		t.Fatal("dead letters returned twice")
	}
}

func TestShareAcknowledgeErrors(t *testing.T) {
	p := newPart(t, nil)
	offer(t, p, recs(0, "", "", "", ""))
	acquire(t, p, t0, "a", 2) // 0-1 to a
	acquire(t, p, t0, "b", 1) // 2 to b
	for _, tc := range []struct {
		name   string
		member string
		acks   []Ack
		want   error
	}{
		{"empty member", "", []Ack{{0, 0, Accept}}, ErrInvalidRequest},
		{"reversed", "a", []Ack{{1, 0, Accept}}, ErrInvalidRequest},
		{"bad type", "a", []Ack{{0, 0, 9}}, ErrInvalidRequest},
		{"overlap", "a", []Ack{{0, 1, Accept}, {1, 1, Release}}, ErrInvalidRequest},
		{"other member's", "a", []Ack{{0, 2, Accept}}, ErrInvalidRecordState},
		{"available", "a", []Ack{{3, 3, Accept}}, ErrInvalidRecordState},
		{"past end", "a", []Ack{{0, 9, Accept}}, ErrInvalidRecordState},
		{"second range bad", "a", []Ack{{0, 0, Accept}, {3, 3, Accept}}, ErrInvalidRecordState},
	} {
		if err := p.Acknowledge(t0, tc.member, tc.acks); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	// Nothing was applied: a still holds 0 and 1.
	if p.Held("a") != 2 || p.Start() != 0 {
		t.Fatalf("a holds %d, start %d after rejected acks; want 2, 0", p.Held("a"), p.Start())
	}
	if _, err := p.Acquire(t0, "", 1); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("acquire for empty member: %v", err)
	}
	if _, err := p.Acquire(t0, "a", 0); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("acquire of 0 records: %v", err)
	}
	if _, err := p.Offer([]Record{{Offset: 9}, {Offset: 8}}, 10); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("offer out of order: %v", err)
	}
}

func TestShareLeaveReleases(t *testing.T) {
	p := newPart(t, nil)
	offer(t, p, recs(0, "", "", ""))
	acquire(t, p, t0, "a", 2)
	p.Leave("a")
	expectRanges(t, acquire(t, p, t0, "b", 10), rng(0, 1, 2), rng(2, 2, 1))
}

func TestShareWindowBound(t *testing.T) {
	p := newPart(t, func(c *Config) { c.MaxRecordLocks = 3 })
	end, err := p.Offer(recs(0, "", "", "", "", ""), 5)
	if err != nil || end != 3 || p.Room() != 0 {
		t.Fatalf("offer of 5 into a window of 3: end %d, room %d, %v", end, p.Room(), err)
	}
	acquire(t, p, t0, "a", 10)
	ack(t, p, t0, "a", 0, 0, Accept)
	// The caller reads again from End; overlapping records are ignored.
	if end, _ := p.Offer(recs(2, "", "", ""), 5); end != 4 {
		t.Fatalf("end %d after the window moved by one, want 4", end)
	}
}

func TestShareSetLogStart(t *testing.T) {
	p := newPart(t, nil)
	offer(t, p, recs(0, "", "", "", ""))
	acquire(t, p, t0, "a", 1)
	p.SetLogStart(2)
	if p.Start() != 2 || len(p.TakeDeadLetters()) != 0 {
		t.Fatalf("start %d after log start 2", p.Start())
	}
	expectRanges(t, acquire(t, p, t0, "b", 10), rng(2, 3, 1))
	p.SetLogStart(10)
	if p.Start() != 10 || p.End() != 10 {
		t.Fatalf("start/end %d/%d after log start 10", p.Start(), p.End())
	}
}

func keyed(mod func(*Config)) func(*Config) {
	return func(c *Config) {
		c.KeyOrdering = true
		if mod != nil {
			mod(c)
		}
	}
}

// TestShareKeyOrdering walks the per-key rules step by step.
func TestShareKeyOrdering(t *testing.T) {
	type step struct {
		do     string // "acq", "ack", "leave", "expire"
		member string
		n      int // acq: max records
		first  int64
		last   int64
		typ    AckType
		at     time.Duration
		want   []AcquiredRange
	}
	for _, tc := range []struct {
		name  string
		mod   func(*Config)
		keys  []string
		steps []step
	}{
		{
			name: "one key is one member's until acknowledged",
			keys: []string{"k", "k", "j", "k"},
			steps: []step{
				{do: "acq", member: "a", n: 1, want: []AcquiredRange{rng(0, 0, 1)}},
				// b may not take 1 or 3 (k is a's), only j.
				{do: "acq", member: "b", n: 10, want: []AcquiredRange{rng(2, 2, 1)}},
				// a gets no later record of k before 0 is acknowledged.
				{do: "acq", member: "a", n: 10},
				{do: "ack", member: "a", first: 0, last: 0, typ: Accept},
				{do: "acq", member: "a", n: 10, want: []AcquiredRange{rng(1, 1, 1), rng(3, 3, 1)}},
				{do: "acq", member: "b", n: 10},
				{do: "ack", member: "a", first: 1, last: 1, typ: Accept},
				{do: "acq", member: "b", n: 10},
				{do: "ack", member: "a", first: 3, last: 3, typ: Accept},
			},
		},
		{
			name: "a released record comes back before later records of its key",
			keys: []string{"k", "k", "k"},
			steps: []step{
				{do: "acq", member: "a", n: 1, want: []AcquiredRange{rng(0, 0, 1)}},
				{do: "ack", member: "a", first: 0, last: 0, typ: Release},
				{do: "acq", member: "b", n: 2, want: []AcquiredRange{rng(0, 0, 2), rng(1, 1, 1)}},
			},
		},
		{
			name: "an expired record comes back first, to anyone",
			keys: []string{"k", "k"},
			steps: []step{
				{do: "acq", member: "a", n: 1, want: []AcquiredRange{rng(0, 0, 1)}},
				{do: "acq", member: "b", n: 5, at: DefaultRecordLockDuration, want: []AcquiredRange{rng(0, 0, 2), rng(1, 1, 1)}},
			},
		},
		{
			name: "a rejected record does not block its key",
			keys: []string{"k", "k"},
			steps: []step{
				{do: "acq", member: "a", n: 1, want: []AcquiredRange{rng(0, 0, 1)}},
				{do: "ack", member: "a", first: 0, last: 0, typ: Reject},
				{do: "acq", member: "b", n: 5, want: []AcquiredRange{rng(1, 1, 1)}},
			},
		},
		{
			name: "a dead-lettered record does not block its key",
			mod:  func(c *Config) { c.DeliveryCountLimit = 1 },
			keys: []string{"k", "k"},
			steps: []step{
				{do: "acq", member: "a", n: 1, want: []AcquiredRange{rng(0, 0, 1)}},
				{do: "ack", member: "a", first: 0, last: 0, typ: Release},
				{do: "acq", member: "b", n: 5, want: []AcquiredRange{rng(1, 1, 1)}},
			},
		},
		{
			name: "max in flight per key",
			mod:  func(c *Config) { c.MaxInFlightPerKey = 2 },
			keys: []string{"k", "k", "k", "j"},
			steps: []step{
				{do: "acq", member: "a", n: 10, want: []AcquiredRange{rng(0, 1, 1), rng(3, 3, 1)}},
				{do: "acq", member: "b", n: 10},
				{do: "ack", member: "a", first: 0, last: 0, typ: Accept},
				{do: "acq", member: "b", n: 10},
				{do: "ack", member: "a", first: 1, last: 1, typ: Accept},
				{do: "acq", member: "a", n: 10, want: []AcquiredRange{rng(2, 2, 1)}},
			},
		},
		{
			name: "a leaving member frees its keys in order",
			keys: []string{"k", "j", "k"},
			steps: []step{
				{do: "acq", member: "a", n: 10, want: []AcquiredRange{rng(0, 2, 1)}},
				{do: "acq", member: "b", n: 10},
				{do: "leave", member: "a"},
				{do: "acq", member: "b", n: 1, want: []AcquiredRange{rng(0, 0, 2)}},
				{do: "acq", member: "c", n: 10, want: []AcquiredRange{rng(1, 1, 2)}},
			},
		},
		{
			name: "records without a key are not ordered",
			keys: []string{"", "", "k"},
			steps: []step{
				{do: "acq", member: "a", n: 1, want: []AcquiredRange{rng(0, 0, 1)}},
				{do: "acq", member: "b", n: 10, want: []AcquiredRange{rng(1, 2, 1)}},
			},
		},
		{
			name: "a member holding a later record re-takes an earlier one it released",
			keys: []string{"k", "k", "k"},
			steps: []step{
				{do: "acq", member: "a", n: 2, want: []AcquiredRange{rng(0, 1, 1)}},
				{do: "ack", member: "a", first: 0, last: 0, typ: Release},
				{do: "acq", member: "b", n: 10},
				// 2 waits for 1, handed out before.
				{do: "acq", member: "a", n: 10, want: []AcquiredRange{rng(0, 0, 2)}},
				{do: "ack", member: "a", first: 0, last: 1, typ: Accept},
				{do: "acq", member: "a", n: 10, want: []AcquiredRange{rng(2, 2, 1)}},
			},
		},
		{
			// The answer handing 0 out may never have reached a: a
			// record of k handed out earlier holds back the later ones
			// even for its holder, and comes back first once released.
			name: "a record held since an earlier acquisition holds back its key for its holder too",
			keys: []string{"k", "k", "j"},
			steps: []step{
				{do: "acq", member: "a", n: 1, want: []AcquiredRange{rng(0, 0, 1)}},
				{do: "acq", member: "a", n: 10, want: []AcquiredRange{rng(2, 2, 1)}},
				{do: "acq", member: "b", n: 10},
				{do: "acq", member: "b", n: 10, at: DefaultRecordLockDuration, want: []AcquiredRange{rng(0, 0, 2), rng(1, 1, 1), rng(2, 2, 2)}},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPart(t, keyed(tc.mod))
			offer(t, p, recs(0, tc.keys...))
			for i, s := range tc.steps {
				now := t0.Add(s.at)
				switch s.do {
				case "acq":
					got := acquire(t, p, now, s.member, s.n)
					if !slices.Equal(got, s.want) {
						t.Fatalf("step %d: %s acquired %v, want %v", i, s.member, got, s.want)
					}
				case "ack":
					if err := p.Acknowledge(now, s.member, []Ack{{First: s.first, Last: s.last, Type: s.typ}}); err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
				case "leave":
					p.Leave(s.member)
				}
			}
		})
	}
}

// TestShareMaxInFlightPerKeyBound: with key ordering and
// max.in.flight.per.key 3, a member asking for as many records as there
// are gets 3 of a key whose other records are available, and no more of
// it (to it or to anyone) until it has acknowledged all 3; each later
// acquisition of the key, after an accept, a release or an expiry, is
// again 3 at most, in offset order, the rest staying available.
func TestShareMaxInFlightPerKeyBound(t *testing.T) {
	const bound = 3
	p := newPart(t, func(c *Config) { c.KeyOrdering, c.MaxInFlightPerKey = true, bound })
	offer(t, p, recs(0, "k", "k", "k", "k", "k", "k", "k", "k", "j", "j"))
	// check asserts the bound over the whole window, and which offsets
	// of k wait available.
	check := func(step string, available ...int64) {
		t.Helper()
		held := map[string]int{}
		var avail []int64
		for _, r := range p.Records() {
			switch r.State {
			case Acquired:
				held[r.Member+"/"+string(r.Key)]++
			case Available:
				if string(r.Key) == "k" {
					avail = append(avail, r.Offset)
				}
			}
		}
		for mk, n := range held {
			if n > bound {
				t.Fatalf("%s: %s holds %d records of its key, bound %d", step, mk, n, bound)
			}
		}
		if !slices.Equal(avail, available) {
			t.Fatalf("%s: k's available offsets %v, want %v", step, avail, available)
		}
	}

	expectRanges(t, acquire(t, p, t0, "a", 100), rng(0, 2, 1), rng(8, 9, 1))
	check("a's first acquisition", 3, 4, 5, 6, 7)
	expectRanges(t, acquire(t, p, t0, "a", 100))
	expectRanges(t, acquire(t, p, t0, "b", 100))
	check("a and b asking again", 3, 4, 5, 6, 7)

	// Two of the three accepted: a still holds 2, so nothing more of k.
	ack(t, p, t0, "a", 0, 1, Accept)
	expectRanges(t, acquire(t, p, t0, "a", 100))
	check("a holding one", 3, 4, 5, 6, 7)
	ack(t, p, t0, "a", 2, 2, Accept)
	expectRanges(t, acquire(t, p, t0, "a", 100), rng(3, 5, 1))
	check("a's second acquisition", 6, 7)

	// Released: the same three come back first, to b, and no more.
	ack(t, p, t0, "a", 3, 5, Release)
	expectRanges(t, acquire(t, p, t0, "b", 100), rng(3, 5, 2))
	check("b after a's release", 6, 7)

	// Expired: c gets the same three again, still three (and j's two,
	// a's locks on them run out too).
	expectRanges(t, acquire(t, p, t0.Add(DefaultRecordLockDuration), "c", 100), rng(3, 5, 3), rng(8, 9, 2))
	check("c after b's locks ran out", 6, 7)
	ack(t, p, t0.Add(DefaultRecordLockDuration), "c", 3, 5, Accept)
	expectRanges(t, acquire(t, p, t0.Add(DefaultRecordLockDuration), "c", 100), rng(6, 7, 1))
	check("c's last acquisition")
}
