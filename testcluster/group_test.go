package testcluster_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/testcluster"
)

func groups(c *testcluster.Cluster, id int32) quirev1.GroupsClient {
	return quirev1.NewGroupsClient(c.Conn(id))
}

// A call through a node rides out a controller election on its own, within
// the node's bound (metadata.write.timeout.ms); on a loaded machine the
// election can outlast it, and the answer is then retriable: commitOffset
// and fetchOffset ask again, as a client does, and fail on anything else.

func commitOffset(ctx context.Context, t *testing.T, c *testcluster.Cluster, via int32, group, topic string, p int32, offset int64) {
	t.Helper()
	c.Eventually(ctx, fmt.Sprintf("commit %s %s-%d=%d through node %d", group, topic, p, offset, via), func() error {
		_, err := groups(c, via).CommitOffsets(ctx, &quirev1.CommitOffsetsRequest{Group: group,
			Offsets: []*quirev1.OffsetCommit{{Topic: topic, Partition: p, Offset: offset}}})
		if err != nil && !errorDetail(err).GetRetriable() {
			t.Fatalf("commit %s %s-%d=%d through node %d: %v", group, topic, p, offset, via, err)
		}
		return err
	})
}

// fetchOffset reads one committed offset through node via.
func fetchOffset(ctx context.Context, t *testing.T, c *testcluster.Cluster, via int32, group, topic string, p int32) int64 {
	t.Helper()
	var off int64
	c.Eventually(ctx, fmt.Sprintf("fetch %s %s-%d through node %d", group, topic, p, via), func() error {
		resp, err := groups(c, via).FetchOffsets(ctx, &quirev1.FetchOffsetsRequest{Group: group,
			Partitions: []*quirev1.TopicPartition{{Topic: topic, Partition: p}}})
		if err != nil {
			if !errorDetail(err).GetRetriable() {
				t.Fatalf("fetch %s %s-%d through node %d: %v", group, topic, p, via, err)
			}
			return err
		}
		off = resp.Offsets[0].Offset
		return nil
	})
	return off
}

// listedGroups lists the groups through node via. A retriable refusal
// (no quorum while the controller is elected again) is answered as an
// error to look again, as a client would retry it; any other fails the
// test.
func listedGroups(ctx context.Context, t *testing.T, c *testcluster.Cluster, via int32) ([]string, error) {
	t.Helper()
	resp, err := groups(c, via).ListGroups(ctx, &quirev1.ListGroupsRequest{})
	if err != nil {
		if !errorDetail(err).GetRetriable() {
			t.Fatal(err)
		}
		return nil, err
	}
	var out []string
	for _, g := range resp.Groups {
		out = append(out, g.Group)
	}
	return out, nil
}

// listGroups lists the groups through node via, asking again while the
// answer is a retriable refusal.
func listGroups(ctx context.Context, t *testing.T, c *testcluster.Cluster, via int32) []string {
	t.Helper()
	var out []string
	c.Eventually(ctx, fmt.Sprintf("list groups through node %d", via), func() error {
		var err error
		out, err = listedGroups(ctx, t, c, via)
		return err
	})
	return out
}

// waitListed waits until node via lists exactly the groups want, calling
// tick (if any) before each look.
func waitListed(ctx context.Context, t *testing.T, c *testcluster.Cluster, via int32, tick func(), want ...string) {
	t.Helper()
	c.Eventually(ctx, fmt.Sprintf("groups %v", want), func() error {
		if tick != nil {
			tick()
		}
		got, err := listedGroups(ctx, t, c, via)
		if err != nil {
			return err
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("groups %v", got)
		}
		return nil
	})
}

