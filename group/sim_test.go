package group

import (
	"fmt"
	"maps"
	"math/rand"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/quirelog/quire/group/assignor"
)

// A seeded simulation: members join, leave, crash, restart, lag, lose
// heartbeats and answers, revoke slowly or never, change subscriptions,
// while topics grow and appear and the coordinator fails over. After
// every input it checks that no two members own one partition, each from
// its own view; at the end, with the faults stopped, that the group
// becomes stable with the assignor's target.

// simClient is a member as a well-behaved client runs it. It only uses
// partitions the coordinator gave it, gives up revoked ones before it
// says so, and drops everything (then rejoins with epoch 0) when it may
// have been removed: no answer for a session timeout since a heartbeat it
// sent, or revocations not confirmed within its rebalance timeout.
type simClient struct {
	id    string
	sub   Subscription
	alive bool

	joined bool
	epoch  int32
	owned  []TopicPartition // what it uses now
	// deferred are revoked partitions it still uses (a slow client).
	deferred []TopicPartition
	// revoking are the partitions it was told to give up, until an
	// answer arrives to a heartbeat listing none of them; revokeBy is
	// when it must have had that answer.
	revoking []TopicPartition
	revokeBy time.Time

	lastAnswered    time.Time // sent time of the newest answered heartbeat
	unansweredSince time.Time // sent time of the oldest unanswered one since
	nextAt          time.Time

	slow, stuck, laggy bool
}

const simRebalanceTimeout = 8 * time.Second

type sim struct {
	t       *testing.T
	rng     *rand.Rand
	cfg     Config
	m       *Machine
	now     time.Time
	topics  map[string]int32
	clients []*simClient
	log     []Record
	group   string
	asg     string
	faults  bool
	nextID  int
	stats   map[string]int // what happened, to check the run saw it
}

func TestGroupSimulation(t *testing.T) {
	total := map[string]int{}
	for seed := int64(1); seed <= 40; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			for k, v := range runSim(t, seed, 1500) {
				total[k] += v
			}
		})
	}
	// The runs must have gone through every path of reconciliation.
	for _, k := range []string{"unrevoked_partitions", "unreleased_partitions", "answer lost, previous epoch accepted", "rejoin", "removed by tick", "rebalance timeout", "failover"} {
		if total[k] == 0 {
			t.Errorf("no run saw %q: %v", k, total)
		}
	}
	t.Logf("%v", total)
}

func runSim(t *testing.T, seed int64, steps int) map[string]int {
	rng := rand.New(rand.NewSource(seed))
	cfg := DefaultConfig()
	cfg.SessionTimeout, cfg.HeartbeatInterval = 3*time.Second, 500*time.Millisecond
	s := &sim{t: t, rng: rng, cfg: cfg, now: epoch0, group: "g", faults: true, stats: map[string]int{},
		topics: map[string]int32{"t0": int32(1 + rng.Intn(8)), "t1": int32(1 + rng.Intn(4)), "x": 2}}
	s.asg = []string{assignor.UniformName, assignor.RangeName}[rng.Intn(2)]
	s.m = newMachine(t, cfg)
	s.record(s.m.SetTopics(s.topics))
	for i, n := 0, 1+rng.Intn(6); i < n; i++ {
		s.addClient()
	}
	for step := 0; step < steps; step++ {
		s.now = s.now.Add(time.Duration(50+rng.Intn(250)) * time.Millisecond)
		s.chaos()
		s.stepClients()
		if g := s.m.groups[s.group]; g != nil {
			for _, mem := range g.members {
				if mem.state == MemberUnrevokedPartitions && !mem.revokeDeadline.After(s.now) {
					s.stats["rebalance timeout"]++
				}
			}
		}
		recs := s.m.Tick(s.now)
		for _, r := range recs {
			if _, ok := r.(MemberRemoved); ok {
				s.stats["removed by tick"]++
			}
		}
		s.record(recs)
		s.check("tick")
		if step%400 == 399 {
			s.failover()
		}
	}
	s.converge()
	s.failover()
	return s.stats
}

