package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"

	internalv1 "github.com/quirelog/quire/api/internalv1"
	"github.com/quirelog/quire/internal/bufpool"
	"github.com/quirelog/quire/internal/clock"
	"github.com/quirelog/quire/internal/dirlock"
	"github.com/quirelog/quire/internal/rpcstats"
	"github.com/quirelog/quire/kafka"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/metrics"
	"github.com/quirelog/quire/partitioner"
	"github.com/quirelog/quire/replica"
	"github.com/quirelog/quire/replica/replicagrpc"
	"github.com/quirelog/quire/request"
	"github.com/quirelog/quire/service"
	"github.com/quirelog/quire/sharegroup/sharepeer"
	"github.com/quirelog/quire/sharegroup/sharestore"
	"github.com/quirelog/quire/storage"
)

// Broker is one running node.
type Broker struct {
	cfg    Config
	logger hclog.Logger
	clock  clock.Clock // cfg.Clock or the system clock

	storage *storage.Manager
	cleaner *storage.Cleaner // compacts the logs of compacted topics
	rm      *replica.Manager // from Start
	cluster *cluster
	core    *request.Core // the data path of every door, from Start
	sticky  *partitioner.Sticky
	// shareStates saves the share coordinator's state (core.go), from
	// Start; sharePeers answers the other nodes' share calls.
	shareStates *sharestore.States
	sharePeers  *sharepeer.Server

	listeners     []boundListener // listeners.go; the inter-broker one included
	interListener string          // the name of the one other nodes dial
	lis           net.Listener    // the inter-broker listener
	server        *grpc.Server
	kafka         *kafka.Server // the Kafka listeners' (kafka.go); nil without
	health        *health.Server
	dirLocks      []*dirlock.Lock // of the data and metadata directories (dirlock.go)
	rpcStats      *rpcstats.Stats // calls answered (metrics.go)
	queue         *rpcstats.Queue // produce and fetch queue time; nil with metrics.requests.enable off
	metrics       *metrics.Server // metrics.listen; nil when unset

	transport *transport // the node's TLS (security.go)
	guard     *guard     // principals and ACLs (auth.go)

	stop      chan struct{}
	draining  chan struct{} // closed as the server's drain begins, after the replicas stopped
	bg        sync.WaitGroup
	served    chan struct{}
	startOnce sync.Once
	shutOnce  sync.Once
	shutErr   error
}

// New checks cfg and opens the data directory (recovering the logs).
// Nothing listens until Start.
func New(cfg Config) (*Broker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	logger := cfg.NodeLogger()
	tr, err := newTransport(&cfg, logger)
	if err != nil {
		return nil, err
	}
	g, err := newGuard(&cfg.Security)
	if err != nil {
		return nil, err
	}
	locks, err := lockDirs(&cfg)
	if err != nil {
		return nil, err
	}
	// Before the logs open: raising the open-file limit (partitionBudget)
	// also sizes the segment file cache, whose default follows it.
	budget := partitionBudget(&cfg, logger)
	files := storage.NewFileCache(int(cfg.LogOpenFilesMax))
	logger.Info("segment file cache", "open_files_max", files.Capacity())
	sm, err := storage.OpenManager(cfg.DataDir, cfg.BaseLogConfig(),
		storage.Options{Logger: logger, FS: cfg.FS, Now: cfg.NodeClock().Now, Files: files,
			RecoveryThreads: int(cfg.RecoveryThreadsPerDataDir)})
	if err != nil {
		_ = releaseDirs(locks)
		return nil, fmt.Errorf("broker: open data dir: %w", err)
	}
	b := &Broker{
		cfg:      cfg,
		logger:   logger,
		clock:    cfg.NodeClock(),
		storage:  sm,
		cleaner:  storage.NewCleaner(sm, cfg.CleanerConfig(), logger),
		sticky:   partitioner.NewSticky(0),
		stop:     make(chan struct{}),
		draining: make(chan struct{}),
		served:   make(chan struct{}),
		rpcStats: rpcstats.New(),
	}
	b.dirLocks = locks
	if cfg.MetricsRequestsEnable {
		b.queue = &rpcstats.Queue{}
	}
	b.transport, b.guard = tr, g
	b.cluster = newCluster(&b.cfg, logger)
	b.cluster.maxPartitions = budget
	b.cluster.creds = tr.peerCredentials()
	return b, nil
}

