package broker

// Joining the metadata quorum and the broker's lifecycle in it: the raft
// node over the broker's gRPC server, registration and heartbeats, and the
// controlled shutdown.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/quirelog/quire/config"
	"github.com/quirelog/quire/controlplane"
	"github.com/quirelog/quire/coordinator"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/raftgrpc"
	"github.com/quirelog/quire/replica"
	"github.com/quirelog/quire/txncoord"
)

// cluster is the broker's membership of the cluster: it runs the raft
// node (over the broker's gRPC server) and the broker lifecycle
// (quorum.go), watches the image and reconciles the replicas with it
// (watcher.go), calls the controller (fwd), stands for the
// cluster to the replica manager (replica_deps.go) and holds the
// node-to-node connections (peers.go).
type cluster struct {
	cfg         *Config
	logger      hclog.Logger
	rm          *replica.Manager // reconciled by the watcher; given by start
	defaults    config.TopicDefaults
	incarnation string
	// maxPartitions is this node's partition budget, reported in its
	// heartbeats (max.partitions.per.broker, or derived: capacity.go).
	maxPartitions int32

	transport *raftgrpc.Transport
	node      *metadata.Node
	fwd       *controlplane.Forwarder
	// markers writes the transaction coordinator's markers through the
	// request core once the broker has built it.
	markers *markerWriter
	// lifecycle is set by start, after the listeners serve: calls that
	// arrive before it (GetMetadata asks sessionLost) see nil.
	lifecycle atomic.Pointer[controlplane.Lifecycle]

	stop    chan struct{}
	stopped chan struct{}

	mu         sync.Mutex
	reconciled *metadata.Image // last image the replicas were brought in line with
	changed    chan struct{}   // closed and replaced after each reconcile
	ready      chan struct{}   // closed once this broker is registered and unfenced
	readyOnce  sync.Once

	creds credentials.TransportCredentials // of node-to-node connections (security.go)

	peersMu     sync.Mutex
	peers       map[string]*grpc.ClientConn // node-to-node connections by address (peers.go)
	peersClosed bool
}

func newCluster(cfg *Config, logger hclog.Logger) *cluster {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return &cluster{
		cfg:         cfg,
		logger:      logger,
		defaults:    cfg.TopicDefaults(),
		incarnation: hex.EncodeToString(b[:]),
		stop:        make(chan struct{}),
		stopped:     make(chan struct{}),
		changed:     make(chan struct{}),
		ready:       make(chan struct{}),
	}
}

// register adds the raft transport and controller service to gs. It must
// run before gs serves.
func (c *cluster) register(gs *grpc.Server, advertised string) {
	c.transport = raftgrpc.New(raft.ServerAddress(advertised),
		raftgrpc.WithLogger(c.logger.Named("raft-transport")),
		raftgrpc.WithDialOptions(c.dialOptions()...))
	c.transport.Register(gs)
}

// registerControllerService adds the controller RPCs; the node must be open.
func (c *cluster) registerControllerService(gs *grpc.Server) {
	controlplane.NewService(c.node).Register(gs)
}

