package metrics

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"

	"github.com/quirelog/quire/internal/rpcstats"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/replica"
	"github.com/quirelog/quire/request"
	"github.com/quirelog/quire/storage"
)

type fakeSource struct {
	rs     replica.Stats
	ss     storage.Stats
	ms     metadata.Stats
	calls  []rpcstats.Method
	gs     []metadata.GroupStats
	stages [replica.NumStages]replica.Histogram
	ready  error
	shares request.ShareStats
}

func (f fakeSource) ReplicaStats() replica.Stats        { return f.rs }
func (f fakeSource) StorageStats() storage.Stats        { return f.ss }
func (f fakeSource) MetadataStats() metadata.Stats      { return f.ms }
func (f fakeSource) RequestStats() []rpcstats.Method    { return f.calls }
func (f fakeSource) Ready() error                       { return f.ready }
func (f fakeSource) GroupStats() []metadata.GroupStats  { return f.gs }
func (f fakeSource) QueueStats() rpcstats.QueueSnapshot { return rpcstats.QueueSnapshot{} }
func (f fakeSource) ShareStats() request.ShareStats     { return f.shares }
func (f fakeSource) StageLatencies() [replica.NumStages]replica.Histogram {
	return f.stages
}

func TestCollectorSeries(t *testing.T) {
	src := fakeSource{
		rs: replica.Stats{ISRShrinks: 2, Partitions: []replica.PartitionStats{
			{Topic: "a", Partition: 0, Leader: true, LogEndOffset: 10, HighWatermark: 8, Replicas: 3, ISR: 2, UnderReplicated: true,
				Followers: []replica.FollowerLag{{ID: 2, Records: 2}, {ID: 3, Records: -1}}},
			{Topic: "a", Partition: 1, Leader: false, LogEndOffset: 4}, // followed: no partition series
		}},
		ms:    metadata.Stats{IsController: false, AppliedIndex: 5, CommitIndex: 9, RaftState: "Follower"},
		calls: []rpcstats.Method{{Name: "/quire.v1.Producer/Produce", ByCode: map[codes.Code]uint64{codes.OK: 3}}},
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(src))
	want := `
# HELP quire_under_replicated_partitions Partitions led here whose ISR is smaller than their replica set.
# TYPE quire_under_replicated_partitions gauge
quire_under_replicated_partitions 1
# HELP quire_isr_shrinks_total ISR changes of partitions led here that removed a replica.
# TYPE quire_isr_shrinks_total counter
quire_isr_shrinks_total 2
# HELP quire_partition_high_watermark High watermark of a partition led here.
# TYPE quire_partition_high_watermark gauge
quire_partition_high_watermark{partition="0",topic="a"} 8
# HELP quire_partition_follower_lag_records Leader's log end offset minus a follower's fetch offset (-1 until it fetched in this leader epoch).
# TYPE quire_partition_follower_lag_records gauge
quire_partition_follower_lag_records{follower="2",partition="0",topic="a"} 2
quire_partition_follower_lag_records{follower="3",partition="0",topic="a"} -1
# HELP quire_metadata_lag Metadata raft entries committed but not yet applied here (commit index minus applied index).
# TYPE quire_metadata_lag gauge
quire_metadata_lag 4
# HELP quire_requests_total gRPC calls answered, by method and status code (streams count once, when they end).
# TYPE quire_requests_total counter
quire_requests_total{code="OK",rpc="quire.v1.Producer/Produce"} 3
# HELP quire_raft_state 1 for this node's raft state (Leader, Follower, Candidate, Shutdown).
# TYPE quire_raft_state gauge
quire_raft_state{state="Candidate"} 0
quire_raft_state{state="Follower"} 1
quire_raft_state{state="Leader"} 0
quire_raft_state{state="Shutdown"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "quire_under_replicated_partitions", "quire_isr_shrinks_total",
		"quire_partition_high_watermark", "quire_partition_follower_lag_records", "quire_metadata_lag", "quire_requests_total",
		"quire_raft_state"); err != nil {
		t.Fatal(err)
	}
	// Off the controller, the cluster-wide counts are absent, not 0.
	if n, err := testutil.GatherAndCount(reg, "quire_offline_partitions", "quire_fenced_brokers"); err != nil || n != 0 {
		t.Fatalf("%d cluster-wide series off the controller (%v)", n, err)
	}
}

func TestCollectorGroupSeries(t *testing.T) {
	src := fakeSource{gs: []metadata.GroupStats{{Group: "g", Members: 2, Rebalances: 3, Partitions: []metadata.GroupPartitionLag{
		// A transaction open from offset 8: a read_committed reader has 4 left.
		{Topic: "a", Partition: 0, Committed: 4, HighWatermark: 10, Lag: 6, LagSeconds: 1.5, LastStableOffset: 8, StableLag: 4},
		{Topic: "a", Partition: 1, Committed: 7, HighWatermark: 7, Lag: 0, LagSeconds: 0, LastStableOffset: 7, StableLag: 0},
		{Topic: "a", Partition: 2, Committed: 3, HighWatermark: -1, Lag: -1, LagSeconds: -1, LastStableOffset: -1, StableLag: -1}, // no answer yet: absent
	}}}}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(src))
	want := `
# HELP quire_group_lag_records Records a consumer group is behind in a partition: high watermark minus committed offset (on the group coordinator, the active controller; refreshed every group.lag.refresh.ms).
# TYPE quire_group_lag_records gauge
quire_group_lag_records{group="g",partition="0",topic="a"} 6
quire_group_lag_records{group="g",partition="1",topic="a"} 0
# HELP quire_group_lag_seconds Seconds a consumer group is behind in a partition: now minus the timestamp of the first record not committed, 0 when caught up (on the group coordinator).
# TYPE quire_group_lag_seconds gauge
quire_group_lag_seconds{group="g",partition="0",topic="a"} 1.5
quire_group_lag_seconds{group="g",partition="1",topic="a"} 0
# HELP quire_group_stable_lag_records Records a read_committed consumer group is behind in a partition: last stable offset minus committed offset, the records of open transactions left out (equal to group_lag_records while none is open; on the group coordinator).
# TYPE quire_group_stable_lag_records gauge
quire_group_stable_lag_records{group="g",partition="0",topic="a"} 4
quire_group_stable_lag_records{group="g",partition="1",topic="a"} 0
# HELP quire_group_members Members of a consumer group (on the group coordinator).
# TYPE quire_group_members gauge
quire_group_members{group="g"} 2
# HELP quire_group_rebalances_total Target assignments the coordinator computed for a consumer group while this node was its coordinator.
# TYPE quire_group_rebalances_total counter
quire_group_rebalances_total{group="g"} 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "quire_group_lag_records", "quire_group_lag_seconds",
		"quire_group_members", "quire_group_rebalances_total", "quire_group_stable_lag_records"); err != nil {
		t.Fatal(err)
	}
}

