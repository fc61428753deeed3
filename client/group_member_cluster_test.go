package client_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

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
	done chan struct{}
}

func startMember(t *testing.T, c *testcluster.Cluster, own *ownership, name string) *testMember {
	t.Helper()
	m := &testMember{name: name, cl: clusterClient(t, c, nil), seen: map[string]bool{}, done: make(chan struct{})}
	g, err := m.cl.NewGroupConsumer(client.GroupConfig{Group: "g", Topics: []string{"seven"}, Assignor: "range",
		Reset: client.AtStart(), AutoCommitInterval: 200 * time.Millisecond,
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
			if errors.Is(err, client.ErrClosed) {
				return
			}
			if err != nil {
				t.Logf("member %s poll: %v", name, err)
			}
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
// member; committed offsets reach the end of every partition.
func TestClusterGroupConsumerSplits(t *testing.T) {
	c := testcluster.New(t, 3, testcluster.Config(func(_ int32, cfg *broker.Config) {
		cfg.GroupConsumerSessionTimeoutMs = 1000
		cfg.GroupConsumerHeartbeatIntervalMs = 100
	}))
	ctx := clusterCtx(t, 90*time.Second)
	c.WaitController(ctx)
	producer := clusterClient(t, c, nil)
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

	a := startMember(t, c, own, "a")
	waitSplit(ctx, t, c, []int{7}, a)
	produceAll()
	b := startMember(t, c, own, "b")
	waitSplit(ctx, t, c, []int{4, 3}, a, b)
	produceAll()
	k := startMember(t, c, own, "k")
	waitSplit(ctx, t, c, []int{3, 2, 2}, a, b, k)
	produceAll()

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
	c.Eventually(ctx, "every record polled", func() error {
		var missing []int
		for i := range produced {
			v := fmt.Sprint("v", i)
			found := false
			for _, m := range []*testMember{a, b, k} {
				m.mu.Lock()
				found = found || m.seen[v]
				m.mu.Unlock()
			}
			if !found {
				missing = append(missing, i)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("%d of %d records not polled: %v; a owns %v, b owns %v", len(missing), produced, missing,
				a.g.Assignment(), b.g.Assignment())
		}
		return nil
	})
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
}
