package group

import (
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quirelog/quire/group/assignor"
)

// A seeded simulation: members join, leave, crash, restart, lag, lose
// heartbeats and answers, revoke slowly or never, change subscriptions,
// while topics grow and appear and the coordinator fails over. After
// every input it checks that no two members own one partition, each from
// its own view, and that every classic member between its joins may
// commit at the generation it holds; at the end, with the faults
// stopped, that the group becomes stable with the assignor's target
// within a bounded number of rounds. Some members are classic (Kafka's
// JoinGroup protocol, eager or cooperative), mixed with KIP-848 ones, and
// some are static.

// simClient is a member as a well-behaved client runs it. It only uses
// partitions the coordinator gave it, gives up revoked ones before it
// says so, and drops everything (then rejoins with epoch 0) when it may
// have been removed: no answer for a session timeout since a heartbeat it
// sent, or revocations not confirmed within its rebalance timeout.
//
// A classic client runs Kafka's JoinGroup protocol as the Kafka listener
// maps it (Heartbeat.Classic): it learns its assignment only in the
// SyncGroup after each answered join, and rejoins when a heartbeat says
// Rejoin, when its heartbeat is fenced (REBALANCE_IN_PROGRESS: its join
// moved its epoch on and the answer was lost), or when a join or
// SyncGroup went unanswered. An eager client gives up everything before
// it joins; a cooperative one joins owning what it has and, when the
// SyncGroup gives it less, gives up the rest and joins again at once.
type simClient struct {
	id    string
	sub   Subscription
	alive bool
	// instance makes it static: it restarts as a new process (a new
	// member id) of its instance, taking the old one's place, and leaves
	// its place (-2) as often as it leaves.
	instance string
	// session is a classic client's own session timeout (0: the group's).
	session time.Duration
	// everyBeat: a KIP-848 client that sends its instance id with every
	// heartbeat, not only with its joins.
	everyBeat bool

	joined bool
	epoch  int32
	owned  []TopicPartition // what it uses now
	// deferred are revoked partitions it still uses (a slow client).
	deferred []TopicPartition
	// revoking are the partitions it was told to give up, until an
	// answer arrives to a heartbeat listing none of them; revokeBy is
	// when it must have had an answer that names none to give up.
	// revokeFrom, the sent time of the oldest heartbeat since such an
	// answer, is the earliest the coordinator's rebalance timeout may
	// run from.
	revoking   []TopicPartition
	revokeBy   time.Time
	revokeFrom time.Time

	lastAnswered    time.Time // sent time of the newest answered heartbeat
	unansweredSince time.Time // sent time of the oldest unanswered one since
	nextAt          time.Time

	slow, stuck, laggy bool

	// A classic client's place in its protocol.
	classic, eager bool
	rejoin         bool // its next call is a join
	joining        bool // a join is sent and not answered: its epoch may be old
	syncing        bool // its join was answered; the SyncGroup is next
	// joinOwned is what its last join said it owns; synced what the
	// SyncGroup after it gave it.
	joinOwned, synced []TopicPartition
}

