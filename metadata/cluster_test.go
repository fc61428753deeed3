package metadata

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/quirelog/quire/internal/poll"
)

// testCluster runs metadata Nodes in-process over raft's InmemTransport
// (raftgrpc is exercised by its own tests and by controlplane's).
type testCluster struct {
	t      *testing.T
	mu     sync.Mutex
	cfgs   []Config
	nodes  []*Node
	trans  []*raft.InmemTransport
	voters []Voter
	// leadership, when set, gives node i's source of leadership changes
	// (else raft's leader channel).
	leadership func(i int) func(*raft.Raft) <-chan bool
}

func testLogger(t *testing.T, name string) hclog.Logger {
	level := hclog.Warn
	if os.Getenv("QUIRE_TEST_LOG") != "" {
		level = hclog.Debug
	}
	return hclog.New(&hclog.LoggerOptions{Name: name, Level: level, Output: testWriter{t}})
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	if os.Getenv("QUIRE_TEST_LOG") != "" {
		w.t.Log(string(p))
	}
	return len(p), nil
}

func fastConfig(t *testing.T, id int32) Config {
	cfg := DefaultConfig()
	cfg.NodeID = id
	cfg.ClusterID = "test-cluster"
	cfg.Dir = t.TempDir()
	cfg.AdvertisedAddr = fmt.Sprintf("node%d", id)
	cfg.Logger = testLogger(t, fmt.Sprintf("node%d", id))
	// Short enough that failovers the tests cause (stopping a node) take
	// a second or two, long enough that a loaded machine running tests in
	// parallel does not cause them by itself.
	cfg.BrokerHeartbeatInterval = 200 * time.Millisecond
	cfg.BrokerSessionTimeout = 3 * time.Second
	cfg.RaftHeartbeatTimeout = time.Second
	cfg.RaftElectionTimeout = time.Second
	cfg.RaftLeaderLeaseTimeout = 500 * time.Millisecond
	cfg.RaftCommitTimeout = 5 * time.Millisecond
	cfg.ApplyTimeout = 3 * time.Second
	return cfg
}

// newTestCluster starts voters controller nodes (ids 1..voters) and
// brokers broker-only nodes after them.
func newTestCluster(t *testing.T, voters, brokers int, mod func(*Config)) *testCluster {
	t.Helper()
	return newTestClusterWith(t, &testCluster{}, voters, brokers, mod)
}

// newTestClusterWith is newTestCluster starting from c (its leadership
// set).
func newTestClusterWith(t *testing.T, c *testCluster, voters, brokers int, mod func(*Config)) *testCluster {
	t.Helper()
	c.t = t
	total := voters + brokers
	for i := 0; i < total; i++ {
		id := int32(i + 1)
		if i < voters {
			c.voters = append(c.voters, Voter{ID: id, Addr: fmt.Sprintf("node%d", id)})
		}
	}
	for i := 0; i < total; i++ {
		cfg := fastConfig(t, int32(i+1))
		cfg.Voter = i < voters
		cfg.Voters = c.voters
		if mod != nil {
			mod(&cfg)
		}
		c.cfgs = append(c.cfgs, cfg)
		c.nodes = append(c.nodes, nil)
		c.trans = append(c.trans, nil)
	}
	for i := range c.cfgs {
		c.start(i)
	}
	t.Cleanup(c.shutdown)
	return c
}

func (c *testCluster) start(i int) {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	addr := raft.ServerAddress(c.cfgs[i].AdvertisedAddr)
	_, tr := raft.NewInmemTransportWithTimeout(addr, 200*time.Millisecond)
	for j, o := range c.trans {
		if j == i || o == nil || c.nodes[j] == nil {
			continue
		}
		tr.Connect(o.LocalAddr(), o)
		o.Connect(addr, tr)
	}
	c.trans[i] = tr
	cfg := c.cfgs[i]
	cfg.Transport = tr
	leadership := (*raft.Raft).LeaderCh
	if c.leadership != nil {
		leadership = c.leadership(i)
	}
	n, err := openNode(cfg, leadership)
	if err != nil {
		c.t.Fatalf("open node %d: %v", cfg.NodeID, err)
	}
	c.nodes[i] = n
}