// TestCollectorStageHistograms: the log2 microsecond buckets of the stage
// histograms come out as cumulative counts at bounds in seconds, the
// buckets under 16 µs folded into the first bound and those past 2^25 µs
// in +Inf only, one series per stage.
func TestCollectorStageHistograms(t *testing.T) {
	var src fakeSource
	fr := &src.stages[replica.StageFollowerRead]
	fr.Counts[0] = 1  // under 1 µs
	fr.Counts[3] = 2  // [4, 8) µs
	fr.Counts[4] = 3  // [8, 16) µs
	fr.Counts[5] = 4  // [16, 32) µs
	fr.Counts[10] = 5 // [512, 1024) µs
	fr.Counts[25] = 6 // [2^24, 2^25) µs
	fr.Counts[26] = 7 // past the last bound
	fr.Counts[31] = 1 // the last bucket, everything longer
	fr.Sum = 1500 * time.Millisecond
	rep := &src.stages[replica.StageReplicated]
	rep.Counts[12] = 1 // [2048, 4096) µs
	rep.Sum = 3 * time.Millisecond

	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(src))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	type hist struct {
		count   uint64
		sum     float64
		buckets map[float64]uint64 // le to cumulative count
		bounds  []float64
	}
	got := map[string]hist{}
	for _, mf := range mfs {
		if mf.GetName() != "quire_replication_stage_seconds" {
			continue
		}
		if !strings.Contains(mf.GetHelp(), "cumulative since the node started") {
			t.Errorf("help %q", mf.GetHelp())
		}
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != 1 || m.GetLabel()[0].GetName() != "stage" {
				t.Fatalf("labels %v", m.GetLabel())
			}
			h := m.GetHistogram()
			if h == nil {
				t.Fatalf("%s is not a histogram", mf.GetName())
			}
			out := hist{count: h.GetSampleCount(), sum: h.GetSampleSum(), buckets: map[float64]uint64{}}
			for _, b := range h.GetBucket() {
				out.buckets[b.GetUpperBound()] = b.GetCumulativeCount()
				out.bounds = append(out.bounds, b.GetUpperBound())
			}
			got[m.GetLabel()[0].GetValue()] = out
		}
	}
	for _, s := range []string{"follower_read", "replicated", "acked", "delivered"} {
		h, ok := got[s]
		if !ok {
			t.Fatalf("no series for stage %q (got %v)", s, got)
		}
		// 16 µs to 2^25 µs, doubling.
		if len(h.bounds) != 22 || h.bounds[0] != 16e-6 || h.bounds[len(h.bounds)-1] != 33.554432 {
			t.Errorf("%s: bounds %v", s, h.bounds)
		}
	}

	// at is the cumulative count of stage s at bound le, which must exist.
	at := func(s string, le float64) uint64 {
		t.Helper()
		n, ok := got[s].buckets[le]
		if !ok {
			t.Fatalf("%s: no bucket le=%v in %v", s, le, got[s].bounds)
		}
		return n
	}
	for _, c := range []struct {
		stage string
		le    float64
		want  uint64
	}{
		{"follower_read", 16e-6, 6}, // folded: buckets 0 to 4
		{"follower_read", 32e-6, 10},
		{"follower_read", 512e-6, 10},
		{"follower_read", 1024e-6, 15},
		{"follower_read", 16.777216, 15},
		{"follower_read", 33.554432, 21},
		{"replicated", 1024e-6, 0},
		{"replicated", 2048e-6, 0},
		{"replicated", 4096e-6, 1},
		{"replicated", 33.554432, 1},
		{"acked", 33.554432, 0},
	} {
		if n := at(c.stage, c.le); n != c.want {
			t.Errorf("%s le=%v: %d, want %d", c.stage, c.le, n, c.want)
		}
	}
	for s, want := range map[string]struct {
		count uint64
		sum   float64
	}{"follower_read": {29, 1.5}, "replicated": {1, 0.003}, "acked": {0, 0}, "delivered": {0, 0}} {
		if h := got[s]; h.count != want.count || math.Abs(h.sum-want.sum) > 1e-9 {
			t.Errorf("%s: count %d sum %v, want %d and %v", s, h.count, h.sum, want.count, want.sum)
		}
	}
}

