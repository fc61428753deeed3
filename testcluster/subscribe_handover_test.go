package testcluster_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/testcluster"
)

// Subscribe's handovers: a cluster whose coordinator has a heartbeat
// interval (60 s) and a session timeout (5 min) longer than any wait of
// these tests (30 s), so that what they wait for can only come from the
// coordinator's decisions reaching the streams at once, or from a
// stream leaving at once, never from the next heartbeat or a session
// expiring.
func handoverCluster(t *testing.T) (*testcluster.Cluster, context.Context, int32) {
	c := testcluster.New(t, 3, testcluster.Config(func(_ int32, cfg *broker.Config) {
		cfg.GroupConsumerSessionTimeoutMs = 300_000
		cfg.GroupConsumerHeartbeatIntervalMs = 60_000
	}))
	ctx := subCtx(t)
	ctl := c.WaitController(ctx)
	return c, ctx, ctl
}

// within is a wait shorter than the heartbeat interval (60 s) and the
// session timeout, but at least the 30 s a poll is given.
func within(ctx context.Context, t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func (s *subStream) member() (string, int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.memberID, s.epoch
}

func (s *subStream) total() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.totalLocked()
}

func groupEpoch(ctx context.Context, t *testing.T, c *testcluster.Cluster, via int32, g string) int32 {
	t.Helper()
	d, err := groups(c, via).DescribeGroup(ctx, &quirev1.DescribeGroupRequest{Group: g})
	if err != nil {
		t.Fatal(err)
	}
	return d.GroupEpoch
}

// TestClusterSubscribeBrokenLeaves: a stream cancelled by its client (as
// a crashed process's connection is reset) gives its partitions to the
// group's other member at once, not after the session timeout (5 min);
// a static member's stream keeps its place: its instance's next stream
// takes its partitions back with no rebalance.
func TestClusterSubscribeBrokenLeaves(t *testing.T) {
	t.Parallel()
	c, ctx, ctl := handoverCluster(t)
	c.WaitMetadataVersion(ctx, metadata.MetadataVersionStaticMembers)
	createTopic(t, c, ctl, "cut", 4, 3)
	waitTopic(ctx, c, "cut")
	start := func(instance string) *quirev1.SubscribeStart {
		return &quirev1.SubscribeStart{Group: "cg", Subscription: &quirev1.GroupSubscription{Topics: []string{"cut"}},
			Assignor: "range", InstanceId: instance}
	}
	ids := c.IDs()
	a := subscribe(t, c, ids[0], "A", start(""), true)
	a.wait(ctx, "A owns 4", func() bool { return len(a.owned) == 4 })
	b := subscribe(t, c, ids[1], "B", start(""), true)
	b.wait(within(ctx, t), "B owns 2", func() bool { return len(b.owned) == 2 })
	a.wait(within(ctx, t), "A owns 2", func() bool { return len(a.owned) == 2 })

	aID, _ := a.member()
	a.cancel()
	<-a.done
	b.wait(within(ctx, t), "B owns A's partitions too, A's stream cancelled", func() bool { return len(b.owned) == 4 })
	d, err := groups(c, ctl).DescribeGroup(ctx, &quirev1.DescribeGroupRequest{Group: "cg"})
	if err != nil || len(d.Members) != 1 || d.Members[0].MemberId == aID {
		t.Fatalf("describe after A's stream was cancelled: %v, %v; want B alone", d, err)
	}
	checkViews(t, a, b)

	// A static member's broken stream keeps its place.
	s := subscribe(t, c, ids[2], "S", start("pod-s"), true)
	s.wait(within(ctx, t), "S owns 2", func() bool { return len(s.owned) == 2 })
	b.wait(within(ctx, t), "B owns 2", func() bool { return len(b.owned) == 2 })
	placeS, placeB, before := s.ownedNow(), b.ownedNow(), groupEpoch(ctx, t, c, ctl, "cg")
	s.cancel()
	<-s.done
	s2 := subscribe(t, c, ids[0], "S2", start("pod-s"), true)
	s2.wait(within(ctx, t), "S2 owns S's partitions", func() bool { return slices.Equal(s2.ownedLocked(), placeS) })
	if got, now := b.ownedNow(), groupEpoch(ctx, t, c, ctl, "cg"); !slices.Equal(got, placeB) || now != before {
		t.Fatalf("after S's stream broke and S2 took its place: B owns %v at group epoch %d; before: %v at %d", got, now, placeB, before)
	}
	checkViews(t, a, b, s, s2)
}