func (c *testCluster) stop(i int) {
	c.t.Helper()
	c.mu.Lock()
	n := c.nodes[i]
	c.nodes[i] = nil
	for j, o := range c.trans {
		if j != i && o != nil {
			o.Disconnect(c.trans[i].LocalAddr())
		}
	}
	c.mu.Unlock()
	if n != nil {
		if err := n.Shutdown(); err != nil {
			c.t.Errorf("shutdown node %d: %v", i+1, err)
		}
	}
}

func (c *testCluster) shutdown() {
	for i := range c.nodes {
		c.stop(i)
	}
}

func (c *testCluster) node(i int) *Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[i]
}

func (c *testCluster) live() []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*Node
	for _, n := range c.nodes {
		if n != nil {
			out = append(out, n)
		}
	}
	return out
}

// waitController returns the node whose controller loop is active.
func (c *testCluster) waitController() *Node {
	c.t.Helper()
	var ctl *Node
	poll.True(c.t, "a controller", func() bool {
		for _, n := range c.live() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			err := n.Ctl().active(ctx)
			cancel()
			if err == nil {
				ctl = n
				return true
			}
		}
		return false
	})
	return ctl
}

// waitConverged waits until every live node's image equals the
// controller's at its current index.
func (c *testCluster) waitConverged() {
	c.t.Helper()
	poll.True(c.t, "identical images", func() bool {
		nodes := c.live()
		var ref *Image
		for _, n := range nodes {
			if n.IsController() {
				ref = n.Image()
			}
		}
		if ref == nil {
			return false
		}
		for _, n := range nodes {
			img := n.Image()
			if img.Index() != ref.Index() || !reflect.DeepEqual(img.Topics(), ref.Topics()) ||
				!reflect.DeepEqual(img.Brokers(), ref.Brokers()) || img.ClusterID() != ref.ClusterID() {
				return false
			}
		}
		return true
	})
}

// fakeBroker registers with whichever node is controller and heartbeats,
// registering again when told it is fenced or unknown.
type fakeBroker struct {
	c      *testCluster
	info   BrokerInfo
	mu     sync.Mutex
	epoch  int64
	stopCh chan struct{}
	done   chan struct{}
}

func (c *testCluster) startBroker(id int32) *fakeBroker {
	return c.startBrokerAt(id, VersionRange{})
}

// startBrokerAt starts a fake broker registering the metadata.version
// range r (the zero range: 1 to 1).
func (c *testCluster) startBrokerAt(id int32, r VersionRange) *fakeBroker {
	b := &fakeBroker{c: c, info: BrokerInfo{ID: id, Incarnation: fmt.Sprintf("inc-%d", id), Addr: fmt.Sprintf("node%d", id), MetadataVersions: r},
		stopCh: make(chan struct{}), done: make(chan struct{})}
	go b.run()
	c.t.Cleanup(b.stop)
	return b
}

func (b *fakeBroker) run() {
	defer close(b.done)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		b.beat()
		select {
		case <-b.stopCh:
			return
		case <-tick.C:
		}
	}
}

func (b *fakeBroker) beat() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for _, n := range b.c.live() {
		if !n.IsController() {
			continue
		}
		b.mu.Lock()
		epoch := b.epoch
		b.mu.Unlock()
		err := errors.New("unregistered")
		if epoch != 0 {
			err = n.Ctl().Heartbeat(ctx, b.info.ID, b.info.Incarnation, epoch, b.info.MaxPartitions)
		}
		if err != nil && !errors.Is(err, ErrNotController) && !errors.Is(err, ErrNoQuorum) && !errors.Is(err, ErrShutdown) {
			if e, rerr := n.Ctl().RegisterBroker(ctx, b.info); rerr == nil {
				b.mu.Lock()
				b.epoch = e
				b.mu.Unlock()
				_ = n.Ctl().Heartbeat(ctx, b.info.ID, b.info.Incarnation, e, b.info.MaxPartitions)
			}
		}
	}
}

