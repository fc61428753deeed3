package replica

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/quirelog/quire/storage"
)

// TopicConfig is what the replicas of a topic need of its configuration.
type TopicConfig struct {
	Log               storage.LogConfig
	MinInsyncReplicas int32
}

// FetchConfig is the follower fetch tuning (replica.fetch.* keys).
type FetchConfig struct {
	MaxWait      time.Duration
	MinBytes     int32
	PartitionMax int32
	ResponseMax  int32
	Backoff      time.Duration
	// CallTimeoutSlop is how much longer than MaxWait a fetch may take
	// before the follower gives up on it.
	CallTimeoutSlop time.Duration
}

// Config is what New needs. Every field but Logger is required.
type Config struct {
	NodeID int32
	// Incarnation is this process's, as it registers: a follower's fetch
	// carries it.
	Incarnation string
	Logs        Logs
	Controller  Controller
	Brokers     Brokers
	Peers       Peers
	Fetch       FetchConfig
	// MaxFetchResponseBytes caps the records of one answer to a follower
	// (the front end's message limit, with room for one more batch).
	MaxFetchResponseBytes int
	// ReadBuffers lends the buffers a leader reads follower fetches into
	// (FetchResult.Buffer); nil: a fresh buffer for every read.
	ReadBuffers Buffers
	Logger      hclog.Logger
}

// Manager owns the replicas this broker hosts: one Partition per replica
// over one storage.Log. Reconcile tells it which replicas to host and
// which to lead; front ends read and append through its Partitions; its
// fetchers pull the replicas it follows.
type Manager struct {
	nodeID   int32
	logger   hclog.Logger
	logs     Logs
	ctl      Controller
	brokers  Brokers
	fetchers *fetcherManager

	maxResponseBytes int
	readBufs         Buffers

	// stages times the leaders' appends on their way to readers
	// (stages.go).
	stages [NumStages]stageHist

	// ctx ends when the manager stops: it bounds background ISR changes
	// and the leader's long polls.
	ctx    context.Context
	cancel context.CancelFunc

	mu         sync.RWMutex
	partitions map[storage.TopicPartition]*Partition
	configs    map[string]TopicConfig // effective config per hosted topic

	reconcileMu sync.Mutex        // one Reconcile at a time
	cleaned     bool              // stray on-disk logs have been removed
	topicIDs    map[string]string // topic name → id, to notice delete-and-recreate

	bgMu      sync.Mutex
	bgStopped bool
	bg        sync.WaitGroup

	// Monitoring (stats.go): client traffic per topic (*TopicIO), the
	// ISR changes of led partitions, and the batch bytes served to
	// followers and fetched from leaders.
	io                                      sync.Map
	isrShrinks, isrExpands                  atomic.Uint64
	replicationBytesOut, replicationBytesIn atomic.Uint64
}

