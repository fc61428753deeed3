package request

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/quirelog/quire/auth"
	"github.com/quirelog/quire/metadata"
)

// DescribeLogsTimeout bounds how long DescribeTopics waits for the
// brokers it asks; a leader that does not answer in time shows -1.
const DescribeLogsTimeout = 2 * time.Second

// TopicDescription is a topic as the metadata has it, with the offsets of
// every partition as its leader knows them.
type TopicDescription struct {
	Name, ID   string
	Configs    map[string]string
	Partitions []PartitionDescription
}

// PartitionDescription is one partition of a TopicDescription: -1 for
// offsets its leader did not answer (none, unreachable, or no longer
// leading it).
type PartitionDescription struct {
	Partition, Leader, LeaderEpoch              int32
	Replicas, ISR                               []int32
	LogStartOffset, HighWatermark, LogEndOffset int64
	// SizeBytes is the leader's log on disk, -1 with the offsets.
	SizeBytes int64
	// DirtyRatio is the leader's share of cleanable bytes not yet cleaned
	// (a compacted topic), -1 when not compacted or not known.
	DirtyRatio float64
	// OfflineReplicas are the replicas outside the ISR whose log failed,
	// by broker id.
	OfflineReplicas []OfflineReplica
	// AddingReplicas and RemovingReplicas are a pending reassignment.
	AddingReplicas, RemovingReplicas []int32
}

// OfflineReplica is a replica whose log failed, in Dir.
type OfflineReplica struct {
	BrokerID   int32
	Dir, Error string
}

// LogRef names a replica's log to describe.
type LogRef struct {
	Topic     string
	Partition int32
}

// LogDescription is a broker's view of one of its replicas: offsets -1
// and Hosted false when it hosts none.
type LogDescription struct {
	Topic                                       string
	Partition                                   int32
	Hosted, Leader                              bool
	LeaderEpoch                                 int32
	LogStartOffset, HighWatermark, LogEndOffset int64
	// SizeBytes is the log's size on disk, -1 when not hosted.
	SizeBytes int64
	// Dir and Failure say where and why the log failed, if it did.
	Dir, Failure string
	// Compacted: the topic is compacted; DirtyRatio is then the share of
	// the replica's cleanable bytes not yet cleaned.
	Compacted  bool
	DirtyRatio float64
	// LastStableOffset is the replica's (the first offset of its oldest
	// open transaction, or its high watermark if lower), -1 when not
	// hosted.
	LastStableOffset int64
}

// LogDescriber asks another broker to describe its replicas' logs, one
// answer per ref in order (the broker's is DescribeLogs over the
// node-to-node connection).
type LogDescriber interface {
	DescribeLogs(ctx context.Context, broker metadata.BrokerInfo, refs []LogRef) ([]LogDescription, error)
}

// DescribeLog is this broker's view of one of its replicas.
func (c *Core) DescribeLog(topic string, partition int32) LogDescription {
	d := LogDescription{Topic: topic, Partition: partition, LogStartOffset: -1, HighWatermark: -1, LogEndOffset: -1, SizeBytes: -1, DirtyRatio: -1,
		LastStableOffset: -1}
	part, ok := c.cfg.Replicas.Partition(topic, partition)
	if !ok {
		return d
	}
	st := part.State()
	d.Hosted, d.Leader, d.LeaderEpoch = true, st.Leader, st.LeaderEpoch
	d.LogStartOffset, d.HighWatermark, d.LogEndOffset = part.LogStartOffset(), part.HighWatermark(), part.LogEndOffset()
	d.LastStableOffset = part.LastStableOffset()
	d.SizeBytes = part.SizeBytes()
	d.DirtyRatio, d.Compacted = part.DirtyRatio()
	var failure error
	if d.Dir, failure = part.LogFailure(); failure != nil {
		d.Failure = failure.Error()
	}
	return d
}

// DescribeTopics describes the topics named, or every topic the caller
// may describe when none is named; a topic named that does not exist, or
// that the caller may not describe, fails the whole request.
func (c *Core) DescribeTopics(ctx context.Context, names []string) ([]TopicDescription, error) {
	var topics []metadata.TopicInfo
	if len(names) == 0 {
		for _, t := range c.cfg.Cluster.Topics() {
			if c.mayDescribe(ctx, t.Name) {
				topics = append(topics, t)
			}
		}
		return c.Describe(ctx, topics), nil
	}
	if err := c.authorizeEach(ctx, auth.OpDescribe, len(names), func(i int) string { return names[i] }, nil); err != nil {
		return nil, err
	}
	for _, name := range names {
		t, ok := c.cfg.Cluster.Topic(name)
		if !ok {
			return nil, c.fail(unknownTopic(name))
		}
		topics = append(topics, t)
	}
	return c.Describe(ctx, topics), nil
}

