package sharegroup

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/quirelog/quire/share"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// memLog is a log of n records, keyed by keys[offset % len(keys)].
type memLog struct {
	start, hw int64
	keys      []string
}

func (l *memLog) Bounds() (int64, int64, error) { return l.start, l.hw, nil }

func (l *memLog) Read(off int64, max int) ([]share.Record, int64, error) {
	var out []share.Record
	for o := max64(off, l.start); o < l.hw && len(out) < max; o++ {
		out = append(out, share.Record{Offset: o, Key: []byte(l.keys[o%int64(len(l.keys))])})
	}
	if len(out) == 0 {
		return nil, off, nil
	}
	return out, out[len(out)-1].Offset + 1, nil
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

func newCoord(t *testing.T) *Coordinator {
	t.Helper()
	cfg := DefaultConfig()
	cfg.ResetEarliest = true
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func join(t *testing.T, c *Coordinator, id string) HeartbeatResult {
	t.Helper()
	r, err := c.Heartbeat(t0, Heartbeat{Group: "g", MemberID: id, Topics: []string{"t"}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var tp = TopicPartition{Topic: "t", Partition: 0}

func TestShareGroupMembersSplitRecords(t *testing.T) {
	c := newCoord(t)
	log := &memLog{hw: 10, keys: []string{""}}
	a, b := join(t, c, "a"), join(t, c, "b")
	if a.Epoch != 1 || b.Epoch != 2 || b.Interval != DefaultHeartbeatInterval {
		t.Fatalf("epochs %d, %d", a.Epoch, b.Epoch)
	}
	fa, err := c.Acquire(t0, "g", "a", tp, 4, log)
	if err != nil {
		t.Fatal(err)
	}
	fb, err := c.Acquire(t0, "g", "b", tp, 100, log)
	if err != nil {
		t.Fatal(err)
	}
	if len(fa.Acquired) != 1 || fa.Acquired[0].First != 0 || fa.Acquired[0].Last != 3 ||
		len(fb.Acquired) != 1 || fb.Acquired[0].First != 4 || fb.Acquired[0].Last != 9 {
		t.Fatalf("a got %v, b got %v; want 0-3 and 4-9", fa.Acquired, fb.Acquired)
	}
	if _, err := c.Acknowledge(t0, "g", "b", tp, []share.Ack{{First: 0, Last: 0, Type: share.Accept}}); !errors.Is(err, share.ErrInvalidRecordState) {
		t.Fatalf("b acknowledging a's record: %v", err)
	}
	if _, err := c.Acknowledge(t0, "g", "a", tp, []share.Ack{{First: 0, Last: 3, Type: share.Accept}}); err != nil {
		t.Fatal(err)
	}
	// a leaves; b's records stay b's.
	if _, err := c.Heartbeat(t0, Heartbeat{Group: "g", MemberID: "a", Epoch: -1}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Acquire(t0, "g", "a", tp, 1, log); !errors.Is(err, ErrUnknownMember) {
		t.Fatalf("acquire after leaving: %v", err)
	}
	_, parts := c.Describe("g")
	if len(parts) != 1 || parts[0].Start != 4 || parts[0].End != 10 {
		t.Fatalf("describe: %+v", parts)
	}
}

func TestShareGroupSessionTimeoutReleases(t *testing.T) {
	c := newCoord(t)
	log := &memLog{hw: 3, keys: []string{"k"}}
	long := share.DefaultConfig()
	long.RecordLockDuration = time.Hour // only the session timeout frees a's records
	if err := c.SetGroupConfig("g", GroupConfig{Partition: long}); err != nil {
		t.Fatal(err)
	}
	join(t, c, "a")
	join(t, c, "b")
	if f, _ := c.Acquire(t0, "g", "a", tp, 10, log); len(f.Acquired) != 1 {
		t.Fatalf("a got %v", f.Acquired)
	}
	// Per-key ordering is off: b takes nothing only because a holds all.
	if f, _ := c.Acquire(t0, "g", "b", tp, 10, log); len(f.Acquired) != 0 {
		t.Fatalf("b got %v", f.Acquired)
	}
	if _, err := c.Heartbeat(t0.Add(DefaultSessionTimeout/2), Heartbeat{Group: "g", MemberID: "b", Epoch: 2}); err != nil {
		t.Fatal(err)
	}
	later := t0.Add(DefaultSessionTimeout)
	if _, err := c.Heartbeat(later, Heartbeat{Group: "g", MemberID: "b", Epoch: 2}); err != nil {
		t.Fatal(err)
	}
	f, err := c.Acquire(later, "g", "b", tp, 10, log)
	if err != nil || len(f.Acquired) != 1 || f.Acquired[0].DeliveryCount != 2 {
		t.Fatalf("b after a timed out: %v, %v", f.Acquired, err)
	}
}

func TestShareGroupHeartbeatErrors(t *testing.T) {
	c := newCoord(t)
	join(t, c, "a")
	for _, tc := range []struct {
		hb   Heartbeat
		want error
	}{
		{Heartbeat{Group: "", MemberID: "a"}, ErrInvalidRequest},
		{Heartbeat{Group: "g", MemberID: "x", Epoch: 1}, ErrUnknownMember},
		{Heartbeat{Group: "g", MemberID: "a", Epoch: 7}, ErrFencedMemberEpoch},
		{Heartbeat{Group: "g", MemberID: "a", Epoch: -2}, ErrInvalidRequest},
		{Heartbeat{Group: "g", MemberID: "b"}, ErrInvalidRequest}, // joins without topics
		{Heartbeat{Group: "g", MemberID: "x", Epoch: -1}, ErrUnknownMember},
	} {
		if _, err := c.Heartbeat(t0, tc.hb); !errors.Is(err, tc.want) {
			t.Errorf("%+v: %v, want %v", tc.hb, err, tc.want)
		}
	}
	r, err := c.Heartbeat(t0, Heartbeat{Group: "g", Topics: []string{"t"}})
	if err != nil || r.MemberID == "" {
		t.Fatalf("join without an id: %+v, %v", r, err)
	}
}

func TestShareGroupResetLatest(t *testing.T) {
	c, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	log := &memLog{hw: 5, keys: []string{""}}
	join(t, c, "a")
	if f, _ := c.Acquire(t0, "g", "a", tp, 10, log); len(f.Acquired) != 0 {
		t.Fatalf("latest reset delivered old records %v", f.Acquired)
	}
	log.hw = 7
	if f, _ := c.Acquire(t0, "g", "a", tp, 10, log); len(f.Acquired) != 1 || f.Acquired[0].First != 5 || f.Acquired[0].Last != 6 {
		t.Fatalf("got %v, want 5-6", f.Acquired)
	}
}

// TestShareGroupAdmitFetchers: a partition leader serves a member whose
// heartbeats go to another node only once admitted (another node vouched
// for it); it joins here only by a heartbeat of epoch 0, keeping its
// records; told that it left (Forget), or silent past the session
// timeout, it leaves and its records are released; a member that
// heartbeats here is not forgotten on another node's word.
func TestShareGroupAdmitFetchers(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ResetEarliest = true
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	log := &memLog{hw: 4, keys: []string{""}}
	if _, err := c.Acquire(t0, "g", "r", tp, 2, log); !errors.Is(err, ErrUnknownMember) {
		t.Fatalf("not admitted: %v", err)
	}
	if c.Admit(t0, "g", "r", t0.Add(time.Second)) {
		t.Fatal("admitted without AdmitFetchers")
	}
	cfg.AdmitFetchers = true
	if c, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	if c.Admit(t0, "g", "", t0.Add(time.Second)) {
		t.Fatal("admitted an empty member id")
	}
	if _, err := c.Acquire(t0, "g", "r", tp, 2, log); !errors.Is(err, ErrUnknownMember) {
		t.Fatalf("not admitted yet: %v", err)
	}
	c.Admit(t0, "g", "r", t0.Add(time.Second))
	if !c.Known(t0, "g", "r") || c.Known(t0.Add(time.Second), "g", "r") || c.HasMember(t0, "g", "r") {
		t.Fatal("an admitted fetcher is known until its confirmation runs out, and is not a member of this node")
	}
	f, err := c.Acquire(t0, "g", "r", tp, 2, log)
	if err != nil || len(f.Acquired) != 1 || f.Acquired[0].Last != 1 {
		t.Fatalf("admitted fetcher got %v, %v", f.Acquired, err)
	}
	if _, err := c.Heartbeat(t0, Heartbeat{Group: "g", MemberID: "r", Epoch: 3}); !errors.Is(err, ErrUnknownMember) {
		t.Fatalf("heartbeat of a fetcher: %v", err)
	}
	if _, err := c.Heartbeat(t0, Heartbeat{Group: "g", MemberID: "r", Topics: []string{"t"}}); err != nil {
		t.Fatal(err)
	}
	if _, parts := c.Describe("g"); parts[0].Records[0].Member != "r" {
		t.Fatalf("joining released the fetcher's records: %+v", parts[0].Records)
	}
	if !c.HasMember(t0, "g", "r") || !c.Known(t0.Add(time.Hour), "g", "r") {
		t.Fatal("a member heartbeating here is its member")
	}
	c.Forget("g", []string{"r"})
	if _, parts := c.Describe("g"); parts[0].Records[0].Member != "r" {
		t.Fatalf("another node's word released the records of a member heartbeating here: %+v", parts[0].Records)
	}
	// A fetcher told it left: released at once.
	c.Admit(t0, "g", "q", t0.Add(time.Minute))
	if f, err := c.Acquire(t0, "g", "q", tp, 1, log); err != nil || len(f.Acquired) != 1 || f.Acquired[0].First != 2 {
		t.Fatalf("fetcher q got %v, %v", f.Acquired, err)
	}
	c.Forget("g", []string{"q"})
	if _, parts := c.Describe("g"); parts[0].Records[2].State != share.Available {
		t.Fatalf("the forgotten fetcher's record: %+v, want available", parts[0].Records[2])
	}
	if _, err := c.Acquire(t0, "g", "q", tp, 1, log); !errors.Is(err, ErrUnknownMember) {
		t.Fatalf("a forgotten fetcher: %v", err)
	}
	if d := c.TakeDepartures(); len(d) != 0 {
		t.Fatalf("departures %v: only members heartbeating here depart", d)
	}
	// Another fetcher, silent past the session timeout, leaves.
	c.Admit(t0, "g", "s", t0.Add(time.Minute))
	if f, err := c.Acquire(t0, "g", "s", tp, 1, log); err != nil || len(f.Acquired) != 1 || f.Acquired[0].First != 2 {
		t.Fatalf("second fetcher got %v, %v", f.Acquired, err)
	}
	for _, at := range []time.Time{t0.Add(DefaultSessionTimeout / 2), t0.Add(DefaultSessionTimeout)} {
		if _, err := c.Heartbeat(at, Heartbeat{Group: "g", MemberID: "r", Epoch: 1}); err != nil {
			t.Fatal(err)
		}
	}
	members, parts := c.Describe("g")
	if len(members) != 1 || members[0] != "r" {
		t.Fatalf("members after the session timeout: %v", members)
	}
	if r := parts[0].Records[2]; r.Offset != 2 || r.State != share.Available {
		t.Fatalf("the silent fetcher's record: %+v, want available", r)
	}
	// The member heartbeating here times out: a departure to tell.
	if d := c.Expire(t0.Add(3 * DefaultSessionTimeout)); len(d) != 1 || d[0] != (Departure{Group: "g", MemberID: "r"}) {
		t.Fatalf("departures after r's session timeout: %v", d)
	}
	if _, parts := c.Describe("g"); parts[0].Records[0].State != share.Available {
		t.Fatalf("the expired member's record: %+v, want available", parts[0].Records[0])
	}
}

// TestShareGroupUnknownMarked: a member marked unknown stays so until
// its mark runs out, unless it joins here or is vouched for; a member
// this node has is never marked, and the marks are bounded.
func TestShareGroupUnknownMarked(t *testing.T) {
	cfg := DefaultConfig()
	cfg.AdmitFetchers = true
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	until := t0.Add(time.Second)
	c.MarkUnknown(t0, "g", "x", until)
	if !c.Unknown(t0, "g", "x") || !c.Unknown(until.Add(-1), "g", "x") || c.Unknown(until, "g", "x") || c.Unknown(t0, "h", "x") || c.Unknown(t0, "g", "y") {
		t.Fatal("a mark holds for its member and group, until it runs out")
	}
	c.Expire(until)
	if len(c.unknown) != 0 {
		t.Fatalf("marks run out kept: %v", c.unknown)
	}

	// Joining here, or another node's vouch, ends the mark.
	c.MarkUnknown(t0, "g", "x", until)
	c.MarkUnknown(t0, "g", "v", until)
	if _, err := c.Heartbeat(t0, Heartbeat{Group: "g", MemberID: "x", Topics: []string{"t"}}); err != nil {
		t.Fatal(err)
	}
	c.Admit(t0, "g", "v", until)
	if c.Unknown(t0, "g", "x") || c.Unknown(t0, "g", "v") {
		t.Fatal("a member that joined here or was vouched for is still marked unknown")
	}
	// A member this node has is not marked (it joined while the other
	// nodes were asked).
	c.MarkUnknown(t0, "g", "x", until)
	c.MarkUnknown(t0, "g", "v", until)
	if c.Unknown(t0, "g", "x") || c.Unknown(t0, "g", "v") {
		t.Fatal("a member of this node was marked unknown")
	}

	// Bounded: past maxUnknown no more are marked until some run out.
	for i := range maxUnknown {
		c.MarkUnknown(t0, "g", fmt.Sprintf("m%d", i), until)
	}
	c.MarkUnknown(t0, "g", "over", until)
	if c.Unknown(t0, "g", "over") || !c.Unknown(t0, "g", "m0") {
		t.Fatal("a mark past the bound was kept, or one within it dropped")
	}
	c.MarkUnknown(until, "g", "later", until.Add(time.Second))
	if !c.Unknown(until, "g", "later") || len(c.unknown) != 1 {
		t.Fatalf("the marks run out were not dropped for a new one: %d kept", len(c.unknown))
	}
}

// TestShareGroupForgetUnknown: a "no" from the other nodes forgets a
// member known here only from its fetches whose vouch ran out, but not
// one vouched for since, nor one that heartbeats here.
func TestShareGroupForgetUnknown(t *testing.T) {
	cfg := DefaultConfig()
	cfg.AdmitFetchers = true
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	until := t0.Add(5 * time.Second)
	c.Admit(t0, "g", "v", until)
	if _, err := c.Heartbeat(t0, Heartbeat{Group: "g", MemberID: "h", Topics: []string{"t"}}); err != nil {
		t.Fatal(err)
	}
	if c.ForgetUnknown(t0.Add(time.Second), "g", "v") || !c.Known(t0.Add(time.Second), "g", "v") {
		t.Fatal("a member vouched for until after now was forgotten")
	}
	if c.ForgetUnknown(until, "g", "h") || !c.Known(until, "g", "h") {
		t.Fatal("a member that heartbeats here was forgotten")
	}
	if !c.ForgetUnknown(until, "g", "v") || c.Known(t0, "g", "v") {
		t.Fatal("a member whose vouch ran out was kept")
	}
	if !c.ForgetUnknown(t0, "g", "never") || !c.ForgetUnknown(t0, "nogroup", "x") {
		t.Fatal("a member never known here is not reported unknown")
	}
}
