package client

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/keepalive"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/internal/bufpool"
)

// maxRecvMsgSize lets fetch responses up to FetchMaxBytes through.
const maxRecvMsgSize = 256 << 20

// Client talks to a Quire cluster: it caches metadata, keeps one gRPC
// connection per broker, and carries the producer, the partition consumers
// and the admin calls. It is safe for concurrent use.
type Client struct {
	cfg config
	log hclog.Logger

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // the client's goroutines; started by spawn only

	spawnMu  sync.Mutex
	stopping bool // Close is waiting for wg: spawn starts nothing more

	connMu sync.Mutex
	conns  map[string]*grpc.ClientConn // by address

	meta     *metaCache
	metaTurn atomic.Uint32 // where the next metadata refresh starts asking
	// minMetaIndex is the newest metadata index an admin call of this
	// client answered with: metadata refreshes ask for at least it, so
	// the client sees its own changes whichever broker it asks.
	minMetaIndex atomic.Uint64
	prod         *producer

	closeOnce sync.Once
}

// New returns a client for the cluster reachable at the seed brokers. It
// fetches the cluster's metadata once, so a cluster that cannot be reached
// fails here (within ctx).
func New(ctx context.Context, opts ...Opt) (*Client, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if len(cfg.seeds) == 0 {
		return nil, ErrNoBrokers
	}
	if cfg.batchMaxBytes < 1024 {
		return nil, fmt.Errorf("client: batch max bytes %d below 1024", cfg.batchMaxBytes)
	}
	if cfg.idempotent && cfg.idempotentSet && cfg.acks != AllISRAcks {
		return nil, fmt.Errorf("client: the idempotent producer needs acks=all (RequiredAcks(AllISRAcks)), not %d", cfg.acks)
	}
	idem := cfg.idempotent && cfg.acks == AllISRAcks
	switch {
	case cfg.maxInFlightSet && cfg.maxInFlight < 1:
		return nil, fmt.Errorf("client: MaxInFlightPerPartition %d below 1", cfg.maxInFlight)
	case idem && cfg.maxInFlight > maxIdempotentBatches:
		return nil, fmt.Errorf("client: MaxInFlightPerPartition %d above %d, the most the idempotent producer allows (a broker remembers a producer's last %d batches of a partition); turn idempotence off (Idempotent(false)) for more",
			cfg.maxInFlight, maxIdempotentBatches, maxIdempotentBatches)
	}
	if cfg.partitioner == nil {
		cfg.partitioner = DefaultPartitioner(cfg.batchMaxBytes)
	}
	c := &Client{cfg: cfg, log: cfg.logger.Named("client"), conns: make(map[string]*grpc.ClientConn)}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.meta = newMetaCache(c)
	c.prod = newProducer(c)
	if err := c.meta.refresh(ctx, nil, false); err != nil {
		c.Close()
		return nil, err
	}
	c.spawn(c.meta.loop)
	if c.prod.idempotent {
		// Ask for the producer id now, so the first records do not wait
		// for it; a failure here is retried by the first send.
		c.spawn(c.prod.prefetchID)
	}
	return c, nil
}

// spawn runs fn on a goroutine Close waits for, unless Close has begun
// waiting (a WaitGroup must not grow from zero once Wait started); it
// reports whether it did. Callers hold their own lock while they publish
// what fn serves, so nothing is published after Close looked.
func (c *Client) spawn(fn func()) bool {
	c.spawnMu.Lock()
	defer c.spawnMu.Unlock()
	if c.stopping {
		return false
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		fn()
	}()
	return true
}

// Close flushes what the producer holds (for at most the delivery
// timeout), fails what is left with ErrClosed, stops the client's
// goroutines and closes its connections. Consumers made from the client
// must be closed first.
func (c *Client) Close() {
	c.closeOnce.Do(func() {
		if c.prod != nil {
			ctx, cancel := context.WithTimeout(context.Background(), c.cfg.deliveryTimeout)
			_ = c.prod.flush(ctx)
			cancel()
			c.prod.close()
		}
		c.spawnMu.Lock()
		c.stopping = true
		c.spawnMu.Unlock()
		c.cancel()
		c.wg.Wait()
		if c.prod != nil {
			c.prod.failAll(ErrClosed)
		}
		c.connMu.Lock()
		for _, cc := range c.conns {
			_ = cc.Close()
		}
		c.conns = map[string]*grpc.ClientConn{}
		c.connMu.Unlock()
	})
}

// keepaliveTime is how long a connection may be quiet before the client
// pings the broker, and keepaliveTimeout how long it waits for the answer
// before it closes the connection. Brokers accept pings down to one a
// second.
const (
	keepaliveTime    = 5 * time.Second
	keepaliveTimeout = 5 * time.Second
)

