// Package testcluster runs a Quire cluster of real broker nodes in one test
// process: every node is a full broker.Broker (gRPC services, raft voter or
// non-voter, controller, replica manager, storage) on its own 127.0.0.1
// port and t.TempDir() data directory, with short raft and session
// timeouts.
//
//	c := testcluster.New(t, 3)                    // ids 1..3, all controller+broker
//	c := testcluster.New(t, 5, testcluster.Voters(3)) // 1..3 voters, 4..5 broker-only
//	ctl := c.WaitController(ctx)
//	c.Kill(ctl); c.Restart(ctl)
//	c.Partition(1); c.Heal()
//
// Ports: the harness binds every node's listener on 127.0.0.1:0 before any
// node starts and hands it over in broker.Config.Listener, so the voter list
// (controller.quorum.voters) is known up front with no port race. A node
// restarted later binds its old address again.
//
// Network partitions: every node-to-node connection (raft transport,
// controller forwarding) is dialled through broker.Config.Dialer, which the
// harness points at its network: Partition refuses new connections between
// the named nodes and severs the open ones; Heal lets them reconnect.
//
// Node numbers are node ids, 1..n. Every wait polls with a deadline; none
// sleeps blindly. Use goleak in the TestMain of packages that use it
// (IgnoreCurrent is not needed: the harness stops everything in Cleanup).
package testcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/internal/poll"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/storage"
)

// ClusterID is the cluster.id every node gets.
const ClusterID = "testcluster"

// Timings the harness gives every node; Config can change them.
const (
	// RaftTimeout is the metadata quorum's raft heartbeat and election
	// timeout, and its leader lease: a follower that has not heard from
	// the leader for 1-2 RaftTimeout starts an election, and a leader that
	// has not heard from a majority for RaftTimeout steps down. In-process
	// nodes share the test's CPU (with -race, with other tests running in
	// parallel, on a loaded machine), where a heartbeat's round trip can
	// take several hundred milliseconds: a lease shorter than that has the
	// controller step down again and again. At load 30 with -race (a
	// full make test beside CPU hogs) 1 s was not enough either: the
	// leader lost its lease ("failed to contact quorum") and candidates'
	// vote rounds kept outlasting their 1-2 s election timer, so three
	// nodes went a minute without a controller. Tests that need a new
	// controller stop or kill the old one; a new one then takes 2-4 s.
	RaftTimeout = 2 * time.Second
	HeartbeatMs = 200
	// SessionTimeoutMs is broker.session.timeout.ms: long enough that a
	// node held up by the machine's load is not fenced by accident, short
	// enough that a test that kills a node sees it fenced in seconds.
	// SessionTimeout changes it for one cluster.
	SessionTimeoutMs = 4000
	WriteTimeoutMs   = 3000
	// ReplicaLagMs is replica.lag.time.max.ms: a follower silent this long
	// leaves the ISR.
	ReplicaLagMs = 5000
	// WaitTimeout bounds every Wait… that gets a context without deadline:
	// it only stops a hang.
	WaitTimeout = 2 * poll.Timeout
	// ReadyTimeout bounds the wait for nodes to register and be unfenced
	// (New, Restart, Add): it only stops a hang. A node is ready once the
	// quorum has elected a controller and committed its registration; on
	// a loaded machine the election alone has been seen to take most of a
	// minute.
	ReadyTimeout = 4 * poll.Timeout
)

// Option configures New.
type Option func(*options)

type options struct {
	voters int
	tweak  []func(id int32, c *broker.Config)
	// connOpts, when set, are Conn's dial options (secure.go).
	connOpts func() []grpc.DialOption
	n        int // nodes, set by New
}

// Voters makes nodes 1..k controllers (raft voters) and the rest
// broker-only (non-voters that replicate the metadata log). The default
// is every node.
func Voters(k int) Option { return func(o *options) { o.voters = k } }

