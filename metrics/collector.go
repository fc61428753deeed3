// Package metrics exposes a node's statistics to Prometheus: the one
// package that imports the Prometheus client. The domain packages keep
// plain snapshots (replica.Manager.Stats and StageLatencies,
// storage.Manager.Stats, metadata.Node.Stats, rpcstats.Stats.Snapshot)
// updated with atomics on their hot paths; the collector here reads them
// at scrape time and turns them into series. Server serves /metrics,
// /healthz, /readyz and, when asked, /debug/pprof/.
package metrics

import (
	"math"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quirelog/quire/internal/atomichist"
	"github.com/quirelog/quire/internal/rpcstats"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/replica"
	"github.com/quirelog/quire/request"
	"github.com/quirelog/quire/storage"
)

// Source gives the snapshots of one node.
type Source interface {
	ReplicaStats() replica.Stats
	StorageStats() storage.Stats
	MetadataStats() metadata.Stats
	// GroupStats is the consumer groups, on their coordinator (the
	// controller); none elsewhere.
	GroupStats() []metadata.GroupStats
	RequestStats() []rpcstats.Method
	// QueueStats is how long produces and fetches waited to be handled.
	QueueStats() rpcstats.QueueSnapshot
	// StageLatencies is how long the appends of partitions led here took
	// to reach each replication stage, since the node started.
	StageLatencies() [replica.NumStages]replica.Histogram
	// Ready is nil when the node serves clients, else why not.
	Ready() error
	// ShareStats is the share groups served here (share.go).
	ShareStats() request.ShareStats
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("quire_"+name, help, labels, nil)
}