// mayDescribe reports whether the caller of ctx may describe topic.
func (c *Core) mayDescribe(ctx context.Context, topic string) bool {
	return c.cfg.Authorizer == nil || c.cfg.Authorizer.Authorize(auth.Request{Principal: Principal(ctx), Operation: auth.OpDescribe,
		ResourceType: auth.ResourceTopic, ResourceName: topic})
}

// logAsk is one partition Describe asks a broker about: its offsets, of
// its leader, or whether its log failed, of a replica outside the ISR.
type logAsk struct {
	pd      *PartitionDescription
	replica int32 // the broker asked
	leader  bool  // offsets (the leader) rather than a failure check
}

// Describe describes topics, for a caller that authorized it, with the
// offsets of every partition as its leader knows them and the replicas
// outside the ISR whose log failed: this broker's own replicas directly,
// every other broker asked at once (one call per broker, within
// DescribeLogsTimeout).
func (c *Core) Describe(ctx context.Context, topics []metadata.TopicInfo) []TopicDescription {
	out := make([]TopicDescription, len(topics))
	asks := map[int32][]logAsk{}
	refs := map[int32][]LogRef{}
	for i, t := range topics {
		d := &out[i]
		*d = TopicDescription{Name: t.Name, ID: t.ID, Configs: t.Configs, Partitions: make([]PartitionDescription, len(t.Partitions))}
		for j, p := range t.Partitions {
			pd := &d.Partitions[j]
			*pd = PartitionDescription{Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, Replicas: p.Replicas, ISR: p.ISR,
				LogStartOffset: -1, HighWatermark: -1, LogEndOffset: -1, SizeBytes: -1, DirtyRatio: -1,
				AddingReplicas: p.AddingReplicas, RemovingReplicas: p.RemovingReplicas}
			var want []logAsk
			if p.Leader >= 0 {
				want = append(want, logAsk{pd: pd, replica: p.Leader, leader: true})
			}
			for _, r := range p.Replicas {
				// A fenced broker (down, or cut off from the controller)
				// is not waited for.
				if br, ok := c.cfg.Cluster.Broker(r); ok && !br.Fenced && r != p.Leader && !slices.Contains(p.ISR, r) {
					want = append(want, logAsk{pd: pd, replica: r})
				}
			}
			for _, a := range want {
				if a.replica == c.cfg.NodeID {
					applyLog(a, c.DescribeLog(t.Name, p.Partition))
					continue
				}
				asks[a.replica] = append(asks[a.replica], a)
				refs[a.replica] = append(refs[a.replica], LogRef{Topic: t.Name, Partition: p.Partition})
			}
		}
	}
	if len(asks) > 0 && c.cfg.Logs != nil {
		ctx, cancel := context.WithTimeout(ctx, DescribeLogsTimeout)
		defer cancel()
		// Answers for one partition may come from several brokers at once.
		var mu sync.Mutex
		var wg sync.WaitGroup
		for id, as := range asks {
			br, ok := c.cfg.Cluster.Broker(id)
			if !ok || br.Addr == "" {
				continue
			}
			wg.Go(func() {
				logs, err := c.cfg.Logs.DescribeLogs(ctx, br, refs[id])
				if err != nil {
					return // its partitions show -1
				}
				mu.Lock()
				defer mu.Unlock()
				for i, a := range as {
					if i < len(logs) {
						applyLog(a, logs[i])
					}
				}
			})
		}
		wg.Wait()
	}
	for i := range out {
		for j := range out[i].Partitions {
			slices.SortFunc(out[i].Partitions[j].OfflineReplicas, func(x, y OfflineReplica) int { return int(x.BrokerID) - int(y.BrokerID) })
		}
	}
	return out
}

// applyLog puts what broker a.replica said of its replica into a.pd: a
// leader's offsets (a replica not hosted or not led there, leadership
// having moved since the image, leaves -1), or a failed log.
func applyLog(a logAsk, l LogDescription) {
	if !l.Hosted || l.Partition != a.pd.Partition {
		return
	}
	if a.leader {
		if l.Leader {
			a.pd.LogStartOffset, a.pd.HighWatermark, a.pd.LogEndOffset = l.LogStartOffset, l.HighWatermark, l.LogEndOffset
			a.pd.SizeBytes = l.SizeBytes
			if l.Compacted {
				a.pd.DirtyRatio = l.DirtyRatio
			}
		}
		return
	}
	if l.Failure != "" {
		a.pd.OfflineReplicas = append(a.pd.OfflineReplicas, OfflineReplica{BrokerID: a.replica, Dir: l.Dir, Error: l.Failure})
	}
}
