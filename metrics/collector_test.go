package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"

	"github.com/quirelog/quire/internal/rpcstats"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/replica"
	"github.com/quirelog/quire/storage"
)

type fakeSource struct {
	rs    replica.Stats
	ms    metadata.Stats
	calls []rpcstats.Method
	gs    []metadata.GroupStats
	ready error
}

func (f fakeSource) ReplicaStats() replica.Stats        { return f.rs }
func (f fakeSource) StorageStats() storage.Stats        { return storage.Stats{} }
func (f fakeSource) MetadataStats() metadata.Stats      { return f.ms }
func (f fakeSource) RequestStats() []rpcstats.Method    { return f.calls }
func (f fakeSource) Ready() error                       { return f.ready }
func (f fakeSource) GroupStats() []metadata.GroupStats  { return f.gs }
func (f fakeSource) QueueStats() rpcstats.QueueSnapshot { return rpcstats.QueueSnapshot{} }

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
		{Topic: "a", Partition: 0, Committed: 4, HighWatermark: 10, Lag: 6, LagSeconds: 1.5},
		{Topic: "a", Partition: 1, Committed: 7, HighWatermark: 7, Lag: 0, LagSeconds: 0},
		{Topic: "a", Partition: 2, Committed: 3, HighWatermark: -1, Lag: -1, LagSeconds: -1}, // no answer yet: absent
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
# HELP quire_group_members Members of a consumer group (on the group coordinator).
# TYPE quire_group_members gauge
quire_group_members{group="g"} 2
# HELP quire_group_rebalances_total Target assignments the coordinator computed for a consumer group while this node was its coordinator.
# TYPE quire_group_rebalances_total counter
quire_group_rebalances_total{group="g"} 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "quire_group_lag_records", "quire_group_lag_seconds",
		"quire_group_members", "quire_group_rebalances_total"); err != nil {
		t.Fatal(err)
	}
}