var (
	dRequests        = desc("requests_total", "gRPC calls answered, by method and status code (streams count once, when they end).", "rpc", "code")
	dRequestDuration = desc("request_duration_seconds", "How long gRPC calls took, from a request's arrival to its answer (type stream: how long streams were open). Each request of a produce stream and each answer of a fetch stream counts as a Produce or Fetch call; the replica fetch stream's as ReplicaFetch calls.", "rpc", "type")

	dQueue = desc("request_queue_seconds", "How long requests waited from their receipt to the start of their work: a produce to the start of its append to each partition (after the appends ahead of it), a fetch to the read of each partition.", "request")

	dStages = desc("replication_stage_seconds", "Time from a leader's append (on partitions led here) to each stage: a follower's fetch read it (follower_read), the high watermark passed it (replicated), its acks=all produce was answered (acked), a consumer's fetch read it (delivered); cumulative since the node started.", "stage")

	dRecordsIn  = desc("topic_records_in_total", "Records appended by producers to partitions led here.", "topic")
	dBytesIn    = desc("topic_bytes_in_total", "Batch bytes appended by producers to partitions led here.", "topic")
	dRecordsOut = desc("topic_records_out_total", "Records read by consumers from partitions led here.", "topic")
	dBytesOut   = desc("topic_bytes_out_total", "Batch bytes read by consumers from partitions led here.", "topic")

	dClientBytesIn       = desc("bytes_in_total", "Batch bytes appended by producers to partitions led here, all topics (the sum of quire_topic_bytes_in_total).")
	dClientBytesOut      = desc("bytes_out_total", "Batch bytes read by consumers from partitions led here, all topics (the sum of quire_topic_bytes_out_total).")
	dReplicationBytesOut = desc("replication_bytes_out_total", "Batch bytes this node's answers to replica fetches carried: served, as a leader, to its followers.")
	dReplicationBytesIn  = desc("replication_bytes_in_total", "Batch bytes this node's replica fetches brought: fetched, as a follower, from the leaders.")

	dUnderReplicated = desc("under_replicated_partitions", "Partitions led here whose ISR is smaller than their replica set.")
	dUnderMinISR     = desc("under_min_isr_partitions", "Partitions led here whose ISR is smaller than min.insync.replicas (acks=all produces fail).")
	dLeaderCount     = desc("leader_partitions", "Partitions led here.")
	dReplicaCount    = desc("replica_partitions", "Replicas hosted here, led or followed.")
	dFailedReplicas  = desc("failed_replicas", "Replicas hosted here whose log failed (out of service).")
	dISRShrinks      = desc("isr_shrinks_total", "ISR changes of partitions led here that removed a replica.")
	dISRExpands      = desc("isr_expands_total", "ISR changes of partitions led here that added a replica.")

	dPartLEO      = desc("partition_log_end_offset", "Log end offset of a partition led here.", "topic", "partition")
	dPartHW       = desc("partition_high_watermark", "High watermark of a partition led here.", "topic", "partition")
	dPartStart    = desc("partition_log_start_offset", "Log start offset of a partition led here.", "topic", "partition")
	dPartSize     = desc("partition_size_bytes", "Size on disk of a partition led here.", "topic", "partition")
	dPartSegments = desc("partition_segments", "Segment count of a partition led here.", "topic", "partition")
	dPartISR      = desc("partition_isr_size", "ISR size of a partition led here.", "topic", "partition")
	dPartReplicas = desc("partition_replicas", "Replica count of a partition led here.", "topic", "partition")
	dPartUnder    = desc("partition_under_replicated", "1 when a partition led here has an ISR smaller than its replica set.", "topic", "partition")
	dFollowerLag  = desc("partition_follower_lag_records", "Leader's log end offset minus a follower's fetch offset (-1 until it fetched in this leader epoch).", "topic", "partition", "follower")

	dFlush = desc("log_flush_duration_seconds", "How long log flushes (fsync) took.")

	dCleanDirty   = desc("log_cleaner_dirty_ratio", "Share of a compacted replica's cleanable bytes written since its last clean (the cleaner takes it above min.cleanable.dirty.ratio); every replica hosted here.", "topic", "partition")
	dCleanLast    = desc("log_cleaner_last_clean_timestamp_seconds", "When the cleaner last finished a pass over a compacted replica hosted here (Unix seconds; 0: never since the node started).", "topic", "partition")
	dCleanBytes   = desc("log_cleaner_bytes_cleaned_total", "Bytes the cleaner read from a compacted replica hosted here (its dirty section and the segments it rewrote).", "topic", "partition")
	dCleanWritten = desc("log_cleaner_bytes_written_total", "Bytes of cleaned segments the cleaner wrote for a compacted replica hosted here.", "topic", "partition")
	dCleanPasses  = desc("log_cleaner_passes_total", "Clean passes completed over a compacted replica hosted here.", "topic", "partition")
	dCleanLag     = desc("log_cleaner_lag_seconds", "How long the oldest dirty record of a compacted replica hosted here has waited to be cleaned (now minus the first timestamp of its first dirty segment; 0 when nothing is dirty).", "topic", "partition")

	dOpenFiles     = desc("log_open_files", "Segment files (.log, .index, .timeindex) open now.")
	dOpenFilesMax  = desc("log_open_files_max", "Most segment files kept open (log.open.files.max, or half the open-file limit).")
	dFileOpens     = desc("log_file_opens_total", "Segment files opened (created, or reopened after being closed to make room).")
	dFileEvictions = desc("log_file_evictions_total", "Segment files closed to make room for others (the least recently used).")

	dActiveController = desc("active_controller", "1 on the active controller (the metadata raft leader), else 0.")
	dFencedBrokers    = desc("fenced_brokers", "Registered brokers the controller has fenced (on the active controller only).")
	dBrokers          = desc("registered_brokers", "Registered brokers (on the active controller only).")
	dOffline          = desc("offline_partitions", "Partitions with no leader or a fenced one (on the active controller only).")
	dReassigning      = desc("cluster_reassigning_partitions", "Partitions with a reassignment pending, cluster-wide (on the active controller only).")
	dAdding           = desc("reassigning_replicas", "Replicas this broker is adding by a partition reassignment (they fetch under the reassignment throttle).")
	dThrottle         = desc("reassignment_throttle_bytes_per_second", "replica.reassignment.throttle.bytes.per.second in force on this broker; 0 unthrottled.")
	dClusterUnder     = desc("cluster_under_replicated_partitions", "Partitions whose ISR is smaller than their replica set, cluster-wide (on the active controller only).")
	dApplied          = desc("metadata_applied_index", "Raft index of the metadata image in use.")
	dCommit           = desc("metadata_commit_index", "Highest raft index this node knows committed.")
	dMetaLag          = desc("metadata_lag", "Metadata raft entries committed but not yet applied here (commit index minus applied index).")
	dElections        = desc("leader_elections_total", "Partition leader elections in the metadata log since this node started: a partition given another leader, an offline one included (on the active controller only).")
	dUncleanElections = desc("unclean_leader_elections_total", "Unclean partition leader elections (the new leader was not in the ISR: records may be lost) in the metadata log since this node started (on the active controller only).")
	dRaftTerm         = desc("raft_term", "Current raft term of the metadata quorum.")
	dRaftState        = desc("raft_state", "1 for this node's raft state (Leader, Follower, Candidate, Shutdown).", "state")
	dGroupLag         = desc("group_lag_records", "Records a consumer group is behind in a partition: high watermark minus committed offset (on the group coordinator, the active controller; refreshed every group.lag.refresh.ms).", "group", "topic", "partition")
	dGroupStableLag   = desc("group_stable_lag_records", "Records a read_committed consumer group is behind in a partition: last stable offset minus committed offset, the records of open transactions left out (equal to group_lag_records while none is open; on the group coordinator).", "group", "topic", "partition")
	dGroupLagSeconds  = desc("group_lag_seconds", "Seconds a consumer group is behind in a partition: now minus the timestamp of the first record not committed, 0 when caught up (on the group coordinator).", "group", "topic", "partition")
	dGroupMembers     = desc("group_members", "Members of a consumer group (on the group coordinator).", "group")
	dGroupRebalances  = desc("group_rebalances_total", "Target assignments the coordinator computed for a consumer group while this node was its coordinator.", "group")
	dGroupConsumeRate = desc("group_consume_rate", "Records a second a consumer group's committed offsets moved, summed over its partitions, over about the last twelve group.lag.refresh.ms (on the group coordinator; absent until it looked twice).", "group")
	dGroupProduceRate = desc("group_produce_rate", "Records a second the high watermarks of a consumer group's partitions moved, over the same window (on the group coordinator).", "group")
	dGroupDrain       = desc("group_drain_seconds", "Seconds until a consumer group's lag is 0 at its consume and produce rates: lag / (consume rate - produce rate); 0 with no lag, +Inf when the lag does not shrink (on the group coordinator; absent while unknown).", "group")
	dGroupNeeded      = desc("group_members_needed", "Members that would keep a consumer group's lag flat at its produce rate, each reading as fast as its members do now on average, at most its partition count; 0 when nothing is produced (on the group coordinator; absent while unknown).", "group")
	dGroupPartitions  = desc("group_partitions", "Partitions a consumer group reads or committed in: the most members that can have work (on the group coordinator).", "group")
	dReady            = desc("ready", "1 when the node is registered, unfenced and its metadata caught up (/readyz answers 200).")
)

