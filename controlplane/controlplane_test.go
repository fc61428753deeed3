package controlplane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/quirelog/quire/internal/poll"
	"github.com/quirelog/quire/internal/testparallel"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/raftgrpc"
)

func TestMain(m *testing.M) {
	testparallel.Raise()
	goleak.VerifyTestMain(m,
		// hashicorp/raft drops the batches still queued for the FSM when
		// it shuts down, so the waiter of a command committed just before
		// a node stopped is never answered (raftApply has returned by then).
		goleak.IgnoreTopFunction("github.com/hashicorp/raft.(*deferError).Error"),
	)
}

// gnode is one cluster node as the broker wires it: one gRPC server
// carrying the raft transport and ControllerService, a metadata.Node, a
// Forwarder and the broker Lifecycle.
type gnode struct {
	id   int32
	addr string
	gs   *grpc.Server
	node *metadata.Node
	fwd  *Forwarder
	life *Lifecycle
	done chan struct{}
}

type gcluster struct {
	t     *testing.T
	nodes []*gnode
}

func newGCluster(t *testing.T, n int, mod func(*metadata.Config)) *gcluster {
	t.Helper()
	return newGClusterServing(t, n, mod)
}

// newGClusterServing is newGCluster with opts on every node's gRPC
// server.
func newGClusterServing(t *testing.T, n int, mod func(*metadata.Config), opts ...grpc.ServerOption) *gcluster {
	t.Helper()
	var lis []net.Listener
	var voters []metadata.Voter
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lis = append(lis, l)
		voters = append(voters, metadata.Voter{ID: int32(i + 1), Addr: l.Addr().String()})
	}
	c := &gcluster{t: t}
	for i := 0; i < n; i++ {
		id := int32(i + 1)
		addr := lis[i].Addr().String()
		tr := raftgrpc.New(raft.ServerAddress(addr), raftgrpc.WithTimeout(time.Second))
		cfg := metadata.DefaultConfig()
		cfg.NodeID, cfg.ClusterID, cfg.Dir = id, "grpc-cluster", t.TempDir()
		cfg.Voter, cfg.Voters, cfg.AdvertisedAddr = true, voters, addr
		cfg.Transport = tr
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: fmt.Sprintf("node%d", id), Level: hclog.Warn, Output: io.Discard})
		// See metadata's fastConfig: failovers the tests cause take a
		// second or two, the machine's load alone causes none.
		cfg.BrokerHeartbeatInterval = 200 * time.Millisecond
		cfg.BrokerSessionTimeout = 3 * time.Second
		cfg.RaftHeartbeatTimeout = time.Second
		cfg.RaftElectionTimeout = time.Second
		cfg.RaftLeaderLeaseTimeout = 500 * time.Millisecond
		cfg.RaftCommitTimeout = 5 * time.Millisecond
		if mod != nil {
			mod(&cfg)
		}
		gs := grpc.NewServer(opts...)
		tr.Register(gs)
		node, err := metadata.Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		NewService(node).Register(gs)
		g := &gnode{id: id, addr: addr, gs: gs, node: node, done: make(chan struct{})}
		go func(l net.Listener) {
			defer close(g.done)
			_ = gs.Serve(l)
		}(lis[i])
		g.fwd = NewForwarder(node, nil, 0)
		g.life = NewLifecycle(g.fwd, metadata.BrokerInfo{ID: id, Incarnation: fmt.Sprintf("inc%d", id), Addr: addr}, cfg.BrokerHeartbeatInterval, cfg.BrokerSessionTimeout, cfg.Logger)
		g.life.Start()
		c.nodes = append(c.nodes, g)
	}
	t.Cleanup(func() {
		for _, g := range c.nodes {
			c.kill(g)
		}
	})
	return c
}

// kill stops a node without a controlled shutdown, as kill -9 would.
func (c *gcluster) kill(g *gnode) {
	if g.node == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // no time for a controlled shutdown
	_ = g.life.Stop(ctx)
	g.gs.Stop()
	<-g.done
	if err := g.node.Shutdown(); err != nil {
		c.t.Errorf("shutdown node %d: %v", g.id, err)
	}
	_ = g.fwd.Close()
	g.node = nil
}

