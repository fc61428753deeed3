package broker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/quirelog/quire/controlplane"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/raftgrpc"
)

// cluster joins the broker to the metadata quorum: it runs the raft node
// (over the broker's gRPC server), forwards admin writes to the controller,
// keeps the broker registered, and reconciles the replicas this broker hosts
// with the metadata image. It is the only file that touches metadata/.
type cluster struct {
	cfg         *Config
	logger      hclog.Logger
	rm          *ReplicaManager
	defaults    topicDefaults
	incarnation string

	transport *raftgrpc.Transport
	node      *metadata.Node
	fwd       *controlplane.Forwarder
	lifecycle *controlplane.Lifecycle

	stop    chan struct{}
	stopped chan struct{}

	mu         sync.Mutex
	reconciled *metadata.Image // last image the replicas were brought in line with
	changed    chan struct{}   // closed and replaced after each reconcile
	ready      chan struct{}   // closed once this broker is registered and unfenced
	readyOnce  sync.Once
	cleaned    bool              // stray on-disk logs have been removed
	topicIDs   map[string]string // topic name → id, to notice delete-and-recreate

	peersMu     sync.Mutex
	peers       map[string]*grpc.ClientConn // node-to-node connections by address (replica_service.go)
	peersClosed bool
}

func newCluster(cfg *Config, logger hclog.Logger, rm *ReplicaManager) *cluster {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return &cluster{
		cfg:         cfg,
		logger:      logger,
		rm:          rm,
		defaults:    cfg.topicDefaults(),
		incarnation: hex.EncodeToString(b[:]),
		topicIDs:    map[string]string{},
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
	voters, err := parseVoters(c.cfg.ControllerQuorumVoters)
	if err != nil {
		return err
	}
	if len(voters) == 0 {
		voters = []voter{{ID: c.cfg.NodeID, Addr: advertised}}
	}
	mc := metadata.DefaultConfig()
	mc.NodeID = c.cfg.NodeID
	mc.ClusterID = c.cfg.ClusterID
	mc.Dir = c.cfg.metadataDir()
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
		mc.RaftCommitTimeout = c.cfg.RaftHeartbeatTimeout / 10
	}
	node, err := metadata.Open(mc)
	if err != nil {
		return fmt.Errorf("broker: open metadata: %w", err)
	}
	c.node = node
	c.fwd = controlplane.NewForwarder(node, c.dial)
	return nil
}

// startReplication gives the replica manager its fetchers and its way to
// the controller for ISR changes.
func (c *cluster) startReplication() {
	cfg := c.cfg
	c.rm.fetchers = newFetcherManager(cfg.NodeID, c.incarnation, fetchConfig{
		maxWait:         ms(int64(cfg.ReplicaFetchWaitMaxMs)),
		minBytes:        cfg.ReplicaFetchMinBytes,
		partitionMax:    cfg.ReplicaFetchMaxBytes,
		responseMax:     cfg.ReplicaFetchResponseMaxBytes,
		backoff:         ms(int64(cfg.ReplicaFetchBackoffMs)),
		callTimeoutSlop: ms(cfg.BrokerSessionTimeoutMs),
	}, c, c.logger.Named("fetcher"))
	c.rm.alterISR = c.alterISR
	c.rm.registered = func(id int32) (registration, bool) {
		b, ok := c.node.Image().Broker(id)
		return registration{incarnation: b.Incarnation, fenced: b.Fenced}, ok
	}
}

