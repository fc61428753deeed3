package testcluster_test

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/testcluster"
)

func groups(c *testcluster.Cluster, id int32) quirev1.GroupsClient {
	return quirev1.NewGroupsClient(c.Conn(id))
}

func commitOffset(ctx context.Context, t *testing.T, c *testcluster.Cluster, via int32, group, topic string, p int32, offset int64) {
	t.Helper()
	_, err := groups(c, via).CommitOffsets(ctx, &quirev1.CommitOffsetsRequest{Group: group,
		Offsets: []*quirev1.OffsetCommit{{Topic: topic, Partition: p, Offset: offset}}})
	if err != nil {
		t.Fatalf("commit %s %s-%d=%d through node %d: %v", group, topic, p, offset, via, err)
	}
}

// fetchOffset reads one committed offset through node via; the call itself
// rides out a controller election.
func fetchOffset(ctx context.Context, t *testing.T, c *testcluster.Cluster, via int32, group, topic string, p int32) int64 {
	t.Helper()
	resp, err := groups(c, via).FetchOffsets(ctx, &quirev1.FetchOffsetsRequest{Group: group,
		Partitions: []*quirev1.TopicPartition{{Topic: topic, Partition: p}}})
	if err != nil {
		t.Fatalf("fetch %s %s-%d through node %d: %v", group, topic, p, via, err)
	}
	return resp.Offsets[0].Offset
}

// TestClusterGroupOffsets: an offset committed through one node is read
// back at once through another (no waiting for that node's image); every
// node's image gets it; it survives the controller's death and a commit
// after the election counts; without a quorum commits fail UNAVAILABLE.
func TestClusterGroupOffsets(t *testing.T) {
	c := testcluster.New(t, 3)
	ctx := testCtx(t)
	ctl := c.WaitController(ctx)
	var a, b int32 // the two nodes that are not the controller
	for _, id := range c.IDs() {
		if id == ctl {
			continue
		}
		if a == 0 {
			a = id
		} else {
			b = id
		}
	}
	createTopic(t, c, ctl, "orders", 2, 3)
	c.WaitImage(ctx, func(img *metadata.Image) bool { _, ok := img.Topic("orders"); return ok })

	for i := int64(1); i <= 5; i++ {
		commitOffset(ctx, t, c, a, "billing", "orders", 1, i*10)
		if got := fetchOffset(ctx, t, c, b, "billing", "orders", 1); got != i*10 {
			t.Fatalf("committed %d through node %d, node %d reads %d", i*10, a, b, got)
		}
	}
	if got := fetchOffset(ctx, t, c, b, "billing", "orders", 0); got != -1 {
		t.Fatalf("partition never committed reads %d, want -1", got)
	}
	c.WaitImage(ctx, func(img *metadata.Image) bool {
		o, ok := img.Offset("billing", "orders", 1)
		return ok && o.Offset == 50
	})

	// The controller dies: the next one has the offset, and takes commits.
	c.Kill(ctl)
	if got := fetchOffset(ctx, t, c, a, "billing", "orders", 1); got != 50 {
		t.Fatalf("after the controller's death node %d reads %d, want 50", a, got)
	}
	commitOffset(ctx, t, c, b, "billing", "orders", 1, 60)
	if got := fetchOffset(ctx, t, c, a, "billing", "orders", 1); got != 60 {
		t.Fatalf("commit after the election: node %d reads %d, want 60", a, got)
	}
	if next := c.WaitController(ctx); next == ctl {
		t.Fatalf("controller still %d", ctl)
	}
	list, err := groups(c, a).ListGroups(ctx, &quirev1.ListGroupsRequest{})
	if err != nil || len(list.Groups) != 1 || list.Groups[0].Group != "billing" {
		t.Fatalf("list groups: %v %v", list, err)
	}

	// No quorum: the write fails retriably instead of hanging.
	c.Kill(b)
	_, err = groups(c, a).CommitOffsets(ctx, &quirev1.CommitOffsetsRequest{Group: "billing",
		Offsets: []*quirev1.OffsetCommit{{Topic: "orders", Partition: 1, Offset: 70}}})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("commit without quorum: %v; want UNAVAILABLE", err)
	}
	if e := errorDetail(err); e == nil || !e.Retriable {
		t.Fatalf("error detail %v: want retriable", e)
	}
}
