package broker

// Monitoring: the node's stats snapshots for the metrics listener
// (metrics.listen, package metrics), the gRPC request counters, and
// readiness (/readyz).

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"

	"github.com/quirelog/quire/internal/rpcstats"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/metrics"
	"github.com/quirelog/quire/replica"
	"github.com/quirelog/quire/request"
	"github.com/quirelog/quire/storage"
)

// errNotReady is wrapped by Readiness when the node should not get client
// traffic.
var errNotReady = errors.New("broker: not ready")

// maxReadyMetadataLag is how many committed metadata entries a node may
// have left to apply and still call itself ready.
const maxReadyMetadataLag = 100

// statsSource is what package metrics reads from a running broker.
type statsSource struct{ b *Broker }

var _ metrics.Source = statsSource{}

func (s statsSource) ReplicaStats() replica.Stats        { return s.b.rm.Stats() }
func (s statsSource) StorageStats() storage.Stats        { return s.b.storage.Stats() }
func (s statsSource) MetadataStats() metadata.Stats      { return s.b.cluster.node.Stats() }
func (s statsSource) GroupStats() []metadata.GroupStats  { return s.b.cluster.node.GroupStats() }
func (s statsSource) RequestStats() []rpcstats.Method    { return s.b.rpcStats.Snapshot() }
func (s statsSource) QueueStats() rpcstats.QueueSnapshot { return s.b.queue.Snapshot() }
func (s statsSource) Ready() error                       { return s.b.Readiness() }
func (s statsSource) ShareStats() request.ShareStats     { return s.b.core.ShareStats() }

func (s statsSource) StageLatencies() [replica.NumStages]replica.Histogram {
	return s.b.StageLatencies()
}

// Readiness is nil when the broker serves clients: it has registered
// with the controller under this process's incarnation, the controller
// has not fenced it, its heartbeats are answered, a controller is known
// and its metadata image is within maxReadyMetadataLag entries of what it
// knows committed. Otherwise the error (wrapping errNotReady) says which
// condition failed.
func (b *Broker) Readiness() error {
	select {
	case <-b.stop:
		return fmt.Errorf("%w: shutting down", errNotReady)
	default:
	}
	select {
	case <-b.cluster.ready:
	default:
		return fmt.Errorf("%w: not yet registered and unfenced with the controller", errNotReady)
	}
	img := b.cluster.image()
	info, ok := img.Broker(b.cfg.NodeID)
	switch {
	case !ok || info.Incarnation != b.cluster.incarnation:
		return fmt.Errorf("%w: not registered in the metadata (index %d)", errNotReady, img.Index())
	case info.Fenced:
		return fmt.Errorf("%w: fenced by the controller (metadata index %d)", errNotReady, img.Index())
	}
	session := ms(b.cfg.BrokerSessionTimeoutMs)
	lc := b.cluster.lifecycle.Load()
	if lc == nil {
		return fmt.Errorf("%w: not started", errNotReady)
	}
	if last := lc.LastHeartbeat(); time.Since(last) > session {
		return fmt.Errorf("%w: no heartbeat answered by the controller for over broker.session.timeout.ms (%v); it fences this broker",
			errNotReady, session)
	}
	st := b.cluster.node.Stats()
	if st.ControllerID < 0 {
		return fmt.Errorf("%w: no controller known (the metadata quorum has no leader)", errNotReady)
	}
	if st.CommitIndex > st.AppliedIndex+maxReadyMetadataLag {
		return fmt.Errorf("%w: metadata applied to index %d, %d committed", errNotReady, st.AppliedIndex, st.CommitIndex)
	}
	return nil
}

// startMetrics starts the metrics listener when metrics.listen is set.
func (b *Broker) startMetrics() error {
	if b.cfg.MetricsListen == "" {
		return nil
	}
	srv, err := metrics.Start(metrics.Config{Addr: b.cfg.MetricsListen, Pprof: b.cfg.MetricsPprofEnable,
		Source: statsSource{b}, Logger: b.logger.Named("metrics")})
	if err != nil {
		return err
	}
	b.metrics = srv
	b.logger.Info("metrics listening", "addr", srv.Addr(), "pprof", b.cfg.MetricsPprofEnable)
	return nil
}

// MetricsAddr is the address of the metrics listener, "" when there is
// none.
func (b *Broker) MetricsAddr() string {
	if b.metrics == nil {
		return ""
	}
	return b.metrics.Addr()
}

// stopMetrics closes the metrics listener, if any.
func (b *Broker) stopMetrics(ctx context.Context) error {
	if b.metrics == nil {
		return nil
	}
	return b.metrics.Close(ctx)
}

// requestInterceptors count every call when metrics.requests.enable.
func (b *Broker) requestInterceptors() []grpc.ServerOption {
	if !b.cfg.MetricsRequestsEnable {
		return nil
	}
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(b.rpcStats.Unary), grpc.ChainStreamInterceptor(b.rpcStats.Stream)}
}