func (c *gcluster) live() []*gnode {
	var out []*gnode
	for _, g := range c.nodes {
		if g.node != nil {
			out = append(out, g)
		}
	}
	return out
}

func (c *gcluster) controller() *gnode {
	c.t.Helper()
	var ctl *gnode
	poll.True(c.t, "a controller", func() bool {
		for _, g := range c.live() {
			if g.node.IsController() && g.node.Image().ControllerID() == g.id {
				ctl = g
				return true
			}
		}
		return false
	})
	return ctl
}

func (c *gcluster) waitLive(ids ...int32) {
	c.t.Helper()
	poll.True(c.t, fmt.Sprintf("brokers %v unfenced", ids), func() bool {
		img := c.controller().node.Image()
		for _, id := range ids {
			if b, ok := img.Broker(id); !ok || b.Fenced {
				return false
			}
		}
		return true
	})
}

func (c *gcluster) follower() *gnode {
	ctl := c.controller()
	for _, g := range c.live() {
		if g != ctl {
			return g
		}
	}
	c.t.Fatal("no follower")
	return nil
}

func TestControllerGRPCForwarding(t *testing.T) {
	t.Parallel()
	c := newGCluster(t, 3, nil)
	c.waitLive(1, 2, 3)
	f := c.follower()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := f.fwd.CreateTopic(ctx, metadata.TopicSpec{Name: "orders", Partitions: 6, ReplicationFactor: 3, Configs: map[string]string{"retention.ms": "60000"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Partitions) != 6 || info.Configs["retention.ms"] != "60000" {
		t.Fatalf("created %+v", info)
	}
	poll.True(t, "topic on every node", func() bool {
		for _, g := range c.live() {
			got, ok := g.node.Image().Topic("orders")
			if !ok || !reflect.DeepEqual(got, info) {
				return false
			}
		}
		return true
	})
	// Sentinels survive the trip.
	if _, err := f.fwd.CreateTopic(ctx, metadata.TopicSpec{Name: "orders", Partitions: 1, ReplicationFactor: 1}); !errors.Is(err, metadata.ErrTopicExists) {
		t.Fatalf("duplicate create: %v", err)
	}
	if err := f.fwd.DeleteTopic(ctx, "nope", ""); !errors.Is(err, metadata.ErrUnknownTopic) {
		t.Fatalf("delete unknown: %v", err)
	}
	if err := f.fwd.CreatePartitions(ctx, "orders", 8); err != nil {
		t.Fatal(err)
	}
	if err := f.fwd.AlterConfigs(ctx, "orders", map[string]string{"segment.bytes": "4096"}, []string{"retention.ms"}); err != nil {
		t.Fatal(err)
	}
	p, _ := f.node.Image().Partition("orders", 0)
	poll.True(t, "partition 7 locally", func() bool {
		_, ok := f.node.Image().Partition("orders", 7)
		return ok
	})
	np, err := f.fwd.AlterPartition(ctx, "orders", 0, p.Leader, p.LeaderEpoch, p.PartitionEpoch, []int32{p.Leader})
	if err != nil || !reflect.DeepEqual(np.ISR, []int32{p.Leader}) {
		t.Fatalf("alter partition: %+v %v", np, err)
	}
	if _, err := f.fwd.AlterPartition(ctx, "orders", 0, p.Leader, p.LeaderEpoch, p.PartitionEpoch, p.Replicas); !errors.Is(err, metadata.ErrStaleEpoch) {
		t.Fatalf("stale alter partition: %v", err)
	}
	if _, err := f.fwd.Heartbeat(ctx, 1, "inc1", 1, 0); !errors.Is(err, metadata.ErrFencedBroker) {
		t.Fatalf("old-epoch heartbeat: %v", err)
	}
}

func TestControllerGRPCFailover(t *testing.T) {
	t.Parallel()
	testFailover(t, newGCluster(t, 3, nil))
}

// TestControllerGRPCFailoverDefaults measures failover with the default
// raft timings (the session timeout is kept short).
func TestControllerGRPCFailoverDefaults(t *testing.T) {
	t.Parallel()
	def := metadata.DefaultConfig()
	testFailover(t, newGCluster(t, 3, func(cfg *metadata.Config) {
		cfg.RaftHeartbeatTimeout = def.RaftHeartbeatTimeout
		cfg.RaftElectionTimeout = def.RaftElectionTimeout
		cfg.RaftLeaderLeaseTimeout = def.RaftLeaderLeaseTimeout
		cfg.RaftCommitTimeout = def.RaftCommitTimeout
	}))
}

func testFailover(t *testing.T, c *gcluster) {
	c.waitLive(1, 2, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	f := c.follower()
	if _, err := f.fwd.CreateTopic(ctx, metadata.TopicSpec{Name: "before", Partitions: 3, ReplicationFactor: 3}); err != nil {
		t.Fatal(err)
	}
	old := c.controller()
	var led []int32
	ti, _ := old.node.Image().Topic("before")
	for _, p := range ti.Partitions {
		if p.Leader == old.id {
			led = append(led, p.Partition)
		}
	}
	c.kill(old)
	start := time.Now()
	survivor := c.live()[0]
	if _, err := survivor.fwd.CreateTopic(ctx, metadata.TopicSpec{Name: "after", Partitions: 2, ReplicationFactor: 2}); err != nil {
		t.Fatalf("create after controller loss: %v", err)
	}
	t.Logf("controller failover (kill to created topic): %v", time.Since(start))
	// The killed broker is fenced after its session expires and its
	// partitions get new leaders.
	poll.True(t, "killed broker fenced with its partitions moved", func() bool {
		img := c.controller().node.Image()
		if b, _ := img.Broker(old.id); !b.Fenced {
			return false
		}
		for _, p := range led {
			pi, _ := img.Partition("before", p)
			if pi.Leader == old.id || pi.Leader == -1 {
				return false
			}
		}
		return true
	})
	t.Logf("partition leader failover (kill to new leaders): %v", time.Since(start))
}

func TestControllerGRPCLifecycleControlledShutdown(t *testing.T) {
	t.Parallel()
	c := newGCluster(t, 3, nil)
	c.waitLive(1, 2, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.nodes[0].fwd.CreateTopic(ctx, metadata.TopicSpec{Name: "t", Partitions: 3, ReplicationFactor: 3}); err != nil {
		t.Fatal(err)
	}
	g := c.follower()
	if err := g.life.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	img := c.controller().node.Image()
	ti, _ := img.Topic("t")
	for _, p := range ti.Partitions {
		if p.Leader == g.id {
			t.Fatalf("stopped broker still leads %+v", p)
		}
	}
	if b, _ := img.Broker(g.id); !b.Fenced {
		t.Fatal("stopped broker not fenced")
	}
}

func TestControllerGRPCStatusMapping(t *testing.T) {
	t.Parallel()
	for _, e := range errorTable {
		err := toStatus(fmt.Errorf("%w: detail", e.err))
		if status.Code(err) != e.code {
			t.Fatalf("%v -> %v, want %v", e.err, status.Code(err), e.code)
		}
		back := fromStatus(err)
		if !errors.Is(back, e.err) {
			t.Fatalf("%v came back as %v", e.err, back)
		}
	}
	nc := toStatus(&metadata.NotControllerError{LeaderID: 3, LeaderAddr: "h:1"})
	var got *metadata.NotControllerError
	if !errors.As(fromStatus(nc), &got) || got.LeaderID != 3 || got.LeaderAddr != "h:1" {
		t.Fatalf("not controller came back as %v", fromStatus(nc))
	}
	if status.Code(toStatus(errors.New("boom"))) != codes.Internal {
		t.Fatal("unknown error not internal")
	}
}

// TestControllerGRPCScale creates 10,000 partitions (10 topics of 1,000,
// RF 3) on 3 nodes and reports when every image shows them.
func TestControllerGRPCScale(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("scale test")
	}
	c := newGCluster(t, 3, nil)
	c.waitLive(1, 2, 3)
	f := c.follower()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	for i := 0; i < 10; i++ {
		if _, err := f.fwd.CreateTopic(ctx, metadata.TopicSpec{Name: fmt.Sprintf("scale-%d", i), Partitions: 1000, ReplicationFactor: 3}); err != nil {
			t.Fatal(err)
		}
	}
	created := time.Since(start)
	poll.Until(t, "10,000 partitions on every node", func() error {
		for i, g := range c.live() {
			if n := g.node.Image().PartitionCount(); n != 10000 {
				return fmt.Errorf("live node %d has %d", i, n)
			}
		}
		return nil
	})
	t.Logf("10,000 partitions: created in %v, on every image in %v", created, time.Since(start))
}

// TestControllerGRPCGroupOffsets: offsets committed through one node are
// read back at once through another (both forward to the controller),
// sentinels survive the trip, and a new controller serves them after the
// old one dies.
func TestControllerGRPCGroupOffsets(t *testing.T) {
	t.Parallel()
	c := newGCluster(t, 3, nil)
	c.waitLive(1, 2, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	ctl := c.controller()
	var a, b *gnode
	for _, g := range c.live() {
		if g == ctl {
			continue
		}
		if a == nil {
			a = g
		} else {
			b = g
		}
	}
	if _, err := a.fwd.CreateTopic(ctx, metadata.TopicSpec{Name: "t", Partitions: 2, ReplicationFactor: 3}); err != nil {
		t.Fatal(err)
	}
	// The time a commit is sent with is only for controllers that record
	// it: this one stamps its own.
	sent := time.UnixMilli(1_700_000_000_000)
	commit := []metadata.OffsetCommit{{Topic: "t", Partition: 1, Offset: 42, LeaderEpoch: 3, Metadata: "m"}}
	before := time.Now()
	at, err := a.fwd.CommitOffsets(ctx, "g", metadata.GroupMember{}, commit, sent)
	if err != nil {
		t.Fatal(err)
	}
	if at.Before(before.Truncate(time.Millisecond)) || at.After(time.Now()) {
		t.Fatalf("commit time %v, not the controller's clock (sent %v)", at, sent)
	}
	got, err := b.fwd.FetchOffsets(ctx, "g", []metadata.TopicPartition{{Topic: "t", Partition: 0}, {Topic: "t", Partition: 1}})
	if err != nil {
		t.Fatal(err)
	}
	want := []metadata.CommittedOffset{
		{Topic: "t", Partition: 0, Offset: -1, LeaderEpoch: -1, CommitTimeMs: -1},
		{Topic: "t", Partition: 1, Offset: 42, LeaderEpoch: 3, Metadata: "m", CommitTimeMs: at.UnixMilli()},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("fetched through another node:\n%+v\nwant\n%+v", got, want)
	}
	// Offsets only: empty, the state of a group without members.
	if groups, err := b.fwd.ListGroups(ctx); err != nil || !reflect.DeepEqual(groups, []metadata.GroupListing{{Group: "g", State: "empty"}}) {
		t.Fatalf("list groups: %v %v", groups, err)
	}
	if _, err := b.fwd.CommitOffsets(ctx, "g", metadata.GroupMember{}, []metadata.OffsetCommit{{Topic: "nope", Offset: 1}}, sent); !errors.Is(err, metadata.ErrUnknownTopic) {
		t.Fatalf("commit to an unknown topic: %v", err)
	}
	if _, err := b.fwd.CommitOffsets(ctx, "g", metadata.GroupMember{}, []metadata.OffsetCommit{{Topic: "t", Offset: -5}}, sent); !errors.Is(err, metadata.ErrInvalidOffsetCommit) {
		t.Fatalf("commit of a negative offset: %v", err)
	}
	if _, err := b.fwd.CommitOffsets(ctx, "", metadata.GroupMember{}, commit, sent); !errors.Is(err, metadata.ErrInvalidGroupID) {
		t.Fatalf("commit without a group: %v", err)
	}
	if err := b.fwd.DeleteGroup(ctx, "other"); !errors.Is(err, metadata.ErrUnknownGroup) {
		t.Fatalf("delete of an unknown group: %v", err)
	}

	// The next controller has every acknowledged commit.
	c.kill(ctl)
	got, err = a.fwd.FetchOffsets(ctx, "g", nil)
	if err != nil || !reflect.DeepEqual(got, want[1:]) {
		t.Fatalf("fetched after the controller died: %+v %v", got, err)
	}
	// The delete may reach the dying controller, be applied, and lose its
	// answer; asked again of the next controller it then finds no group,
	// as Kafka's DeleteGroups answers a retry (GROUP_ID_NOT_FOUND). Either
	// way the group must be gone.
	if err := b.fwd.DeleteGroup(ctx, "g"); err != nil && !errors.Is(err, metadata.ErrUnknownGroup) {
		t.Fatal(err)
	}
	if groups, err := a.fwd.ListGroups(ctx); err != nil || len(groups) != 0 {
		t.Fatalf("groups after delete: %v %v", groups, err)
	}
}

// TestControllerGRPCForwardingLocalAndRemoteAlike: a controller call made
// on the controller itself (its own handler) and on another node (over
// gRPC) fails with the same error: the same sentinel, status and message,
// through the one mapping both take.
func TestControllerGRPCForwardingLocalAndRemoteAlike(t *testing.T) {
	t.Parallel()
	c := newGCluster(t, 3, nil)
	c.waitLive(1, 2, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ctl := c.controller()
	if _, err := ctl.fwd.CreateTopic(ctx, metadata.TopicSpec{Name: "orders", Partitions: 2, ReplicationFactor: 3}); err != nil {
		t.Fatal(err)
	}
	p, _ := ctl.node.Image().Partition("orders", 0)
	calls := []struct {
		name string
		want error
		call func(*Forwarder) error
	}{
		{"duplicate create", metadata.ErrTopicExists, func(f *Forwarder) error {
			_, err := f.CreateTopic(ctx, metadata.TopicSpec{Name: "orders", Partitions: 1, ReplicationFactor: 1})
			return err
		}},
		{"delete unknown", metadata.ErrUnknownTopic, func(f *Forwarder) error { return f.DeleteTopic(ctx, "nope", "") }},
		{"fewer partitions", metadata.ErrInvalidPartitions, func(f *Forwarder) error { return f.CreatePartitions(ctx, "orders", 1) }},
		{"stale alter partition", metadata.ErrStaleEpoch, func(f *Forwarder) error {
			_, err := f.AlterPartition(ctx, "orders", 0, p.Leader, p.LeaderEpoch, p.PartitionEpoch-1, p.Replicas)
			return err
		}},
		{"old-epoch heartbeat", metadata.ErrFencedBroker, func(f *Forwarder) error {
			_, err := f.Heartbeat(ctx, 1, "inc1", 1, 0)
			return err
		}},
	}
	for _, tc := range calls {
		var errs [2]error
		for i, g := range []*gnode{c.controller(), c.follower()} {
			errs[i] = tc.call(g.fwd)
			if !errors.Is(errs[i], tc.want) {
				t.Errorf("%s on node %d (controller %v): %v, want %v", tc.name, g.id, g.node.IsController(), errs[i], tc.want)
			}
		}
		if errs[0] == nil || errs[1] == nil {
			continue
		}
		local, remote := status.Convert(toStatus(errs[0])), status.Convert(toStatus(errs[1]))
		if local.Code() != remote.Code() || errs[0].Error() != errs[1].Error() {
			t.Errorf("%s: on the controller %v %q, elsewhere %v %q", tc.name, local.Code(), errs[0], remote.Code(), errs[1])
		}
	}
}