// New returns a Manager hosting nothing yet.
func New(cfg Config) (*Manager, error) {
	if cfg.Logs == nil || cfg.Controller == nil || cfg.Brokers == nil || cfg.Peers == nil {
		return nil, errors.New("replica: Config needs Logs, Controller, Brokers and Peers")
	}
	if cfg.MaxFetchResponseBytes <= 0 {
		return nil, fmt.Errorf("replica: MaxFetchResponseBytes %d: want > 0", cfg.MaxFetchResponseBytes)
	}
	if cfg.Fetch.MaxWait < 0 || cfg.Fetch.Backoff <= 0 {
		return nil, fmt.Errorf("replica: fetch max wait %v and backoff %v: want >= 0 and > 0", cfg.Fetch.MaxWait, cfg.Fetch.Backoff)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	readBufs := cfg.ReadBuffers
	if readBufs == nil {
		readBufs = freshBuffers{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	rm := &Manager{
		nodeID:           cfg.NodeID,
		logger:           logger,
		logs:             cfg.Logs,
		ctl:              cfg.Controller,
		brokers:          cfg.Brokers,
		maxResponseBytes: cfg.MaxFetchResponseBytes,
		readBufs:         readBufs,
		ctx:              ctx,
		cancel:           cancel,
		partitions:       map[storage.TopicPartition]*Partition{},
		configs:          map[string]TopicConfig{},
		topicIDs:         map[string]string{},
	}
	rm.fetchers = newFetcherManager(cfg.NodeID, cfg.Incarnation, cfg.Fetch, cfg.Peers, &rm.replicationBytesIn, logger.Named("fetcher"))
	return rm, nil
}

// goBackground runs fn on its own goroutine unless the manager is
// stopping; Stop waits for every one.
func (rm *Manager) goBackground(fn func()) {
	rm.bgMu.Lock()
	defer rm.bgMu.Unlock()
	if rm.bgStopped {
		return
	}
	rm.bg.Add(1)
	go func() {
		defer rm.bg.Done()
		fn()
	}()
}

// Stop ends the leader's long polls, stops the fetchers and waits for
// background ISR changes.
func (rm *Manager) Stop() {
	rm.cancel()
	rm.fetchers.stopAll()
	rm.bgMu.Lock()
	rm.bgStopped = true
	rm.bgMu.Unlock()
	rm.bg.Wait()
}

// Partition returns a hosted replica.
func (rm *Manager) Partition(topic string, p int32) (*Partition, bool) {
	rm.mu.RLock()
	defer rm.mu.RUnlock()
	part, ok := rm.partitions[storage.TopicPartition{Topic: topic, Partition: p}]
	return part, ok
}

// topicConfig returns the effective config of a hosted topic.
func (rm *Manager) topicConfig(topic string) (TopicConfig, bool) {
	rm.mu.RLock()
	defer rm.mu.RUnlock()
	tc, ok := rm.configs[topic]
	return tc, ok
}

// setTopicConfig applies a (changed) topic config to the topic's logs.
func (rm *Manager) setTopicConfig(topic string, tc TopicConfig) {
	rm.mu.Lock()
	old, had := rm.configs[topic]
	rm.configs[topic] = tc
	var parts []*Partition
	if !had || old != tc {
		for k, p := range rm.partitions {
			if k.Topic == topic {
				parts = append(parts, p)
			}
		}
	}
	rm.mu.Unlock()
	for _, p := range parts {
		p.log.SetConfig(tc.Log)
	}
}

// host opens (or creates) the replica's log and returns it.
func (rm *Manager) host(topic string, p int32) (*Partition, bool, error) {
	key := storage.TopicPartition{Topic: topic, Partition: p}
	rm.mu.RLock()
	part, ok := rm.partitions[key]
	tc, hasCfg := rm.configs[topic]
	rm.mu.RUnlock()
	if ok {
		return part, false, nil
	}
	if !hasCfg {
		return nil, false, fmt.Errorf("replica: no config for topic %q", topic)
	}
	l, err := rm.logs.GetOrCreate(topic, p, tc.Log)
	if err != nil {
		return nil, false, fmt.Errorf("replica: open %s-%d: %w", topic, p, err)
	}
	part = newPartition(rm, topic, p, l)
	rm.mu.Lock()
	if existing, ok := rm.partitions[key]; ok {
		rm.mu.Unlock()
		return existing, false, nil
	}
	rm.partitions[key] = part
	rm.mu.Unlock()
	// A storage failure found anywhere (a background flush, a checkpoint,
	// recording a leader epoch), not only by an append, takes the replica
	// out of service.
	l.OnFailure(func(err error) { rm.goBackground(func() { part.logFailed(err) }) })
	return part, true, nil
}

// apply hosts the replica and leads or follows it as a says.
func (rm *Manager) apply(topic string, p int32, a Assignment) error {
	part, _, err := rm.host(topic, p)
	if err != nil {
		return err
	}
	part.reassigning.Store(contains(a.Adding, rm.nodeID))
	part.withLock(func() { part.adding = append([]int32(nil), a.Adding...) })
	st := part.state()
	if st.is(a, rm.nodeID) {
		return nil
	}
	_, failed := part.LogFailure()
	if a.Leader == rm.nodeID {
		rm.fetchers.unfollow(part)
		part.becomeLeader(a, time.Now())
		if failed != nil {
			// Elected with a failed log: give it up again at once.
			part.withLock(part.giveUpLocked)
		}
		if !st.leader || st.leaderEpoch != a.LeaderEpoch {
			rm.logger.Info("became leader", "topic", topic, "partition", p, "epoch", a.LeaderEpoch,
				"log_end_offset", part.log.LogEndOffset(), "high_watermark", part.HighWatermark())
		}
		return nil
	}
	part.becomeFollower(a)
	// A failed replica is followed too: its fetches tell the leader.
	rm.fetchers.follow(part, a.Leader, a.LeaderEpoch)
	if st.leader || st.leaderID != a.Leader || st.leaderEpoch != a.LeaderEpoch {
		rm.logger.Info("became follower", "topic", topic, "partition", p, "leader", a.Leader, "epoch", a.LeaderEpoch)
	}
	return nil
}

// ShrinkISRs drops lagging followers (not caught up for lag,
// replica.lag.time.max.ms) from the ISR of every led partition.
func (rm *Manager) ShrinkISRs(lag time.Duration) error {
	now := time.Now()
	for _, p := range rm.all() {
		p.maybeShrinkISR(now, lag)
	}
	return nil
}

func (rm *Manager) all() []*Partition {
	rm.mu.RLock()
	defer rm.mu.RUnlock()
	parts := make([]*Partition, 0, len(rm.partitions))
	for _, p := range rm.partitions {
		parts = append(parts, p)
	}
	return parts
}

// remove stops hosting a replica and deletes its log.
func (rm *Manager) remove(topic string, p int32) error {
	key := storage.TopicPartition{Topic: topic, Partition: p}
	rm.mu.Lock()
	part, ok := rm.partitions[key]
	delete(rm.partitions, key)
	rm.mu.Unlock()
	if ok {
		rm.fetchers.unfollow(part)
		part.becomeFollower(Assignment{Leader: -1, LeaderEpoch: -1})
	}
	if err := rm.logs.Delete(topic, p); err != nil {
		return fmt.Errorf("replica: delete %s-%d: %w", topic, p, err)
	}
	rm.logger.Info("deleted replica", "topic", topic, "partition", p)
	return nil
}

// forgetTopic drops a deleted topic's config.
func (rm *Manager) forgetTopic(topic string) {
	rm.mu.Lock()
	delete(rm.configs, topic)
	rm.mu.Unlock()
}

// configured lists the topics with a config.
func (rm *Manager) configured() []string {
	rm.mu.RLock()
	defer rm.mu.RUnlock()
	out := make([]string, 0, len(rm.configs))
	for k := range rm.configs {
		out = append(out, k)
	}
	return out
}

// hosted lists every hosted replica.
func (rm *Manager) hosted() []storage.TopicPartition {
	rm.mu.RLock()
	defer rm.mu.RUnlock()
	out := make([]storage.TopicPartition, 0, len(rm.partitions))
	for k := range rm.partitions {
		out = append(out, k)
	}
	return out
}

// mayJoinISR reports whether broker id is registered and not fenced.
func (rm *Manager) mayJoinISR(id int32) bool {
	r, ok := rm.brokers.Registration(id)
	return ok && !r.Fenced
}

func equalIDs(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func contains(s []int32, v int32) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
