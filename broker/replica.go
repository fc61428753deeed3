package broker

import (
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/quirelog/quire/storage"
)

// topicPartition names one partition.
type topicPartition struct {
	topic     string
	partition int32
}

// ReplicaManager owns the replicas this broker hosts: one Partition per
// replica over one storage.Log. The metadata watcher (metadata_glue.go)
// tells it which replicas to host and which to lead; the services read and
// append through it.
type ReplicaManager struct {
	nodeID  int32
	logger  hclog.Logger
	storage *storage.Manager
	base    storage.LogConfig

	// alterISR asks the controller for a partition's new ISR (set by the
	// cluster; nil in tests without one) and returns what was committed.
	alterISR func(topic string, p int32, a assignment) (assignment, error)
	// registered is a broker's registration as the metadata has it (set
	// by the cluster; nil in tests without one: every broker counts as
	// registered and live, and incarnations are not checked).
	registered func(id int32) (registration, bool)
	// fetchers pull the partitions this broker follows (nil until the
	// cluster starts them).
	fetchers *fetcherManager

	mu         sync.RWMutex
	partitions map[topicPartition]*Partition
	configs    map[string]topicConfig // effective config per hosted topic

	bgMu      sync.Mutex
	bgStopped bool
	bg        sync.WaitGroup
}

// registration is what a leader needs to know of a follower's broker:
// only its registered process (incarnation) may fetch, and only an
// unfenced broker may join an ISR.
type registration struct {
	incarnation string
	fenced      bool
}