// Start listens, joins the metadata quorum and serves. It returns once the
// server accepts connections; WaitReady tells when the broker has
// registered and hosts its replicas.
func (b *Broker) Start() error {
	var err error
	b.startOnce.Do(func() { err = b.start() })
	return err
}

func (b *Broker) start() error {
	plan, err := b.cfg.ListenerPlan()
	if err != nil {
		return err
	}
	lns, err := bindListeners(plan, b.cfg.Listener)
	b.cfg.Listener = nil // owned by the server from here on
	if err != nil {
		return err
	}
	b.listeners, b.interListener = lns, plan.Inter
	var advertised string
	for _, l := range lns {
		if l.name == plan.Inter {
			b.lis, advertised = l.lis, l.advertised
		}
	}
	b.cfg.AdvertisedAddr = advertisedString(lns)
	closeAll := func() {
		for _, l := range lns {
			_ = l.lis.Close()
		}
	}
	b.server = grpc.NewServer(append(append(append(service.TransportOptions(), b.transport.serverOptions(&b.cfg)...), append(b.requestInterceptors(), b.authInterceptors()...)...),
		grpc.MaxRecvMsgSize(service.MaxReceiveBytes(b.cfg.MessageMaxBytes)), // recvlimit.go
		grpc.MaxSendMsgSize(request.MaxSendBytes),
		// Stop waits for handlers to return, so storage is never closed
		// under an append still running.
		grpc.WaitForHandlers(true),
		// Clients and other nodes ping quiet connections to find dead
		// ones within seconds; pings as often as once a second are
		// welcome, idle or not. The server pings a quiet client too.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 15 * time.Second, Timeout: 10 * time.Second}),
	)...)
	b.health = health.NewServer()
	b.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	healthpb.RegisterHealthServer(b.server, b.health)
	reflection.Register(b.server)
	b.server.RegisterService(replicagrpc.WithPooledFetch(&internalv1.ReplicaService_ServiceDesc), &replicaService{b: b})

	b.cluster.register(b.server, advertised)
	if err := b.cluster.open(advertised); err != nil {
		closeAll()
		b.server = nil // never served: Shutdown only closes storage
		return err
	}
	b.cluster.registerControllerService(b.server)
	rm, err := replica.New(replica.Config{
		NodeID:                b.cfg.NodeID,
		Incarnation:           b.cluster.incarnation,
		Logs:                  b.storage,
		Controller:            b.cluster,
		Brokers:               b.cluster,
		Peers:                 b.cluster,
		Fetch:                 b.cfg.FetchConfig(),
		MaxFetchResponseBytes: request.MaxFetchResponseBytes,
		ReadBuffers:           bufpool.Shared, // sent from and given back by replicagrpc's codec
		Logger:                b.logger.Named("replicas"),
	})
	if err != nil {
		closeAll()
		b.server = nil
		return err
	}
	b.rm = rm
	if b.core, err = b.newCore(); err == nil { // core.go
		b.cluster.markers.core.Store(b.core)
		b.sharePeers = sharepeer.NewServer(b.core)
	}
	if err != nil {
		closeAll()
		b.server = nil
		return err
	}
	if err := b.registerServices(); err != nil { // core.go
		closeAll()
		b.server = nil
		return err
	}

	var serving sync.WaitGroup
	if len(plan.Kafka) > 0 {
		b.kafka = b.newKafkaServer() // kafka.go
	}
	for _, l := range lns {
		serving.Add(1)
		go func() {
			defer serving.Done()
			if plan.Kafka[l.name] {
				if err := b.serveKafka(l); err != nil {
					b.logger.Error("kafka listener stopped", "listener", l.name, "error", err)
				}
				return
			}
			if err := b.server.Serve(l.lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
				b.logger.Error("grpc server stopped", "listener", l.name, "error", err)
			}
		}()
	}
	go func() {
		serving.Wait()
		close(b.served)
	}()
	b.cluster.start(advertised, b.storage.DirectoryID(), endpoints(lns), b.rm)
	b.startBackground()
	go func() {
		select {
		case <-b.cluster.ready:
			for _, svc := range []string{"", "quire.v1.Admin", "quire.v1.Producer", "quire.v1.Consumer", "quire.v1.Metadata", "quire.v1.Groups"} {
				b.health.SetServingStatus(svc, healthpb.HealthCheckResponse_SERVING)
			}
		case <-b.stop:
		}
	}()
	for _, l := range lns {
		protocol := "grpc"
		if plan.Kafka[l.name] {
			protocol = "kafka"
		}
		b.logger.Info("listening", "listener", l.name, "addr", l.lis.Addr().String(), "advertised", l.advertised,
			"protocol", protocol, "inter_broker", l.name == plan.Inter)
	}
	b.warnIfOpen()
	b.logger.Info("broker started", "node_id", b.cfg.NodeID, "listen", b.lis.Addr().String(),
		"advertised", advertised, "data_dir", b.cfg.DataDir)
	// Last, once every stats source runs; a failure here is cleaned up by
	// Shutdown, like any failed Start.
	return b.startMetrics()
}