// TestCollectorTrafficAndElections: the client bytes are the topics'
// sums, the replication bytes and elections come through as counters,
// the elections on the active controller only.
func TestCollectorTrafficAndElections(t *testing.T) {
	src := fakeSource{
		rs: replica.Stats{Topics: []replica.TopicStats{{Topic: "a", BytesIn: 100, BytesOut: 30}, {Topic: "b", BytesIn: 5, BytesOut: 7}},
			ReplicationBytesOut: 400, ReplicationBytesIn: 9},
		ms: metadata.Stats{IsController: true, LeaderElections: 6, UncleanLeaderElections: 1, RaftState: "Leader"},
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(src))
	for name, want := range map[string]float64{"quire_bytes_in_total": 105, "quire_bytes_out_total": 37,
		"quire_replication_bytes_out_total": 400, "quire_replication_bytes_in_total": 9,
		"quire_leader_elections_total": 6, "quire_unclean_leader_elections_total": 1} {
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, f := range fams {
			if f.GetName() == name {
				found = true
				if got := f.GetMetric()[0].GetCounter().GetValue(); got != want {
					t.Errorf("%s = %v, want %v", name, got, want)
				}
			}
		}
		if !found {
			t.Errorf("no %s", name)
		}
	}
	src.ms.IsController = false
	reg = prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(src))
	if n, err := testutil.GatherAndCount(reg, "quire_leader_elections_total", "quire_unclean_leader_elections_total"); err != nil || n != 0 {
		t.Fatalf("%d election series off the controller (%v)", n, err)
	}
}

