package request_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quirelog/quire/request"
	"github.com/quirelog/quire/share"
	"github.com/quirelog/quire/sharegroup"
)

// shareNodes is the other nodes as a partition leader sees them: which
// members they have, whether they answer, who they were told left, and
// the calls passed on to leader 2.
type shareNodes struct {
	mu       sync.Mutex
	members  map[string]bool
	down     bool
	asked    []string
	left     []sharegroup.Departure
	fetches  []*request.ShareFetchRequest
	acks     [][]request.SharePartition
	fetchErr error
}

func (n *shareNodes) ShareMember(_ context.Context, group, id string) (bool, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.asked = append(n.asked, id)
	if n.members[group+"/"+id] {
		return true, nil
	}
	if n.down {
		return false, errors.New("a node did not answer")
	}
	return false, nil
}

func (n *shareNodes) ShareGroupHasMembers(_ context.Context, group string) (bool, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for k, ok := range n.members {
		if ok && strings.HasPrefix(k, group+"/") {
			return true, nil
		}
	}
	if n.down {
		return false, errors.New("a node did not answer")
	}
	return false, nil
}

func (n *shareNodes) ShareMembersLeft(_ context.Context, left []sharegroup.Departure) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.left = append(n.left, left...)
}

func (n *shareNodes) ShareFetch(_ context.Context, leader int32, req *request.ShareFetchRequest) ([]request.ShareFetchResult, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.fetches = append(n.fetches, req)
	if n.fetchErr != nil {
		return nil, n.fetchErr
	}
	out := make([]request.ShareFetchResult, len(req.Partitions))
	for i, p := range req.Partitions {
		out[i] = request.ShareFetchResult{Topic: p.Topic, Partition: p.Partition, Acquired: []share.AcquiredRange{{First: 7, Last: 7, DeliveryCount: 1}}}
	}
	return out, nil
}

func (n *shareNodes) ShareAcknowledge(_ context.Context, leader int32, group, member string, _ bool, parts []request.SharePartition) ([]request.ShareAckResult, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.acks = append(n.acks, parts)
	out := make([]request.ShareAckResult, len(parts))
	for i, p := range parts {
		out[i] = request.ShareAckResult{Topic: p.Topic, Partition: p.Partition}
	}
	return out, nil
}