// advertisedFor is the address others dial when advertised.listeners is
// unset: the bound address, or this host's name when bound to all
// interfaces.
func advertisedFor(a *net.TCPAddr) string {
	if a.IP.IsUnspecified() {
		if h, err := os.Hostname(); err == nil && h != "" {
			return net.JoinHostPort(h, strconv.Itoa(a.Port))
		}
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(a.Port))
	}
	return a.String()
}

// Addr returns the address the inter-broker listener is bound to, after
// Start (ListenerAddr names the others).
func (b *Broker) Addr() string {
	if b.lis == nil {
		return ""
	}
	return b.lis.Addr().String()
}

// Config returns the configuration in use (with every listener's
// advertised address filled in after Start).
func (b *Broker) Config() Config { return b.cfg }

// Metadata returns this node's metadata quorum member, after Start: for
// embedding programs and tests to read the image (Image, Subscribe,
// Controller). Writes go through the Admin service.
func (b *Broker) Metadata() *metadata.Node { return b.cluster.node }

// Ready is closed once the broker has registered with the controller and
// hosts its replicas; health checks answer SERVING from then on.
func (b *Broker) Ready() <-chan struct{} { return b.cluster.ready }

// WaitReady blocks until Ready or ctx ends.
func (b *Broker) WaitReady(ctx context.Context) error {
	select {
	case <-b.cluster.ready:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("broker: not ready: %w", ctx.Err())
	}
}

// Shutdown stops the node cleanly: controlled shutdown with the
// controller, no new calls (in-flight ones finish within ctx), the metadata
// node, then a final flush and checkpoints and the clean-shutdown marker.
func (b *Broker) Shutdown(ctx context.Context) error {
	b.shutOnce.Do(func() { b.shutErr = b.shutdown(ctx) })
	return b.shutErr
}

// drainTimeout bounds how long a stopping broker waits for open calls and
// streams before cutting them.
const drainTimeout = 3 * time.Second