func (b *fakeBroker) stop() {
	select {
	case <-b.stopCh:
	default:
		close(b.stopCh)
	}
	<-b.done
}

func (c *testCluster) waitBrokersLive(ids ...int32) {
	c.t.Helper()
	poll.True(c.t, fmt.Sprintf("brokers %v unfenced", ids), func() bool {
		for _, n := range c.live() {
			if !n.IsController() {
				continue
			}
			img := n.Image()
			for _, id := range ids {
				if b, ok := img.Broker(id); !ok || b.Fenced {
					return false
				}
			}
			return true
		}
		return false
	})
}

// createTopic creates a topic through the current controller, retrying
// across elections.
func (c *testCluster) createTopic(spec TopicSpec) TopicInfo {
	c.t.Helper()
	var info TopicInfo
	retried := false
	poll.True(c.t, "topic "+spec.Name+" created", func() bool {
		ctl := c.waitController()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		var err error
		info, err = ctl.Ctl().CreateTopic(ctx, spec)
		if retried && errors.Is(err, ErrTopicExists) {
			// An attempt that failed with the leadership lost while
			// committing was committed after all.
			t, ok := ctl.Image().Topic(spec.Name)
			info = t
			return ok
		}
		if err != nil && !errors.Is(err, ErrNotController) && !errors.Is(err, ErrNoQuorum) {
			c.t.Fatalf("create topic %s: %v", spec.Name, err)
		}
		retried = err != nil
		return err == nil
	})
	return info
}

func TestControllerClusterForms(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 3, 0, nil)
	ctl := c.waitController()
	for i := int32(1); i <= 3; i++ {
		c.startBroker(i)
	}
	c.waitBrokersLive(1, 2, 3)
	info := c.createTopic(TopicSpec{Name: "orders", Partitions: 6, ReplicationFactor: 3})
	if len(info.Partitions) != 6 || info.ID == "" {
		t.Fatalf("created %+v", info)
	}
	leaders := map[int32]int{}
	for _, p := range info.Partitions {
		leaders[p.Leader]++
		if len(p.ISR) != 3 || len(p.Replicas) != 3 {
			t.Fatalf("partition %+v", p)
		}
	}
	for id := int32(1); id <= 3; id++ {
		if leaders[id] != 2 {
			t.Fatalf("leaders not spread: %v", leaders)
		}
	}
	c.waitConverged()
	for _, n := range c.live() {
		if n.Image().ClusterID() != "test-cluster" || n.Image().ControllerID() != ctl.ID() {
			t.Fatalf("node %d: cluster %q controller %d", n.ID(), n.Image().ClusterID(), n.Image().ControllerID())
		}
	}
	// Off the controller, operations name it.
	for _, n := range c.live() {
		if n == ctl {
			continue
		}
		_, err := n.Ctl().CreateTopic(context.Background(), TopicSpec{Name: "x", Partitions: 1, ReplicationFactor: 1})
		var nc *NotControllerError
		if !errors.As(err, &nc) || nc.LeaderID != ctl.ID() || nc.LeaderAddr == "" {
			t.Fatalf("create on follower: %v", err)
		}
	}
	_, err := ctl.Ctl().CreateTopic(context.Background(), TopicSpec{Name: "orders", Partitions: 1, ReplicationFactor: 1})
	if !errors.Is(err, ErrTopicExists) {
		t.Fatalf("duplicate create: %v", err)
	}
	_, err = ctl.Ctl().CreateTopic(context.Background(), TopicSpec{Name: "big", Partitions: 1, ReplicationFactor: 4})
	if !errors.Is(err, ErrInvalidReplicationFactor) {
		t.Fatalf("rf 4: %v", err)
	}
}

