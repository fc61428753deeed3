package testcluster_test

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	internalv1 "github.com/quirelog/quire/api/internalv1"
	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker"
)

// TestClusterShareMembersAcrossNodes: a SHARED stream on a node that
// does not lead the partition gets its records (its fetches passed on to
// the leader); the leader refuses a member no node has
// (UNKNOWN_MEMBER_ID); when the stream breaks, its member leaves on its
// node and the record it held on the leader goes to another member at
// once, with its delivery count raised, although locks last 2 minutes.
// When the group forgets a stream's member (here a leave sent for it over
// Kafka's protocol), the stream joins again and goes on: the record it
// held, released by the leave, comes back to it.
func TestClusterShareMembersAcrossNodes(t *testing.T) {
	t.Parallel()
	c, addrs := kafkaCluster(t, 2, func(cfg *broker.Config) {
		cfg.GroupShareEnable = true
		cfg.ShareAutoOffsetReset = "earliest"
		cfg.GroupShareHeartbeatIntervalMs = 200
		cfg.GroupShareRecordLockDurationMs = 120_000
	})
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
	aID := a.memberID()
	a.cancel() // broken: a's node leaves the group for it
	c.Eventually(ctx, "a's member gone from the leader, its record released", func() error {
		d, err := groups(c, leader).DescribeShareGroup(ctx, &quirev1.DescribeShareGroupRequest{Group: "mg"})
		if err != nil {
			return err
		}
		for _, m := range d.Members {
			if m.MemberId == aID {
				return fmt.Errorf("the leader still has %s", aID)
			}
		}
		if len(d.Partitions) != 1 || d.Partitions[0].InFlight != 1 || d.Partitions[0].OldestLockMember != b.memberID() {
			return fmt.Errorf("described %v, want b's record alone in flight", d)
		}
		return nil
	})
	if res := b.ack(ctx, ackRange("mq", 1, 1, quirev1.ShareAckType_SHARE_ACCEPT)); res.Ranges[0].Error != nil {
		t.Fatalf("b's acceptance: %v", res.Ranges[0].Error)
	}
	delivered(ctx, c, []*sharedStream{b}, 0, 2, nil)

	// b's member leaves behind its back: b's next heartbeat is refused
	// UNKNOWN_MEMBER_ID, and b joins again, getting record 0 once more.
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs[leader]))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	leave := kmsg.NewPtrShareGroupHeartbeatRequest()
	leave.Version, leave.GroupID, leave.MemberID, leave.MemberEpoch = 1, "mg", b.memberID(), -1
	c.Eventually(ctx, "b's member left over the Kafka listener", func() error {
		resp, err := cl.SeedBrokers()[0].Request(ctx, leave)
		if err != nil {
			return err
		}
		if code := resp.(*kmsg.ShareGroupHeartbeatResponse).ErrorCode; code != 0 {
			return fmt.Errorf("error code %d", code)
		}
		return nil
	})
	delivered(ctx, c, []*sharedStream{b}, 0, 3, nil)
	b.mu.Lock()
	err = b.err
	b.mu.Unlock()
	if err != nil {
		t.Fatalf("b ended: %v", err)
	}
}
