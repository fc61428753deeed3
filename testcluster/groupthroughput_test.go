package testcluster_test

import (
	"context"
	"fmt"
	"math"
	"testing"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/testcluster"
)

// produceBatch produces n records to topic-p in one request, through the
// partition's leader.
func produceBatch(ctx context.Context, t *testing.T, c *testcluster.Cluster, topic string, p int32, n int) {
	t.Helper()
	recs := make([]*quirev1.ProduceRecord, n)
	for i := range recs {
		recs[i] = &quirev1.ProduceRecord{ValueData: &quirev1.ProduceRecord_Value{Value: "v"},
			OptionalPartition: &quirev1.ProduceRecord_Partition{Partition: p}}
	}
	c.Eventually(ctx, fmt.Sprintf("%d records produced to %s-%d", n, topic, p), func() error {
		leader, ok := c.Image(c.IDs()[0]).Partition(topic, p)
		if !ok || leader.Leader < 0 || c.Node(leader.Leader) == nil {
			return fmt.Errorf("no leader of %s-%d", topic, p)
		}
		_, err := quirev1.NewProducerClient(c.Conn(leader.Leader)).ProduceRecords(ctx, &quirev1.ProduceRecordsRequest{
			Topic: topic, OptionalAcks: &quirev1.ProduceRecordsRequest_Acks{Acks: -1}, TimeoutMs: 2000, Records: recs})
		return err
	})
}

// TestClusterGroupThroughput: a group member that commits more slowly
// than its partition grows is told, in DescribeGroup and on the
// controller's /metrics, that its lag does not drain and that two
// members (the partition count) would keep up; once it commits faster
// than the partition grows, that the lag drains in a finite time and one
// member keeps up.
func TestClusterGroupThroughput(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 1, withMetrics(), testcluster.Config(func(_ int32, cfg *broker.Config) {
		cfg.GroupLagRefreshMs = 50
		cfg.GroupConsumerSessionTimeoutMs = 30000
		cfg.GroupConsumerHeartbeatIntervalMs = 100
	}))
	ctx := testCtx(t)
	ctl := c.WaitController(ctx)
	createTopic(t, c, ctl, "grow", 2, 1)
	c.WaitImage(ctx, func(img *metadata.Image) bool {
		_, ok := img.Topic("grow")
		return ok && img.MetadataVersion() >= metadata.MetadataVersionProducerIDs
	})
	// A backlog the draining phase below cannot use up.
	produceBatch(ctx, t, c, "grow", 0, 5000)
	mem := &groupMember{c: c, via: ctl, group: "scale", id: "m1", topic: "grow"}
	c.Eventually(ctx, "m1 owning both partitions", func() error {
		if err := mem.heartbeat(ctx); err != nil {
			return err
		}
		if n := len(ownedSet(mem.owned)); n != 2 {
			return fmt.Errorf("m1 owns %d partitions", n)
		}
		return nil
	})
	committed := int64(0)
	commit := func(n int64) {
		t.Helper()
		if err := mem.heartbeat(ctx); err != nil { // stays a member
			t.Fatalf("heartbeat: %v", err)
		}
		committed += n
		_, err := groups(c, ctl).CommitOffsets(ctx, &quirev1.CommitOffsetsRequest{Group: "scale", MemberId: mem.id, MemberEpoch: mem.epoch,
			Offsets: []*quirev1.OffsetCommit{{Topic: "grow", Partition: 0, Offset: committed}}})
		if err != nil {
			t.Fatalf("commit %d: %v", committed, err)
		}
	}
	describe := func() (*quirev1.GroupThroughput, error) {
		d, err := groups(c, ctl).DescribeGroup(ctx, &quirev1.DescribeGroupRequest{Group: "scale"})
		if err != nil {
			return nil, err
		}
		if d.Throughput == nil {
			return nil, fmt.Errorf("no throughput in %v", d)
		}
		return d.Throughput, nil
	}

	// Falling behind: two records produced for each one committed.
	c.Eventually(ctx, "a group falling behind, two members needed", func() error {
		produceBatch(ctx, t, c, "grow", 0, 2)
		commit(1)
		tp, err := describe()
		if err != nil {
			return err
		}
		if tp.Members != 1 || tp.Partitions != 2 || tp.Lag <= 0 || tp.ConsumeRate <= 0 || tp.ProduceRate <= tp.ConsumeRate ||
			tp.DrainSeconds != -1 || tp.MembersNeeded != 2 {
			return fmt.Errorf("throughput %v", tp)
		}
		m, err := scrape(ctx, c, ctl)
		if err != nil {
			return err
		}
		if v := m[`quire_group_members_needed{group="scale"}`]; v != 2 {
			return fmt.Errorf("quire_group_members_needed %v", v)
		}
		if v := m[`quire_group_drain_seconds{group="scale"}`]; !math.IsInf(v, 1) {
			return fmt.Errorf("quire_group_drain_seconds %v, want +Inf", v)
		}
		return nil
	})

	// Draining: three records committed for each one produced.
	c.Eventually(ctx, "a group draining its lag, one member enough", func() error {
		produceBatch(ctx, t, c, "grow", 0, 1)
		commit(3)
		tp, err := describe()
		if err != nil {
			return err
		}
		if tp.Lag <= 0 || tp.ProduceRate <= 0 || tp.ConsumeRate <= tp.ProduceRate || tp.MembersNeeded != 1 {
			return fmt.Errorf("throughput %v", tp)
		}
		if want := float64(tp.Lag) / (tp.ConsumeRate - tp.ProduceRate); tp.DrainSeconds <= 0 || math.Abs(tp.DrainSeconds-want) > 1e-6*want {
			return fmt.Errorf("drain %v s, want lag / (consume - produce) = %v: %v", tp.DrainSeconds, want, tp)
		}
		m, err := scrape(ctx, c, ctl)
		if err != nil {
			return err
		}
		if v, ok := m[`quire_group_consume_rate{group="scale"}`]; !ok || v <= 0 {
			return fmt.Errorf("quire_group_consume_rate %v %v", v, ok)
		}
		if v, ok := m[`quire_group_drain_seconds{group="scale"}`]; !ok || v <= 0 || math.IsInf(v, 1) {
			return fmt.Errorf("quire_group_drain_seconds %v %v", v, ok)
		}
		if v := m[`quire_group_members_needed{group="scale"}`]; v != 1 {
			return fmt.Errorf("quire_group_members_needed %v", v)
		}
		return nil
	})
}