// TestClusterSubscribeTakeover: a restarted client takes its member over
// with the member id and epoch its last stream was told: on the same
// node the old stream ends FENCED_MEMBER_EPOCH, committing what it
// acknowledged; the new one has the member's partitions with no
// rebalance (the other member keeps its own, the group epoch stays) and
// reads on from the old one's acknowledgements. A member that left is
// joined again under its id.
func TestClusterSubscribeTakeover(t *testing.T) {
	t.Parallel()
	c, ctx, ctl := handoverCluster(t)
	createTopic(t, c, ctl, "take", 4, 3)
	waitTopic(ctx, c, "take")
	start := func(member string, epoch int32) *quirev1.SubscribeStart {
		return &quirev1.SubscribeStart{Group: "tg", Subscription: &quirev1.GroupSubscription{Topics: []string{"take"}},
			Assignor: "range", Batches: true, MemberId: member, MemberEpoch: epoch}
	}
	ids := c.IDs()
	b := subscribe(t, c, ids[1], "B", start("", 0), true)
	b.wait(within(ctx, t), "B owns 4", func() bool { return len(b.owned) == 4 })
	a := subscribe(t, c, ids[0], "A", start("", 0), false)
	a.wait(within(ctx, t), "A owns 2", func() bool { return len(a.owned) == 2 })
	b.wait(within(ctx, t), "B owns 2", func() bool { return len(b.owned) == 2 })
	placeA, placeB, before := a.ownedNow(), b.ownedNow(), groupEpoch(ctx, t, c, ctl, "tg")
	produceN(ctx, t, c, "take", 4, 10, "r")
	// A acknowledges the first 4 records of each of its partitions, and
	// its client "restarts" without closing the stream.
	for _, p := range placeA {
		a.wait(ctx, "A reads "+p, func() bool { return len(a.records[p]) == 10 })
		a.ackBelow("take", partOf(t, p), 4)
	}
	for _, p := range placeA {
		c.Eventually(ctx, "A's acks of "+p+" committed", func() error {
			if got, err := committedAt(ctx, c, ctl, "tg", "take", partOf(t, p)); err != nil || got != 4 {
				return fmt.Errorf("committed %d (%v)", got, err)
			}
			return nil
		})
	}
	id, epoch := a.member()
	a2 := subscribe(t, c, ids[0], "A2", start(id, epoch), true)
	select {
	case <-a.done:
	case <-within(ctx, t).Done():
		t.Fatal("A's stream did not end once A2 took its member over")
	}
	if code := errCode(a.err); code != quirev1.ErrorCode_FENCED_MEMBER_EPOCH {
		t.Fatalf("A's stream ended with %v (%v), want FENCED_MEMBER_EPOCH", a.err, code)
	}
	a2.wait(within(ctx, t), "A2 owns A's partitions", func() bool { return slices.Equal(a2.ownedLocked(), placeA) })
	if got, _ := a2.member(); got != id {
		t.Fatalf("A2 is member %s, want A's %s", got, id)
	}
	for _, p := range placeA {
		a2.wait(ctx, "A2 reads "+p, func() bool { return len(a2.records[p]) == 6 })
		if got := a2.offsets(p); !slices.Equal(got, span(4, 10)) {
			t.Fatalf("A2 read %s offsets %v, want 4..9 (from A's acknowledgements on)", p, got)
		}
	}
	if got, now := b.ownedNow(), groupEpoch(ctx, t, c, ctl, "tg"); !slices.Equal(got, placeB) || now != before {
		t.Fatalf("after A2 took A's member over: B owns %v at group epoch %d; before: %v at %d", got, now, placeB, before)
	}
	// A and A2 are one member, one client: only B is another.
	checkViews(t, a, b)
	checkViews(t, a2, b)

	// A2 goes (and leaves); a stream naming its member and epoch joins
	// again as that member, through another node.
	id2, epoch2 := a2.member()
	if err := a2.closeSend(ctx); !errors.Is(err, io.EOF) {
		t.Fatalf("A2's close: %v", err)
	}
	a3 := subscribe(t, c, ids[2], "A3", start(id2, epoch2), true)
	a3.wait(within(ctx, t), "A3 owns 2", func() bool { return len(a3.owned) == 2 })
	if got, _ := a3.member(); got != id {
		t.Fatalf("A3 is member %s, want %s", got, id)
	}
	checkViews(t, a2, a3, b)
}

