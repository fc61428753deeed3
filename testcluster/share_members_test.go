package testcluster_test

import (
	"testing"

	internalv1 "github.com/quirelog/quire/api/internalv1"
	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/testcluster"
)

// TestClusterShareMembersAcrossNodes: a SHARED stream on a node that
// does not lead the partition gets its records (its fetches passed on to
// the leader); the leader refuses a member no node has
// (UNKNOWN_MEMBER_ID); when the stream breaks, its member leaves on its
// node and the record it held on the leader goes to another member at
// once, with its delivery count raised, although locks last 2 minutes.
func TestClusterShareMembersAcrossNodes(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 2, testcluster.Config(func(_ int32, cfg *broker.Config) {
		cfg.GroupShareEnable = true
		cfg.ShareAutoOffsetReset = "earliest"
		cfg.GroupShareHeartbeatIntervalMs = 200
		cfg.GroupShareRecordLockDurationMs = 120_000
	}))
	ctx := subCtx(t)
	ctl := c.WaitController(ctx)
	createTopic(t, c, ctl, "mq", 1, 2)
	leader, _ := c.WaitLeader(ctx, "mq", 0)
	other := c.Running()[0]
	if other == leader {
		other = c.Running()[1]
	}
	produceN(ctx, t, c, "mq", 1, 3, "m")
	start := func() *quirev1.SubscribeStart {
		return &quirev1.SubscribeStart{Group: "mg", Subscription: &quirev1.GroupSubscription{Topics: []string{"mq"}},
			Mode: quirev1.SubscribeMode_SHARED, MaxOutstandingRecords: 1}
	}
	a := shareSubscribe(ctx, t, c, other, "a", start())
	delivered(ctx, c, []*sharedStream{a}, 0, 1, nil)

	resp, err := internalv1.NewReplicaServiceClient(c.Conn(leader)).ShareFetch(ctx, &internalv1.PeerShareFetchRequest{
		Group: "mg", MemberId: "made-up", Partitions: []*internalv1.PeerSharePartition{{Topic: "mq"}}})
	if err != nil || resp.Error.GetCode() != quirev1.ErrorCode_UNKNOWN_MEMBER_ID {
		t.Fatalf("a share fetch of a member no node has: %v, %v; want UNKNOWN_MEMBER_ID", resp, err)
	}

	b := shareSubscribe(ctx, t, c, leader, "b", start())
	delivered(ctx, c, []*sharedStream{b}, 1, 1, nil)
	a.cancel() // broken: a's node leaves the group for it
	if res := b.ack(ctx, ackRange("mq", 1, 1, quirev1.ShareAckType_SHARE_ACCEPT)); res.Ranges[0].Error != nil {
		t.Fatalf("b's acceptance: %v", res.Ranges[0].Error)
	}
	delivered(ctx, c, []*sharedStream{b}, 0, 2, nil)
}