// open starts the raft node. It must run before gs serves (the controller
// service needs the node) but raft only talks to peers once gs serves.
func (c *cluster) open(advertised string) error {
	voters, err := config.ParseVoters(c.cfg.ControllerQuorumVoters)
	if err != nil {
		return err
	}
	if len(voters) == 0 {
		voters = []config.Voter{{ID: c.cfg.NodeID, Addr: advertised}}
	}
	mc := metadata.DefaultConfig()
	mc.NodeID = c.cfg.NodeID
	mc.ClusterID = c.cfg.ClusterID
	mc.Dir = c.cfg.MetadataDir()
	mc.Voter = c.cfg.IsController()
	mc.Voters = mc.Voters[:0]
	for _, v := range voters {
		mc.Voters = append(mc.Voters, metadata.Voter{ID: v.ID, Addr: v.Addr})
	}
	mc.AdvertisedAddr = advertised
	mc.Rack = c.cfg.Rack
	mc.Transport = c.transport
	mc.Logger = c.logger
	mc.BrokerHeartbeatInterval = ms(c.cfg.BrokerHeartbeatIntervalMs)
	mc.BrokerSessionTimeout = ms(c.cfg.BrokerSessionTimeoutMs)
	mc.SnapshotThreshold = c.cfg.RaftSnapshotThreshold
	mc.SnapshotInterval = c.cfg.RaftSnapshotInterval
	mc.TrailingLogs = c.cfg.RaftTrailingLogs
	mc.ApplyTimeout = ms(c.cfg.MetadataWriteTimeoutMs)
	mc.UncleanLeaderElection = c.cfg.UncleanLeaderElectionEnable
	mc.AutoLeaderRebalance = c.cfg.AutoLeaderRebalanceEnable
	mc.LeaderRebalanceEvery = time.Duration(c.cfg.LeaderImbalanceCheckIntervalSecs) * time.Second
	mc.Balancer = c.cfg.BalancerEnable
	mc.BalanceEvery = time.Duration(c.cfg.BalancerIntervalSecs) * time.Second
	mc.BalanceMaxMoves = int(c.cfg.BalancerMaxPartitionMoves)
	mc.MetadataVersions = c.cfg.MetadataVersions
	mc.Clock = c.cfg.GroupClock
	if mc.Clock == nil {
		mc.Clock = c.cfg.NodeClock()
	}
	cc := coordinator.Config{
		Groups:           c.cfg.GroupConfig(),
		Clock:            mc.Clock,
		Logs:             c,
		LagRefresh:       ms(c.cfg.GroupLagRefreshMs),
		OffsetsRetention: time.Duration(c.cfg.OffsetsRetentionMinutes) * time.Minute,
		WriteTimeout:     mc.ApplyTimeout,
		Logger:           c.logger.Named("coordinator"),
	}
	mc.Coordinator = func(l *metadata.GroupLog) (metadata.GroupCoordinator, error) {
		return coordinator.New(l, cc)
	}
	c.markers = &markerWriter{c: c}
	tc := txncoord.Config{
		MaxTimeoutMs:  c.cfg.TransactionMaxTimeoutMs,
		CheckInterval: ms(c.cfg.TransactionAbortCheckIntervalMs),
		IDExpiration:  ms(c.cfg.TransactionalIDExpirationMs),
		WriteTimeout:  mc.ApplyTimeout,
		Clock:         mc.Clock,
		Logger:        c.logger.Named("txncoord"),
	}
	mc.TxnCoordinator = func(l *metadata.GroupLog) (metadata.TxnCoordinator, error) {
		return txncoord.New(l, c.markers, l, tc), nil
	}
	if len(voters) == 1 && c.cfg.RaftHeartbeatTimeout == 0 {
		// A one-voter quorum (a dev node) has no peer to lose touch with:
		// elect itself at once instead of after a 1-2s heartbeat timeout.
		mc.RaftHeartbeatTimeout = 100 * time.Millisecond
		mc.RaftElectionTimeout = 100 * time.Millisecond
		mc.RaftLeaderLeaseTimeout = 50 * time.Millisecond
	}
	if c.cfg.RaftHeartbeatTimeout > 0 {
		mc.RaftHeartbeatTimeout = c.cfg.RaftHeartbeatTimeout
		mc.RaftElectionTimeout = c.cfg.RaftHeartbeatTimeout
		mc.RaftLeaderLeaseTimeout = c.cfg.RaftHeartbeatTimeout / 2
		if c.cfg.RaftLeaderLeaseTimeout > 0 {
			mc.RaftLeaderLeaseTimeout = c.cfg.RaftLeaderLeaseTimeout
		}
		// Never longer than the default: it bounds how soon followers
		// learn that an entry committed, and so apply it.
		mc.RaftCommitTimeout = min(mc.RaftCommitTimeout, c.cfg.RaftHeartbeatTimeout/10)
	}
	node, err := metadata.Open(mc)
	if err != nil {
		return fmt.Errorf("broker: open metadata: %w", err)
	}
	c.node = node
	c.fwd = controlplane.NewForwarder(node, c.dial, ms(c.cfg.MetadataWriteTimeoutMs))
	return nil
}

// start begins registration, heartbeats and the image watcher, which
// reconciles rm with every image.
func (c *cluster) start(advertised, directoryID string, endpoints []metadata.Endpoint, rm *replica.Manager) {
	c.rm = rm
	// The log directory id tells the controller whether this broker still
	// has the data it registered with before (see metadata.BrokerInfo).
	self := metadata.BrokerInfo{ID: c.cfg.NodeID, Incarnation: c.incarnation, Addr: advertised, Rack: c.cfg.Rack,
		DirectoryID: directoryID, Endpoints: endpoints, MetadataVersions: c.node.MetadataVersions(), MaxPartitions: c.maxPartitions}
	lc := controlplane.NewLifecycle(c.fwd, self, ms(c.cfg.BrokerHeartbeatIntervalMs), ms(c.cfg.BrokerSessionTimeoutMs), c.logger.Named("lifecycle"))
	c.lifecycle.Store(lc)
	lc.Start()
	go c.watch()
}