// conn returns the (shared) connection to addr.
func (c *Client) conn(addr string) (*grpc.ClientConn, error) {
	c.connMu.Lock()
	defer c.connMu.Unlock()
	if c.ctx.Err() != nil {
		return nil, ErrClosed
	}
	if cc := c.conns[addr]; cc != nil {
		return cc, nil
	}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUserAgent(c.cfg.clientID),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxRecvMsgSize)),
		grpc.WithInitialWindowSize(4 << 20),
		grpc.WithInitialConnWindowSize(16 << 20),
		grpc.WithReadBufferSize(256 << 10),
		grpc.WithWriteBufferSize(256 << 10),
		// Frames read into buffers that are not zeroed first (see
		// internal/bufpool).
		experimental.WithBufferPool(bufpool.Shared),
		// A connection that silently stops carrying packets (a cut
		// network, a paused or vanished host) is found within seconds
		// and redialled, instead of waiting on TCP retransmission.
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: keepaliveTime, Timeout: keepaliveTimeout, PermitWithoutStream: true}),
	}
	opts = append(opts, c.cfg.dialOpts...)
	cc, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("client: dial %s: %w", addr, err)
	}
	c.conns[addr] = cc
	return cc, nil
}

// brokerAddrs lists where to send a request any broker can answer: known
// brokers first, then the seeds.
func (c *Client) brokerAddrs() []string {
	seen := map[string]bool{}
	var out []string
	for _, b := range c.meta.brokerList() {
		if !b.fenced && !seen[b.addr] {
			seen[b.addr] = true
			out = append(out, b.addr)
		}
	}
	for _, s := range c.cfg.seeds {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// anyBroker calls fn with connections to brokers in turn until one answers
// with something other than a network failure.
func (c *Client) anyBroker(ctx context.Context, fn func(ctx context.Context, cc *grpc.ClientConn) error) error {
	var last error
	for _, addr := range c.brokerAddrs() {
		cc, err := c.conn(addr)
		if err != nil {
			return err
		}
		rctx, cancel := context.WithTimeout(ctx, c.cfg.requestTimeout)
		err = fromStatus(fn(rctx, cc))
		cancel()
		if err == nil {
			return nil
		}
		last = err
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if ErrorCode(err) != quirev1.ErrorCode_NETWORK_EXCEPTION && ErrorCode(err) != quirev1.ErrorCode_REQUEST_TIMED_OUT {
			return err
		}
	}
	if last == nil {
		last = ErrNoBrokers
	}
	return last
}

// --- metadata ---

type brokerMeta struct {
	id     int32
	addr   string
	rack   string
	fenced bool
}

type partMeta struct {
	leader      int32
	leaderEpoch int32
	replicas    []int32
	isr         []int32
}

type topicMeta struct {
	name            string
	id              string
	err             error
	partitions      []partMeta
	maxMessageBytes int // the topic's max.message.bytes; 0 when not said
}

// metaCache is the client's view of the cluster. Readers take snapshots;
// refreshes replace whole entries.
type metaCache struct {
	c *Client

	mu         sync.RWMutex
	clusterID  string
	controller int32
	brokers    map[int32]brokerMeta
	topics     map[string]*topicMeta
	wanted     map[string]bool // topics kept fresh
	listeners  []func()
	lastFetch  time.Time

	refreshMu sync.Mutex // one refresh at a time
	trigger   chan struct{}
}

func newMetaCache(c *Client) *metaCache {
	return &metaCache{c: c, brokers: map[int32]brokerMeta{}, topics: map[string]*topicMeta{},
		wanted: map[string]bool{}, trigger: make(chan struct{}, 1)}
}

func (m *metaCache) brokerList() []brokerMeta {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]brokerMeta, 0, len(m.brokers))
	for _, b := range m.brokers {
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

func (m *metaCache) broker(id int32) (brokerMeta, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	b, ok := m.brokers[id]
	return b, ok
}

func (m *metaCache) topic(name string) *topicMeta {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.topics[name]
}

// onChange registers fn to run (on the refreshing goroutine) after every
// metadata refresh.
func (m *metaCache) onChange(fn func()) {
	m.mu.Lock()
	m.listeners = append(m.listeners, fn)
	m.mu.Unlock()
}

// want adds topics to the set refreshed in the background.
func (m *metaCache) want(topics ...string) {
	m.mu.Lock()
	for _, t := range topics {
		m.wanted[t] = true
	}
	m.mu.Unlock()
}

// triggerRefresh asks the background loop for a refresh soon.
func (m *metaCache) triggerRefresh() {
	select {
	case m.trigger <- struct{}{}:
	default:
	}
}

// loop refreshes on demand (at most once per retry backoff) and every
// metadata max age.
func (m *metaCache) loop() {
	ticker := time.NewTicker(m.c.cfg.metadataMaxAge)
	defer ticker.Stop()
	for {
		select {
		case <-m.c.ctx.Done():
			return
		case <-ticker.C:
		case <-m.trigger:
		}
		m.mu.RLock()
		wait := m.c.cfg.retryBackoff - time.Since(m.lastFetch)
		m.mu.RUnlock()
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-m.c.ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		if err := m.refresh(m.c.ctx, nil, false); err != nil && m.c.ctx.Err() == nil {
			m.c.log.Debug("metadata refresh failed", "error", err)
			m.triggerRefresh() // try again after the backoff
		}
	}
}

// refresh fetches metadata for topics plus every wanted topic (all topics
// when both are empty) and tells the listeners.
func (m *metaCache) refresh(ctx context.Context, topics []string, autoCreate bool) error {
	m.refreshMu.Lock()
	defer m.refreshMu.Unlock()
	m.mu.RLock()
	names := append([]string(nil), topics...)
	for t := range m.wanted {
		names = append(names, t)
	}
	m.mu.RUnlock()
	if len(topics) == 0 && len(names) == 0 {
		names = nil
	}
	resp, err := m.c.newestMetadata(ctx, &quirev1.GetMetadataRequest{
		Topics: dedup(names), AllowAutoTopicCreation: autoCreate || m.c.cfg.autoCreate,
		MinMetadataIndex: m.c.minMetaIndex.Load()})
	m.mu.Lock()
	m.lastFetch = time.Now()
	if err != nil {
		m.mu.Unlock()
		return err
	}
	m.clusterID, m.controller = resp.GetClusterId(), resp.GetControllerId()
	brokers := make(map[int32]brokerMeta, len(resp.GetBrokers()))
	for _, b := range resp.GetBrokers() {
		brokers[b.GetId()] = brokerMeta{id: b.GetId(), addr: b.GetAddress(), rack: b.GetRack(), fenced: b.GetFenced()}
	}
	m.brokers = brokers
	if names == nil {
		m.topics = map[string]*topicMeta{}
	}
	for _, t := range resp.GetTopics() {
		tm := &topicMeta{name: t.GetName(), id: t.GetTopicId(), err: fromProto(t.GetError()), maxMessageBytes: int(t.GetMaxMessageBytes())}
		for _, p := range t.GetPartitions() {
			idx := int(p.GetPartition())
			for len(tm.partitions) <= idx {
				tm.partitions = append(tm.partitions, partMeta{leader: -1})
			}
			tm.partitions[idx] = partMeta{leader: p.GetLeader(), leaderEpoch: p.GetLeaderEpoch(),
				replicas: p.GetReplicas(), isr: p.GetIsr()}
		}
		m.topics[t.GetName()] = tm
	}
	listeners := append([]func(){}, m.listeners...)
	m.mu.Unlock()
	for _, fn := range listeners {
		fn()
	}
	return nil
}

// unknownTopicGrace is how long brokers must keep answering that a topic
// does not exist before a client takes it as so: a broker's metadata
// applies the controller's changes a moment after it commits them.
const unknownTopicGrace = time.Second

// loadTopic returns the metadata of a topic, fetching it when it is not
// cached, and retrying retriable topic errors (a topic being created has no
// leaders yet) until ctx ends.
func (m *metaCache) loadTopic(ctx context.Context, name string, autoCreate bool) (*topicMeta, error) {
	if tm := m.topic(name); tm != nil && tm.err == nil && len(tm.partitions) > 0 {
		return tm, nil
	}
	m.want(name)
	backoff := m.c.cfg.retryBackoff
	var unknownSince time.Time
	for {
		err := m.refresh(ctx, []string{name}, autoCreate)
		if err == nil {
			tm := m.topic(name)
			switch {
			case tm == nil:
				err = newError(quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, "topic "+name+" not in metadata")
			case tm.err != nil:
				err = tm.err
			case len(tm.partitions) == 0:
				err = newError(quirev1.ErrorCode_LEADER_NOT_AVAILABLE, "topic has no partitions yet")
			default:
				return tm, nil
			}
		}
		// A broker that may create topics has done so (or answered
		// another error) before it answers that one does not exist. The
		// answer is taken as final once brokers have given it for
		// unknownTopicGrace: a topic another client just created may not
		// be in every broker's metadata yet.
		if ErrorCode(err) == quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION {
			if unknownSince.IsZero() {
				unknownSince = time.Now()
			}
			if time.Since(unknownSince) >= unknownTopicGrace {
				return nil, err
			}
		} else if !retriable(err) {
			return nil, err
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("client: topic %s: %w (last error: %v)", name, ctx.Err(), err)
		case <-m.c.ctx.Done():
			t.Stop()
			return nil, ErrClosed
		case <-t.C:
		}
	}
}

func dedup(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	sort.Strings(s)
	out := s[:1]
	for _, v := range s[1:] {
		if v != out[len(out)-1] {
			out = append(out, v)
		}
	}
	return out
}

// sleepCtx waits d unless ctx or the client ends first.
func (c *Client) sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-c.ctx.Done():
		return ErrClosed
	case <-t.C:
		return nil
	}
}