// TestCoreShareMembersAcrossNodes: a partition leader refuses a member
// no node has (UNKNOWN_MEMBER_ID), and one it cannot confirm because a
// node does not answer (COORDINATOR_NOT_AVAILABLE, retriable); it serves
// one another node has, without asking again while the confirmation
// holds; told that member left, it releases its records at once. A
// member leaving the node it heartbeats to is told to the other nodes.
// A routed fetch and acknowledgement pass partitions led elsewhere on
// to their leader, the credit shared between the leaders.
func TestCoreShareMembersAcrossNodes(t *testing.T) {
	t.Parallel()
	nodes := &shareNodes{members: map[string]bool{"g/far": true}}
	cfg := sharegroup.DefaultConfig()
	cfg.ResetEarliest = true
	cfg.AdmitFetchers = true
	sc, err := sharegroup.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f := newCore(t, func(c *request.Config) { c.Shares, c.ShareCluster = sc, nodes })
	produceKeyed(t, f, 0, 4, 4)
	ctx := ctxT(t)
	fetch := func(member string) ([]request.ShareFetchResult, error) {
		return f.core.ShareFetch(ctx, &request.ShareFetchRequest{Group: "g", MemberID: member, MaxRecords: 1,
			Partitions: []request.SharePartition{{Topic: "t", Partition: 0}}})
	}
	if _, err := fetch("stranger"); !errors.Is(err, sharegroup.ErrUnknownMember) {
		t.Fatalf("a member no node has: %v, want UNKNOWN_MEMBER_ID", err)
	}
	if _, err := f.core.ShareAcknowledge(ctx, "g", "stranger", []request.SharePartition{{Topic: "t", Partition: 0, Acks: []share.Ack{{First: 0, Last: 0, Type: share.Accept}}}}); !errors.Is(err, sharegroup.ErrUnknownMember) {
		t.Fatalf("an acknowledgement of a member no node has: %v, want UNKNOWN_MEMBER_ID", err)
	}
	nodes.down = true
	if _, err := fetch("wanderer"); !errors.Is(err, request.ErrShareMemberUnconfirmed) {
		t.Fatalf("a member not confirmed, a node down: %v", err)
	}
	nodes.down = false

	out, err := fetch("far")
	if err != nil || len(out[0].Acquired) != 1 || out[0].Acquired[0].First != 0 {
		t.Fatalf("a member another node has: %+v, %v", out, err)
	}
	asked := len(nodes.asked)
	if out, err := fetch("far"); err != nil || len(out[0].Acquired) != 1 || len(nodes.asked) != asked {
		t.Fatalf("a confirmed member's second fetch: %+v, %v, asked %v", out, err, nodes.asked)
	}
	// Told that far left: its two records are released at once.
	f.core.ShareMembersGone("g", []string{"far"})
	if _, parts := sc.Describe("g"); parts[0].Records[0].State != share.Available || parts[0].Records[1].State != share.Available {
		t.Fatalf("records of a member told gone: %+v", parts[0].Records)
	}

	// A member heartbeating here: leaving is told to the other nodes.
	if _, err := f.core.ShareGroupHeartbeat(ctx, &request.ShareHeartbeat{Group: "g", MemberID: "near", Topics: []string{"t"}}); err != nil {
		t.Fatal(err)
	}
	if !f.core.ShareMemberHere("g", "near") || f.core.ShareMemberHere("g", "far") {
		t.Fatal("ShareMemberHere answers only members heartbeating here")
	}
	if _, err := f.core.ShareGroupHeartbeat(ctx, &request.ShareHeartbeat{Group: "g", MemberID: "near", Epoch: -1}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(nodes.left, []sharegroup.Departure{{Group: "g", MemberID: "near"}}) {
		t.Fatalf("told %v, want near's leave", nodes.left)
	}

	// Routed: t-1 is led by node 2.
	out, err = f.core.ShareFetch(ctx, &request.ShareFetchRequest{Group: "g", MemberID: "far", MaxRecords: 4, Route: true,
		Partitions: []request.SharePartition{{Topic: "t", Partition: 0}, {Topic: "t", Partition: 1, Acks: []share.Ack{{First: 3, Last: 3, Type: share.Accept}}}}})
	if err != nil || len(out) != 2 || out[0].Partition != 0 || out[1].Partition != 1 || len(out[1].Acquired) != 1 || out[1].Acquired[0].First != 7 {
		t.Fatalf("routed fetch: %+v, %v", out, err)
	}
	if len(nodes.fetches) != 1 || len(nodes.fetches[0].Partitions) != 1 || nodes.fetches[0].Partitions[0].Partition != 1 ||
		len(nodes.fetches[0].Partitions[0].Acks) != 1 || nodes.fetches[0].MaxRecords != 2 || nodes.fetches[0].Route {
		t.Fatalf("fetch passed on to node 2: %+v, want t-1 alone with its ack and half the credit", nodes.fetches)
	}
	if n := len(out[0].Acquired); n != 1 || out[0].Acquired[0].Last-out[0].Acquired[0].First > 1 {
		t.Fatalf("t-0's part of a routed fetch: %+v", out[0].Acquired)
	}
	nodes.fetchErr = errors.New("connection refused")
	out, err = f.core.ShareFetch(ctx, &request.ShareFetchRequest{Group: "g", MemberID: "far", Route: true,
		Partitions: []request.SharePartition{{Topic: "t", Partition: 1}}})
	if err != nil || !errors.Is(out[0].Err, request.ErrLeaderUnreachable) {
		t.Fatalf("a leader out of reach: %+v, %v", out, err)
	}
	res, err := f.core.ShareAcknowledgeRouted(ctx, "g", "far", false, []request.SharePartition{
		{Topic: "t", Partition: 1, Acks: []share.Ack{{First: 7, Last: 7, Type: share.Accept}}}})
	if err != nil || len(res) != 1 || res[0].Err != nil || len(nodes.acks) != 1 || nodes.acks[0][0].Partition != 1 {
		t.Fatalf("routed acknowledgement: %+v, %v, passed on %+v", res, err, nodes.acks)
	}
}

// TestCoreShareRoutedFetchCredit: a routed fetch with less credit than
// leaders acquires no more than its credit; a leader left without
// credit this time is only sent its acknowledgements.
func TestCoreShareRoutedFetchCredit(t *testing.T) {
	t.Parallel()
	nodes := &shareNodes{members: map[string]bool{"g/far": true}}
	cfg := sharegroup.DefaultConfig()
	cfg.ResetEarliest = true
	cfg.AdmitFetchers = true
	sc, err := sharegroup.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f := newCore(t, func(c *request.Config) { c.Shares, c.ShareCluster = sc, nodes })
	produceKeyed(t, f, 0, 8, 8)
	ctx := ctxT(t)
	// The credit of one goes to either leader in turn: twice covers both.
	for run := range 2 {
		out, err := f.core.ShareFetch(ctx, &request.ShareFetchRequest{Group: "g", MemberID: "far", MaxRecords: 1, Route: true,
			Partitions: []request.SharePartition{{Topic: "t", Partition: 0, Acks: []share.Ack{{First: 100, Last: 100, Type: share.Accept}}},
				{Topic: "t", Partition: 1, Acks: []share.Ack{{First: 7, Last: 7, Type: share.Accept}}}}})
		if err != nil || len(out) != 2 {
			t.Fatalf("run %d: %+v, %v", run, out, err)
		}
		n := 0
		for _, r := range out {
			for _, a := range r.Acquired {
				n += int(a.Last - a.First + 1)
			}
		}
		if n != 1 {
			t.Fatalf("run %d: acquired %d records with a credit of 1: %+v", run, n, out)
		}
		if out[0].AckErr == nil {
			t.Fatalf("run %d: the acknowledgement of a record t-0 never delivered was taken", run)
		}
	}
	nodes.mu.Lock()
	defer nodes.mu.Unlock()
	for _, r := range nodes.fetches {
		if r.MaxRecords < 1 {
			t.Fatalf("a fetch with no credit passed on: %+v", r)
		}
	}
	if len(nodes.fetches)+len(nodes.acks) != 2 {
		t.Fatalf("passed on %d fetches and %d acknowledgements, want 2 calls", len(nodes.fetches), len(nodes.acks))
	}
}

// TestCoreShareKeyOrderedAckOnNewLeader: a key_ordered stream's
// acknowledgement may be the first call a new leader gets for the group,
// restoring the partition's saved state there: it turns the group's
// per-key ordering on first, so the state is served with it and the
// stream's next fetch is not refused as asking it of a group served
// without.
func TestCoreShareKeyOrderedAckOnNewLeader(t *testing.T) {
	t.Parallel()
	store := &shareStore{saved: map[sharegroup.TopicPartition]sharegroup.SavedState{}}
	nodes := &shareNodes{members: map[string]bool{"g/far": true}}
	coordinator := func() *sharegroup.Coordinator {
		cfg := sharegroup.DefaultConfig()
		cfg.ResetEarliest = true
		cfg.AdmitFetchers = true
		cfg.Store = store
		sc, err := sharegroup.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return sc
	}
	ctx := ctxT(t)
	fetch := func(f fixture) ([]request.ShareFetchResult, error) {
		return f.core.ShareFetch(ctx, &request.ShareFetchRequest{Group: "g", MemberID: "far", MaxRecords: 1, KeyOrdered: true, Route: true,
			Partitions: []request.SharePartition{{Topic: "t", Partition: 0}}})
	}
	// The old leader hands out record 0 with the ordering on.
	old := newCore(t, func(c *request.Config) { c.Shares, c.ShareCluster = coordinator(), nodes })
	produceKeyed(t, old, 0, 4, 2)
	if out, err := fetch(old); err != nil || len(out[0].Acquired) != 1 || out[0].Acquired[0].First != 0 {
		t.Fatalf("the old leader's fetch: %+v, %v", out, err)
	}
	// The new leader first gets the acknowledgement of record 0 (which
	// it refuses: the records acquired from the old one are no one's
	// here), restoring the partition's state for it.
	sc := coordinator()
	f := newCore(t, func(c *request.Config) { c.Shares, c.ShareCluster = sc, nodes })
	produceKeyed(t, f, 0, 4, 2)
	res, err := f.core.ShareAcknowledgeRouted(ctx, "g", "far", true, []request.SharePartition{
		{Topic: "t", Partition: 0, Acks: []share.Ack{{First: 0, Last: 0, Type: share.Accept}}}})
	if err != nil || len(res) != 1 {
		t.Fatalf("the acknowledgement at the new leader: %+v, %v", res, err)
	}
	if _, parts := sc.Describe("g"); len(parts) != 1 {
		t.Fatalf("the new leader's share-partitions %+v, want t-0's restored", parts)
	}
	if !sc.GroupConfig("g").Partition.KeyOrdering {
		t.Fatal("the new leader serves the group without its per-key ordering")
	}
	if out, err := fetch(f); err != nil || out[0].Err != nil || len(out[0].Acquired) != 1 {
		t.Fatalf("the stream's next fetch at the new leader: %+v, %v", out, err)
	}
}

// TestCoreShareUnknownMemberNotAskedAgain: a member no node had is
// refused without asking the other nodes again for a second; after it
// they are asked again, and a member joining here is served at once.
func TestCoreShareUnknownMemberNotAskedAgain(t *testing.T) {
	t.Parallel()
	nodes := &shareNodes{members: map[string]bool{}}
	cfg := sharegroup.DefaultConfig()
	cfg.ResetEarliest = true
	cfg.AdmitFetchers = true
	sc, err := sharegroup.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}
	advance := func(d time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(d)
	}
	f := newCore(t, func(c *request.Config) { c.Shares, c.ShareCluster, c.Now = sc, nodes, clock })
	produceKeyed(t, f, 0, 4, 4)
	ctx := ctxT(t)
	fetch := func(member string) error {
		_, err := f.core.ShareFetch(ctx, &request.ShareFetchRequest{Group: "g", MemberID: member, MaxRecords: 1,
			Partitions: []request.SharePartition{{Topic: "t", Partition: 0}}})
		return err
	}
	asked := func() int {
		nodes.mu.Lock()
		defer nodes.mu.Unlock()
		return len(nodes.asked)
	}
	for i := range 3 {
		if err := fetch("stranger"); !errors.Is(err, sharegroup.ErrUnknownMember) {
			t.Fatalf("fetch %d of a member no node has: %v, want UNKNOWN_MEMBER_ID", i, err)
		}
	}
	if n := asked(); n != 1 {
		t.Fatalf("the other nodes were asked %d times about one unknown member; want once", n)
	}
	// Another node has it now: still refused until the mark runs out,
	// then asked again and served.
	nodes.mu.Lock()
	nodes.members["g/stranger"] = true
	nodes.mu.Unlock()
	advance(500 * time.Millisecond)
	if err := fetch("stranger"); !errors.Is(err, sharegroup.ErrUnknownMember) || asked() != 1 {
		t.Fatalf("within the mark: %v after %d questions; want UNKNOWN_MEMBER_ID, not asked", err, asked())
	}
	advance(500 * time.Millisecond)
	if err := fetch("stranger"); err != nil || asked() != 2 {
		t.Fatalf("after the mark: %v after %d questions; want served, asked again", err, asked())
	}

	// A member marked unknown that joins here is served at once.
	if err := fetch("joiner"); !errors.Is(err, sharegroup.ErrUnknownMember) {
		t.Fatalf("a member no node has: %v", err)
	}
	if _, err := f.core.ShareGroupHeartbeat(ctx, &request.ShareHeartbeat{Group: "g", MemberID: "joiner", Topics: []string{"t"}}); err != nil {
		t.Fatal(err)
	}
	if err := fetch("joiner"); err != nil {
		t.Fatalf("a member that joined here after being refused: %v", err)
	}
}