// TestClusterSubscribeHandover: members join a group while records flow
// (one, then two more, through different nodes), each rebalance handing
// partitions over: every record produced is read by exactly one member,
// no two members own a partition at the same moment (from their
// timestamped views), and each new member has records well within the
// heartbeat interval (60 s): the coordinator's decisions are acted on
// as they are made.
func TestClusterSubscribeHandover(t *testing.T) {
	t.Parallel()
	c, ctx, ctl := handoverCluster(t)
	const topic, parts = "flow", 6
	createTopic(t, c, ctl, topic, parts, 3)
	waitTopic(ctx, c, topic)

	// The producer: rounds of 10 records per partition until stopped.
	var (
		mu       sync.Mutex
		produced = map[int32]int64{}
		prodErr  error
	)
	stop := make(chan struct{})
	prodDone := make(chan struct{})
	go func() {
		defer close(prodDone)
		for round := 0; ; round++ {
			select {
			case <-stop:
				return
			default:
			}
			for p := range int32(parts) {
				req := &quirev1.ProduceRecordsRequest{Topic: topic, OptionalAcks: &quirev1.ProduceRecordsRequest_Acks{Acks: -1}, TimeoutMs: 5000}
				for i := range 10 {
					req.Records = append(req.Records, &quirev1.ProduceRecord{ValueData: &quirev1.ProduceRecord_Value{Value: fmt.Sprintf("%d-%d-%d", round, p, i)},
						OptionalPartition: &quirev1.ProduceRecord_Partition{Partition: p}})
				}
				resp, err := quirev1.NewProducerClient(c.Conn(c.IDs()[int(p)%3])).ProduceRecords(ctx, req)
				if err == nil && resp.Results[0].Error != nil {
					err = errors.New(resp.Results[0].Error.Message)
				}
				mu.Lock()
				if err != nil {
					prodErr = fmt.Errorf("produce to %s-%d: %w", topic, p, err)
				} else {
					produced[p] += 10
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}
	}()
	stopped := false
	stopProducing := func() {
		if !stopped {
			close(stop)
			stopped = true
		}
		<-prodDone
	}
	t.Cleanup(stopProducing)

	start := &quirev1.SubscribeStart{Group: "hg", Subscription: &quirev1.GroupSubscription{Topics: []string{topic}},
		Batches: true, MaxOutstandingRecords: 50, CommitIntervalMs: 100}
	ids := c.IDs()
	// Each client acknowledges what it got every 20 ms, as one working
	// on its records would (and a partition's at once when it is
	// revoking): there are records in flight for a handover to wait for.
	lagging := func(name string, via int32) *subStream {
		t.Helper()
		s := subscribe(t, c, via, name, start, false)
		s.mu.Lock()
		s.autoAck, s.lagAck = true, true
		s.mu.Unlock()
		go s.ackLagging(20 * time.Millisecond)
		return s
	}
	a := lagging("A", ids[0])
	a.wait(within(ctx, t), "A reads", func() bool { return len(a.owned) == parts && a.totalLocked() > 200 })
	b := lagging("B", ids[1])
	b.wait(within(ctx, t), "B reads, well before a heartbeat interval", func() bool { return len(b.owned) > 0 && b.totalLocked() > 0 })
	c3 := lagging("C", ids[2])
	c3.wait(within(ctx, t), "C reads, well before a heartbeat interval", func() bool { return len(c3.owned) > 0 && c3.totalLocked() > 0 })
	for _, s := range []*subStream{a, b, c3} {
		s.wait(within(ctx, t), s.name+" owns 2", func() bool { return len(s.owned) == 2 })
	}
	// Let the three read a while, then stop and read what is left.
	b.wait(ctx, "B reads on", func() bool { return b.totalLocked() > 100 })
	stopProducing()
	mu.Lock()
	if prodErr != nil {
		mu.Unlock()
		t.Fatal(prodErr)
	}
	want := maps.Clone(produced)
	mu.Unlock()
	streams := []*subStream{a, b, c3}
	c.Eventually(ctx, "every record produced read", func() error {
		n := 0
		for _, s := range streams {
			n += s.total()
		}
		total := int64(0)
		for _, v := range want {
			total += v
		}
		if int64(n) < total {
			return fmt.Errorf("%d of %d records read", n, total)
		}
		return nil
	})
	// Exactly once: each partition's offsets, over the three members,
	// are 0..produced-1, each read by one member.
	for p := range int32(parts) {
		name := tpName(topic, p)
		seen := map[int64]string{}
		for _, s := range streams {
			for _, off := range s.offsets(name) {
				if by, dup := seen[off]; dup {
					t.Errorf("%s@%d read by %s and %s", name, off, by, s.name)
				}
				seen[off] = s.name
			}
		}
		if int64(len(seen)) != want[p] {
			t.Errorf("%s: %d distinct offsets read, %d produced", name, len(seen), want[p])
		}
		for off := range want[p] {
			if _, ok := seen[off]; !ok {
				t.Errorf("%s@%d never read", name, off)
				break
			}
		}
	}
	checkViews(t, streams...)
}

// ackLagging sends the acks lagAck kept, every period, until the stream
// ends.
func (s *subStream) ackLagging(period time.Duration) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-tick.C:
		}
		s.mu.Lock()
		if s.send == nil {
			s.mu.Unlock()
			return
		}
		for p, a := range s.unacked {
			s.send <- &quirev1.SubscribeRequest{Request: &quirev1.SubscribeRequest_Ack{Ack: &quirev1.SubscribeAck{Partitions: []*quirev1.AckedOffsets{a}}}}
			delete(s.unacked, p)
		}
		s.mu.Unlock()
	}
}