// SessionTimeout sets broker.session.timeout.ms (and the heartbeat
// interval to a tenth of it) on every node, for a test that waits for a
// killed node to be fenced and wants it sooner, or one that must not see
// a node fenced.
func SessionTimeout(ms int64) Option {
	return Config(func(_ int32, c *broker.Config) {
		c.BrokerSessionTimeoutMs = ms
		c.BrokerHeartbeatIntervalMs = max(ms/10, 10)
	})
}

// Config adjusts each node's config before it first starts (and on every
// restart).
func Config(fn func(id int32, c *broker.Config)) Option {
	return func(o *options) { o.tweak = append(o.tweak, fn) }
}

// Cluster is a running in-process cluster.
type Cluster struct {
	t     testing.TB
	n     int
	opts  options
	net   *network
	addrs []string // by id-1
	dirs  []string
	logs  *logSink

	mu    sync.Mutex
	nodes []*broker.Broker // nil while stopped
	conns map[int32]*grpc.ClientConn
	// held are the addresses of stopped nodes, reserved by the cluster as
	// soon as the node let go (reserve), so that no other test's node
	// takes the address before the restart.
	held map[int32]*reservation
}

// New starts n nodes with ids 1..n and waits until every one is
// registered, unfenced and hosting its replicas. Everything is stopped in
// t.Cleanup.
func New(t testing.TB, n int, opts ...Option) *Cluster {
	t.Helper()
	o := options{voters: n}
	for _, fn := range opts {
		fn(&o)
	}
	o.n = n
	if n < 1 || o.voters < 1 || o.voters > n {
		t.Fatalf("testcluster: %d nodes with %d voters", n, o.voters)
	}
	c := &Cluster{
		t: t, n: n, opts: o, net: newNetwork(),
		addrs: make([]string, n), dirs: make([]string, n),
		nodes: make([]*broker.Broker, n), conns: map[int32]*grpc.ClientConn{}, held: map[int32]*reservation{},
		logs: newLogSink(t),
	}
	t.Cleanup(c.logs.close) // registered first: runs after the nodes stopped
	lis := make([]net.Listener, n)
	for i := range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("testcluster: listen: %v", err)
		}
		lis[i] = l
		c.addrs[i] = l.Addr().String()
		c.dirs[i] = t.TempDir()
		c.net.byAddr[c.addrs[i]] = int32(i + 1)
	}
	t.Cleanup(c.close)
	for i := range n {
		b, err := c.start(int32(i+1), lis[i])
		if err != nil {
			for _, l := range lis[i+1:] {
				_ = l.Close()
			}
			t.Fatalf("testcluster: start node %d: %v", i+1, err)
		}
		c.set(int32(i+1), b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), ReadyTimeout)
	defer cancel()
	for i := range n {
		if err := c.waitReady(ctx, int32(i+1)); err != nil {
			t.Fatalf("testcluster: node %d: %v", i+1, err)
		}
	}
	// Each node is ready once it sees itself live; wait until every node
	// sees every broker live, so tests start from one settled view.
	c.WaitImage(ctx, func(img *metadata.Image) bool {
		live := 0
		for _, b := range img.Brokers() {
			if !b.Fenced {
				live++
			}
		}
		return live == n
	})
	return c
}

// waitReady waits until node id is ready (registered, unfenced, hosting
// its replicas) or ctx ends; then the error says how long it waited and
// the node's last view: the controller it knows and its own registration.
func (c *Cluster) waitReady(ctx context.Context, id int32) error {
	b := c.Node(id)
	start := time.Now()
	if err := b.WaitReady(ctx); err != nil {
		return fmt.Errorf("waiting %v for it to register and be unfenced: %w (last: %s)",
			time.Since(start).Round(time.Millisecond), err, readyState(b.Metadata(), id))
	}
	return nil
}

// readyState describes what node id's metadata member knows of the
// controller and of its own registration.
func readyState(m *metadata.Node, id int32) string {
	ctl := "no controller known"
	if cid, _, ok := m.Controller(); ok {
		ctl = fmt.Sprintf("controller %d", cid)
	}
	img := m.Image()
	reg := "not registered"
	if br, ok := img.Broker(id); ok {
		reg = fmt.Sprintf("registered (incarnation %s, fenced %t)", br.Incarnation, br.Fenced)
	}
	return fmt.Sprintf("raft %s, %s, image index %d, %s", m.Raft().State(), ctl, img.Index(), reg)
}