func (s *sim) addClient() {
	s.nextID++
	c := &simClient{id: fmt.Sprintf("m%02d", s.nextID), alive: true, nextAt: s.now}
	s.pickSubscription(c)
	if s.rng.Intn(4) == 0 {
		c.slow = true
		c.stuck = s.rng.Intn(3) == 0
	}
	c.laggy = s.rng.Intn(4) == 0
	s.clients = append(s.clients, c)
}

func (s *sim) pickSubscription(c *simClient) {
	switch s.rng.Intn(4) {
	case 0:
		c.sub = Subscription{Topics: []string{"t0"}}
	case 1:
		c.sub = Subscription{Topics: []string{"t0", "t1"}}
	case 2:
		c.sub = Subscription{Regex: "t[0-9]+"}
	default:
		c.sub = Subscription{Topics: []string{"x"}, Regex: "t1|t2"}
	}
	if s.asg == assignor.UniformName && s.rng.Intn(2) == 0 {
		// Half the runs of uniform check balance with one subscription.
		c.sub = Subscription{Topics: []string{"t0", "t1"}}
	}
}

// chaos applies the faults of one step.
func (s *sim) chaos() {
	r := s.rng.Intn(1000)
	switch {
	case r < 8 && len(s.clients) < 10:
		s.addClient()
	case r < 14: // a crash: the process and what it used are gone
		if c := s.pick(); c != nil {
			c.alive = false
			c.owned, c.deferred = nil, nil
		}
	case r < 18: // a restart under the same member id
		for _, c := range s.clients {
			if !c.alive {
				*c = simClient{id: c.id, sub: c.sub, alive: true, nextAt: s.now}
				break
			}
		}
	case r < 24:
		if c := s.pick(); c != nil {
			s.pickSubscription(c)
			c.nextAt = s.now
			s.heartbeat(c, true, false)
		}
	case r < 28:
		if c := s.pick(); c != nil {
			s.heartbeat(c, false, true)
		}
	case r < 30:
		s.topics["t0"] += int32(1 + s.rng.Intn(2))
		s.record(s.m.SetTopics(s.topics))
		s.check("partitions added")
	case r < 31:
		if _, ok := s.topics["t2"]; !ok {
			s.topics["t2"] = 3
			s.record(s.m.SetTopics(s.topics))
			s.check("topic created")
		}
	}
}

func (s *sim) pick() *simClient {
	var alive []*simClient
	for _, c := range s.clients {
		if c.alive {
			alive = append(alive, c)
		}
	}
	if len(alive) == 0 {
		return nil
	}
	return alive[s.rng.Intn(len(alive))]
}

func (s *sim) stepClients() {
	for _, c := range s.clients {
		if !c.alive {
			continue
		}
		s.selfFence(c)
		if c.slow && !c.stuck && len(c.deferred) > 0 && s.rng.Intn(8) == 0 {
			c.owned = minus(c.owned, c.deferred)
			c.deferred = nil
			c.nextAt = s.now // report at once
		}
		if !s.now.Before(c.nextAt) {
			s.heartbeat(c, false, false)
		}
	}
}

// selfFence drops everything when the coordinator may have removed c.
func (s *sim) selfFence(c *simClient) {
	expired := c.joined && !s.now.Before(c.lastAnswered.Add(s.cfg.SessionTimeout))
	late := !c.revokeBy.IsZero() && !s.now.Before(c.revokeBy)
	if expired || late {
		c.joined, c.epoch = false, 0
		c.owned, c.deferred, c.revoking, c.revokeBy = nil, nil, nil, time.Time{}
		c.unansweredSince = time.Time{}
	}
}