// TestCollectorGroupThroughputSeries: a group's rates, time to drain and
// members needed, unknown figures absent and a lag that does not shrink
// as +Inf.
func TestCollectorGroupThroughputSeries(t *testing.T) {
	src := fakeSource{gs: []metadata.GroupStats{
		{Group: "fast", Throughput: metadata.GroupThroughput{Lag: 100, ConsumeRate: 30, ProduceRate: 10, DrainSeconds: 5, Members: 2, Partitions: 4, MembersNeeded: 1}},
		{Group: "slow", Throughput: metadata.GroupThroughput{Lag: 100, ConsumeRate: 10, ProduceRate: 30, DrainSeconds: -1, Members: 1, Partitions: 2, MembersNeeded: 2}},
		{Group: "new", Throughput: metadata.GroupThroughput{Lag: -1, ConsumeRate: -1, ProduceRate: -1, DrainSeconds: -1, Partitions: 3, MembersNeeded: -1}},
	}}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(src))
	want := `
# HELP quire_group_consume_rate Records a second a consumer group's committed offsets moved, summed over its partitions, over about the last twelve group.lag.refresh.ms (on the group coordinator; absent until it looked twice).
# TYPE quire_group_consume_rate gauge
quire_group_consume_rate{group="fast"} 30
quire_group_consume_rate{group="slow"} 10
# HELP quire_group_drain_seconds Seconds until a consumer group's lag is 0 at its consume and produce rates: lag / (consume rate - produce rate); 0 with no lag, +Inf when the lag does not shrink (on the group coordinator; absent while unknown).
# TYPE quire_group_drain_seconds gauge
quire_group_drain_seconds{group="fast"} 5
quire_group_drain_seconds{group="slow"} +Inf
# HELP quire_group_members_needed Members that would keep a consumer group's lag flat at its produce rate, each reading as fast as its members do now on average, at most its partition count; 0 when nothing is produced (on the group coordinator; absent while unknown).
# TYPE quire_group_members_needed gauge
quire_group_members_needed{group="fast"} 1
quire_group_members_needed{group="slow"} 2
# HELP quire_group_partitions Partitions a consumer group reads or committed in: the most members that can have work (on the group coordinator).
# TYPE quire_group_partitions gauge
quire_group_partitions{group="fast"} 4
quire_group_partitions{group="new"} 3
quire_group_partitions{group="slow"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "quire_group_consume_rate", "quire_group_drain_seconds",
		"quire_group_members_needed", "quire_group_partitions"); err != nil {
		t.Fatal(err)
	}
}

// Every compacted replica hosted on the node, led or followed, has its
// cleaner series; a log that is not compacted has none.
func TestCollectorCleanerSeries(t *testing.T) {
	src := fakeSource{ss: storage.Stats{Logs: []storage.LogStats{
		{Topic: "c", Partition: 1, Compacted: true, Cleaning: storage.CleanerStats{DirtyRatio: 0.25, LastCleanMs: 1_500,
			BytesCleaned: 4096, BytesWritten: 1024, Passes: 3, LagMs: 2_000}},
		{Topic: "d", Partition: 0},
	}}}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(src))
	want := `
# HELP quire_log_cleaner_dirty_ratio Share of a compacted replica's cleanable bytes written since its last clean (the cleaner takes it above min.cleanable.dirty.ratio); every replica hosted here.
# TYPE quire_log_cleaner_dirty_ratio gauge
quire_log_cleaner_dirty_ratio{partition="1",topic="c"} 0.25
# HELP quire_log_cleaner_passes_total Clean passes completed over a compacted replica hosted here.
# TYPE quire_log_cleaner_passes_total counter
quire_log_cleaner_passes_total{partition="1",topic="c"} 3
# HELP quire_log_cleaner_lag_seconds How long the oldest dirty record of a compacted replica hosted here has waited to be cleaned (now minus the first timestamp of its first dirty segment; 0 when nothing is dirty).
# TYPE quire_log_cleaner_lag_seconds gauge
quire_log_cleaner_lag_seconds{partition="1",topic="c"} 2
# HELP quire_log_cleaner_bytes_cleaned_total Bytes the cleaner read from a compacted replica hosted here (its dirty section and the segments it rewrote).
# TYPE quire_log_cleaner_bytes_cleaned_total counter
quire_log_cleaner_bytes_cleaned_total{partition="1",topic="c"} 4096
# HELP quire_log_cleaner_last_clean_timestamp_seconds When the cleaner last finished a pass over a compacted replica hosted here (Unix seconds; 0: never since the node started).
# TYPE quire_log_cleaner_last_clean_timestamp_seconds gauge
quire_log_cleaner_last_clean_timestamp_seconds{partition="1",topic="c"} 1.5
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "quire_log_cleaner_dirty_ratio", "quire_log_cleaner_passes_total",
		"quire_log_cleaner_lag_seconds", "quire_log_cleaner_bytes_cleaned_total", "quire_log_cleaner_last_clean_timestamp_seconds"); err != nil {
		t.Fatal(err)
	}
}