// alterISR asks the controller for a led partition's new ISR.
func (c *cluster) alterISR(topic string, p int32, a assignment) (assignment, error) {
	ctx, cancel := c.writeContext(context.Background())
	defer cancel()
	go func() {
		select {
		case <-c.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	info, err := c.fwd.AlterPartition(ctx, topic, p, a.leader, a.leaderEpoch, a.partitionEpoch, a.isr)
	if err != nil {
		for _, refused := range []error{metadata.ErrStaleEpoch, metadata.ErrFencedBroker, metadata.ErrInvalidPartitions, metadata.ErrUnknownTopic} {
			if errors.Is(err, refused) {
				return a, fmt.Errorf("%w: %w", errISRRefused, err)
			}
		}
		return a, err
	}
	return assignment{leader: info.Leader, leaderEpoch: info.LeaderEpoch, partitionEpoch: info.PartitionEpoch,
		replicas: info.Replicas, isr: info.ISR}, nil
}

// brokerAddr is where broker id listens, as registered.
func (c *cluster) brokerAddr(id int32) (string, bool) {
	b, ok := c.node.Image().Broker(id)
	if !ok || b.Addr == "" {
		return "", false
	}
	return b.Addr, true
}

// start begins registration, heartbeats and the image watcher.
func (c *cluster) start(advertised string) {
	c.startReplication()
	// The log directory id tells the controller whether this broker still
	// has the data it registered with before (see metadata.BrokerInfo).
	self := metadata.BrokerInfo{ID: c.cfg.NodeID, Incarnation: c.incarnation, Addr: advertised, Rack: c.cfg.Rack,
		DirectoryID: c.rm.storage.DirectoryID()}
	c.lifecycle = controlplane.NewLifecycle(c.fwd, self, ms(c.cfg.BrokerHeartbeatIntervalMs), c.logger.Named("lifecycle"))
	c.lifecycle.Start()
	go c.watch()
}

// dial connects to another node; the Forwarder caches and closes the
// connections.
func (c *cluster) dial(addr string) (*grpc.ClientConn, error) {
	return grpc.NewClient(addr, c.dialOptions()...)
}

// dialOptions are those of every node-to-node connection: Config.Dialer
// when set, and a reconnect backoff capped at a second (gRPC's default
// grows to two minutes), so that a peer back after a crash or a network
// partition is reached again within a raft election or two.
func (c *cluster) dialOptions() []grpc.DialOption {
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: 2 * time.Second,
		}),
	}
	if d := c.cfg.Dialer; d != nil {
		opts = append(opts, grpc.WithContextDialer(d))
	}
	return opts
}

// watch reconciles the replicas with every new image. It runs outside the
// FSM: Apply only signals the subscription.
func (c *cluster) watch() {
	defer close(c.stopped)
	ch, cancel := c.node.Subscribe()
	defer cancel()
	for {
		c.reconcile(c.node.Image())
		select {
		case <-ch:
		case <-c.stop:
			return
		}
	}
}

// reconcile brings the hosted replicas in line with img: create and lead
// or follow the replicas assigned here, apply topic configs, delete the
// replicas of deleted topics.
func (c *cluster) reconcile(img *metadata.Image) {
	self := c.cfg.NodeID
	want := map[topicPartition]bool{}
	for _, t := range img.Topics() {
		if old, ok := c.topicIDs[t.Name]; ok && old != t.ID {
			// Deleted and created again between two images: start afresh.
			for _, key := range c.rm.hosted() {
				if key.topic == t.Name {
					if err := c.rm.remove(key.topic, key.partition); err != nil {
						c.logger.Error("cannot delete replica", "topic", key.topic, "partition", key.partition, "error", err)
					}
				}
			}
		}
		c.topicIDs[t.Name] = t.ID
		tc, err := c.defaults.resolve(t.Configs)
		if err != nil {
			// Configs are validated before they reach the controller; an
			// invalid one here came from a newer node or a bug.
			c.logger.Error("invalid topic config in metadata", "topic", t.Name, "error", err)
			tc, _ = c.defaults.resolve(nil)
		}
		c.rm.setTopicConfig(t.Name, tc)
		for _, p := range t.Partitions {
			if !contains(p.Replicas, self) {
				continue
			}
			key := topicPartition{t.Name, p.Partition}
			want[key] = true
			a := assignment{leader: p.Leader, leaderEpoch: p.LeaderEpoch, partitionEpoch: p.PartitionEpoch, replicas: p.Replicas, isr: p.ISR}
			if err := c.rm.apply(t.Name, p.Partition, a); err != nil {
				c.logger.Error("cannot host replica", "topic", t.Name, "partition", p.Partition, "error", err)
			}
		}
	}
	for _, key := range c.rm.hosted() {
		if !want[key] {
			if err := c.rm.remove(key.topic, key.partition); err != nil {
				c.logger.Error("cannot delete replica", "topic", key.topic, "partition", key.partition, "error", err)
			}
		}
	}
	b, registered := img.Broker(self)
	registered = registered && b.Incarnation == c.incarnation
	if registered && !c.cleaned {
		// The image includes our own registration, so it is at least as new
		// as everything committed before we started: logs on disk that it
		// does not assign here belong to deleted topics.
		c.cleaned = true
		for _, l := range c.rm.storage.Logs() {
			key := topicPartition{l.Topic(), l.Partition()}
			if !want[key] {
				c.logger.Info("deleting stray log", "topic", key.topic, "partition", key.partition)
				if err := c.rm.storage.Delete(key.topic, key.partition); err != nil {
					c.logger.Error("cannot delete stray log", "topic", key.topic, "partition", key.partition, "error", err)
				}
			}
		}
	}
	for name := range c.rm.configsSnapshot() {
		if _, ok := img.Topic(name); !ok {
			c.rm.forgetTopic(name)
			delete(c.topicIDs, name)
		}
	}
	c.mu.Lock()
	c.reconciled = img
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
	if registered && !b.Fenced {
		c.readyOnce.Do(func() {
			c.logger.Info("broker ready", "node_id", self, "metadata_index", img.Index())
			close(c.ready)
		})
	}
}

