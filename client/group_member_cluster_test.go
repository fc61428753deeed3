package client_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/client"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/testcluster"
)

// ownership logs every member's own view of what it owns, in the order
// the members saw it (one lock), to check that no two members ever own
// one partition.
type ownership struct {
	t      *testing.T
	mu     sync.Mutex
	owners map[client.TopicPartition]string
	events int
	// order is, per partition, the members it was given to, in order.
	order map[client.TopicPartition][]string
	// tokens are, per partition and member, the fencing tokens of the
	// records polled.
	tokens map[client.TopicPartition]map[string][]client.FencingToken
}

// polled notes the fencing tokens of the records member polled.
func (o *ownership) polled(member string, recs []*client.Record) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.tokens == nil {
		o.tokens = map[client.TopicPartition]map[string][]client.FencingToken{}
	}
	for _, r := range recs {
		tp := client.TopicPartition{Topic: r.Topic, Partition: r.Partition}
		if o.tokens[tp] == nil {
			o.tokens[tp] = map[string][]client.FencingToken{}
		}
		o.tokens[tp][member] = append(o.tokens[tp][member], r.FencingToken())
	}
}

// checkFencing fails unless, for every partition, the fencing tokens of
// each member's records grow, no two members were given one epoch, and
// the members ordered by their epochs were given the partition in that
// order: so every token of an owner is above every token of the owners
// before it. It returns how many partitions moved (were read by two
// owners or more).
func (o *ownership) checkFencing() int {
	o.t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	moved := 0
	for tp, byMember := range o.tokens {
		type tenure struct {
			member string
			epoch  int32
		}
		var tenures []tenure
		seen := map[int32]string{}
		for m, toks := range byMember {
			for i, tok := range toks {
				if tok.Epoch <= 0 {
					o.t.Fatalf("%v: %s polled offset %d with fencing epoch %d", tp, m, tok.Offset, tok.Epoch)
				}
				if i > 0 && toks[i-1].Compare(tok) >= 0 {
					o.t.Fatalf("%v: %s polled fencing token %+v after %+v", tp, m, tok, toks[i-1])
				}
				if other, ok := seen[tok.Epoch]; ok && other != m {
					o.t.Fatalf("%v: %s and %s were both given it at epoch %d", tp, other, m, tok.Epoch)
				}
				if _, ok := seen[tok.Epoch]; !ok {
					seen[tok.Epoch] = m
					tenures = append(tenures, tenure{m, tok.Epoch})
				}
			}
		}
		slices.SortFunc(tenures, func(a, b tenure) int { return int(a.epoch - b.epoch) })
		// The owners by epoch: a subsequence of the owners in the order
		// the group gave them the partition (an owner that polled
		// nothing of it has no tokens).
		order, i := o.order[tp], 0
		for _, te := range tenures {
			for i < len(order) && order[i] != te.member {
				i++
			}
			if i == len(order) {
				o.t.Fatalf("%v: owners by fencing epoch %+v, but given to %v in that order", tp, tenures, o.order[tp])
			}
			i++
		}
		if len(tenures) > 1 {
			moved++
		}
		o.t.Logf("%v: owners by fencing epoch %+v, given to %v", tp, tenures, o.order[tp])
	}
	return moved
}

func (o *ownership) assigned(member string, ps []client.TopicPartition) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events++
	for _, tp := range ps {
		if prev, ok := o.owners[tp]; ok && prev != member {
			o.t.Errorf("%v assigned to %s while %s owns it", tp, member, prev)
		}
		o.owners[tp] = member
		if o.order == nil {
			o.order = map[client.TopicPartition][]string{}
		}
		o.order[tp] = append(o.order[tp], member)
	}
}

func (o *ownership) revoked(member string, ps []client.TopicPartition) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events++
	for _, tp := range ps {
		if o.owners[tp] == member {
			delete(o.owners, tp)
		}
	}
}

// gone is a member that died: it owns nothing from now on.
func (o *ownership) gone(member string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for tp, m := range o.owners {
		if m == member {
			delete(o.owners, tp)
		}
	}
}

type testMember struct {
	name string
	cl   *client.Client
	g    *client.GroupConsumer
	mu   sync.Mutex
	seen map[string]bool // values polled
	err  error           // Poll's last error
	done chan struct{}
}

func startMember(t *testing.T, c *testcluster.Cluster, own *ownership, name string) *testMember {
	t.Helper()
	return startMemberOf(t, c, own, name, "seven", "")
}

