package group

import (
	"errors"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quirelog/quire/group/assignor"
)

// newSim is a fault-free simulation of one group on m, for tests that
// drive members through whole rebalances.
func newSim(t *testing.T, m *Machine, group, asg string, topics map[string]int32) *sim {
	s := &sim{t: t, rng: rand.New(rand.NewSource(1)), cfg: m.cfg, m: m, now: epoch0, group: group,
		asg: asg, topics: topics, stats: map[string]int{}}
	s.record(m.SetTopics(topics))
	return s
}

func (s *sim) join(id string, topics ...string) *simClient {
	c := &simClient{id: id, sub: Subscription{Topics: topics}, alive: true, nextAt: s.now}
	s.clients = append(s.clients, c)
	return c
}

func (s *sim) counts() []int {
	var out []int
	for _, c := range s.clients {
		if c.alive {
			out = append(out, len(c.owned))
		}
	}
	return out
}

// With the range assignor and one topic of 7 partitions, members joining
// one by one move through the splits 7; 4 3; 3 2 2; ...; and members
// beyond the 7th own nothing; leaving, back again.
func TestGroupRangeSplits(t *testing.T) {
	m := newMachine(t, DefaultConfig())
	s := newSim(t, m, "g", assignor.RangeName, map[string]int32{"t": 7})
	want := [][]int{{7}, {4, 3}, {3, 2, 2}, {2, 2, 2, 1}, {2, 2, 1, 1, 1}, {2, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 1, 1, 1, 0}}
	for i, w := range want {
		s.join(string(rune('a'+i)), "t")
		s.converge()
		if got := s.counts(); !slices.Equal(got, w) {
			t.Fatalf("%d members own %v, want %v", i+1, got, w)
		}
	}
	for i := len(want) - 1; i > 0; i-- {
		s.heartbeat(s.clients[i], false, true)
		s.converge()
		if got := s.counts(); !slices.Equal(got, want[i-1]) {
			t.Fatalf("after a leave, %d members own %v, want %v", i, got, want[i-1])
		}
	}
	d, err := m.Describe("g")
	if err != nil || d.Assignor != assignor.RangeName || d.State != GroupStable {
		t.Fatalf("describe: %+v, %v", d, err)
	}
}

// A topic of 4 partitions read by group X of 4 members and group Y of 2:
// each X member owns one partition, each Y member two, and every
// partition has an owner in both groups.
func TestGroupTwoGroupsOneTopic(t *testing.T) {
	for _, asg := range []string{assignor.UniformName, assignor.RangeName} {
		m := newMachine(t, DefaultConfig())
		topics := map[string]int32{"t": 4}
		x, y := newSim(t, m, "X", asg, topics), newSim(t, m, "Y", asg, topics)
		for _, id := range []string{"x1", "x2", "x3", "x4"} {
			x.join(id, "t")
		}
		y.join("y1", "t")
		y.join("y2", "t")
		x.converge()
		y.converge()
		for _, g := range []struct {
			s    *sim
			each int
		}{{x, 1}, {y, 2}} {
			seen := map[TopicPartition]bool{}
			for _, c := range g.s.clients {
				if len(c.owned) != g.each {
					t.Errorf("%s: group %s member %s owns %v, want %d partitions", asg, g.s.group, c.id, c.owned, g.each)
				}
				for _, tp := range c.owned {
					seen[tp] = true
				}
			}
			if len(seen) != 4 {
				t.Errorf("%s: group %s owns %v, not all 4 partitions", asg, g.s.group, seen)
			}
		}
	}
}

func TestGroupConfig(t *testing.T) {
	cfg := DefaultConfig()
	if cfg.SessionTimeout != 45*time.Second || cfg.HeartbeatInterval != 5*time.Second || cfg.Assignors[0] != assignor.UniformName {
		t.Errorf("defaults %+v", cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Error(err)
	}
	cfg.SessionTimeout, cfg.HeartbeatInterval = time.Second, 300*time.Millisecond
	if err := cfg.Validate(); err != nil {
		t.Errorf("a 1 s session timeout: %v", err)
	}
	cfg.Assignors = []string{"range", "range"}
	if _, err := New(cfg); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("an assignor twice: %v", err)
	}
}

func TestGroupHeartbeatBadPartitions(t *testing.T) {
	m := newMachine(t, DefaultConfig())
	m.SetTopics(map[string]int32{"t": 2})
	resp, _, err := m.Heartbeat(Heartbeat{Group: "g", MemberID: "a", Subscription: &Subscription{Topics: []string{"t"}}, RebalanceTimeout: time.Minute, HasOwned: true, Now: epoch0})
	if err != nil {
		t.Fatal(err)
	}
	for _, owned := range [][]TopicPartition{{{Topic: "t", Partition: -1}}, {{Topic: "", Partition: 0}}} {
		_, recs, err := m.Heartbeat(Heartbeat{Group: "g", MemberID: "a", MemberEpoch: resp.MemberEpoch, Owned: owned, HasOwned: true, Now: epoch0})
		if !errors.Is(err, ErrInvalidRequest) || recs != nil {
			t.Errorf("owning %v: %v, %v", owned, recs, err)
		}
	}
	if _, _, err := m.Heartbeat(Heartbeat{Group: "g", MemberID: "a", MemberEpoch: resp.MemberEpoch, RebalanceTimeout: -time.Second, Now: epoch0}); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("a negative rebalance timeout: %v", err)
	}
	if _, _, err := m.Heartbeat(Heartbeat{Group: "g", MemberID: strings.Repeat("m", MaxMemberIDLen+1), Now: epoch0}); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("a long member id: %v", err)
	}
}

