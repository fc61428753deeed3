package testcluster_test

import (
	"fmt"
	"testing"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/testcluster"
)

// TestClusterDescribeTopicsOffsetsFromEveryLeader: DescribeTopics through
// any node shows the log start, high watermark and log end offset of every
// partition, also those led by other nodes (asked over the internal
// ReplicaService); a leader this node cannot reach shows -1 rather than
// holding up the answer.
func TestClusterDescribeTopicsOffsetsFromEveryLeader(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 3)
	ctx := testCtx(t)
	c.WaitController(ctx)
	const topic = "offsets"
	createTopic(t, c, 1, topic, 6, 1)
	leaders := map[int32]int32{}
	for p := int32(0); p < 6; p++ {
		leaders[p], _ = c.WaitLeader(ctx, topic, p)
		for i := int32(0); i <= p; i++ { // p+1 records in partition p
			produceToLeader(t, c, topic, p, fmt.Sprintf("r%d", i))
		}
	}
	distinct := map[int32]bool{}
	for _, l := range leaders {
		distinct[l] = true
	}
	if len(distinct) < 2 {
		t.Fatalf("partitions all led by one node: %v", leaders)
	}

	check := func(via int32, unreachable int32) {
		t.Helper()
		// An unreachable leader must not hold up the answer: one that
		// waited for it would run out ctx and fail here.
		resp, err := admin(c, via).DescribeTopics(ctx, &quirev1.DescribeTopicsRequest{Names: []string{topic}})
		if err != nil {
			t.Fatalf("describe through node %d: %v", via, err)
		}
		for _, pd := range resp.Topics[0].Partitions {
			want := [3]int64{0, int64(pd.Partition) + 1, int64(pd.Partition) + 1}
			if pd.Leader == unreachable && pd.Leader != via {
				want = [3]int64{-1, -1, -1}
			}
			got := [3]int64{pd.LogStartOffset, pd.HighWatermark, pd.LogEndOffset}
			if got != want {
				t.Errorf("through node %d: partition %d (leader %d): start/hw/leo %v, want %v", via, pd.Partition, pd.Leader, got, want)
			}
		}
	}
	for _, via := range c.IDs() {
		check(via, -1)
	}

	// A leader cut off from the asking node: its partitions show -1, the
	// others their offsets. (Links to the third node stay up, so raft keeps
	// a majority on both sides.)
	var via, cut int32 = -1, -1
	for _, l := range leaders {
		if cut == -1 {
			cut = l
		} else if l != cut {
			via = l
			break
		}
	}
	c.Partition(cut, via)
	check(via, cut)
	c.Heal()
}
