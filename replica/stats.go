package replica

// Stats: plain snapshots of the replicas for monitoring, read at scrape
// time. The hot paths only add to atomic counters (TopicIO, the ISR
// change counts); everything else is read from the partitions' state.

import (
	"sort"
	"sync/atomic"

	"github.com/quirelog/quire/record"
)

// TopicIO counts what clients appended to and read from a topic's
// partitions led here (follower appends and replication reads are not
// counted). The counters only grow.
type TopicIO struct {
	RecordsIn, BytesIn   atomic.Uint64
	RecordsOut, BytesOut atomic.Uint64
}

// countRead counts the batches a consumer read.
func (io *TopicIO) countRead(batches []byte) {
	if len(batches) == 0 {
		return
	}
	var n uint64
	_ = record.SplitBatches(batches, func(_ []byte, h record.Header) error {
		n += uint64(h.NumRecords)
		return nil
	})
	io.RecordsOut.Add(n)
	io.BytesOut.Add(uint64(len(batches)))
}

// topicIO returns the counters of a topic, made on first use; they
// outlive the topic's partitions here (leadership moves away and back)
// so that they never go down.
func (rm *Manager) topicIO(topic string) *TopicIO {
	if v, ok := rm.io.Load(topic); ok {
		return v.(*TopicIO)
	}
	v, _ := rm.io.LoadOrStore(topic, &TopicIO{})
	return v.(*TopicIO)
}

// countISRChange counts a led partition's ISR going from old to isr: a
// shrink when a member left, an expansion when one joined (both when
// both happened).
func (rm *Manager) countISRChange(old, isr []int32) {
	for _, id := range old {
		if !contains(isr, id) {
			rm.isrShrinks.Add(1)
			break
		}
	}
	for _, id := range isr {
		if !contains(old, id) {
			rm.isrExpands.Add(1)
			break
		}
	}
}

// FollowerLag is what a leader knows of one follower.
type FollowerLag struct {
	ID int32
	// Records is the leader's LEO minus the follower's fetch offset; -1
	// until the follower has fetched in this leader epoch.
	Records int64
	InSync  bool
}

// PartitionStats is one hosted replica.
type PartitionStats struct {
	Topic          string
	Partition      int32
	Leader         bool // this broker leads it; the fields below are a leader's
	LogStartOffset int64
	LogEndOffset   int64
	HighWatermark  int64
	Replicas       int
	ISR            int
	// UnderReplicated: the ISR is smaller than the replica set (without
	// the replicas a reassignment is adding, as Kafka counts it).
	UnderReplicated bool
	// Reassigning: this broker is adding the replica by a reassignment
	// (it fetches under the reassignment throttle).
	Reassigning bool
	// UnderMinISR: the ISR is smaller than min.insync.replicas (acks=all
	// produces fail).
	UnderMinISR bool
	// SizeBytes and Segments are the log's on disk.
	SizeBytes int64
	Segments  int
	Followers []FollowerLag // as leader
	// LogFailed: the replica's log failed; it is out of service.
	LogFailed bool
}

// TopicStats is a topic's client traffic through this broker.
type TopicStats struct {
	Topic                string
	RecordsIn, BytesIn   uint64
	RecordsOut, BytesOut uint64
}

// Stats is a snapshot of the replicas.
type Stats struct {
	Partitions []PartitionStats // sorted by topic and partition
	Topics     []TopicStats     // sorted by topic
	// ISRShrinks and ISRExpands count the ISR changes of partitions led
	// here, since the process started.
	ISRShrinks, ISRExpands uint64
	// ReplicationBytesOut counts the batch bytes this node's answers to
	// replica fetches carried (as a leader, to its followers);
	// ReplicationBytesIn those its own replica fetches brought (as a
	// follower, from the leaders); since the process started.
	ReplicationBytesOut, ReplicationBytesIn uint64
	// ReassignmentThrottle is replica.reassignment.throttle.bytes.per.second
	// as in force, 0 unthrottled.
	ReassignmentThrottle int64
}

// Stats returns a snapshot of every hosted replica and the counters.
func (rm *Manager) Stats() Stats {
	st := Stats{ISRShrinks: rm.isrShrinks.Load(), ISRExpands: rm.isrExpands.Load(),
		ReplicationBytesOut: rm.replicationBytesOut.Load(), ReplicationBytesIn: rm.replicationBytesIn.Load(),
		ReassignmentThrottle: rm.ReassignmentThrottle()}
	for _, p := range rm.all() {
		st.Partitions = append(st.Partitions, p.stats())
	}
	sort.Slice(st.Partitions, func(i, j int) bool {
		a, b := st.Partitions[i], st.Partitions[j]
		return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
	})
	rm.io.Range(func(k, v any) bool {
		io := v.(*TopicIO)
		st.Topics = append(st.Topics, TopicStats{Topic: k.(string), RecordsIn: io.RecordsIn.Load(), BytesIn: io.BytesIn.Load(),
			RecordsOut: io.RecordsOut.Load(), BytesOut: io.BytesOut.Load()})
		return true
	})
	sort.Slice(st.Topics, func(i, j int) bool { return st.Topics[i].Topic < st.Topics[j].Topic })
	return st
}

func (p *Partition) stats() PartitionStats {
	tc, _ := p.rm.topicConfig(p.topic)
	leo := p.log.LogEndOffset()
	ps := PartitionStats{Topic: p.topic, Partition: p.id, LogStartOffset: p.log.LogStartOffset(), LogEndOffset: leo,
		SizeBytes: p.log.Size(), Segments: p.log.NumSegments()}
	p.mu.Lock()
	defer p.mu.Unlock()
	ps.Leader, ps.HighWatermark = p.leader, p.hw
	ps.Replicas, ps.ISR = len(p.replicas), len(p.isr)
	ps.UnderReplicated = p.leader && len(p.isr) < len(p.replicas)-len(p.adding)
	ps.Reassigning = p.reassigning.Load()
	ps.UnderMinISR = p.leader && int32(len(p.isr)) < tc.MinInsyncReplicas
	ps.LogFailed = p.failed != nil
	if p.leader {
		for _, id := range p.replicas {
			f, ok := p.followers[id]
			if id == p.leaderID || !ok {
				continue
			}
			lag := int64(-1)
			if f.leo >= 0 {
				lag = max(leo-f.leo, 0)
			}
			ps.Followers = append(ps.Followers, FollowerLag{ID: id, Records: lag, InSync: contains(p.isr, id)})
		}
	}
	return ps
}