// startMemberOf starts member name of group g reading topic, static when
// instance is not "".
func startMemberOf(t *testing.T, c *testcluster.Cluster, own *ownership, name, topic, instance string) *testMember {
	t.Helper()
	m := &testMember{name: name, cl: clusterClient(t, c, nil), seen: map[string]bool{}, done: make(chan struct{})}
	g, err := m.cl.NewGroupConsumer(client.GroupConfig{Group: "g", Topics: []string{topic}, Assignor: "range",
		Reset: client.AtStart(), AutoCommitInterval: 200 * time.Millisecond, InstanceID: instance,
		OnAssigned: func(ps []client.TopicPartition) { own.assigned(name, ps) },
		OnRevoked:  func(ps []client.TopicPartition) { own.revoked(name, ps) }})
	if err != nil {
		t.Fatal(err)
	}
	m.g = g
	go func() {
		defer close(m.done)
		for {
			recs, err := g.Poll(context.Background())
			m.mu.Lock()
			m.err = err
			m.mu.Unlock()
			if errors.Is(err, client.ErrClosed) || client.ErrorCode(err) == quirev1.ErrorCode_FENCED_INSTANCE_ID {
				return // for good
			}
			if err != nil {
				t.Logf("member %s poll: %v", name, err)
			}
			own.polled(name, recs)
			m.mu.Lock()
			for _, r := range recs {
				m.seen[string(r.Value)] = true
			}
			m.mu.Unlock()
		}
	}()
	return m
}

func waitSplit(ctx context.Context, t *testing.T, c *testcluster.Cluster, want []int, members ...*testMember) {
	t.Helper()
	c.Eventually(ctx, fmt.Sprintf("members own %v", want), func() error {
		var got []int
		for _, m := range members {
			got = append(got, len(m.g.Assignment()))
		}
		// Range orders members by their (random) ids: compare the counts.
		slices.Sort(got)
		slices.Reverse(got)
		if !slices.Equal(got, want) {
			return fmt.Errorf("members own %v", got)
		}
		return nil
	})
}

// TestClusterGroupConsumerSplits: group consumers of the Go client
// joining a 7-partition topic own 7; 4 3; 3 2 2 (range); a member killed
// without leaving loses its partitions to the others after the 1s session
// timeout; one closing leaves at once; no partition ever has two owners in
// the members' own views; every record produced is polled by some
// member; committed offsets reach the end of every partition; the
// records' fencing tokens grow per partition across every move, the
// killed member's included.
func TestClusterGroupConsumerSplits(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 3, testcluster.Config(func(_ int32, cfg *broker.Config) {
		cfg.GroupConsumerSessionTimeoutMs = 1000
		cfg.GroupConsumerHeartbeatIntervalMs = 100
	}))
	ctx := clusterCtx(t, 3*time.Minute)
	c.WaitController(ctx)
	// Each round writes five records to every partition (Record.Partition
	// is read only by ManualPartitioner: with the default partitioner a
	// round's 35 keyless records went to one partition, and when that one
	// never moved, no partition was read by two owners).
	producer := clusterClient(t, c, nil, client.RecordPartitioner(client.ManualPartitioner()))
	if _, err := producer.CreateTopic(ctx, client.TopicSpec{Name: "seven", Partitions: 7, ReplicationFactor: 3}); err != nil {
		t.Fatal(err)
	}
	c.WaitImage(ctx, func(img *metadata.Image) bool {
		_, ok := img.Topic("seven")
		return ok && img.MetadataVersion() >= metadata.MetadataVersionProducerIDs
	})
	produced := 0
	produceAll := func() {
		t.Helper()
		var rs []*client.Record
		for p := int32(0); p < 7; p++ {
			for range 5 {
				rs = append(rs, &client.Record{Topic: "seven", Partition: p, Value: []byte(fmt.Sprint("v", produced))})
				produced++
			}
		}
		if err := producer.ProduceSync(ctx, rs...); err != nil {
			t.Fatal(err)
		}
	}
	own := &ownership{t: t, owners: map[client.TopicPartition]string{}}
	// waitPolled waits until members have polled every record produced
	// so far, so that each membership change below comes after the
	// owners before it read their partitions: every partition that moves
	// is then read by two owners.
	waitPolled := func(members ...*testMember) {
		t.Helper()
		c.Eventually(ctx, "every record polled", func() error {
			var missing []int
			for i := range produced {
				v := fmt.Sprint("v", i)
				found := false
				for _, m := range members {
					m.mu.Lock()
					found = found || m.seen[v]
					m.mu.Unlock()
				}
				if !found {
					missing = append(missing, i)
				}
			}
			if len(missing) > 0 {
				return fmt.Errorf("%d of %d records not polled: %v", len(missing), produced, missing)
			}
			return nil
		})
	}

	a := startMember(t, c, own, "a")
	waitSplit(ctx, t, c, []int{7}, a)
	produceAll()
	waitPolled(a)
	b := startMember(t, c, own, "b")
	waitSplit(ctx, t, c, []int{4, 3}, a, b)
	produceAll()
	waitPolled(a, b)
	k := startMember(t, c, own, "k")
	waitSplit(ctx, t, c, []int{3, 2, 2}, a, b, k)
	produceAll()
	waitPolled(a, b, k)

	// k dies without leaving: a and b get its partitions back once its
	// session times out.
	killed := time.Now()
	k.cl.Close()
	<-k.done
	own.gone("k")
	waitSplit(ctx, t, c, []int{4, 3}, a, b)
	if d := time.Since(killed); d < 900*time.Millisecond {
		t.Fatalf("k's partitions moved after %v, before its session timed out", d)
	}
	produceAll()

	// Every record is polled by some member (at least once).
	waitPolled(a, b, k)
	// b leaves cleanly: a owns everything at once (no session timeout).
	if err := b.g.Close(ctx); err != nil {
		t.Fatalf("close b: %v", err)
	}
	waitSplit(ctx, t, c, []int{7}, a)
	c.Eventually(ctx, "offsets committed to the end", func() error {
		offs, err := producer.FetchOffsets(ctx, "g")
		if err != nil {
			return err
		}
		total := int64(0)
		for _, o := range offs {
			total += o.Offset
		}
		if total != int64(produced) {
			return fmt.Errorf("committed %d of %d: %+v", total, produced, offs)
		}
		return nil
	})
	if err := a.g.Close(ctx); err != nil {
		t.Fatalf("close a: %v", err)
	}
	if own.events < 6 {
		t.Fatalf("%d assignment changes seen", own.events)
	}
	if moved := own.checkFencing(); moved == 0 {
		t.Fatal("no partition was read by more than one owner")
	}
}