func TestControllerFailover(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 3, 0, nil)
	for i := int32(1); i <= 3; i++ {
		c.startBroker(i)
	}
	c.waitBrokersLive(1, 2, 3)
	c.createTopic(TopicSpec{Name: "before", Partitions: 3, ReplicationFactor: 3})
	old := c.waitController()
	oldIdx := int(old.ID() - 1)
	c.stop(oldIdx)
	start := time.Now()
	ctl := c.waitController()
	if ctl.ID() == old.ID() {
		t.Fatal("stopped node still controller")
	}
	c.createTopic(TopicSpec{Name: "after", Partitions: 3, ReplicationFactor: 2})
	t.Logf("controller failover to a created topic: %v", time.Since(start))
	c.start(oldIdx)
	c.waitConverged()
	img := c.node(oldIdx).Image()
	if _, ok := img.Topic("after"); !ok {
		t.Fatal("restarted node misses the topic created while it was down")
	}
	if img.ControllerID() != ctl.ID() {
		t.Fatalf("restarted node sees controller %d, want %d", img.ControllerID(), ctl.ID())
	}
}

func TestControllerFencesSilentBroker(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 3, 0, nil)
	bs := []*fakeBroker{c.startBroker(1), c.startBroker(2), c.startBroker(3)}
	c.waitBrokersLive(1, 2, 3)
	info := c.createTopic(TopicSpec{Name: "t", Partitions: 6, ReplicationFactor: 3})
	victim := c.waitController().ID()%3 + 1 // a broker whose node is not the controller
	before := map[int32]PartitionInfo{}
	for _, p := range info.Partitions {
		before[p.Partition] = p
	}
	bs[victim-1].stop()
	poll.True(t, fmt.Sprintf("broker %d fenced", victim), func() bool {
		b, _ := c.waitController().Image().Broker(victim)
		return b.Fenced
	})
	c.waitConverged()
	ti, _ := c.waitController().Image().Topic("t")
	for _, p := range ti.Partitions {
		old := before[p.Partition]
		for _, r := range p.ISR {
			if r == victim {
				t.Fatalf("fenced broker still in the ISR of %+v", p)
			}
		}
		if old.Leader == victim {
			if p.Leader == victim || p.Leader == -1 || p.LeaderEpoch <= old.LeaderEpoch {
				t.Fatalf("partition %d: leader %d epoch %d (was %d epoch %d)", p.Partition, p.Leader, p.LeaderEpoch, old.Leader, old.LeaderEpoch)
			}
			found := false
			for _, r := range old.ISR {
				found = found || r == p.Leader
			}
			if !found {
				t.Fatalf("new leader %d not from the ISR %v", p.Leader, old.ISR)
			}
		}
	}
	// Its heartbeat with the old epoch after a re-registration is rejected.
	// Each call goes to the controller of the moment and is retried as a
	// broker retries it: a loaded machine can move the leadership in
	// between, and the call then fails with ErrNoQuorum or
	// ErrNotController.
	b, _ := c.waitController().Image().Broker(victim)
	var epoch int64
	c.onController("re-register", func(ctl *Node) (err error) {
		epoch, err = ctl.Ctl().RegisterBroker(context.Background(), b)
		return err
	})
	if epoch <= b.Epoch {
		t.Fatalf("re-register: epoch %d (was %d)", epoch, b.Epoch)
	}
	c.onController("heartbeat of an old epoch", func(ctl *Node) error {
		err := ctl.Ctl().Heartbeat(context.Background(), victim, b.Incarnation, b.Epoch, 0)
		if err == nil {
			return errors.New("accepted, want ErrFencedBroker")
		}
		if errors.Is(err, ErrFencedBroker) {
			return nil
		}
		return err
	})
	c.onController("heartbeat of an unknown broker", func(ctl *Node) error {
		err := ctl.Ctl().Heartbeat(context.Background(), 42, "x", 1, 0)
		if err == nil {
			return errors.New("accepted, want ErrUnknownBroker")
		}
		if errors.Is(err, ErrUnknownBroker) {
			return nil
		}
		return err
	})
	ctl := c.onController("heartbeat after re-registration", func(ctl *Node) error {
		return ctl.Ctl().Heartbeat(context.Background(), victim, b.Incarnation, epoch, 0)
	})
	if nb, _ := ctl.Image().Broker(victim); nb.Fenced {
		t.Fatal("heartbeat did not unfence")
	}
}

