// Package metadata is Quire's KRaft: a hashicorp/raft quorum whose FSM is
// the cluster metadata image (brokers, topics, assignments, leaders,
// epochs, ISRs) kept in bbolt, and the controller that runs on the raft
// leader. It imports no gRPC: the raft transport is passed in (raftgrpc),
// and controlplane adapts the controller to gRPC.
//
// The command set is versioned by the finalized metadata.version feature
// level (features.go): the controller proposes, and the FSM applies, only
// commands at or below it, and raises it only to a level every registered
// broker supports.
//
// Files under Config.Dir:
//
//	meta.properties   node.id and cluster.id, checked on every start
//	raft.db           raft log and stable store (raft-boltdb)
//	snapshots/        raft file snapshots (bbolt image copies)
//	metadata.db       the image store (see schema.go)
package metadata

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// Voter is one member of controller.quorum.voters: a node id and its gRPC
// address.
type Voter struct {
	ID   int32
	Addr string
}

// Config configures a metadata node.
type Config struct {
	NodeID    int32
	ClusterID string // required to bootstrap; checked against stored state
	Dir       string // raft log/stable store, snapshots, image store

	Voter          bool    // process.roles includes controller
	Voters         []Voter // controller.quorum.voters
	AdvertisedAddr string
	Rack           string

	Transport raft.Transport // built by the caller (raftgrpc.New); closed by Shutdown
	Logger    hclog.Logger

	// broker.heartbeat.interval.ms and broker.session.timeout.ms.
	BrokerHeartbeatInterval, BrokerSessionTimeout time.Duration
	// Raft timings; zero means hashicorp/raft's defaults.
	RaftHeartbeatTimeout, RaftElectionTimeout, RaftLeaderLeaseTimeout, RaftCommitTimeout time.Duration
	// SnapshotThreshold is the number of log entries between snapshots
	// (zero: raft's default, 8192); SnapshotInterval how often to check.
	SnapshotThreshold uint64
	SnapshotInterval  time.Duration
	// TrailingLogs kept after a snapshot (zero: raft's default, 10240).
	TrailingLogs uint64

	AutoLeaderRebalance   bool          // auto.leader.rebalance.enable
	LeaderRebalanceEvery  time.Duration // leader.imbalance.check.interval (default 30s)
	UncleanLeaderElection bool          // unclean.leader.election.enable
	// Balancer (balancer.enable) has the controller start, every
	// BalanceEvery (balancer.interval.seconds, default 5 min) and while
	// no reassignment is pending, the moves PlanReassignment proposes,
	// at most BalanceMaxMoves (balancer.max.partition.moves, default 10)
	// at a time.
	Balancer        bool
	BalanceEvery    time.Duration
	BalanceMaxMoves int
	// ApplyTimeout bounds a metadata write when the caller's context has
	// no deadline (default 10s).
	ApplyTimeout time.Duration

	// MetadataVersions is the range of metadata.version levels this node
	// registers as supported and, as controller, may finalize; the zero
	// value is everything this code supports (SupportedMetadataVersions).
	// A narrower range stands for a node running an older release.
	MetadataVersions VersionRange
	// ManualMetadataVersion keeps the finalized metadata.version where it
	// is until UpdateMetadataVersion raises it; otherwise the controller
	// raises it as soon as every voter has registered and every registered
	// broker supports a higher level.
	ManualMetadataVersion bool

	// Clock stamps the offset commits' times (which the group
	// coordinator's offsets retention counts from); nil is the system
	// clock.
	Clock Clock
	// Coordinator makes the consumer group coordinator this node runs
	// while it is the controller (package coordinator), given the
	// metadata log it writes through; nil: none, and the controller
	// answers group heartbeats ErrNotCoordinator.
	Coordinator func(*GroupLog) (GroupCoordinator, error)
	// TxnCoordinator makes the transaction coordinator this node runs
	// while it is the controller, writing through the same log; nil: the
	// transactional calls are answered ErrNotCoordinator.
	TxnCoordinator func(*GroupLog) (TxnCoordinator, error)
}