// sessionLost reports whether this broker has gone longer than
// broker.session.timeout.ms without the controller answering its
// heartbeat (see controlplane.Lifecycle.SessionLost): cut off from the
// controller, it stops taking produces as leader, stops asking for ISR
// changes, and says its metadata is stale, until heartbeats are answered
// again.
//
// Back in touch, it stays so until its image has applied as far as the
// controller's was when it answered again: until then it may still take
// itself for the leader of partitions moved while it was cut off.
func (c *cluster) sessionLost() bool {
	lc := c.lifecycle.Load()
	if lc == nil {
		return false
	}
	return lc.SessionLost(ms(c.cfg.BrokerSessionTimeoutMs)) || c.node.Image().Index() < lc.CatchUpIndex()
}

// sessionDeadline is when this broker's session with the controller
// runs out unless a heartbeat is answered before: broker.session.timeout.ms
// after the last answered one. ok is false before the first.
func (c *cluster) sessionDeadline() (time.Time, bool) {
	lc := c.lifecycle.Load()
	if lc == nil {
		return time.Time{}, false
	}
	last := lc.LastHeartbeat()
	if last.IsZero() {
		return time.Time{}, false
	}
	return last.Add(ms(c.cfg.BrokerSessionTimeoutMs)), true
}

// controllerInfo returns the current controller, -1 if unknown.
func (c *cluster) controllerID() int32 {
	if id, _, ok := c.node.Controller(); ok {
		return id
	}
	return -1
}

func (c *cluster) clusterID() string { return c.cfg.ClusterID }

func (c *cluster) isVoter(id int32) bool {
	voters, _ := config.ParseVoters(c.cfg.ControllerQuorumVoters)
	if len(voters) == 0 {
		return id == c.cfg.NodeID && c.cfg.IsController()
	}
	for _, v := range voters {
		if v.ID == id {
			return true
		}
	}
	return false
}

// shutdown deregisters (controlled shutdown), stops the watcher and the
// raft node. The gRPC server must still serve while the lifecycle stops.
// close, after the server stopped, releases the rest.
//
// The controlled shutdown is bounded by broker.session.timeout.ms (within
// ctx): past it the controller fences this broker anyway. Failing it (no
// quorum, no controller reachable) is logged, not returned: the local
// shutdown that follows (flush, checkpoints, clean marker) is still clean.
func (c *cluster) shutdown(ctx context.Context) error {
	var errs []error
	lc := c.lifecycle.Load()
	if lc != nil {
		timeout := ms(c.cfg.BrokerSessionTimeoutMs)
		sctx, cancel := context.WithTimeout(ctx, timeout)
		start := time.Now()
		err := lc.Stop(sctx)
		cancel()
		if err != nil && ctx.Err() == nil {
			c.logger.Warn("controlled shutdown failed; continuing the local shutdown (the controller fences this broker when its session expires)",
				"node_id", c.cfg.NodeID, "took", time.Since(start).Round(time.Millisecond), "timeout", timeout, "error", err)
		}
	}
	if c.node != nil {
		select {
		case <-c.stopped:
		default:
			close(c.stop)
			// The watcher may be mid-reconcile (local work only: it never
			// waits on the network); wait for it even when ctx is done, so
			// that storage is not closed under it.
			if lc != nil {
				<-c.stopped
			}
		}
		// Leave the quorum before the gRPC server drains: peers' raft
		// streams into this node never end on their own, and in-flight
		// calls that need the node now fail with a retriable error.
		if err := c.node.Shutdown(); err != nil {
			errs = append(errs, fmt.Errorf("broker: metadata shutdown: %w", err))
		}
	}
	return errors.Join(errs...)
}

// close stops raft and the transport; after the gRPC server stopped.
func (c *cluster) close() error {
	var errs []error
	if c.node != nil {
		if err := c.node.Shutdown(); err != nil {
			errs = append(errs, fmt.Errorf("broker: metadata shutdown: %w", err))
		}
	}
	if c.transport != nil {
		if err := c.transport.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.fwd != nil {
		if err := c.fwd.Close(); err != nil {
			errs = append(errs, fmt.Errorf("broker: close forwarder: %w", err))
		}
	}
	if err := c.closePeers(); err != nil {
		errs = append(errs, fmt.Errorf("broker: close peer connections: %w", err))
	}
	return errors.Join(errs...)
}

// liveBrokers counts registered, unfenced brokers.
func liveBrokers(img *metadata.Image) int {
	n := 0
	for _, b := range img.Brokers() {
		if !b.Fenced {
			n++
		}
	}
	return n
}