// onController calls call with the controller until it returns nil, and
// returns that controller. ErrNoQuorum and ErrNotController (leadership
// moved during the call) are retried, as a broker retries them; any other
// error fails the test.
func (c *testCluster) onController(what string, call func(ctl *Node) error) *Node {
	c.t.Helper()
	var ctl *Node
	poll.Until(c.t, what, func() error {
		ctl = c.waitController()
		err := call(ctl)
		if err != nil && !errors.Is(err, ErrNoQuorum) && !errors.Is(err, ErrNotController) {
			c.t.Fatalf("%s: %v", what, err)
		}
		return err
	})
	return ctl
}

func TestControllerAlterPartitionAndShutdown(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 3, 0, func(cfg *Config) {
		cfg.AutoLeaderRebalance = true
		cfg.LeaderRebalanceEvery = 100 * time.Millisecond
	})
	for i := int32(1); i <= 3; i++ {
		c.startBroker(i)
	}
	c.waitBrokersLive(1, 2, 3)
	c.createTopic(TopicSpec{Name: "t", Partitions: 3, ReplicationFactor: 3})
	ctl := c.waitController()
	ctx := context.Background()
	p, _ := ctl.Image().Partition("t", 0)
	others := without(p.Replicas, p.Leader)
	np, err := ctl.Ctl().AlterPartition(ctx, "t", 0, p.Leader, p.LeaderEpoch, p.PartitionEpoch, []int32{p.Leader, others[0]})
	if err != nil || len(np.ISR) != 2 || np.PartitionEpoch != p.PartitionEpoch+1 {
		t.Fatalf("alter partition: %+v %v", np, err)
	}
	if _, err := ctl.Ctl().AlterPartition(ctx, "t", 0, p.Leader, p.LeaderEpoch, p.PartitionEpoch, p.ISR); !errors.Is(err, ErrStaleEpoch) {
		t.Fatalf("stale alter partition: %v", err)
	}
	// Controlled shutdown of a partition's leader moves leadership away.
	leader := np.Leader
	if err := ctl.Ctl().ControlledShutdown(ctx, leader); err != nil {
		t.Fatal(err)
	}
	after, _ := ctl.Image().Partition("t", 0)
	if after.Leader == leader || after.Leader == -1 || after.LeaderEpoch <= np.LeaderEpoch {
		t.Fatalf("after controlled shutdown: %+v", after)
	}
	// Its next heartbeat unfences it; once the leaders take it back into
	// their ISRs (as they would when it caught up), preferred leaders return.
	c.waitBrokersLive(leader)
	poll.True(t, "full ISRs", func() bool {
		ctl := c.waitController()
		ti, _ := ctl.Image().Topic("t")
		full := true
		for _, p := range ti.Partitions {
			if len(p.ISR) == len(p.Replicas) {
				continue
			}
			full = false
			_, _ = ctl.Ctl().AlterPartition(ctx, "t", p.Partition, p.Leader, p.LeaderEpoch, p.PartitionEpoch, p.Replicas)
		}
		return full
	})
	poll.True(t, "preferred leaders restored", func() bool {
		img := c.waitController().Image()
		ti, _ := img.Topic("t")
		for _, p := range ti.Partitions {
			if p.Leader != p.Replicas[0] {
				return false
			}
		}
		return true
	})
}

