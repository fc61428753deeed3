package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// Cluster is n `quire server` processes on loopback, each a broker and a
// metadata voter, with short session and fetch timings (TestTimings) so
// that faults play out in seconds, or the defaults (UseDefaultTimings).
type Cluster struct {
	bin            string
	dir            string
	nodes          []*Node
	net            *Network // nil: network faults unavailable
	logf           func(format string, args ...any)
	defaultTimings bool
}

// Node is one process of the cluster.
type Node struct {
	ID   int
	Addr string
	Dir  string
	gid  uint32 // the group it runs as, which the network rules match

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	paused bool
}

// ClusterSettings are the settings every node gets (QUIRE_* variables),
// before its own (id, addresses, directories).
var ClusterSettings = []string{
	"QUIRE_CLUSTER_ID=chaos",
	"QUIRE_PROCESS_ROLES=broker,controller",
	"QUIRE_NUM_PARTITIONS=3",
	"QUIRE_DEFAULT_REPLICATION_FACTOR=3",
	"QUIRE_MIN_INSYNC_REPLICAS=2",
	"QUIRE_AUTO_CREATE_TOPICS_ENABLE=false",
	"QUIRE_LOG_LEVEL=info",
	// Retention looks every second, so that a node whose clock jumps
	// deletes at once whatever it takes to be past retention.ms (the
	// workload's topic keeps everything: see createTopic).
	"QUIRE_LOG_RETENTION_CHECK_INTERVAL_MS=1000",
}

// TestTimings are the session, ISR and fetch timings the nodes get after
// ClusterSettings, unless UseDefaultTimings was called: short, so that a
// fault plays out in seconds.
var TestTimings = []string{
	"QUIRE_BROKER_HEARTBEAT_INTERVAL_MS=500",
	"QUIRE_BROKER_SESSION_TIMEOUT_MS=3000",
	"QUIRE_REPLICA_LAG_TIME_MAX_MS=3000",
	"QUIRE_REPLICA_FETCH_WAIT_MAX_MS=250",
	"QUIRE_REPLICA_FETCH_BACKOFF_MS=200",
	"QUIRE_METADATA_WRITE_TIMEOUT_MS=5000",
	"QUIRE_GROUP_CONSUMER_SESSION_TIMEOUT_MS=4000",
	"QUIRE_GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS=500",
	// The coordinator completes half-ended transactions and aborts timed-out
	// ones within 2 s, not 10.
	"QUIRE_TRANSACTION_ABORT_TIMED_OUT_TRANSACTION_CLEANUP_INTERVAL_MS=2000",
}

// UseDefaultTimings makes nodes started from now on run with the
// defaults of every timing (broker.session.timeout.ms 9 s,
// replica.lag.time.max.ms 30 s...) instead of TestTimings.
func (c *Cluster) UseDefaultTimings() { c.defaultTimings = true }

// NewCluster prepares n nodes under dir, on free loopback ports. With
// net, the nodes run as groups its rules can cut off from each other.
func NewCluster(bin, dir string, n int, net *Network, logf func(string, ...any)) (*Cluster, error) {
	c := &Cluster{bin: bin, dir: dir, net: net, logf: logf}
	ports, err := freePorts(n)
	if err != nil {
		return nil, err
	}
	for i := range n {
		nd := &Node{ID: i + 1, Addr: fmt.Sprintf("127.0.0.1:%d", ports[i]), Dir: filepath.Join(dir, fmt.Sprintf("node%d", i+1))}
		if net != nil {
			nd.gid = net.gidOf(nd.ID)
		}
		c.nodes = append(c.nodes, nd)
	}
	return c, nil
}

// freePorts finds n loopback ports nothing listens on (by listening on
// them and letting go; the nodes bind them a moment later).
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var out []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// Nodes returns the nodes.
func (c *Cluster) Nodes() []*Node { return c.nodes }

// Node returns node id.
func (c *Cluster) Node(id int) *Node { return c.nodes[id-1] }