func (b *Broker) shutdown(ctx context.Context) error {
	b.logger.Info("broker shutting down")
	var errs []error
	close(b.stop)
	if b.health != nil {
		b.health.Shutdown()
	}
	if b.server != nil {
		if err := b.cluster.shutdown(ctx); err != nil {
			errs = append(errs, err)
		}
		// The watcher has stopped: no partition changes hands from here.
		b.rm.Stop()
		// Drain: calls in flight finish. Long-lived produce streams only
		// end when their client closes them, so after drainTimeout the
		// rest are cut (clients retry elsewhere).
		close(b.draining) // replica fetch streams end (replica_service.go)
		if b.kafka != nil {
			// Kafka clients have no drain: their connections close once
			// the requests being answered return (long polls end now).
			b.kafka.Close()
		}
		stopped := make(chan struct{})
		go func() {
			b.server.GracefulStop()
			close(stopped)
		}()
		drain := time.NewTimer(drainTimeout)
		defer drain.Stop()
		select {
		case <-stopped:
		case <-drain.C:
			b.server.Stop()
			<-stopped
		case <-ctx.Done():
			b.server.Stop()
			<-stopped
		}
		<-b.served
	}
	b.bg.Wait()
	if b.shareStates != nil {
		b.shareStates.Close()
	}
	b.cleaner.Stop()
	if err := b.stopMetrics(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := b.cluster.close(); err != nil {
		errs = append(errs, err)
	}
	if err := b.storage.Close(); err != nil {
		errs = append(errs, fmt.Errorf("broker: close storage: %w", err))
	}
	if err := releaseDirs(b.dirLocks); err != nil {
		errs = append(errs, err)
	}
	b.logger.Info("broker stopped")
	return errors.Join(errs...)
}

// shareExpireInterval is how often a broker looks for share group
// members silent past their session timeout, to release their records
// everywhere.
const shareExpireInterval = time.Second

// startBackground runs retention, flushes and checkpoints until Shutdown.
func (b *Broker) startBackground() {
	b.every("retention", ms(b.cfg.LogRetentionCheckIntervalMs), b.storage.RunRetention)
	b.every("flush", ms(b.cfg.LogFlushSchedulerIntervalMs), b.storage.FlushDirty)
	b.every("checkpoint", ms(b.cfg.LogFlushOffsetCheckpointIntervalMs), b.storage.Checkpoint)
	b.cleaner.Start()
	lag := ms(b.cfg.ReplicaLagTimeMaxMs)
	var lastStages [replica.NumStages]replica.Histogram
	b.every("stage-log", stageLogInterval, func() error {
		// How long this broker's appends took to reach each stage over
		// the last interval, when there were any (see replica.Stage).
		now := b.rm.StageLatencies()
		var d [replica.NumStages]replica.Histogram
		for i := range now {
			d[i] = now[i].Sub(lastStages[i])
		}
		lastStages = now
		if line := replica.FormatStages(d); line != "" {
			b.logger.Info("replication stages, from the leader's append", "interval", stageLogInterval, "stages", line)
		}
		return nil
	})
	if b.cfg.GroupShareEnable {
		// Share group members silent past their session timeout leave,
		// their records released on every node (sharegroup/sharepeer).
		// The questions to other nodes end when the node stops, instead
		// of holding its stop up to the peer timeout: a question cut
		// short keeps the members it asked about.
		expireCtx, cancelExpire := context.WithCancel(context.Background())
		b.bg.Add(1)
		go func() {
			defer b.bg.Done()
			<-b.stop
			cancelExpire()
		}()
		b.every("share-expire", shareExpireInterval, func() error {
			b.core.ShareExpire(expireCtx)
			return nil
		})
	}
	b.every("isr-shrink", lag/2, func() error {
		if b.cluster.sessionLost() {
			return nil // cut off: the controller decides the ISR now, not us
		}
		return b.rm.ShrinkISRs(lag)
	})
}

// stageLogInterval is how often a broker logs its appends' stage
// latencies (when it had appends to time).
const stageLogInterval = time.Minute

// StageLatencies is how long the appends this broker led took to reach
// each replication stage since it started (replica.Manager.StageLatencies).
func (b *Broker) StageLatencies() [replica.NumStages]replica.Histogram {
	return b.rm.StageLatencies()
}

func (b *Broker) every(name string, d time.Duration, fn func() error) {
	b.bg.Add(1)
	go func() {
		defer b.bg.Done()
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				if err := fn(); err != nil {
					b.logger.Error("background task failed", "task", name, "error", err)
				}
			case <-b.stop:
				return
			}
		}
	}()
}
