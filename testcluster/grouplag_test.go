package testcluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/testcluster"
)

// produceAt produces one record with timestamp ts to its partition's
// leader, retrying until it is taken.
func produceAt(ctx context.Context, t *testing.T, c *testcluster.Cluster, topic string, p int32, ts time.Time) {
	t.Helper()
	c.Eventually(ctx, fmt.Sprintf("a record produced to %s-%d", topic, p), func() error {
		leader, ok := c.Image(c.IDs()[0]).Partition(topic, p)
		if !ok || leader.Leader < 0 || c.Node(leader.Leader) == nil {
			return fmt.Errorf("no leader of %s-%d", topic, p)
		}
		_, err := quirev1.NewProducerClient(c.Conn(leader.Leader)).ProduceRecords(ctx, &quirev1.ProduceRecordsRequest{
			Topic: topic, OptionalAcks: &quirev1.ProduceRecordsRequest_Acks{Acks: -1}, TimeoutMs: 2000,
			Records: []*quirev1.ProduceRecord{{ValueData: &quirev1.ProduceRecord_Value{Value: "v"}, TimestampMs: ts.UnixMilli(),
				OptionalPartition: &quirev1.ProduceRecord_Partition{Partition: p}}},
		})
		return err
	})
}

// partitionLag finds one partition in a DescribeGroup answer.
func partitionLag(d *quirev1.DescribeGroupResponse, topic string, p int32) (*quirev1.GroupPartitionLag, error) {
	for _, l := range d.Partitions {
		if l.Topic == topic && l.Partition == p {
			return l, nil
		}
	}
	return nil, fmt.Errorf("group %s describes no %s-%d: %v", d.Group, topic, p, d.Partitions)
}