// Brokers is every node's address, comma-separated.
func (c *Cluster) Brokers() []string {
	var out []string
	for _, n := range c.nodes {
		out = append(out, n.Addr)
	}
	return out
}

func (c *Cluster) voters() string {
	var v []string
	for _, n := range c.nodes {
		v = append(v, fmt.Sprintf("%d@%s", n.ID, n.Addr))
	}
	return strings.Join(v, ",")
}

// StartAll starts every node and waits until each serves.
func (c *Cluster) StartAll(ctx context.Context) error {
	for _, n := range c.nodes {
		if err := c.Start(n); err != nil {
			return err
		}
	}
	for _, n := range c.nodes {
		if err := c.WaitServing(ctx, n); err != nil {
			return err
		}
	}
	return nil
}

// Start starts a node's process (it must not be running).
func (c *Cluster) Start(n *Node) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		return fmt.Errorf("chaos: node %d is running", n.ID)
	}
	if err := os.MkdirAll(n.Dir, 0o755); err != nil {
		return err
	}
	logFile, err := os.OpenFile(filepath.Join(n.Dir, "quire.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(c.bin, "server")
	cmd.Env = append(os.Environ(), ClusterSettings...)
	if !c.defaultTimings {
		cmd.Env = append(cmd.Env, TestTimings...)
	}
	cmd.Env = append(cmd.Env,
		"QUIRE_NODE_ID="+strconv.Itoa(n.ID),
		"QUIRE_LISTENERS="+n.Addr,
		"QUIRE_ADVERTISED_LISTENERS="+n.Addr,
		"QUIRE_CONTROLLER_QUORUM_VOTERS="+c.voters(),
		"QUIRE_LOG_DIRS="+filepath.Join(n.Dir, "data"),
		// Read only by a test build (go build -tags chaosfs).
		"QUIRE_CHAOS_DISK_FAULT="+n.diskFaultFile(),
		"QUIRE_CHAOS_CLOCK_OFFSET="+n.clockFile(),
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if n.gid != 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(os.Getuid()), Gid: n.gid, NoSetGroups: true}
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("chaos: start node %d: %w", n.ID, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(exited)
	}()
	n.cmd, n.exited, n.paused = cmd, exited, false
	return nil
}

// Running reports whether the node's process is up (paused counts).
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd != nil
}

// Kill sends SIGKILL (resuming a paused process first is not needed) and
// waits for the process to go.
func (c *Cluster) Kill(n *Node) error { return c.stop(n, syscall.SIGKILL, 10*time.Second) }

// Stop sends SIGTERM and waits, then kills after timeout.
func (c *Cluster) Stop(n *Node, timeout time.Duration) error {
	return c.stop(n, syscall.SIGTERM, timeout)
}

func (c *Cluster) stop(n *Node, sig syscall.Signal, timeout time.Duration) error {
	n.mu.Lock()
	cmd, exited, paused := n.cmd, n.exited, n.paused
	n.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Signal(sig)
	if paused && sig != syscall.SIGKILL {
		_ = cmd.Process.Signal(syscall.SIGCONT)
	}
	select {
	case <-exited:
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-exited
	}
	n.mu.Lock()
	n.cmd, n.paused = nil, false
	n.mu.Unlock()
	return nil
}

// Pause stops the process with SIGSTOP; Resume continues it.
func (c *Cluster) Pause(n *Node) error { return c.signal(n, syscall.SIGSTOP, true) }

// Resume continues a paused process.
func (c *Cluster) Resume(n *Node) error { return c.signal(n, syscall.SIGCONT, false) }

func (c *Cluster) signal(n *Node, sig syscall.Signal, paused bool) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return fmt.Errorf("chaos: node %d is not running", n.ID)
	}
	n.paused = paused
	return n.cmd.Process.Signal(sig)
}