// goBackground runs fn on its own goroutine unless the manager is
// stopping; stopBackground waits for every one.
func (rm *ReplicaManager) goBackground(fn func()) {
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

// stop stops the fetchers and waits for background ISR changes.
func (rm *ReplicaManager) stop() {
	if rm.fetchers != nil {
		rm.fetchers.stopAll()
	}
	rm.bgMu.Lock()
	rm.bgStopped = true
	rm.bgMu.Unlock()
	rm.bg.Wait()
}

func newReplicaManager(nodeID int32, sm *storage.Manager, base storage.LogConfig, logger hclog.Logger) *ReplicaManager {
	return &ReplicaManager{
		nodeID:     nodeID,
		logger:     logger,
		storage:    sm,
		base:       base,
		partitions: map[topicPartition]*Partition{},
		configs:    map[string]topicConfig{},
	}
}

// partition returns a hosted replica.
func (rm *ReplicaManager) partition(topic string, p int32) (*Partition, bool) {
	rm.mu.RLock()
	defer rm.mu.RUnlock()
	part, ok := rm.partitions[topicPartition{topic, p}]
	return part, ok
}

// topicConfig returns the effective config of a hosted topic.
func (rm *ReplicaManager) topicConfig(topic string) (topicConfig, bool) {
	rm.mu.RLock()
	defer rm.mu.RUnlock()
	tc, ok := rm.configs[topic]
	return tc, ok
}

// setTopicConfig applies a (changed) topic config to the topic's logs.
func (rm *ReplicaManager) setTopicConfig(topic string, tc topicConfig) {
	rm.mu.Lock()
	old, had := rm.configs[topic]
	rm.configs[topic] = tc
	var parts []*Partition
	if !had || old != tc {
		for k, p := range rm.partitions {
			if k.topic == topic {
				parts = append(parts, p)
			}
		}
	}
	rm.mu.Unlock()
	for _, p := range parts {
		p.log.SetConfig(tc.logConfig(rm.base))
	}
}

// host opens (or creates) the replica's log and returns it.
func (rm *ReplicaManager) host(topic string, p int32) (*Partition, bool, error) {
	key := topicPartition{topic, p}
	rm.mu.RLock()
	part, ok := rm.partitions[key]
	tc, hasCfg := rm.configs[topic]
	rm.mu.RUnlock()
	if ok {
		return part, false, nil
	}
	if !hasCfg {
		return nil, false, fmt.Errorf("broker: no config for topic %q", topic)
	}
	l, err := rm.storage.GetOrCreate(topic, p, tc.logConfig(rm.base))
	if err != nil {
		return nil, false, fmt.Errorf("broker: open %s-%d: %w", topic, p, err)
	}
	part = &Partition{topic: topic, id: p, log: l, rm: rm, leaderID: -1}
	if hw, ok := rm.storage.HighWatermark(topic, p); ok {
		part.setHW(hw)
	} else {
		part.setHW(l.LogStartOffset())
	}
	rm.mu.Lock()
	if existing, ok := rm.partitions[key]; ok {
		rm.mu.Unlock()
		return existing, false, nil
	}
	rm.partitions[key] = part
	rm.mu.Unlock()
	return part, true, nil
}

// apply hosts the replica and leads or follows it as a says.
func (rm *ReplicaManager) apply(topic string, p int32, a assignment) error {
	part, _, err := rm.host(topic, p)
	if err != nil {
		return err
	}
	st := part.state()
	if st.is(a, rm.nodeID) {
		return nil
	}
	if a.leader == rm.nodeID {
		if rm.fetchers != nil {
			rm.fetchers.unfollow(part)
		}
		part.becomeLeader(a, time.Now())
		if !st.leader || st.leaderEpoch != a.leaderEpoch {
			rm.logger.Info("became leader", "topic", topic, "partition", p, "epoch", a.leaderEpoch,
				"log_end_offset", part.log.LogEndOffset(), "high_watermark", part.HighWatermark())
		}
		return nil
	}
	part.becomeFollower(a)
	if rm.fetchers != nil {
		rm.fetchers.follow(part, a.leader, a.leaderEpoch)
	}
	if st.leader || st.leaderID != a.leader || st.leaderEpoch != a.leaderEpoch {
		rm.logger.Info("became follower", "topic", topic, "partition", p, "leader", a.leader, "epoch", a.leaderEpoch)
	}
	return nil
}

// shrinkISRs drops lagging followers from the ISR of every led partition.
func (rm *ReplicaManager) shrinkISRs(lag time.Duration) error {
	now := time.Now()
	rm.mu.RLock()
	parts := make([]*Partition, 0, len(rm.partitions))
	for _, p := range rm.partitions {
		parts = append(parts, p)
	}
	rm.mu.RUnlock()
	for _, p := range parts {
		p.maybeShrinkISR(now, lag)
	}
	return nil
}

// remove stops hosting a replica and deletes its log.
func (rm *ReplicaManager) remove(topic string, p int32) error {
	key := topicPartition{topic, p}
	rm.mu.Lock()
	part, ok := rm.partitions[key]
	delete(rm.partitions, key)
	rm.mu.Unlock()
	if ok {
		if rm.fetchers != nil {
			rm.fetchers.unfollow(part)
		}
		part.becomeFollower(assignment{leader: -1, leaderEpoch: -1})
	}
	if err := rm.storage.Delete(topic, p); err != nil {
		return fmt.Errorf("broker: delete %s-%d: %w", topic, p, err)
	}
	rm.logger.Info("deleted replica", "topic", topic, "partition", p)
	return nil
}

// forgetTopic drops a deleted topic's config.
func (rm *ReplicaManager) forgetTopic(topic string) {
	rm.mu.Lock()
	delete(rm.configs, topic)
	rm.mu.Unlock()
}

// configsSnapshot lists the topics with a config.
func (rm *ReplicaManager) configsSnapshot() map[string]topicConfig {
	rm.mu.RLock()
	defer rm.mu.RUnlock()
	out := make(map[string]topicConfig, len(rm.configs))
	for k, v := range rm.configs {
		out[k] = v
	}
	return out
}

// hosted lists every hosted replica.
func (rm *ReplicaManager) hosted() []topicPartition {
	rm.mu.RLock()
	defer rm.mu.RUnlock()
	out := make([]topicPartition, 0, len(rm.partitions))
	for k := range rm.partitions {
		out = append(out, k)
	}
	return out
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