// IDs lists the node ids, 1..n.
func (c *Cluster) IDs() []int32 {
	out := make([]int32, c.n)
	for i := range out {
		out[i] = int32(i + 1)
	}
	return out
}

// Voters lists the ids of the controller nodes.
func (c *Cluster) Voters() []int32 { return c.IDs()[:c.opts.voters] }

// config is node id's configuration; lis, when set, is its pre-bound
// listener.
func (c *Cluster) config(id int32, lis net.Listener) broker.Config {
	cfg := broker.DefaultConfig()
	cfg.NodeID = id
	cfg.ClusterID = ClusterID
	cfg.DataDir = c.dirs[id-1]
	cfg.ListenAddr = c.addrs[id-1]
	cfg.AdvertisedAddr = c.addrs[id-1]
	cfg.Listener = lis
	cfg.Dialer = c.net.dial(id)
	cfg.ProcessRoles = []string{"broker"}
	if int(id) <= c.opts.voters {
		cfg.ProcessRoles = []string{"broker", "controller"}
	}
	var voters []string
	for i := range c.opts.voters {
		voters = append(voters, fmt.Sprintf("%d@%s", i+1, c.addrs[i]))
	}
	cfg.ControllerQuorumVoters = strings.Join(voters, ",")
	cfg.RaftHeartbeatTimeout = RaftTimeout
	cfg.RaftLeaderLeaseTimeout = RaftTimeout
	cfg.BrokerHeartbeatIntervalMs = HeartbeatMs
	cfg.BrokerSessionTimeoutMs = SessionTimeoutMs
	cfg.MetadataWriteTimeoutMs = WriteTimeoutMs
	cfg.ReplicaLagTimeMaxMs = ReplicaLagMs
	cfg.ReplicaFetchWaitMaxMs = 200
	cfg.ReplicaFetchBackoffMs = 50
	cfg.LogLevel = "warn"
	cfg.Logger = c.logs.logger(fmt.Sprintf("node%d", id))
	for _, fn := range c.opts.tweak {
		fn(id, &cfg)
	}
	return cfg
}

func (c *Cluster) start(id int32, lis net.Listener) (*broker.Broker, error) {
	return c.startConfig(c.config(id, lis))
}

func (c *Cluster) startConfig(cfg broker.Config) (*broker.Broker, error) {
	b, err := broker.New(cfg)
	if err != nil {
		if cfg.Listener != nil {
			_ = cfg.Listener.Close()
		}
		return nil, err
	}
	if err := b.Start(); err != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = b.Shutdown(ctx)
		return nil, err
	}
	return b, nil
}

func (c *Cluster) set(id int32, b *broker.Broker) {
	c.mu.Lock()
	c.nodes[id-1] = b
	c.mu.Unlock()
}

// Node returns node id's broker, nil while it is stopped.
func (c *Cluster) Node(id int32) *broker.Broker {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[id-1]
}

// Running lists the ids of the nodes that run.
func (c *Cluster) Running() []int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int32
	for i, b := range c.nodes {
		if b != nil {
			out = append(out, int32(i+1))
		}
	}
	return out
}

// Addr returns node id's gRPC address (stable across restarts).
func (c *Cluster) Addr(id int32) string { return c.addrs[id-1] }

// Dir returns node id's data directory (log.dirs).
func (c *Cluster) Dir(id int32) string { return c.dirs[id-1] }

// Image returns node id's current metadata image.
func (c *Cluster) Image(id int32) *metadata.Image {
	b := c.Node(id)
	if b == nil {
		c.t.Fatalf("testcluster: node %d is not running", id)
	}
	return b.Metadata().Image()
}