func (s *sim) heartbeat(c *simClient, subChanged, leave bool) {
	hb := Heartbeat{Group: s.group, MemberID: c.id, MemberEpoch: c.epoch, Now: s.now,
		Owned: slices.Clone(c.owned), HasOwned: !s.faults || s.rng.Intn(10) > 0}
	if !c.joined {
		hb.MemberEpoch = JoinEpoch
		hb.Owned, hb.HasOwned = nil, true
		hb.RebalanceTimeout, hb.Assignor = simRebalanceTimeout, s.asg
		subChanged = true
	}
	if subChanged {
		sub := c.sub
		hb.Subscription = &sub
	}
	if leave {
		c.owned, c.deferred = nil, nil
		hb.MemberEpoch, hb.Owned = LeaveEpoch, nil
		c.alive = false
	}
	lost := s.faults && s.rng.Intn(12) == 0
	if lost && s.rng.Intn(2) == 0 {
		s.unanswered(c) // the request never arrived
		return
	}
	before := int32(-1)
	if g := s.m.groups[s.group]; g != nil && g.members[c.id] != nil {
		before = g.members[c.id].epoch
	}
	resp, recs, err := s.m.Heartbeat(hb)
	if g := s.m.groups[s.group]; err == nil && g != nil && g.members[c.id] != nil {
		s.stats[g.members[c.id].state.String()]++
		if hb.MemberEpoch > 0 && hb.MemberEpoch < before {
			s.stats["answer lost, previous epoch accepted"]++
		}
	}
	for _, r := range recs {
		if _, ok := r.(MemberRemoved); ok && hb.MemberEpoch == JoinEpoch {
			s.stats["rejoin"]++
		}
	}
	s.record(recs)
	s.check(fmt.Sprintf("heartbeat of %s at epoch %d", c.id, hb.MemberEpoch))
	if leave {
		return
	}
	if lost { // the answer never arrived
		s.unanswered(c)
		return
	}
	c.lastAnswered, c.unansweredSince = s.now, time.Time{}
	c.nextAt = s.now.Add(s.cfg.HeartbeatInterval)
	if c.laggy && s.faults && s.rng.Intn(10) == 0 {
		c.nextAt = c.nextAt.Add(time.Duration(s.rng.Int63n(int64(2 * s.cfg.SessionTimeout))))
	}
	if err != nil {
		c.joined, c.epoch = false, 0
		c.owned, c.deferred, c.revoking, c.revokeBy = nil, nil, nil, time.Time{}
		c.nextAt = s.now
		return
	}
	c.joined, c.epoch = true, resp.MemberEpoch
	if hb.HasOwned && !overlaps(normalize(hb.Owned), c.revoking) {
		c.revoking, c.revokeBy = nil, time.Time{}
	}
	if !resp.HasAssignment {
		return
	}
	revoked := minus(c.owned, resp.Assignment)
	if len(revoked) > 0 {
		if c.revokeBy.IsZero() {
			c.revokeBy = hb.Now.Add(simRebalanceTimeout)
		}
		c.revoking = normalize(append(c.revoking, revoked...))
		c.nextAt = s.now
	}
	if c.slow && s.faults {
		c.deferred = normalize(append(minus(c.deferred, resp.Assignment), revoked...))
	} else {
		c.deferred = nil
	}
	c.owned = normalize(append(slices.Clone(resp.Assignment), c.deferred...))
}

func (s *sim) unanswered(c *simClient) {
	if c.unansweredSince.IsZero() {
		c.unansweredSince = s.now
	}
	// The coordinator may have started the rebalance timeout then.
	if c.joined && (c.revokeBy.IsZero() || c.unansweredSince.Add(simRebalanceTimeout).Before(c.revokeBy)) && len(c.owned) > 0 {
		c.revokeBy = c.unansweredSince.Add(simRebalanceTimeout)
	}
	c.nextAt = s.now.Add(s.cfg.HeartbeatInterval)
}

func (s *sim) record(recs []Record) { s.log = append(s.log, recs...) }