func TestControllerRestartCatchesUpThroughSnapshot(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 3, 0, func(cfg *Config) {
		cfg.SnapshotThreshold = 8
		cfg.SnapshotInterval = 50 * time.Millisecond
		cfg.TrailingLogs = 4
	})
	for i := int32(1); i <= 3; i++ {
		c.startBroker(i)
	}
	c.waitBrokersLive(1, 2, 3)
	ctl := c.waitController()
	down := int(ctl.ID()) % 3 // index of a node that is not the controller
	c.stop(down)
	for i := 0; i < 30; i++ {
		c.createTopic(TopicSpec{Name: fmt.Sprintf("t%02d", i), Partitions: 2, ReplicationFactor: 2})
	}
	ctl = c.waitController()
	poll.True(t, "a snapshot on the controller", func() bool {
		snaps, err := raft.NewFileSnapshotStore(c.cfgs[ctl.ID()-1].Dir, 2, io.Discard)
		if err != nil {
			return false
		}
		list, _ := snaps.List()
		return len(list) > 0
	})
	c.start(down)
	c.waitConverged()
	if got := len(c.node(down).Image().Topics()); got != 30 {
		t.Fatalf("restarted node has %d topics", got)
	}
}

func TestControllerVotersAndBrokerOnlyNodes(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 3, 2, nil)
	for i := int32(1); i <= 5; i++ {
		c.startBroker(i)
	}
	c.waitBrokersLive(1, 2, 3, 4, 5)
	poll.True(t, "broker-only nodes in the quorum as non-voters", func() bool {
		f := c.waitController().Raft().GetConfiguration()
		if f.Error() != nil {
			return false
		}
		voters, nonvoters := 0, 0
		for _, s := range f.Configuration().Servers {
			switch s.Suffrage {
			case raft.Voter:
				voters++
			case raft.Nonvoter:
				nonvoters++
			}
		}
		return voters == 3 && nonvoters == 2
	})
	info := c.createTopic(TopicSpec{Name: "wide", Partitions: 10, ReplicationFactor: 3})
	leaders := map[int32]int{}
	for _, p := range info.Partitions {
		leaders[p.Leader]++
	}
	if len(leaders) != 5 {
		t.Fatalf("leaders over %d brokers, want 5: %v", len(leaders), leaders)
	}
	c.waitConverged()
	for _, i := range []int{3, 4} {
		if _, ok := c.node(i).Image().Topic("wide"); !ok {
			t.Fatalf("broker-only node %d misses the topic", i+1)
		}
	}
}

func TestQuorumLossFailsFast(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 3, 0, nil)
	c.startBroker(1)
	c.waitBrokersLive(1)
	c.createTopic(TopicSpec{Name: "t", Partitions: 1, ReplicationFactor: 1})
	c.waitConverged()
	survivor := c.node(0)
	c.stop(1)
	c.stop(2)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := survivor.Ctl().CreateTopic(ctx, TopicSpec{Name: "u", Partitions: 1, ReplicationFactor: 1})
	if !errors.Is(err, ErrNoQuorum) && !errors.Is(err, ErrNotController) {
		t.Fatalf("create without quorum: %v", err)
	}
	// Refused, not waited out: the call had two minutes.
	if d := time.Since(start); d > time.Minute {
		t.Fatalf("create without quorum took %v to be refused", d)
	}
	if _, ok := survivor.Image().Topic("t"); !ok {
		t.Fatal("image reads fail without quorum")
	}
}

func TestQuorumClusterIDMismatch(t *testing.T) {
	t.Parallel()
	cfg := fastConfig(t, 1)
	cfg.Voters = []Voter{{ID: 1, Addr: "node1"}}
	_, tr := raft.NewInmemTransport("node1")
	cfg.Transport = tr
	n, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	poll.True(t, "cluster id in the image", func() bool { return n.Image().ClusterID() == "test-cluster" })
	if err := n.Shutdown(); err != nil {
		t.Fatal(err)
	}
	cfg.ClusterID = "another"
	_, tr2 := raft.NewInmemTransport("node1")
	cfg.Transport = tr2
	if _, err := Open(cfg); !errors.Is(err, ErrClusterIDMismatch) {
		t.Fatalf("open with another cluster id: %v", err)
	}
	// Without a configured id, the stored one is used.
	cfg.ClusterID = ""
	n, err = Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Shutdown()
	if n.Image().ClusterID() != "test-cluster" {
		t.Fatalf("cluster id %q", n.Image().ClusterID())
	}
}
