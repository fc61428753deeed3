package broker

import (
	"fmt"
	"sync"

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

	mu         sync.RWMutex
	partitions map[topicPartition]*Partition
	configs    map[string]topicConfig // effective config per hosted topic
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
	part = &Partition{topic: topic, id: p, log: l, rm: rm, leaderID: -1, followerLEO: map[int32]int64{}}
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

// makeLeader hosts the replica and leads it at epoch.
func (rm *ReplicaManager) makeLeader(topic string, p, epoch int32, isr []int32) error {
	part, _, err := rm.host(topic, p)
	if err != nil {
		return err
	}
	st := part.state()
	if st.leader && st.leaderEpoch == epoch && equalIDs(st.isr, isr) {
		return nil
	}
	part.becomeLeader(rm.nodeID, epoch, isr)
	if !st.leader || st.leaderEpoch != epoch {
		rm.logger.Info("became leader", "topic", topic, "partition", p, "epoch", epoch,
			"log_end_offset", part.log.LogEndOffset(), "high_watermark", part.HighWatermark())
	}
	return nil
}

// makeFollower hosts the replica as a follower of leader.
func (rm *ReplicaManager) makeFollower(topic string, p, leader, epoch int32, isr []int32) error {
	part, _, err := rm.host(topic, p)
	if err != nil {
		return err
	}
	st := part.state()
	if !st.leader && st.leaderID == leader && st.leaderEpoch == epoch {
		return nil
	}
	part.becomeFollower(leader, epoch, isr)
	rm.logger.Info("became follower", "topic", topic, "partition", p, "leader", leader, "epoch", epoch)
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
		part.becomeFollower(-1, -1, nil)
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