// The group's assignor is the one most members ask for, the configured
// default when none asks; changing it is a new epoch.
func TestGroupAssignorChoice(t *testing.T) {
	m := newMachine(t, DefaultConfig())
	m.SetTopics(map[string]int32{"t": 7})
	join := func(id, asg string) Response {
		resp, _, err := m.Heartbeat(Heartbeat{Group: "g", MemberID: id, Subscription: &Subscription{Topics: []string{"t"}}, RebalanceTimeout: time.Minute, Assignor: asg, HasOwned: true, Now: epoch0})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	assignorIs := func(want string) {
		t.Helper()
		if d, _ := m.Describe("g"); d.Assignor != want {
			t.Fatalf("assignor %q, want %q", d.Assignor, want)
		}
	}
	join("a", "")
	assignorIs(assignor.UniformName)
	join("b", assignor.RangeName)
	assignorIs(assignor.RangeName)
	resp := join("c", assignor.UniformName)
	assignorIs(assignor.UniformName) // a tie goes to the earlier in the config
	_, recs, err := m.Heartbeat(Heartbeat{Group: "g", MemberID: "c", MemberEpoch: resp.MemberEpoch, Assignor: assignor.RangeName, HasOwned: true, Now: epoch0})
	if err != nil {
		t.Fatal(err)
	}
	assignorIs(assignor.RangeName)
	if !slices.ContainsFunc(recs, func(r Record) bool { _, ok := r.(GroupEpoch); return ok }) {
		t.Errorf("an assignor change bumped no epoch: %v", recs)
	}
}

func TestGroupNextDeadline(t *testing.T) {
	cfg := DefaultConfig()
	cfg.SessionTimeout = 10 * time.Second
	m := newMachine(t, cfg)
	if _, ok := m.NextDeadline(); ok {
		t.Fatal("a deadline with no members")
	}
	m.SetTopics(map[string]int32{"t": 2})
	for i, id := range []string{"a", "b"} {
		if _, _, err := m.Heartbeat(Heartbeat{Group: "g", MemberID: id, Subscription: &Subscription{Topics: []string{"t"}}, RebalanceTimeout: time.Second, HasOwned: true, Now: epoch0.Add(time.Duration(i) * time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	// a still owns both partitions: told to revoke one, it has 1 s.
	if _, _, err := m.Heartbeat(Heartbeat{Group: "g", MemberID: "a", MemberEpoch: 1, Owned: []TopicPartition{tp("t", 0), tp("t", 1)}, HasOwned: true, Now: epoch0.Add(2 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	if d, ok := m.NextDeadline(); !ok || !d.Equal(epoch0.Add(3*time.Second)) {
		t.Fatalf("next deadline %v, %v; want the rebalance timeout at 3s", d.Sub(epoch0), ok)
	}
	if recs := m.Tick(epoch0.Add(3 * time.Second)); len(recs) != 2 {
		t.Fatalf("tick at the deadline: %v", recs)
	}
	if d, ok := m.NextDeadline(); !ok || !d.Equal(epoch0.Add(11*time.Second)) {
		t.Fatalf("next deadline %v, %v; want b's session at 11s", d.Sub(epoch0), ok)
	}
}

func TestGroupReplayInvalid(t *testing.T) {
	cases := []struct {
		name string
		recs []Record
	}{
		{"assignment before member", []Record{MemberAssignment{Group: "g", MemberID: "a"}}},
		{"removal of unknown member", []Record{MemberRemoved{Group: "g", MemberID: "a"}}},
		{"bad group id", []Record{GroupEpoch{Group: "", Epoch: 1}}},
		{"bad member id", []Record{MemberMetadata{Group: "g", MemberID: ""}}},
		{"partition held twice", []Record{
			MemberMetadata{Group: "g", MemberID: "a"}, MemberMetadata{Group: "g", MemberID: "b"},
			MemberAssignment{Group: "g", MemberID: "a", Assigned: []TopicPartition{tp("t", 0)}},
			MemberAssignment{Group: "g", MemberID: "b", PendingRevocation: []TopicPartition{tp("t", 0)}},
		}},
		{"assigned and revoking", []Record{MemberMetadata{Group: "g", MemberID: "a"},
			MemberAssignment{Group: "g", MemberID: "a", Assigned: []TopicPartition{tp("t", 0)}, PendingRevocation: []TopicPartition{tp("t", 0)}}}},
		{"deleting a group with members", []Record{MemberMetadata{Group: "g", MemberID: "a"}, GroupDeleted{Group: "g"}}},
		{"deleting an unknown group", []Record{GroupDeleted{Group: "g"}}},
	}
	for _, c := range cases {
		if _, err := newMachine(t, DefaultConfig()).Replay(c.recs, nil, epoch0); !errors.Is(err, ErrInvalidRecord) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

func TestGroupDescribeAndCommitAfterLeave(t *testing.T) {
	m := newMachine(t, DefaultConfig())
	m.SetTopics(map[string]int32{"t": 2})
	if _, _, err := m.Heartbeat(Heartbeat{Group: "g", MemberID: "a", ClientAddress: "10.0.0.1:5000", Subscription: &Subscription{Topics: []string{"t"}}, RebalanceTimeout: time.Minute, HasOwned: true, Now: epoch0}); err != nil {
		t.Fatal(err)
	}
	d, err := m.Describe("g")
	if err != nil {
		t.Fatal(err)
	}
	mem := d.Members[0]
	if mem.ClientAddress != "10.0.0.1:5000" || mem.Epoch != 1 || len(mem.Assigned) != 2 || len(mem.Target) != 2 || len(mem.PendingAssignment) != 0 {
		t.Errorf("member %+v", mem)
	}
	if err := m.ValidateCommit("g", "", -1); !errors.Is(err, ErrUnknownMemberID) {
		t.Errorf("a commit without a member to a group with one: %v", err)
	}
	if m.Size("g") != 1 || m.Size("nope") != 0 {
		t.Errorf("sizes %d, %d", m.Size("g"), m.Size("nope"))
	}
	if _, _, err := m.Heartbeat(Heartbeat{Group: "g", MemberID: "a", MemberEpoch: LeaveEpoch, Now: epoch0}); err != nil {
		t.Fatal(err)
	}
	if err := m.ValidateCommit("g", "", -1); err != nil {
		t.Errorf("a commit without a member to an empty group: %v", err)
	}
	if m.Size("g") != 0 {
		t.Errorf("size %d after the leave", m.Size("g"))
	}
	if err := m.ValidateCommit("", "", -1); !errors.Is(err, ErrInvalidGroupID) {
		t.Errorf("a commit to an empty group id: %v", err)
	}
	recs, err := m.Delete("g")
	if err != nil || len(recs) != 1 {
		t.Fatalf("delete: %v, %v", recs, err)
	}
	if len(m.Groups()) != 0 {
		t.Errorf("groups after delete: %v", m.Groups())
	}
}

func tp(topic string, p int32) TopicPartition { return TopicPartition{Topic: topic, Partition: p} }

// A member that gives up what it was asked to but is asked, in the same
// answer, to give up more, gets its whole rebalance timeout again for the
// new partitions: it only learns of them then.
func TestGroupRebalanceTimeoutRestartsForNewRevocations(t *testing.T) {
	cfg := DefaultConfig()
	cfg.SessionTimeout = time.Minute
	m := newMachine(t, cfg)
	m.SetTopics(map[string]int32{"t": 4})
	at := func(s int) time.Time { return epoch0.Add(time.Duration(s) * time.Second) }
	hb := func(id string, epoch int32, s int, owned ...TopicPartition) Response {
		t.Helper()
		h := Heartbeat{Group: "g", MemberID: id, MemberEpoch: epoch, Owned: owned, HasOwned: true, Now: at(s)}
		if epoch == JoinEpoch {
			h.Subscription, h.RebalanceTimeout = &Subscription{Topics: []string{"t"}}, 10*time.Second
		}
		resp, _, err := m.Heartbeat(h)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	hb("a", JoinEpoch, 0)
	hb("c", JoinEpoch, 1)
	resp := hb("a", 1, 1, tp("t", 0), tp("t", 1), tp("t", 2), tp("t", 3))
	if !slices.Equal(resp.Assignment, []TopicPartition{tp("t", 0), tp("t", 1)}) {
		t.Fatalf("a is told to keep %v", resp.Assignment)
	}
	hb("d", JoinEpoch, 8)
	resp = hb("a", 1, 9, tp("t", 0), tp("t", 1))
	if !slices.Equal(resp.Assignment, []TopicPartition{tp("t", 0)}) || resp.MemberEpoch != 1 {
		t.Fatalf("a is told %+v, want to keep t-0 at epoch 1", resp)
	}
	if recs := m.Tick(at(11)); len(recs) != 0 {
		t.Fatalf("a fenced at the first revocation's deadline: %v", recs)
	}
	if d, _ := m.NextDeadline(); !d.Equal(at(19)) {
		t.Fatalf("next deadline at %v, want 19s", d.Sub(epoch0))
	}
	if recs := m.Tick(at(19)); len(recs) != 2 {
		t.Fatalf("a not fenced at 19s: %v", recs)
	}
}