// DefaultConfig returns Kafka's broker session defaults (heartbeat 2s,
// session 9s) and hashicorp/raft's own timings (1s heartbeat and election
// timeouts, 500ms leader lease), as Kafka's KRaft (1s election timeout): a
// lost controller is replaced in about 2-3s, and a loaded machine does not
// make the quorum churn. Tests shorten them.
func DefaultConfig() Config {
	return Config{
		Voter:                   true,
		BrokerHeartbeatInterval: 2 * time.Second,
		BrokerSessionTimeout:    9 * time.Second,
		RaftHeartbeatTimeout:    time.Second,
		RaftElectionTimeout:     time.Second,
		RaftLeaderLeaseTimeout:  500 * time.Millisecond,
		RaftCommitTimeout:       20 * time.Millisecond,
		LeaderRebalanceEvery:    30 * time.Second,
		ApplyTimeout:            10 * time.Second,
	}
}

// Validate checks a Config.
func (c *Config) Validate() error {
	switch {
	case c.NodeID < 0:
		return fmt.Errorf("metadata: node id %d: must be >= 0", c.NodeID)
	case c.Dir == "":
		return errors.New("metadata: dir is required")
	case c.Transport == nil:
		return errors.New("metadata: transport is required")
	case c.Voter && len(c.Voters) == 0:
		return errors.New("metadata: a controller needs controller.quorum.voters")
	}
	if c.MetadataVersions != (VersionRange{}) {
		if err := c.MetadataVersions.validate(); err != nil {
			return err
		}
	}
	if c.Voter {
		found := false
		for _, v := range c.Voters {
			if v.ID == c.NodeID {
				found = true
			}
		}
		if !found {
			return fmt.Errorf("metadata: node %d is a controller but not in controller.quorum.voters", c.NodeID)
		}
	}
	return nil
}

// Node is one member of the metadata quorum: a voter (controller role) or
// a non-voter (broker-only), applying the metadata log to its image.
type Node struct {
	cfg    Config
	logger hclog.Logger
	fsm    *FSM
	store  *raftboltdb.BoltStore
	raft   *raft.Raft
	ctl    *Controller

	subMu  sync.Mutex
	subs   map[int]chan struct{}
	nextID int

	stopCh   chan struct{}
	wg       sync.WaitGroup
	stopOnce sync.Once
}

// Open starts a node. With no raft state a voter bootstraps the cluster
// from Voters; with state it rejoins. A stored cluster id that differs from
// Config.ClusterID fails with ErrClusterIDMismatch.
func Open(cfg Config) (*Node, error) {
	return openNode(cfg, (*raft.Raft).LeaderCh)
}