// staleNodes answers the first question about a member no, but only
// once told to (asked says it is waiting), and every later one yes: a
// "no" given before the member joined elsewhere that arrives after
// another fetch of it was vouched for.
type staleNodes struct {
	shareNodes
	asked   chan struct{}
	release chan struct{}
	once    sync.Once
}

func (n *staleNodes) ShareMember(ctx context.Context, group, id string) (bool, error) {
	first := false
	n.once.Do(func() { first = true })
	if !first {
		return true, nil
	}
	close(n.asked)
	select {
	case <-n.release:
		return false, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// TestCoreShareStaleNoAfterVouch: a "no" about a member that arrives
// after another node vouched for it meanwhile neither releases what the
// member acquired under the vouch nor marks it unknown: its fetches go
// on being served.
func TestCoreShareStaleNoAfterVouch(t *testing.T) {
	t.Parallel()
	nodes := &staleNodes{asked: make(chan struct{}), release: make(chan struct{})}
	cfg := sharegroup.DefaultConfig()
	cfg.ResetEarliest = true
	cfg.AdmitFetchers = true
	sc, err := sharegroup.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f := newCore(t, func(c *request.Config) { c.Shares, c.ShareCluster = sc, nodes })
	produceKeyed(t, f, 0, 4, 4)
	ctx := ctxT(t)
	fetch := func() ([]request.ShareFetchResult, error) {
		return f.core.ShareFetch(ctx, &request.ShareFetchRequest{Group: "g", MemberID: "m", MaxRecords: 1,
			Partitions: []request.SharePartition{{Topic: "t", Partition: 0}}})
	}
	type result struct {
		out []request.ShareFetchResult
		err error
	}
	first := make(chan result, 1)
	go func() {
		out, err := fetch()
		first <- result{out, err}
	}()
	select {
	case <-nodes.asked:
	case <-ctx.Done():
		t.Fatal("the first fetch never asked the other nodes")
	}
	// The member joined elsewhere meanwhile: its next fetch is vouched
	// for and acquires offset 0.
	out, err := fetch()
	if err != nil || len(out[0].Acquired) != 1 || out[0].Acquired[0].First != 0 {
		t.Fatalf("the vouched-for fetch: %+v, %v; want offset 0 acquired", out, err)
	}
	close(nodes.release)
	var r result
	select {
	case r = <-first:
	case <-ctx.Done():
		t.Fatal("the first fetch never returned")
	}
	if r.err != nil {
		t.Fatalf("the fetch whose no came after the vouch: %v; want served (the member is known by then)", r.err)
	}
	// Offset 0 is still the member's: not released and handed out again.
	out, err = fetch()
	if err != nil {
		t.Fatalf("a fetch after the stale no: %v; want served", err)
	}
	for _, a := range append(r.out[0].Acquired, out[0].Acquired...) {
		if a.First == 0 {
			t.Fatalf("offset 0 delivered again (%+v): the stale no released what the member held", a)
		}
	}
}

// barrierNodes vouch for every member; once holding, each question
// waits until another is asked at the same time.
type barrierNodes struct {
	shareNodes
	mu      sync.Mutex
	holding bool
	waiting int
	met     chan struct{}
}

func (n *barrierNodes) ShareMember(ctx context.Context, group, id string) (bool, error) {
	n.mu.Lock()
	if !n.holding {
		n.mu.Unlock()
		return true, nil
	}
	if n.waiting++; n.waiting == 2 {
		close(n.met)
	}
	n.mu.Unlock()
	select {
	case <-n.met:
		return true, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// TestCoreShareExpireAsksAtOnce: the members whose confirmation ran out
// are asked about at once, not one after another, so that one slow
// answer (a fenced node that is down answers only when its connection
// fails) does not hold up the others, nor the next round of session
// expiry.
func TestCoreShareExpireAsksAtOnce(t *testing.T) {
	t.Parallel()
	nodes := &barrierNodes{met: make(chan struct{})}
	cfg := sharegroup.DefaultConfig()
	cfg.ResetEarliest = true
	cfg.AdmitFetchers = true
	sc, err := sharegroup.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}
	f := newCore(t, func(c *request.Config) { c.Shares, c.ShareCluster, c.Now = sc, nodes, clock })
	produceKeyed(t, f, 0, 4, 4)
	ctx := ctxT(t)
	for _, m := range []string{"a", "b"} {
		if _, err := f.core.ShareFetch(ctx, &request.ShareFetchRequest{Group: "g", MemberID: m, MaxRecords: 1,
			Partitions: []request.SharePartition{{Topic: "t", Partition: 0}}}); err != nil {
			t.Fatalf("fetch of %s, vouched for: %v", m, err)
		}
	}
	mu.Lock()
	now = now.Add(10 * time.Second)
	mu.Unlock()
	nodes.mu.Lock()
	nodes.holding = true
	nodes.mu.Unlock()
	// Asked one after another, the first question would wait out this
	// context for the second.
	expireCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	f.core.ShareExpire(expireCtx)
	for _, m := range []string{"a", "b"} {
		if !sc.Known(clock(), "g", m) {
			t.Errorf("member %s not confirmed again by ShareExpire", m)
		}
	}
}