// Conn returns a gRPC client connection to node id (the test's, not
// subject to Partition), closed in Cleanup.
func (c *Cluster) Conn(id int32) *grpc.ClientConn {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cc, ok := c.conns[id]; ok {
		return cc
	}
	// Reconnects back off at most half a second, as the nodes' own
	// connections do: a node restarted is reached again at once, not
	// after gRPC's default backoff (growing past a minute), during which
	// calls to it fail with the last dial error.
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if c.opts.connOpts != nil {
		opts = c.opts.connOpts()
	}
	opts = append(opts, grpc.WithConnectParams(grpc.ConnectParams{
		Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 500 * time.Millisecond},
		MinConnectTimeout: 2 * time.Second,
	}))
	cc, err := grpc.NewClient(c.addrs[id-1], opts...)
	if err != nil {
		c.t.Fatalf("testcluster: dial node %d: %v", id, err)
	}
	c.conns[id] = cc
	return cc
}

// Stop shuts node id down cleanly: controlled shutdown with the
// controller, then the clean-shutdown marker.
func (c *Cluster) Stop(id int32) {
	c.t.Helper()
	b := c.take(id)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.Shutdown(ctx); err != nil {
		c.t.Errorf("testcluster: stop node %d: %v", id, err)
	}
	c.hold(id)
}

// Kill stops node id abruptly, as kill -9 would as far as its peers can
// tell: no controlled shutdown (the controller fences it when its session
// expires), connections dropped at once, and no clean-shutdown marker, so
// its next start recovers every log. (Raft and the logs are still closed
// in-process so the directory can be reopened.)
func (c *Cluster) Kill(id int32) {
	c.t.Helper()
	b := c.take(id)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // a done context skips controlled shutdown and graceful stop
	_ = b.Shutdown(ctx)
	c.hold(id)
	if err := os.Remove(filepath.Join(c.dirs[id-1], storage.CleanShutdownFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		c.t.Errorf("testcluster: kill node %d: %v", id, err)
	}
}

// hold reserves a stopped node's address until it restarts (held).
// Failing that, the restart binds it again as it finds it.
func (c *Cluster) hold(id int32) {
	r, err := reserve(c.addrs[id-1])
	if err != nil {
		c.t.Logf("testcluster: hold node %d's address: %v", id, err)
		return
	}
	c.mu.Lock()
	c.held[id] = r
	c.mu.Unlock()
}

func (c *Cluster) take(id int32) *broker.Broker {
	c.t.Helper()
	c.mu.Lock()
	b := c.nodes[id-1]
	c.nodes[id-1] = nil
	c.mu.Unlock()
	if b == nil {
		c.t.Fatalf("testcluster: node %d is not running", id)
	}
	return b
}

// Wipe deletes a stopped node's data directory (logs and metadata): its
// next start is a new node with the old id.
func (c *Cluster) Wipe(id int32) {
	c.t.Helper()
	if c.Node(id) != nil {
		c.t.Fatalf("testcluster: wipe node %d: it is running", id)
	}
	entries, err := os.ReadDir(c.dirs[id-1])
	if err != nil {
		c.t.Fatalf("testcluster: wipe node %d: %v", id, err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(c.dirs[id-1], e.Name())); err != nil {
			c.t.Fatalf("testcluster: wipe node %d: %v", id, err)
		}
	}
}

// Restart starts a stopped node again on its old address and data
// directory and waits until it is ready (registered and unfenced).
func (c *Cluster) Restart(id int32) {
	c.t.Helper()
	if err := c.TryRestart(id); err != nil {
		c.t.Fatalf("testcluster: restart node %d: %v", id, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), ReadyTimeout)
	defer cancel()
	if err := c.waitReady(ctx, id); err != nil {
		c.t.Fatalf("testcluster: restart node %d: %v", id, err)
	}
}

// TryRestart starts a stopped node with its config changed by tweak and
// returns the error broker.New or Start gave; it does not wait for
// readiness.
func (c *Cluster) TryRestart(id int32, tweak ...func(*broker.Config)) error {
	if c.Node(id) != nil {
		return fmt.Errorf("testcluster: node %d is running", id)
	}
	c.mu.Lock()
	if r, ok := c.held[id]; ok {
		r.release()
		delete(c.held, id)
	}
	c.mu.Unlock()
	lis, err := c.rebind(id)
	if err != nil {
		return err
	}
	cfg := c.config(id, lis)
	for _, fn := range tweak {
		fn(&cfg)
	}
	b, err := c.startConfig(cfg)
	if err != nil {
		c.hold(id) // the failed start let go of it
		return err
	}
	c.set(id, b)
	return nil
}

// rebind listens on node id's old address again, retrying while the old
// socket is being released.
func (c *Cluster) rebind(id int32) (net.Listener, error) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		l, err := net.Listen("tcp", c.addrs[id-1])
		if err == nil {
			return l, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("testcluster: rebind %s: %w", c.addrs[id-1], err)
		}
		time.Sleep(20 * time.Millisecond) // polling for the port, not synchronising with a node
	}
}