// openNode is Open with the source of leadership changes: raft's leader
// channel, or (in tests) one that holds its signals back.
func openNode(cfg Config, leadership func(*raft.Raft) <-chan bool) (*Node, error) {
	def := DefaultConfig()
	if cfg.BrokerHeartbeatInterval <= 0 {
		cfg.BrokerHeartbeatInterval = def.BrokerHeartbeatInterval
	}
	if cfg.BrokerSessionTimeout <= 0 {
		cfg.BrokerSessionTimeout = def.BrokerSessionTimeout
	}
	if cfg.BalanceEvery <= 0 {
		cfg.BalanceEvery = 5 * time.Minute
	}
	if cfg.BalanceMaxMoves <= 0 {
		cfg.BalanceMaxMoves = 10
	}
	if cfg.LeaderRebalanceEvery <= 0 {
		cfg.LeaderRebalanceEvery = def.LeaderRebalanceEvery
	}
	if cfg.ApplyTimeout <= 0 {
		cfg.ApplyTimeout = def.ApplyTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.MetadataVersions == (VersionRange{}) {
		cfg.MetadataVersions = SupportedMetadataVersions()
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	props, err := checkProperties(cfg.Dir, cfg.NodeID, cfg.ClusterID)
	if err != nil {
		return nil, err
	}
	if cfg.ClusterID == "" {
		cfg.ClusterID = props.ClusterID
	}
	logger := cfg.Logger.Named("metadata")
	fsm, err := OpenFSM(filepath.Join(cfg.Dir, "metadata.db"), logger)
	if err != nil {
		return nil, err
	}
	if id := fsm.Image().ClusterID(); id != "" && cfg.ClusterID != "" && id != cfg.ClusterID {
		fsm.Close()
		return nil, fmt.Errorf("%w: dir %s belongs to cluster %q, configured %q", ErrClusterIDMismatch, cfg.Dir, id, cfg.ClusterID)
	}
	if err := writeProperties(cfg.Dir, properties{NodeID: cfg.NodeID, ClusterID: cfg.ClusterID}); err != nil {
		fsm.Close()
		return nil, err
	}
	n := &Node{cfg: cfg, logger: logger, fsm: fsm, subs: map[int]chan struct{}{}, stopCh: make(chan struct{})}
	fsm.onChange = n.notify
	if n.ctl, err = newController(n); err != nil {
		fsm.Close()
		return nil, err
	}
	if err := n.startRaft(); err != nil {
		fsm.Close()
		return nil, err
	}
	n.wg.Add(1)
	go n.watchLeadership(leadership(n.raft))
	return n, nil
}

func (n *Node) startRaft() error {
	cfg := n.cfg
	rc := raft.DefaultConfig()
	rc.LocalID = serverID(cfg.NodeID)
	rc.Logger = n.logger.Named("raft")
	if cfg.RaftHeartbeatTimeout > 0 {
		rc.HeartbeatTimeout = cfg.RaftHeartbeatTimeout
	}
	if cfg.RaftElectionTimeout > 0 {
		rc.ElectionTimeout = cfg.RaftElectionTimeout
	}
	if cfg.RaftLeaderLeaseTimeout > 0 {
		rc.LeaderLeaseTimeout = cfg.RaftLeaderLeaseTimeout
	}
	if cfg.RaftCommitTimeout > 0 {
		rc.CommitTimeout = cfg.RaftCommitTimeout
	}
	if cfg.SnapshotThreshold > 0 {
		rc.SnapshotThreshold = cfg.SnapshotThreshold
	}
	if cfg.SnapshotInterval > 0 {
		rc.SnapshotInterval = cfg.SnapshotInterval
	}
	if cfg.TrailingLogs > 0 {
		rc.TrailingLogs = cfg.TrailingLogs
	}
	if err := raft.ValidateConfig(rc); err != nil {
		return fmt.Errorf("metadata: raft config: %w", err)
	}
	store, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(cfg.Dir, "raft.db")})
	if err != nil {
		return fmt.Errorf("metadata: open raft store: %w", err)
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.Dir, 2, n.logger.Named("snapshots"))
	if err != nil {
		store.Close()
		return fmt.Errorf("metadata: open snapshot store: %w", err)
	}
	if cfg.Voter {
		has, err := raft.HasExistingState(store, store, snaps)
		if err != nil {
			store.Close()
			return fmt.Errorf("metadata: %w", err)
		}
		if !has {
			if cfg.ClusterID == "" {
				store.Close()
				return errors.New("metadata: a cluster id is required to bootstrap a new cluster")
			}
			var servers []raft.Server
			for _, v := range cfg.Voters {
				servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: serverID(v.ID), Address: raft.ServerAddress(v.Addr)})
			}
			if err := raft.BootstrapCluster(rc, store, store, snaps, cfg.Transport, raft.Configuration{Servers: servers}); err != nil {
				store.Close()
				return fmt.Errorf("metadata: bootstrap: %w", err)
			}
			n.logger.Info("bootstrapped metadata quorum", "cluster_id", cfg.ClusterID, "voters", len(servers))
		}
	}
	r, err := raft.NewRaft(rc, n.fsm, store, store, snaps, cfg.Transport)
	if err != nil {
		store.Close()
		return fmt.Errorf("metadata: start raft: %w", err)
	}
	n.store, n.raft = store, r
	return nil
}

func serverID(id int32) raft.ServerID { return raft.ServerID(strconv.Itoa(int(id))) }