// drop forgets the membership and every partition, as a client does
// that may have been removed.
func (c *simClient) drop() {
	c.joined, c.epoch = false, 0
	c.owned, c.deferred, c.revoking, c.revokeBy, c.revokeFrom = nil, nil, nil, time.Time{}, time.Time{}
	c.unansweredSince = time.Time{}
	c.rejoin, c.joining, c.syncing, c.joinOwned, c.synced = false, false, false, nil, nil
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

var simSeeds = flag.Int64("sim.seeds", 40, "the number of seeds TestGroupSimulation runs")

func TestGroupSimulation(t *testing.T) {
	total := map[string]int{}
	for seed := int64(1); seed <= *simSeeds; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			for k, v := range runSim(t, seed, 1500) {
				if strings.HasPrefix(k, "converge rounds") {
					total[k] = max(total[k], v)
				} else {
					total[k] += v
				}
			}
		})
	}
	// The runs must have gone through every path of reconciliation.
	for _, k := range []string{"unrevoked_partitions", "unreleased_partitions", "answer lost, previous epoch accepted", "rejoin", "removed by tick", "rebalance timeout", "failover",
		"classic eager join", "classic cooperative join owning", "classic join: unrevoked_partitions", "classic join: unreleased_partitions",
		"classic told to rejoin", "classic revoked at sync", "classic fenced", "classic commit", "waits for a member of the other protocol",
		"static replaced", "static left its place"} {
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
	cfg.MinSessionTimeout = time.Second // classic clients ask for their own
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
	if s.rng.Intn(3) == 0 {
		c.classic, c.eager = true, s.rng.Intn(2) == 0
	}
	if s.rng.Intn(3) == 0 {
		c.instance, c.everyBeat = "i"+c.id, s.rng.Intn(2) == 0
	}
	if c.classic {
		c.session = []time.Duration{0, 1500 * time.Millisecond, 6 * time.Second}[s.rng.Intn(3)]
	}
	if s.rng.Intn(4) == 0 {
		c.slow = true
		// An eager member, which gives up everything before it joins,
		// is never asked to revoke, so no rebalance timeout removes
		// it: stuck, it would hold its partitions to the end.
		c.stuck = s.rng.Intn(3) == 0 && !c.eager
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
	case r < 18: // a restart under the same member id, or a static one's
		for _, c := range s.clients {
			if !c.alive {
				s.restart(c)
				break
			}
		}
	case r < 21: // a static client's next process, soon after the last stopped
		for _, c := range s.clients {
			if !c.alive && c.instance != "" {
				s.restart(c)
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

func (s *sim) client(id string) *simClient {
	for _, c := range s.clients {
		if c.id == id {
			return c
		}
	}
	return nil
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

// restart starts c's process again: under the same member id, or a new
// one for a static client (its instance's next process).
func (s *sim) restart(c *simClient) {
	id := c.id
	if c.instance != "" {
		s.nextID++
		id = fmt.Sprintf("m%02d", s.nextID)
	}
	*c = simClient{id: id, instance: c.instance, everyBeat: c.everyBeat, session: c.session, sub: c.sub, classic: c.classic, eager: c.eager, alive: true, nextAt: s.now}
}

// sessionOf is c's session timeout: its own, else the group's.
func (s *sim) sessionOf(c *simClient) time.Duration {
	if c.session > 0 {
		return c.session
	}
	return s.cfg.SessionTimeout
}

// selfFence drops everything when the coordinator may have removed c.
func (s *sim) selfFence(c *simClient) {
	expired := c.joined && !s.now.Before(c.lastAnswered.Add(s.sessionOf(c)))
	late := !c.revokeBy.IsZero() && !s.now.Before(c.revokeBy)
	if expired || late {
		c.drop()
	}
}

func (s *sim) heartbeat(c *simClient, subChanged, leave bool) {
	if c.classic && !leave {
		s.classicStep(c, subChanged)
		return
	}
	hb := Heartbeat{Group: s.group, MemberID: c.id, MemberEpoch: c.epoch, Now: s.now,
		Owned: slices.Clone(c.owned), HasOwned: !s.faults || s.rng.Intn(10) > 0}
	if !c.joined {
		hb.MemberEpoch = JoinEpoch
		hb.Owned, hb.HasOwned = nil, true
		hb.RebalanceTimeout, hb.Assignor = simRebalanceTimeout, s.asg
		subChanged = true
	}
	if !c.joined || c.everyBeat {
		// franz-go sends it with joins only, Kafka's Java consumer with
		// every heartbeat.
		hb.InstanceID = c.instance
	}
	if subChanged {
		sub := c.sub
		hb.Subscription = &sub
	}
	if leave {
		c.owned, c.deferred = nil, nil
		hb.MemberEpoch, hb.Owned = LeaveEpoch, nil
		if c.instance != "" && c.joined {
			hb.MemberEpoch = StaticLeaveEpoch
			s.stats["static left its place"]++
		}
		c.alive = false
	}
	if c.revokeFrom.IsZero() {
		c.revokeFrom = s.now
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
		if rm, ok := r.(MemberRemoved); ok && hb.MemberEpoch == JoinEpoch && rm.MemberID == c.id {
			s.stats["rejoin"]++
		}
	}
	s.countReplaced(hb, recs)
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
		c.nextAt = c.nextAt.Add(time.Duration(s.rng.Int63n(int64(2 * s.sessionOf(c)))))
	}
	if err != nil {
		c.drop()
		c.nextAt = s.now
		return
	}
	c.joined, c.epoch = true, resp.MemberEpoch
	if owned := normalize(hb.Owned); hb.HasOwned && !overlaps(owned, c.revoking) {
		c.revoking = nil
		if !resp.HasAssignment || subset(owned, normalize(resp.Assignment)) {
			// Nothing it listed is to be given up: the coordinator
			// waits for none of its partitions.
			c.revokeBy, c.revokeFrom = time.Time{}, time.Time{}
		}
	}
	if !resp.HasAssignment {
		return
	}
	revoked := minus(c.owned, resp.Assignment)
	if len(revoked) > 0 {
		if by := c.revokeFrom.Add(simRebalanceTimeout); c.revokeBy.IsZero() || by.Before(c.revokeBy) {
			c.revokeBy = by
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

// classicStep is a classic client's next call: a join when it must
// rejoin, else the SyncGroup after its answered join, else a heartbeat.
func (s *sim) classicStep(c *simClient, subChanged bool) {
	if subChanged {
		c.rejoin = true // a new subscription goes in a join
	}
	switch {
	case c.joined && c.joining && s.faults && s.rng.Intn(3) == 0:
		s.classicBeat(c) // its heartbeat thread, while the join is unanswered
	case !c.joined || c.rejoin:
		if c.eager && c.slow && s.faults && len(c.deferred) == 0 {
			c.deferred = slices.Clone(c.owned) // its revocation callback is slow
		}
		if len(c.deferred) > 0 {
			s.classicBeat(c) // still giving partitions up
			return
		}
		s.classicJoin(c)
	case c.syncing:
		s.classicSync(c)
	default:
		s.classicBeat(c)
	}
}

// classicJoin sends a classic client's JoinGroup and, when it is
// answered, the SyncGroup (at once, or at the next step).
func (s *sim) classicJoin(c *simClient) {
	if c.eager {
		c.owned = nil // it gives up everything first
		s.stats["classic eager join"]++
	} else if len(c.owned) > 0 {
		s.stats["classic cooperative join owning"]++
	}
	sub := c.sub
	hb := Heartbeat{Group: s.group, MemberID: c.id, MemberEpoch: JoinEpoch, Classic: true, Now: s.now, InstanceID: c.instance, SessionTimeout: c.session,
		Subscription: &sub, Owned: slices.Clone(c.owned), HasOwned: true, RebalanceTimeout: simRebalanceTimeout, Assignor: s.asg}
	c.rejoin, c.joining, c.syncing = true, true, false
	c.joinOwned = normalize(c.owned)
	if len(c.owned) > 0 && c.revokeBy.IsZero() {
		// This join may name partitions to give up, and the rebalance
		// timeout run from it, until a SyncGroup shows it did not.
		c.revokeBy = s.now.Add(simRebalanceTimeout)
	}
	resp, answered, err := s.classicCall(c, hb, "join")
	c.nextAt = s.now.Add(s.cfg.HeartbeatInterval)
	switch {
	case !answered:
		return // it joins again
	case errors.Is(err, ErrUnknownMemberID):
		// Removed while it owns partitions: it has lost them.
		s.stats["classic unknown member"]++
		c.drop()
		c.nextAt = s.now
		return
	case err != nil:
		s.t.Fatalf("%v: join of %s: %v", s.now.Sub(epoch0), c.id, err)
	}
	s.stats["classic join: "+s.m.groups[s.group].members[c.id].state.String()]++
	c.joined, c.epoch = true, resp.MemberEpoch
	c.rejoin, c.joining, c.syncing = false, false, true
	if !s.faults || s.rng.Intn(2) == 0 {
		s.classicSync(c)
	} else {
		c.nextAt = s.now
	}
}

// classicSync sends a classic client's SyncGroup, a classic heartbeat
// whose answer it takes as its assignment. A cooperative client given
// less than it owns gives the rest up and joins again at once (a slow
// one later).
func (s *sim) classicSync(c *simClient) {
	hb := Heartbeat{Group: s.group, MemberID: c.id, MemberEpoch: c.epoch, Classic: true, Now: s.now, InstanceID: c.instance}
	resp, answered, err := s.classicCall(c, hb, "sync")
	c.nextAt = s.now.Add(s.cfg.HeartbeatInterval)
	if !answered {
		c.rejoin, c.syncing = true, false // a failed SyncGroup: it joins again
		return
	}
	if err != nil {
		s.classicError(c, err, "sync")
		return
	}
	if !resp.HasAssignment || resp.MemberEpoch != c.epoch {
		s.t.Fatalf("%v: SyncGroup of %s at epoch %d answered %+v", s.now.Sub(epoch0), c.id, c.epoch, resp)
	}
	c.syncing, c.synced = false, normalize(resp.Assignment)
	if subset(c.joinOwned, c.synced) {
		c.revokeBy = time.Time{} // its join named nothing to give up
	}
	revoked := minus(c.owned, c.synced)
	if len(revoked) > 0 {
		s.stats["classic revoked at sync"]++
		c.rejoin = true
	}
	if c.slow && s.faults {
		c.deferred = normalize(append(minus(c.deferred, c.synced), revoked...))
	} else {
		c.deferred = nil
	}
	c.owned = normalize(append(slices.Clone(c.synced), c.deferred...))
	if c.rejoin && len(c.deferred) == 0 {
		s.classicJoin(c)
	}
}

// classicBeat sends a classic client's heartbeat, which must change
// nothing and answer the assignment of its last SyncGroup; a laggy
// client heeds a rejoin late.
func (s *sim) classicBeat(c *simClient) {
	hb := Heartbeat{Group: s.group, MemberID: c.id, MemberEpoch: c.epoch, Classic: true, Now: s.now, InstanceID: c.instance}
	n := len(s.log)
	// The coordinator may have said rejoin in an answer that was lost:
	// its rebalance timeout runs from the oldest unanswered heartbeat.
	from := c.unansweredSince
	if from.IsZero() {
		from = hb.Now
	}
	resp, answered, err := s.classicCall(c, hb, "heartbeat")
	c.nextAt = s.now.Add(s.cfg.HeartbeatInterval)
	if c.laggy && s.faults && s.rng.Intn(10) == 0 {
		c.nextAt = c.nextAt.Add(time.Duration(s.rng.Int63n(int64(2 * s.sessionOf(c)))))
	}
	for _, r := range s.log[n:] {
		if _, ok := r.(TargetAssignment); !ok {
			s.t.Fatalf("%v: heartbeat of %s at epoch %d wrote %v", s.now.Sub(epoch0), c.id, c.epoch, r)
		}
	}
	if !answered {
		if c.unansweredSince.IsZero() {
			c.unansweredSince = hb.Now
		}
		return
	}
	c.unansweredSince = time.Time{}
	if err != nil {
		s.classicError(c, err, "heartbeat")
		return
	}
	if !c.joining && !c.syncing && (!resp.HasAssignment || !slices.Equal(normalize(resp.Assignment), c.synced) || resp.MemberEpoch != c.epoch) {
		s.t.Fatalf("%v: heartbeat of %s at epoch %d answered %+v; its SyncGroup gave %v", s.now.Sub(epoch0), c.id, c.epoch, resp, c.synced)
	}
	if resp.Rejoin {
		s.stats["classic told to rejoin"]++
		if c.revokeBy.IsZero() {
			// The coordinator removes it a rebalance timeout after the
			// first answer that said rejoin, unless it has rejoined by
			// then; it drops everything then too (as Kafka's clients do
			// past max.poll.interval.ms).
			c.revokeBy = from.Add(simRebalanceTimeout)
		}
		if !c.laggy || !s.faults || s.rng.Intn(3) > 0 {
			c.rejoin = true
			c.nextAt = s.now
		}
	}
}

// classicError is what a classic client does with a refused call.
func (s *sim) classicError(c *simClient, err error, what string) {
	switch {
	case errors.Is(err, ErrFencedMemberEpoch):
		// REBALANCE_IN_PROGRESS: it rejoins with what it owns. Only a
		// join moves its epoch, so it must have sent one.
		if !c.joining {
			s.t.Fatalf("%v: %s of %s at epoch %d fenced between its joins: %v", s.now.Sub(epoch0), what, c.id, c.epoch, err)
		}
		s.stats["classic fenced"]++
		c.rejoin, c.syncing = true, false
	case errors.Is(err, ErrUnknownMemberID):
		s.stats["classic unknown member"]++
		c.drop()
	default:
		s.t.Fatalf("%v: %s of %s: %v", s.now.Sub(epoch0), what, c.id, err)
	}
	c.nextAt = s.now
}

// classicCall sends a classic client's hb and checks the state after
// it. With the faults on, one call in twelve is lost: the request, or
// the answer.
func (s *sim) classicCall(c *simClient, hb Heartbeat, what string) (resp Response, answered bool, err error) {
	lost := s.faults && s.rng.Intn(12) == 0
	if lost && s.rng.Intn(2) == 0 {
		return Response{}, false, nil // the request never arrived
	}
	resp, recs, err := s.m.Heartbeat(hb)
	s.countReplaced(hb, recs)
	s.record(recs)
	s.check(fmt.Sprintf("classic %s of %s at epoch %d", what, c.id, hb.MemberEpoch))
	if lost {
		return Response{}, false, nil
	}
	if err == nil {
		c.lastAnswered = s.now
	}
	return resp, true, err
}

func (s *sim) record(recs []Record) { s.log = append(s.log, recs...) }

// countReplaced counts a join that took a static member's place.
func (s *sim) countReplaced(hb Heartbeat, recs []Record) {
	for _, r := range recs {
		if rm, ok := r.(MemberRemoved); ok && hb.MemberEpoch == JoinEpoch && rm.MemberID != hb.MemberID {
			s.stats["static replaced"]++
		}
	}
}

// check asserts, after one input, that no two clients use one partition,
// that each uses only what the coordinator holds for it, and that a
// classic client between its joins may commit at the epoch it holds.
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
		if g == nil || !c.alive {
			continue
		}
		if mem := g.members[c.id]; mem != nil && mem.state == MemberUnreleasedPartitions {
			for _, tp := range minus(g.target[c.id], mem.assigned) {
				if o := s.client(g.owners[tp]); o != nil && o.classic != c.classic {
					s.stats["waits for a member of the other protocol"]++
				}
			}
		}
		if c.classic && c.joined && !c.joining {
			if err := s.m.ValidateCommit(s.group, c.id, c.epoch); err != nil {
				s.t.Fatalf("%v after %s: %s commits at epoch %d between its joins: %v", s.now.Sub(epoch0), after, c.id, c.epoch, err)
			}
			s.stats["classic commit"]++
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

// simSettleRounds bounds the rounds (each a fifth of the heartbeat
// interval, every live client making its next call) the group may take
// to be stable once the faults stop, after the members whose client is
// gone have been removed (at the end of their session).
const simSettleRounds = 10

// converge stops the faults and has every live client make its next call
// each round until the group is stable, then checks the result against
// the assignor, and that one more round changes nothing.
func (s *sim) converge() {
	s.faults = false
	for _, c := range s.clients {
		c.owned = minus(minus(c.owned, c.deferred), c.revoking)
		c.deferred = nil
	}
	// The members whose client is gone are removed when their session
	// ends, by the round gone.
	step := s.cfg.HeartbeatInterval / 5
	gone := 0
	if g := s.m.groups[s.group]; g != nil {
		for _, mem := range g.members {
			if c := s.client(mem.id); c == nil || !c.alive {
				gone = max(gone, int((mem.sessionDeadline.Sub(s.now)+step-1)/step))
			}
		}
	}
	removed := 0 // the round of the last removal
	for round := 0; ; round++ {
		if round > max(gone, removed)+simSettleRounds {
			d, _ := s.m.Describe(s.group)
			s.t.Fatalf("not stable after %d rounds, the last removal at round %d: %+v", round, removed, d)
		}
		s.now = s.now.Add(step)
		for _, c := range s.clients {
			if c.alive {
				s.selfFence(c)
				s.heartbeat(c, false, false)
			}
		}
		if recs := s.m.Tick(s.now); len(recs) > 0 {
			s.record(recs)
			removed = round
		}
		s.check("tick")
		if s.stable() {
			s.stats["converge rounds, most"] = round
			s.stats["converge rounds after the last removal, most"] = round - max(gone, removed)
			break
		}
	}
	g := s.m.groups[s.group]
	var in []assignor.Member
	for _, mem := range g.sortedMembers() {
		in = append(in, assignor.Member{ID: mem.id, InstanceID: mem.instanceID, Topics: s.m.subscribedTopics(mem), Current: g.target[mem.id]})
	}
	a, _ := assignor.Lookup(s.m.chosenAssignor(g))
	want := a.Assign(in, s.topics)
	for id, ps := range want {
		if !slices.Equal(ps, g.target[id]) {
			s.t.Fatalf("%s: the target of %s is %v, the assignor gives %v", a.Name(), id, g.target[id], ps)
		}
	}
	// Every subscribed partition has one owner.
	owners := map[TopicPartition]int{}
	for _, c := range s.clients {
		for _, tp := range c.owned {
			owners[tp]++
		}
	}
	for t, n := range s.m.subscribedCounts(g) {
		for p := range n {
			if tp := (TopicPartition{Topic: t, Partition: p}); owners[tp] != 1 {
				s.t.Fatalf("stable, and %v has %d owners", tp, owners[tp])
			}
		}
	}
	// The next call of every member changes nothing, and no classic
	// member is told to rejoin.
	n := len(s.log)
	s.now = s.now.Add(step)
	for _, c := range s.clients {
		if c.alive {
			s.heartbeat(c, false, false)
			if c.rejoin {
				s.t.Fatalf("stable, and %s is told to rejoin", c.id)
			}
		}
	}
	if len(s.log) != n {
		s.t.Fatalf("stable, and heartbeats wrote %v", s.log[n:])
	}
	if !s.stable() {
		d, _ := s.m.Describe(s.group)
		s.t.Fatalf("stable, and not after one more round: %+v", d)
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
		if c.classic && (c.rejoin || c.joining || c.syncing || c.epoch != mem.epoch) {
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