// TestClusterGroupLag: the coordinator's lag in records is the high
// watermark minus the committed offset, in DescribeGroup and in the
// controller's /metrics; the lag in seconds is now minus the timestamp of
// the first record not committed, grows while the group commits nothing,
// and is 0 once it catches up. Members and rebalances are counted per
// group.
func TestClusterGroupLag(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 3, withMetrics(), testcluster.Config(func(_ int32, cfg *broker.Config) {
		cfg.GroupLagRefreshMs = 100
		cfg.GroupConsumerSessionTimeoutMs = 5000
		cfg.GroupConsumerHeartbeatIntervalMs = 100
	}))
	ctx := testCtx(t)
	ctl := c.WaitController(ctx)
	createTopic(t, c, ctl, "lag", 2, 3)
	c.WaitImage(ctx, func(img *metadata.Image) bool {
		_, ok := img.Topic("lag")
		return ok && img.MetadataVersion() >= metadata.MetadataVersionProducerIDs
	})
	// Ten records in lag-0, the fifth (offset 4) an hour old; three in
	// lag-1.
	start := time.Now()
	hourAgo := start.Add(-time.Hour)
	for i := range 10 {
		ts := start
		if i == 4 {
			ts = hourAgo
		}
		produceAt(ctx, t, c, "lag", 0, ts)
	}
	for range 3 {
		produceAt(ctx, t, c, "lag", 1, start)
	}
	var via int32 // a node that is not the controller
	for _, id := range c.IDs() {
		if id != ctl {
			via = id
		}
	}
	commitOffset(ctx, t, c, via, "billing", "lag", 0, 4)
	commitOffset(ctx, t, c, via, "billing", "lag", 1, 3)

	describe := func() *quirev1.DescribeGroupResponse {
		t.Helper()
		d, err := groups(c, via).DescribeGroup(ctx, &quirev1.DescribeGroupRequest{Group: "billing"})
		if err != nil {
			t.Fatalf("describe billing: %v", err)
		}
		return d
	}
	d := describe()
	p0, err := partitionLag(d, "lag", 0)
	if err != nil {
		t.Fatal(err)
	}
	p1, err := partitionLag(d, "lag", 1)
	if err != nil {
		t.Fatal(err)
	}
	if d.State != "empty" || p0.CommittedOffset != 4 || p0.HighWatermark != 10 || p0.Lag != p0.HighWatermark-p0.CommittedOffset {
		t.Fatalf("lag-0: want committed 4, high watermark 10, lag 6: %v", p0)
	}
	// The record at offset 4 is an hour old.
	if age := time.Since(hourAgo).Seconds(); p0.LagSeconds < 3600 || p0.LagSeconds > age+1 {
		t.Fatalf("lag-0: lag seconds %v, want between 3600 and %v", p0.LagSeconds, age)
	}
	if p1.CommittedOffset != 3 || p1.HighWatermark != 3 || p1.Lag != 0 || p1.LagSeconds != 0 {
		t.Fatalf("lag-1: want committed 3 = high watermark, lag 0 and 0 s: %v", p1)
	}

	// The same figures on the coordinator's /metrics, and on no other node.
	// The coordinator is the controller, asked again at every look: an
	// election on a loaded machine moves it, and polling the first one's
	// /metrics for a series it no longer exposes waited out the test's
	// whole deadline.
	wantControllerSeries(t, ctx, c, via, `quire_group_lag_records{group="billing",partition="0",topic="lag"}`, "= 6", eq(6))
	wantControllerSeries(t, ctx, c, via, `quire_group_lag_records{group="billing",partition="1",topic="lag"}`, "= 0", eq(0))
	wantControllerSeries(t, ctx, c, via, `quire_group_lag_seconds{group="billing",partition="1",topic="lag"}`, "= 0", eq(0))
	ctl = wantControllerSeries(t, ctx, c, via, `quire_group_lag_seconds{group="billing",partition="0",topic="lag"}`, ">= 3600",
		func(v float64) bool { return v >= 3600 })
	other := ctl%3 + 1
	m, err := scrape(ctx, c, other)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := m[`quire_group_lag_records{group="billing",partition="0",topic="lag"}`]; ok {
		t.Fatalf("node %d, not the coordinator, exposes group lag %v", other, v)
	}

	// The group commits nothing more while records come: lag-1's lag in
	// seconds starts at the new record's age and grows.
	produceAt(ctx, t, c, "lag", 1, time.Now())
	var first float64
	c.Eventually(ctx, "lag-1 behind by a record", func() error {
		l, err := partitionLag(describe(), "lag", 1)
		if err != nil {
			return err
		}
		if l.Lag != 1 || l.LagSeconds < 0 {
			return fmt.Errorf("lag-1: %v", l)
		}
		first = l.LagSeconds
		return nil
	})
	c.Eventually(ctx, "lag-1's lag in seconds growing", func() error {
		l, err := partitionLag(describe(), "lag", 1)
		if err != nil {
			return err
		}
		if l.Lag != 1 || l.LagSeconds < first+0.2 {
			return fmt.Errorf("lag-1: %v, want lag 1 and at least %.3f s", l, first+0.2)
		}
		return nil
	})
	wantControllerSeries(t, ctx, c, via, `quire_group_lag_seconds{group="billing",partition="1",topic="lag"}`, fmt.Sprintf("> %.3f", first),
		func(v float64) bool { return v > first })

	// Caught up: 0 records and 0 seconds behind, in both.
	commitOffset(ctx, t, c, via, "billing", "lag", 0, 10)
	commitOffset(ctx, t, c, via, "billing", "lag", 1, 4)
	for _, p := range []int32{0, 1} {
		l, err := partitionLag(describe(), "lag", p)
		if err != nil {
			t.Fatal(err)
		}
		if l.Lag != 0 || l.LagSeconds != 0 || l.CommittedOffset != l.HighWatermark {
			t.Fatalf("lag-%d after catching up: %v", p, l)
		}
		for _, name := range []string{"quire_group_lag_records", "quire_group_lag_seconds"} {
			wantControllerSeries(t, ctx, c, via, fmt.Sprintf(`%s{group="billing",partition="%d",topic="lag"}`, name, p), "= 0", eq(0))
		}
	}

	// A member of another group: counted, its partitions described as
	// its own (never committed: committed offset and lag unknown).
	mem := &groupMember{c: c, via: via, group: "readers", id: "r1", topic: "lag"}
	c.Eventually(ctx, "r1 owning both partitions", func() error {
		if err := mem.heartbeat(ctx); err != nil {
			return err
		}
		if n := len(ownedSet(mem.owned)); n != 2 {
			return fmt.Errorf("r1 owns %d partitions", n)
		}
		return nil
	})
	wantControllerSeries(t, ctx, c, via, `quire_group_members{group="readers"}`, "= 1", eq(1))
	wantControllerSeries(t, ctx, c, via, `quire_group_rebalances_total{group="readers"}`, ">= 1", func(v float64) bool { return v >= 1 })
	c.Eventually(ctx, "readers' partitions described with r1 as owner", func() error {
		d, err := groups(c, via).DescribeGroup(ctx, &quirev1.DescribeGroupRequest{Group: "readers"})
		if err != nil {
			return err
		}
		for _, p := range []int32{0, 1} {
			l, err := partitionLag(d, "lag", p)
			if err != nil {
				return err
			}
			if l.MemberId != "r1" || l.CommittedOffset != -1 || l.Lag != -1 || l.HighWatermark != []int64{10, 4}[p] {
				return fmt.Errorf("lag-%d: %v", p, l)
			}
		}
		return nil
	})
}