// Partition cuts the network between node a and each of others (every
// other node when none is named), in both directions, closing the open
// connections. Connections from the test (Conn) are not affected.
func (c *Cluster) Partition(a int32, others ...int32) {
	if len(others) == 0 {
		others = c.IDs()
	}
	c.net.cut(a, others)
}

// Heal restores every link cut by Partition.
func (c *Cluster) Heal() { c.net.heal() }

// close stops every running node and the test's connections.
func (c *Cluster) close() {
	c.mu.Lock()
	conns := c.conns
	c.conns = map[int32]*grpc.ClientConn{}
	held := c.held
	c.held = map[int32]*reservation{}
	c.mu.Unlock()
	for _, r := range held {
		r.release()
	}
	for _, cc := range conns {
		_ = cc.Close()
	}
	var wg sync.WaitGroup
	for _, id := range c.Running() {
		b := c.take(id)
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Stopping everything at once, a controlled shutdown would
			// wait for a controller that is itself stopping: skip it (a
			// done context), as for Kill, but keep the clean marker.
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if err := b.Shutdown(ctx); err != nil {
				c.t.Logf("testcluster: shutdown node %d: %v", id, err)
			}
		}()
	}
	wg.Wait()
}

// logSink sends every node's log lines to t.Log (shown for failed tests
// and with -v); QUIRE_TEST_LOG=debug raises the level. After the test it
// drops them.
type logSink struct {
	t     testing.TB
	level hclog.Level
	mu    sync.Mutex
	done  bool
}

func newLogSink(t testing.TB) *logSink {
	level := hclog.Warn
	if v := os.Getenv("QUIRE_TEST_LOG"); v != "" {
		if l := hclog.LevelFromString(v); l != hclog.NoLevel {
			level = l
		} else {
			level = hclog.Debug
		}
	}
	return &logSink{t: t, level: level}
}

func (s *logSink) logger(name string) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: name, Level: s.level, Output: s})
}

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.done {
		s.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (s *logSink) close() {
	s.mu.Lock()
	s.done = true
	s.mu.Unlock()
}

// Add starts one more node, broker-only, with the next id (the number of
// nodes so far plus one), and waits until it is ready (registered and
// unfenced, as every node sees it): a broker joining a running cluster.
// Call it from the test's goroutine.
func (c *Cluster) Add() int32 {
	c.t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		c.t.Fatalf("testcluster: listen: %v", err)
	}
	dir := c.t.TempDir()
	c.mu.Lock()
	c.addrs = append(c.addrs, l.Addr().String())
	c.dirs = append(c.dirs, dir)
	c.nodes = append(c.nodes, nil)
	c.n++
	id := int32(c.n)
	c.mu.Unlock()
	c.net.mu.Lock()
	c.net.byAddr[l.Addr().String()] = id
	c.net.mu.Unlock()
	b, err := c.start(id, l)
	if err != nil {
		c.t.Fatalf("testcluster: start node %d: %v", id, err)
	}
	c.set(id, b)
	ctx, cancel := context.WithTimeout(context.Background(), ReadyTimeout)
	defer cancel()
	if err := c.waitReady(ctx, id); err != nil {
		c.t.Fatalf("testcluster: node %d: %v", id, err)
	}
	// As New does: every node sees it live before the test goes on.
	c.WaitImage(ctx, func(img *metadata.Image) bool {
		br, ok := img.Broker(id)
		return ok && !br.Fenced
	})
	return id
}