// TestClusterGroupOffsets: an offset committed through one node is read
// back at once through another (no waiting for that node's image); every
// node's image gets it; it survives the controller's death and a commit
// after the election counts; without a quorum commits fail UNAVAILABLE.
func TestClusterGroupOffsets(t *testing.T) {
	t.Parallel()
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

// TestClusterGroupListedFromFirstJoin: a group is listed from its first
// member's join, before any commit (as Kafka's ListGroups shows it); it
// cannot be deleted while it has members; left empty with no committed
// offsets, the coordinator removes it a session timeout later, and it is
// no longer listed; one emptied with offsets stays listed, and deleting
// it removes both.
func TestClusterGroupListedFromFirstJoin(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 3, testcluster.Config(func(_ int32, cfg *broker.Config) {
		// Long enough that members heartbeating on a loaded machine keep
		// their sessions; the test's expiry waits take this long.
		cfg.GroupConsumerSessionTimeoutMs = 5000
		cfg.GroupConsumerHeartbeatIntervalMs = 100
	}))
	ctx := testCtx(t)
	ctl := c.WaitController(ctx)
	createTopic(t, c, ctl, "joined", 2, 3)
	c.WaitImage(ctx, func(img *metadata.Image) bool {
		_, ok := img.Topic("joined")
		return ok && img.MetadataVersion() >= metadata.MetadataVersionProducerIDs
	})
	via := c.IDs()[0]
	if via == ctl {
		via = c.IDs()[1]
	}
	fresh := &groupMember{c: c, via: via, group: "fresh", id: "fresh-m", topic: "joined"}
	kept := &groupMember{c: c, via: via, group: "kept", id: "kept-m", topic: "joined"}
	for _, m := range []*groupMember{fresh, kept} {
		c.Eventually(ctx, "join "+m.group, func() error { return m.heartbeat(ctx) })
	}
	waitListed(ctx, t, c, via, nil, "fresh", "kept")
	// Each with the coordinator's state: one member, two partitions, no
	// one else to wait for.
	c.Eventually(ctx, "both groups stable", func() error {
		for _, m := range []*groupMember{fresh, kept} {
			if err := m.heartbeat(ctx); err != nil {
				return err
			}
		}
		resp, err := groups(c, via).ListGroups(ctx, &quirev1.ListGroupsRequest{})
		if err != nil {
			return err
		}
		for _, g := range resp.Groups {
			if g.State != "stable" {
				return fmt.Errorf("group %s is %q", g.Group, g.State)
			}
		}
		return nil
	})
	_, err := groups(c, via).DeleteGroup(ctx, &quirev1.DeleteGroupRequest{Group: "fresh"})
	if status.Code(err) != codes.FailedPrecondition || errorDetail(err).GetCode() != quirev1.ErrorCode_NON_EMPTY_GROUP {
		t.Fatalf("delete a group with a member: %v; want NON_EMPTY_GROUP", err)
	}
	if _, err := groups(c, via).CommitOffsets(ctx, &quirev1.CommitOffsetsRequest{Group: "kept", MemberId: kept.id,
		MemberEpoch: kept.epoch, Offsets: []*quirev1.OffsetCommit{{Topic: "joined", Partition: 0, Offset: 3}}}); err != nil {
		t.Fatal(err)
	}

	for _, m := range []*groupMember{fresh, kept} {
		if err := m.leave(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Empty and never committed: removed; empty with an offset: kept (for
	// offsets.retention.minutes).
	waitListed(ctx, t, c, via, nil, "kept")
	if got := fetchOffset(ctx, t, c, via, "kept", "joined", 0); got != 3 {
		t.Fatalf("kept's offset %d, want 3", got)
	}
	if resp, err := groups(c, via).ListGroups(ctx, &quirev1.ListGroupsRequest{}); err != nil || len(resp.Groups) != 1 ||
		resp.Groups[0].State != "empty" {
		t.Fatalf("listing with kept empty: %v %v", resp, err)
	}
	if _, err := groups(c, via).DescribeGroup(ctx, &quirev1.DescribeGroupRequest{Group: "fresh"}); status.Code(err) != codes.NotFound {
		t.Fatalf("describe the removed group: %v; want NOT_FOUND", err)
	}
	// A group that joins again after its removal starts over: at group
	// epoch 1 (kept, it would be at 3: join, leave, join).
	again := &groupMember{c: c, via: via, group: "fresh", id: "fresh-m2", topic: "joined"}
	c.Eventually(ctx, "join fresh again", func() error { return again.heartbeat(ctx) })
	if again.epoch != 1 || len(ownedSet(again.owned)) != 2 {
		t.Fatalf("the new member of fresh is at epoch %d owning %v, want epoch 1 and both partitions", again.epoch, ownedSet(again.owned))
	}
	waitListed(ctx, t, c, via, nil, "fresh", "kept")
	if err := again.leave(ctx); err != nil {
		t.Fatal(err)
	}
	// The controller may not answer in time on a loaded machine
	// (UNAVAILABLE, which clients retry); a retry of a delete that was
	// applied all the same finds the group gone.
	retried := false
	c.Eventually(ctx, "delete kept", func() error {
		_, err := groups(c, via).DeleteGroup(ctx, &quirev1.DeleteGroupRequest{Group: "kept"})
		switch {
		case err == nil, retried && status.Code(err) == codes.NotFound:
			return nil
		case status.Code(err) == codes.Unavailable:
			retried = true
			return err
		}
		t.Fatalf("delete kept: %v", err)
		return nil
	})
	waitListed(ctx, t, c, via, nil)
	_, err = groups(c, via).DeleteGroup(ctx, &quirev1.DeleteGroupRequest{Group: "kept"})
	if status.Code(err) != codes.NotFound || errorDetail(err).GetCode() != quirev1.ErrorCode_GROUP_ID_NOT_FOUND {
		t.Fatalf("delete a deleted group: %v; want GROUP_ID_NOT_FOUND", err)
	}
}