// check asserts, after one input, that no two clients use one partition
// and that each uses only what the coordinator holds for it.
func (s *sim) check(after string) {
	s.t.Helper()
	checkInvariants(s.t, s.m)
	user := map[TopicPartition]string{}
	g := s.m.groups[s.group]
	for _, c := range s.clients {
		for _, tp := range c.owned {
			if other, dup := user[tp]; dup {
				s.t.Fatalf("%v after %s: %v used by %s and %s", s.now.Sub(epoch0), after, tp, other, c.id)
			}
			user[tp] = c.id
			if g == nil || g.owners[tp] != c.id {
				s.t.Fatalf("%v after %s: %s uses %v, which the coordinator has with %q", s.now.Sub(epoch0), after, c.id, tp, g.owners[tp])
			}
		}
	}
}

// failover rebuilds the coordinator from the records written so far and
// checks the rebuilt state; the clients carry on with their partitions.
func (s *sim) failover() {
	m := newMachine(s.t, s.cfg)
	recs, err := m.Replay(s.log, s.topics, s.now)
	if err != nil || len(recs) != 0 {
		s.t.Fatal(recs, err)
	}
	if got, want := m.Snapshot(), s.m.Snapshot(); !reflect.DeepEqual(got, want) {
		s.t.Fatalf("replayed state differs:\n%v\nwant\n%v", got, want)
	}
	again := newMachine(s.t, s.cfg)
	if _, err := again.Replay(m.Snapshot(), s.topics, s.now); err != nil {
		s.t.Fatal(err)
	}
	if !reflect.DeepEqual(again.Snapshot(), m.Snapshot()) {
		s.t.Fatal("state rebuilt from a snapshot differs")
	}
	s.m = m
	s.check("failover")
	s.stats["failover"]++
}

// converge stops the faults and heartbeats every live client until the
// group is stable, then checks the result against the assignor.
func (s *sim) converge() {
	s.faults = false
	for _, c := range s.clients {
		c.deferred = nil
		c.owned = minus(c.owned, c.revoking)
	}
	for round := 0; ; round++ {
		if round > 200 {
			d, _ := s.m.Describe(s.group)
			s.t.Fatalf("not stable after %d rounds: %+v", round, d)
		}
		s.now = s.now.Add(s.cfg.HeartbeatInterval / 5)
		for _, c := range s.clients {
			if c.alive {
				s.selfFence(c)
				s.heartbeat(c, false, false)
			}
		}
		s.record(s.m.Tick(s.now))
		s.check("tick")
		if s.stable() {
			break
		}
	}
	g := s.m.groups[s.group]
	var in []assignor.Member
	for _, mem := range g.sortedMembers() {
		in = append(in, assignor.Member{ID: mem.id, Topics: s.m.subscribedTopics(mem), Current: g.target[mem.id]})
	}
	a, _ := assignor.Lookup(s.m.chosenAssignor(g))
	want := a.Assign(in, s.topics)
	for id, ps := range want {
		if !slices.Equal(ps, g.target[id]) {
			s.t.Fatalf("%s: the target of %s is %v, the assignor gives %v", a.Name(), id, g.target[id], ps)
		}
	}
}

func (s *sim) stable() bool {
	g := s.m.groups[s.group]
	if g == nil {
		return true
	}
	if g.state() != GroupStable && len(g.members) > 0 {
		return false
	}
	if !maps.Equal(g.topics, s.m.subscribedCounts(g)) {
		s.t.Fatalf("the group's topics %v are not its subscriptions' %v", g.topics, s.m.subscribedCounts(g))
	}
	for _, c := range s.clients {
		if !c.alive {
			continue
		}
		mem := g.members[c.id]
		if mem == nil || !slices.Equal(c.owned, mem.assigned) || !slices.Equal(mem.assigned, g.target[c.id]) {
			return false
		}
	}
	return len(g.members) == s.aliveCount()
}

func (s *sim) aliveCount() int {
	n := 0
	for _, c := range s.clients {
		if c.alive {
			n++
		}
	}
	return n
}