// image returns the newest image whose changes the replicas reflect.
func (c *cluster) image() *metadata.Image {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reconciled == nil {
		return c.node.Image()
	}
	return c.reconciled
}

// waitFor blocks until cond holds for a reconciled image, or ctx ends.
func (c *cluster) waitFor(ctx context.Context, cond func(*metadata.Image) bool) (*metadata.Image, error) {
	for {
		c.mu.Lock()
		img, ch := c.reconciled, c.changed
		c.mu.Unlock()
		if img != nil && cond(img) {
			return img, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return img, ctx.Err()
		}
	}
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
	voters, _ := parseVoters(c.cfg.ControllerQuorumVoters)
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
	if c.lifecycle != nil {
		timeout := ms(c.cfg.BrokerSessionTimeoutMs)
		sctx, cancel := context.WithTimeout(ctx, timeout)
		start := time.Now()
		err := c.lifecycle.Stop(sctx)
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
			if c.lifecycle != nil {
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

// Admin writes, validated by the caller, go to the controller.

// writeContext bounds a write by metadata.write.timeout.ms unless ctx
// ends sooner: with a majority of voters lost the Forwarder would retry
// for ever, and the caller must get UNAVAILABLE instead.
func (c *cluster) writeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, ms(c.cfg.MetadataWriteTimeoutMs))
}

// unavailable turns a write that found no controller in time into
// ErrNoQuorum (UNAVAILABLE, retriable) rather than a bare deadline, unless
// the caller's own deadline ended it.
func unavailable(parent context.Context, err error) error {
	if err == nil || errors.Is(err, metadata.ErrNoQuorum) || parent.Err() != nil {
		return err
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: no controller answered: %w", metadata.ErrNoQuorum, err)
	}
	return err
}

func (c *cluster) createTopic(ctx context.Context, spec metadata.TopicSpec) (metadata.TopicInfo, error) {
	wctx, cancel := c.writeContext(ctx)
	defer cancel()
	info, err := c.fwd.CreateTopic(wctx, spec)
	return info, unavailable(ctx, err)
}

func (c *cluster) deleteTopic(ctx context.Context, name string) error {
	wctx, cancel := c.writeContext(ctx)
	defer cancel()
	return unavailable(ctx, c.fwd.DeleteTopic(wctx, name))
}

func (c *cluster) alterConfigs(ctx context.Context, topic string, set map[string]string, del []string) error {
	wctx, cancel := c.writeContext(ctx)
	defer cancel()
	return unavailable(ctx, c.fwd.AlterConfigs(wctx, topic, set, del))
}

func (c *cluster) createPartitions(ctx context.Context, topic string, total int32) error {
	wctx, cancel := c.writeContext(ctx)
	defer cancel()
	return unavailable(ctx, c.fwd.CreatePartitions(wctx, topic, total))
}

func (c *cluster) unregisterBroker(ctx context.Context, id int32) error {
	wctx, cancel := c.writeContext(ctx)
	defer cancel()
	return unavailable(ctx, c.fwd.UnregisterBroker(wctx, id))
}

// Consumer group offsets live in the controller's image: commits are
// written through it and reads answered by it, so a commit made through
// any node is read back at once through any other. Reads are bounded like
// writes, so that without a controller they fail UNAVAILABLE.

func (c *cluster) commitOffsets(ctx context.Context, group string, offsets []metadata.OffsetCommit, at time.Time) error {
	wctx, cancel := c.writeContext(ctx)
	defer cancel()
	return unavailable(ctx, c.fwd.CommitOffsets(wctx, group, offsets, at))
}

func (c *cluster) fetchOffsets(ctx context.Context, group string, partitions []metadata.TopicPartition) ([]metadata.CommittedOffset, error) {
	wctx, cancel := c.writeContext(ctx)
	defer cancel()
	out, err := c.fwd.FetchOffsets(wctx, group, partitions)
	return out, unavailable(ctx, err)
}

func (c *cluster) listGroups(ctx context.Context) ([]string, error) {
	wctx, cancel := c.writeContext(ctx)
	defer cancel()
	out, err := c.fwd.ListGroups(wctx)
	return out, unavailable(ctx, err)
}

func (c *cluster) deleteGroup(ctx context.Context, group string) error {
	wctx, cancel := c.writeContext(ctx)
	defer cancel()
	return unavailable(ctx, c.fwd.DeleteGroup(wctx, group))
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