// TestClusterGroupConsumerStatic: a static member (GroupConfig.InstanceID)
// that closes and whose instance starts again within the session timeout
// is back in its place with no rebalance: the new process owns the old
// one's partitions, under a new member id, and the other member's epoch
// and partitions have not moved. A third process of the instance
// replaces the second while it runs: the second gives its partitions up
// and its Poll fails with FENCED_INSTANCE_ID.
func TestClusterGroupConsumerStatic(t *testing.T) {
	t.Parallel()
	// The instance comes back well within a 30 s session even on a
	// loaded machine; the test never waits for a session to run out.
	c := testcluster.New(t, 1, testcluster.Config(func(_ int32, cfg *broker.Config) {
		cfg.GroupConsumerSessionTimeoutMs = 30000
		cfg.GroupConsumerHeartbeatIntervalMs = 100
	}))
	ctx := clusterCtx(t, 3*time.Minute)
	c.WaitController(ctx)
	admin := clusterClient(t, c, nil)
	if _, err := admin.CreateTopic(ctx, client.TopicSpec{Name: "four", Partitions: 4, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	c.WaitImage(ctx, func(img *metadata.Image) bool {
		_, ok := img.Topic("four")
		return ok && img.MetadataVersion() >= metadata.MetadataVersionStaticMembers
	})
	own := &ownership{t: t, owners: map[client.TopicPartition]string{}}
	a1 := startMemberOf(t, c, own, "a1", "four", "pod-a")
	b := startMemberOf(t, c, own, "b", "four", "")
	waitSplit(ctx, t, c, []int{2, 2}, a1, b)
	placeA, placeB, epochB := a1.g.Assignment(), b.g.Assignment(), b.g.Epoch()

	if err := a1.g.Close(ctx); err != nil {
		t.Fatal(err)
	}
	own.gone("a1")
	a2 := startMemberOf(t, c, own, "a2", "four", "pod-a")
	c.Eventually(ctx, "a2 in a1's place", func() error {
		if got := a2.g.Assignment(); !slices.Equal(got, placeA) {
			return fmt.Errorf("a2 owns %v, a1 owned %v", got, placeA)
		}
		return nil
	})
	if a2.g.MemberID() == a1.g.MemberID() {
		t.Fatalf("a2 joined as a1's member id %s", a1.g.MemberID())
	}
	if got, epoch := b.g.Assignment(), b.g.Epoch(); !slices.Equal(got, placeB) || epoch != epochB {
		t.Fatalf("b after a's restart: %v at epoch %d; before: %v at epoch %d", got, epoch, placeB, epochB)
	}

	// a2 still owns its partitions when a3 takes them, until its next
	// heartbeat: two live processes of one instance overlap, so a3 is
	// not checked against the others' ownership.
	a3 := startMemberOf(t, c, &ownership{t: t, owners: map[client.TopicPartition]string{}}, "a3", "four", "pod-a")
	c.Eventually(ctx, "a2 fenced by a3", func() error {
		a2.mu.Lock()
		err := a2.err
		a2.mu.Unlock()
		if client.ErrorCode(err) != quirev1.ErrorCode_FENCED_INSTANCE_ID || len(a2.g.Assignment()) != 0 {
			return fmt.Errorf("a2: poll error %v, owns %v", err, a2.g.Assignment())
		}
		if got := a3.g.Assignment(); !slices.Equal(got, placeA) {
			return fmt.Errorf("a3 owns %v", got)
		}
		return nil
	})
	if got, epoch := b.g.Assignment(), b.g.Epoch(); !slices.Equal(got, placeB) || epoch != epochB {
		t.Fatalf("b after a3 replaced a2: %v at epoch %d; before: %v at epoch %d", got, epoch, placeB, epochB)
	}
	<-a2.done
	for _, m := range []*testMember{a3, b} {
		if err := m.g.Close(ctx); err != nil {
			t.Fatalf("close %s: %v", m.name, err)
		}
		<-m.done
	}
}