// WaitServing polls the node's grpc.health.v1 until it says SERVING.
func (c *Cluster) WaitServing(ctx context.Context, n *Node) error {
	cc, err := grpc.NewClient(n.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer cc.Close()
	h := healthpb.NewHealthClient(cc)
	for {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		resp, err := h.Check(rctx, &healthpb.HealthCheckRequest{})
		cancel()
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return nil
		}
		if !n.Running() {
			return fmt.Errorf("chaos: node %d exited while starting (see %s)", n.ID, filepath.Join(n.Dir, "quire.log"))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("chaos: node %d not serving: %w (last: %v)", n.ID, ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// StopAll stops every node (SIGCONT first for paused ones).
func (c *Cluster) StopAll() {
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		wg.Go(func() { _ = c.Stop(n, 20*time.Second) })
	}
	wg.Wait()
}

// diskFaultFile is the file whose existence fails the node's disk (in a
// server built with -tags chaosfs).
func (n *Node) diskFaultFile() string { return filepath.Join(n.Dir, "disk-fault") }

// DiskFaults reports whether the nodes can fail their disks: their server
// is a test build that says so when it starts (checked in node 1's log).
func (c *Cluster) DiskFaults() bool {
	b, err := os.ReadFile(filepath.Join(c.nodes[0].Dir, "quire.log"))
	return err == nil && bytes.Contains(b, []byte("chaos: disk faults armed"))
}

// clockFile holds the node's clock offset (in a server built with -tags
// chaosfs): a duration its wall clock is stepped by.
func (n *Node) clockFile() string { return filepath.Join(n.Dir, "clock-offset") }

// ClockJumps reports whether the nodes' clocks can be stepped: their
// server is a test build that says so when it starts (node 1's log).
func (c *Cluster) ClockJumps() bool {
	b, err := os.ReadFile(filepath.Join(c.nodes[0].Dir, "quire.log"))
	return err == nil && bytes.Contains(b, []byte("chaos: clock jumps armed"))
}

// StepClock sets the node's wall clock d away from the machine's (0: in
// step again). The node reads it within a tenth of a second of running.
func (c *Cluster) StepClock(n *Node, d time.Duration) error {
	// Renamed into place, so that the node never reads half of it.
	tmp := n.clockFile() + ".tmp"
	if err := os.WriteFile(tmp, []byte(d.String()+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, n.clockFile())
}

// FailDisk makes every write and fsync of the node's partition logs fail
// with EIO (on), or work again (off).
func (c *Cluster) FailDisk(n *Node, on bool) error {
	if on {
		return os.WriteFile(n.diskFaultFile(), nil, 0o644)
	}
	if err := os.Remove(n.diskFaultFile()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// TearTail cuts up to maxBytes off the end of the active (last) segment
// of one partition directory of a stopped node, chosen by pick among
// those with data; it returns what it cut.
func (c *Cluster) TearTail(n *Node, pick func(int) int, maxBytes int64) (string, int64, error) {
	if n.Running() {
		return "", 0, fmt.Errorf("chaos: node %d is running", n.ID)
	}
	segs, err := filepath.Glob(filepath.Join(n.Dir, "data", "*-*", "*.log"))
	if err != nil {
		return "", 0, err
	}
	// The last segment of each partition directory.
	last := map[string]string{}
	for _, s := range segs {
		d := filepath.Dir(s)
		if s > last[d] {
			last[d] = s
		}
	}
	var cands []string
	for _, s := range last {
		if st, err := os.Stat(s); err == nil && st.Size() > 0 {
			cands = append(cands, s)
		}
	}
	if len(cands) == 0 {
		return "", 0, nil
	}
	sortStrings(cands)
	seg := cands[pick(len(cands))]
	st, err := os.Stat(seg)
	if err != nil {
		return "", 0, err
	}
	cut := min(st.Size(), 1+int64(pick(int(maxBytes))))
	if err := os.Truncate(seg, st.Size()-cut); err != nil {
		return "", 0, err
	}
	return seg, cut, nil
}
