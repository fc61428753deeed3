package testcluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/testcluster"
)

// TestClusterFetchRecordsMultiRoutes: one FetchRecordsMulti to any broker
// reads partitions led by every broker, the ones led elsewhere passed on
// to their leaders; a long poll over them answers when a record reaches a
// partition led by another broker; a call already passed on answers
// NOT_LEADER_OR_FOLLOWER with the leader's id instead.
func TestClusterFetchRecordsMultiRoutes(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 3)
	const parts = 6
	createTopic(t, c, 1, "multi", parts, 1)
	ctx := testCtx(t)
	leaders := make([]int32, parts)
	for p := range int32(parts) {
		leaders[p], _ = c.WaitLeader(ctx, "multi", p)
		produceToLeader(t, c, "multi", p, fmt.Sprintf("v%d", p))
	}
	via := leaders[0]
	remote := int32(-1)
	for p, l := range leaders {
		if l != via {
			remote = int32(p)
		}
	}
	if remote < 0 {
		t.Fatalf("every partition led by node %d: %v", via, leaders)
	}
	cons := quirev1.NewConsumerClient(c.Conn(via))
	all := func(offset int64) []*quirev1.FetchRecordsPartition {
		var ps []*quirev1.FetchRecordsPartition
		for p := range int32(parts) {
			ps = append(ps, &quirev1.FetchRecordsPartition{Topic: "multi", Partition: p, Offset: offset})
		}
		return ps
	}

	resp, err := cons.FetchRecordsMulti(ctx, &quirev1.FetchRecordsMultiRequest{Partitions: all(0)})
	if err != nil {
		t.Fatal(err)
	}
	for p, a := range resp.Partitions {
		if a.Error != nil || a.Partition != int32(p) || len(a.Records) != 1 || a.Records[0].GetValue() != fmt.Sprintf("v%d", p) ||
			a.NextOffset != 1 || a.HighWatermark != 1 {
			t.Fatalf("partition %d (leader %d) through node %d: %+v", p, leaders[p], via, a)
		}
	}

	// Long poll: nothing new anywhere until a record reaches a partition
	// another broker leads. The caller's deadline is far shorter than
	// max_wait_ms, so only that record can answer in time.
	pollCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	type answer struct {
		resp *quirev1.FetchRecordsMultiResponse
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		resp, err := cons.FetchRecordsMulti(pollCtx, &quirev1.FetchRecordsMultiRequest{MaxWaitMs: 120_000, Partitions: all(1)})
		done <- answer{resp, err}
	}()
	produceToLeader(t, c, "multi", remote, "late")
	got := <-done
	if got.err != nil {
		t.Fatalf("long poll through node %d not woken by a record on node %d: %v", via, leaders[remote], got.err)
	}
	for p, a := range got.resp.Partitions {
		switch {
		case a.Error != nil:
			t.Fatalf("partition %d: %v", p, a.Error)
		case int32(p) == remote && (len(a.Records) != 1 || a.Records[0].GetValue() != "late" || a.NextOffset != 2):
			t.Fatalf("woken partition %d: %+v", p, a)
		case int32(p) != remote && (len(a.Records) != 0 || a.NextOffset != 1):
			t.Fatalf("quiet partition %d: %+v", p, a)
		}
	}

	// Already passed on: not passed on again.
	resp, err = cons.FetchRecordsMulti(asForwarded(ctx), &quirev1.FetchRecordsMultiRequest{Partitions: all(0)})
	if err != nil {
		t.Fatal(err)
	}
	for p, a := range resp.Partitions {
		if leaders[p] == via {
			if a.Error != nil || len(a.Records) == 0 {
				t.Fatalf("local partition %d: %+v", p, a)
			}
			continue
		}
		if e := a.Error; e == nil || e.Code != quirev1.ErrorCode_NOT_LEADER_OR_FOLLOWER || e.LeaderId != leaders[p] || !e.Retriable {
			t.Fatalf("partition %d led by %d, asked of %d as passed on: %+v", p, leaders[p], via, a)
		}
	}
}

// TestClusterFetchRecordsMultiUnreachableLeader: when the broker asked
// cannot reach the leader of some partitions, those answer
// NOT_LEADER_OR_FOLLOWER naming the leader and the others come back as
// usual, without waiting for the unreachable one.
func TestClusterFetchRecordsMultiUnreachableLeader(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 3)
	const parts = 9
	createTopic(t, c, 1, "cut", parts, 1)
	ctx := testCtx(t)
	controller := c.WaitController(ctx)
	leaders := make([]int32, parts)
	for p := range int32(parts) {
		leaders[p], _ = c.WaitLeader(ctx, "cut", p)
		produceToLeader(t, c, "cut", p, fmt.Sprintf("v%d", p))
	}
	// Two brokers that are not the controller and both lead partitions:
	// cutting the link between them leaves both heartbeating, so no
	// leadership moves.
	var via, far int32 = -1, -1
	for _, l := range leaders {
		switch {
		case l == controller:
		case via < 0:
			via = l
		case l != via && far < 0:
			far = l
		}
	}
	if via < 0 || far < 0 {
		t.Fatalf("want partitions led by both non-controllers (controller %d): %v", controller, leaders)
	}
	c.Partition(via, far)
	defer c.Heal()

	var ps []*quirev1.FetchRecordsPartition
	for p := range int32(parts) {
		ps = append(ps, &quirev1.FetchRecordsPartition{Topic: "cut", Partition: p})
	}
	resp, err := quirev1.NewConsumerClient(c.Conn(via)).FetchRecordsMulti(ctx, &quirev1.FetchRecordsMultiRequest{Partitions: ps, MaxWaitMs: 60_000})
	if err != nil {
		t.Fatal(err)
	}
	for p, a := range resp.Partitions {
		if leaders[p] == far {
			if e := a.Error; e == nil || e.Code != quirev1.ErrorCode_NOT_LEADER_OR_FOLLOWER || e.LeaderId != far || !e.Retriable {
				t.Fatalf("partition %d led by unreachable node %d: %+v", p, far, a)
			}
			continue
		}
		if a.Error != nil || len(a.Records) != 1 || a.Records[0].GetValue() != fmt.Sprintf("v%d", p) {
			t.Fatalf("partition %d led by node %d, asked of node %d: %+v", p, leaders[p], via, a)
		}
	}
}