var raftStates = []string{"Leader", "Follower", "Candidate", "Shutdown"}

// collector turns a Source's snapshots into series at scrape time.
type collector struct{ src Source }

// NewCollector returns a prometheus.Collector over src.
func NewCollector(src Source) prometheus.Collector { return collector{src} }

func (collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{dRequests, dRequestDuration, dQueue, dStages, dRecordsIn, dBytesIn, dRecordsOut, dBytesOut,
		dClientBytesIn, dClientBytesOut, dReplicationBytesOut, dReplicationBytesIn, dElections, dUncleanElections,
		dGroupConsumeRate, dGroupProduceRate, dGroupDrain, dGroupNeeded, dGroupPartitions,
		dUnderReplicated, dUnderMinISR, dLeaderCount, dReplicaCount, dFailedReplicas, dISRShrinks, dISRExpands,
		dPartLEO, dPartHW, dPartStart, dPartSize, dPartSegments, dPartISR, dPartReplicas, dPartUnder, dFollowerLag,
		dFlush, dCleanDirty, dCleanLast, dCleanBytes, dCleanWritten, dCleanPasses, dCleanLag, dOpenFiles, dOpenFilesMax, dFileOpens, dFileEvictions, dActiveController, dFencedBrokers, dBrokers, dOffline, dClusterUnder, dReassigning, dAdding, dThrottle, dApplied, dCommit, dMetaLag,
		dRaftTerm, dRaftState, dGroupLag, dGroupStableLag, dGroupLagSeconds, dGroupMembers, dGroupRebalances, dReady} {
		ch <- d
	}
	for _, d := range shareDescs {
		ch <- d
	}
}

func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func counter(ch chan<- prometheus.Metric, d *prometheus.Desc, v uint64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
}

func histogram(ch chan<- prometheus.Metric, d *prometheus.Desc, s atomichist.Snapshot, labels ...string) {
	buckets := make(map[float64]uint64, len(atomichist.Bounds))
	for i, b := range atomichist.Bounds {
		if i < len(s.Cumulative) { // a zero Snapshot has none
			buckets[b] = s.Cumulative[i]
		}
	}
	ch <- prometheus.MustNewConstHistogram(d, s.Count, s.Sum.Seconds(), buckets, labels...)
}