// Image returns the current metadata image.
func (n *Node) Image() *Image { return n.fsm.Image() }

// AppliedIndex is the raft index of the last applied metadata command.
func (n *Node) AppliedIndex() uint64 { return n.fsm.Image().Index() }

// Subscribe returns a channel signalled (coalesced) after each change to
// the image, and a cancel func.
func (n *Node) Subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	n.subMu.Lock()
	id := n.nextID
	n.nextID++
	n.subs[id] = ch
	n.subMu.Unlock()
	return ch, func() {
		n.subMu.Lock()
		delete(n.subs, id)
		n.subMu.Unlock()
	}
}

func (n *Node) notify() {
	n.subMu.Lock()
	defer n.subMu.Unlock()
	for _, ch := range n.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Controller returns the current controller (the raft leader) as known to
// this node.
func (n *Node) Controller() (id int32, addr string, ok bool) {
	a, sid := n.raft.LeaderWithID()
	if a == "" {
		return -1, "", false
	}
	v, err := strconv.Atoi(string(sid))
	if err != nil {
		return -1, string(a), false
	}
	return int32(v), string(a), true
}

// IsController reports whether this node is the raft leader.
func (n *Node) IsController() bool { return n.raft.State() == raft.Leader }

// Ctl returns the controller operations; off the leader they fail with a
// NotControllerError.
func (n *Node) Ctl() *Controller { return n.ctl }

// MetadataVersions is the range of metadata.version levels this node
// supports (Config.MetadataVersions), for its broker registration.
func (n *Node) MetadataVersions() VersionRange { return n.cfg.MetadataVersions }

// ID is this node's id.
func (n *Node) ID() int32 { return n.cfg.NodeID }

// Voters returns controller.quorum.voters as configured.
func (n *Node) Voters() []Voter { return append([]Voter(nil), n.cfg.Voters...) }

// Raft exposes the raft instance for stats and tests.
func (n *Node) Raft() *raft.Raft { return n.raft }

// Shutdown stops the controller loop and raft, closes the transport and
// the stores.
func (n *Node) Shutdown() error {
	var errs []error
	n.stopOnce.Do(func() {
		close(n.stopCh)
		n.wg.Wait()
		n.ctl.stop()
		if err := n.raft.Shutdown().Error(); err != nil {
			errs = append(errs, fmt.Errorf("metadata: raft shutdown: %w", err))
		}
		if c, ok := n.cfg.Transport.(raft.WithClose); ok {
			if err := c.Close(); err != nil {
				errs = append(errs, err)
			}
		}
		if err := n.store.Close(); err != nil {
			errs = append(errs, fmt.Errorf("metadata: close raft store: %w", err))
		}
		if err := n.fsm.Close(); err != nil {
			errs = append(errs, fmt.Errorf("metadata: close image store: %w", err))
		}
	})
	return errors.Join(errs...)
}

// watchLeadership starts the controller loop when this node becomes raft
// leader and stops it when it loses leadership. A "leader" signal may
// stand for a lost and regained leadership (raft keeps only the last
// value), so the loop is keyed by the raft term, not the boolean: a new
// term restarts it. It also records the cluster id in meta.properties once
// the image knows it.
func (n *Node) watchLeadership(leadership <-chan bool) {
	defer n.wg.Done()
	changes, cancel := n.Subscribe()
	defer cancel()
	propsDone := n.cfg.ClusterID != ""
	for {
		select {
		case leader := <-leadership:
			if leader {
				n.ctl.start(n.raft.CurrentTerm())
			} else {
				n.ctl.stop()
			}
		case <-changes:
			if !propsDone {
				if id := n.Image().ClusterID(); id != "" {
					if err := writeProperties(n.cfg.Dir, properties{NodeID: n.cfg.NodeID, ClusterID: id}); err != nil {
						n.logger.Error("cannot record cluster id", "error", err)
					}
					propsDone = true
				}
			}
		case <-n.stopCh:
			n.ctl.stop()
			return
		}
	}
}