// The stage histograms' log2 buckets exported as bounds: bucket
// stageBucketFirst (16 µs) to stageBucketLast (2^25 µs, about 33.6 s).
// The buckets below the first are folded into it; those past the last
// count in +Inf only.
const (
	stageBucketFirst = 4
	stageBucketLast  = 25
)

// stageHistogram exports a replica.Histogram (log2 buckets of
// microseconds, counts per bucket) as a Prometheus one (cumulative counts
// at upper bounds in seconds). Bucket i holds durations under
// BucketBound(i), so its upper bound is exclusive where Prometheus' le is
// inclusive: a duration of exactly a bound counts at the next one, a
// difference far below the buckets' factor-of-two resolution.
func stageHistogram(ch chan<- prometheus.Metric, d *prometheus.Desc, h replica.Histogram, labels ...string) {
	buckets := make(map[float64]uint64, stageBucketLast-stageBucketFirst+1)
	var cum uint64
	for i, n := range h.Counts {
		cum += n
		if i >= stageBucketFirst && i <= stageBucketLast {
			buckets[replica.BucketBound(i).Seconds()] = cum
		}
	}
	ch <- prometheus.MustNewConstHistogram(d, cum, h.Sum.Seconds(), buckets, labels...)
}

// groupThroughput exports a group's throughput; unknown figures are left
// out rather than shown as a number.
func groupThroughput(ch chan<- prometheus.Metric, group string, t metadata.GroupThroughput) {
	if t.ConsumeRate >= 0 {
		gauge(ch, dGroupConsumeRate, t.ConsumeRate, group)
	}
	if t.ProduceRate >= 0 {
		gauge(ch, dGroupProduceRate, t.ProduceRate, group)
	}
	switch {
	case t.DrainSeconds >= 0:
		gauge(ch, dGroupDrain, t.DrainSeconds, group)
	case t.Lag > 0 && t.ConsumeRate >= 0 && t.ProduceRate >= 0:
		gauge(ch, dGroupDrain, math.Inf(1), group) // not draining
	}
	if t.MembersNeeded >= 0 {
		gauge(ch, dGroupNeeded, float64(t.MembersNeeded), group)
	}
	gauge(ch, dGroupPartitions, float64(t.Partitions), group)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c.src.RequestStats() {
		rpc := strings.TrimPrefix(m.Name, "/")
		for code, n := range m.ByCode {
			counter(ch, dRequests, n, rpc, code.String())
		}
		kind := "unary"
		if m.Stream {
			kind = "stream"
		}
		histogram(ch, dRequestDuration, m.Latency, rpc, kind)
	}

	collectShares(ch, c.src.ShareStats())

	qs := c.src.QueueStats()
	histogram(ch, dQueue, qs.Produce, "produce")
	histogram(ch, dQueue, qs.Fetch, "fetch")

	for s, h := range c.src.StageLatencies() {
		stageHistogram(ch, dStages, h, replica.Stage(s).String())
	}

	rs := c.src.ReplicaStats()
	var bytesIn, bytesOut uint64
	for _, t := range rs.Topics {
		counter(ch, dRecordsIn, t.RecordsIn, t.Topic)
		counter(ch, dBytesIn, t.BytesIn, t.Topic)
		counter(ch, dRecordsOut, t.RecordsOut, t.Topic)
		counter(ch, dBytesOut, t.BytesOut, t.Topic)
		bytesIn += t.BytesIn
		bytesOut += t.BytesOut
	}
	// The topic counters outlive their partitions here (replica.TopicIO),
	// so their sums never go down.
	counter(ch, dClientBytesIn, bytesIn)
	counter(ch, dClientBytesOut, bytesOut)
	counter(ch, dReplicationBytesOut, rs.ReplicationBytesOut)
	counter(ch, dReplicationBytesIn, rs.ReplicationBytesIn)
	var under, underMin, leaders, failed, adding int
	for _, p := range rs.Partitions {
		if p.LogFailed {
			failed++
		}
		if p.Reassigning {
			adding++
		}
		if !p.Leader {
			continue
		}
		leaders++
		if p.UnderReplicated {
			under++
		}
		if p.UnderMinISR {
			underMin++
		}
		part := strconv.Itoa(int(p.Partition))
		gauge(ch, dPartLEO, float64(p.LogEndOffset), p.Topic, part)
		gauge(ch, dPartHW, float64(p.HighWatermark), p.Topic, part)
		gauge(ch, dPartStart, float64(p.LogStartOffset), p.Topic, part)
		gauge(ch, dPartSize, float64(p.SizeBytes), p.Topic, part)
		gauge(ch, dPartSegments, float64(p.Segments), p.Topic, part)
		gauge(ch, dPartISR, float64(p.ISR), p.Topic, part)
		gauge(ch, dPartReplicas, float64(p.Replicas), p.Topic, part)
		gauge(ch, dPartUnder, b2f(p.UnderReplicated), p.Topic, part)
		for _, f := range p.Followers {
			gauge(ch, dFollowerLag, float64(f.Records), p.Topic, part, strconv.Itoa(int(f.ID)))
		}
	}
	gauge(ch, dUnderReplicated, float64(under))
	gauge(ch, dUnderMinISR, float64(underMin))
	gauge(ch, dLeaderCount, float64(leaders))
	gauge(ch, dReplicaCount, float64(len(rs.Partitions)))
	gauge(ch, dFailedReplicas, float64(failed))
	gauge(ch, dAdding, float64(adding))
	gauge(ch, dThrottle, float64(rs.ReassignmentThrottle))
	counter(ch, dISRShrinks, rs.ISRShrinks)
	counter(ch, dISRExpands, rs.ISRExpands)

	ss := c.src.StorageStats()
	histogram(ch, dFlush, ss.FlushLatency)
	for _, l := range ss.Logs {
		if !l.Compacted {
			continue
		}
		part := strconv.Itoa(int(l.Partition))
		cs := l.Cleaning
		gauge(ch, dCleanDirty, cs.DirtyRatio, l.Topic, part)
		gauge(ch, dCleanLast, float64(cs.LastCleanMs)/1000, l.Topic, part)
		counter(ch, dCleanBytes, uint64(cs.BytesCleaned), l.Topic, part)
		counter(ch, dCleanWritten, uint64(cs.BytesWritten), l.Topic, part)
		counter(ch, dCleanPasses, uint64(cs.Passes), l.Topic, part)
		gauge(ch, dCleanLag, float64(cs.LagMs)/1000, l.Topic, part)
	}
	gauge(ch, dOpenFiles, float64(ss.Files.Open))
	gauge(ch, dOpenFilesMax, float64(ss.Files.Capacity))
	counter(ch, dFileOpens, uint64(ss.Files.Opens))
	counter(ch, dFileEvictions, uint64(ss.Files.Evicted))

	ms := c.src.MetadataStats()
	gauge(ch, dActiveController, b2f(ms.IsController))
	if ms.IsController {
		gauge(ch, dFencedBrokers, float64(ms.FencedBrokers))
		gauge(ch, dBrokers, float64(ms.Brokers))
		gauge(ch, dOffline, float64(ms.OfflinePartitions))
		gauge(ch, dClusterUnder, float64(ms.UnderReplicatedPartitions))
		counter(ch, dElections, ms.LeaderElections)
		counter(ch, dUncleanElections, ms.UncleanLeaderElections)
		gauge(ch, dReassigning, float64(ms.ReassigningPartitions))
	}
	gauge(ch, dApplied, float64(ms.AppliedIndex))
	gauge(ch, dCommit, float64(ms.CommitIndex))
	lag := int64(ms.CommitIndex) - int64(ms.AppliedIndex)
	gauge(ch, dMetaLag, float64(max(lag, 0)))
	gauge(ch, dRaftTerm, float64(ms.Term))
	for _, s := range raftStates {
		gauge(ch, dRaftState, b2f(ms.RaftState == s), s)
	}
	for _, g := range c.src.GroupStats() {
		gauge(ch, dGroupMembers, float64(g.Members), g.Group)
		counter(ch, dGroupRebalances, g.Rebalances, g.Group)
		groupThroughput(ch, g.Group, g.Throughput)
		for _, p := range g.Partitions {
			part := strconv.Itoa(int(p.Partition))
			// Unknown figures (no answer from the leader yet) are left
			// out rather than shown as a number.
			if p.Lag >= 0 {
				gauge(ch, dGroupLag, float64(p.Lag), g.Group, p.Topic, part)
			}
			if p.StableLag >= 0 {
				gauge(ch, dGroupStableLag, float64(p.StableLag), g.Group, p.Topic, part)
			}
			if p.LagSeconds >= 0 {
				gauge(ch, dGroupLagSeconds, p.LagSeconds, g.Group, p.Topic, part)
			}
		}
	}
	gauge(ch, dReady, b2f(c.src.Ready() == nil))
}
