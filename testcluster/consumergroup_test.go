package testcluster_test

import (
	"cmp"
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

// groupMember is a consumer group member speaking the heartbeat protocol
// itself: it uses at once what each answer assigns (giving up the rest),
// and lists it in its next heartbeat.
type groupMember struct {
	c     *testcluster.Cluster
	via   int32
	group string
	id    string
	epoch int32
	owned *quirev1.GroupAssignment
	topic string // subscribed; "" is "seven"
}

// heartbeat sends one heartbeat; joining (its topic, else "seven") when
// the member has no epoch.
func (m *groupMember) heartbeat(ctx context.Context) error {
	return m.heartbeatTopic(ctx, cmp.Or(m.topic, "seven"))
}

func (m *groupMember) heartbeatTopic(ctx context.Context, topic string) error {
	req := &quirev1.ConsumerGroupHeartbeatRequest{Group: m.group, MemberId: m.id, MemberEpoch: m.epoch,
		Owned: m.owned}
	if m.epoch == 0 {
		req.Subscription = &quirev1.GroupSubscription{Topics: []string{topic}}
		req.RebalanceTimeoutMs = 5000
		req.Assignor = "range"
		req.Owned = &quirev1.GroupAssignment{}
	}
	resp, err := groups(m.c, m.via).ConsumerGroupHeartbeat(ctx, req)
	if err != nil {
		return err
	}
	m.epoch = resp.MemberEpoch
	if resp.Assignment != nil {
		m.owned = resp.Assignment
	}
	return nil
}

func (m *groupMember) leave(ctx context.Context) error {
	_, err := groups(m.c, m.via).ConsumerGroupHeartbeat(ctx, &quirev1.ConsumerGroupHeartbeatRequest{
		Group: m.group, MemberId: m.id, MemberEpoch: -1})
	return err
}

func ownedSet(a *quirev1.GroupAssignment) []string {
	var out []string
	for _, t := range a.GetTopics() {
		for _, p := range t.Partitions {
			out = append(out, fmt.Sprintf("%s-%d", t.Topic, p))
		}
	}
	return out
}

// settle heartbeats every member until their partition counts are want
// (in member order) and all seven partitions are owned, checking after
// every answer that no partition has two owners.
func settle(ctx context.Context, t *testing.T, c *testcluster.Cluster, members []*groupMember, want []int) {
	t.Helper()
	c.Eventually(ctx, fmt.Sprintf("members own %v", want), func() error {
		for _, m := range members {
			if err := m.heartbeat(ctx); err != nil {
				return fmt.Errorf("member %s: %w", m.id, err)
			}
			checkNoSharedPartition(t, members)
		}
		var got []int
		total := 0
		for _, m := range members {
			got = append(got, len(ownedSet(m.owned)))
			total += len(ownedSet(m.owned))
		}
		if !slices.Equal(got, want) || total != 7 {
			return fmt.Errorf("members own %v partitions", got)
		}
		return nil
	})
}

func checkNoSharedPartition(t *testing.T, members []*groupMember) {
	t.Helper()
	owner := map[string]string{}
	for _, m := range members {
		for _, p := range ownedSet(m.owned) {
			if o, ok := owner[p]; ok {
				t.Fatalf("partition %s owned by %s and %s", p, o, m.id)
			}
			owner[p] = m.id
		}
	}
}

func errCode(err error) quirev1.ErrorCode {
	if d := errorDetail(err); d != nil {
		return d.Code
	}
	return quirev1.ErrorCode_NONE
}

// TestClusterConsumerGroupRange: with the range assignor members joining
// and leaving a 7-partition topic own 7; 4 3; 3 2 2 and back, never two
// of them one partition; a commit at a stale epoch, or without a member,
// is refused while the group has members; a member that stops
// heartbeating is removed after the session timeout and its partitions
// go to the others; after the controller dies the survivors keep their
// partitions at their epochs with the new coordinator (rebuilt from the
// metadata log).
func TestClusterConsumerGroupRange(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 3, testcluster.Config(func(_ int32, cfg *broker.Config) {
		// Long enough that members heartbeating on a loaded machine keep
		// their sessions; the test's expiry waits take this long.
		cfg.GroupConsumerSessionTimeoutMs = 5000
		cfg.GroupConsumerHeartbeatIntervalMs = 100
	}))
	ctx := testCtx(t)
	ctl := c.WaitController(ctx)
	createTopic(t, c, ctl, "seven", 7, 3)
	c.WaitImage(ctx, func(img *metadata.Image) bool {
		_, ok := img.Topic("seven")
		return ok && img.MetadataVersion() >= metadata.MetadataVersionProducerIDs
	})
	var others []int32
	for _, id := range c.IDs() {
		if id != ctl {
			others = append(others, id)
		}
	}
	m1 := &groupMember{c: c, via: others[0], group: "g", id: "m1"}
	m2 := &groupMember{c: c, via: others[1], group: "g", id: "m2"}
	m3 := &groupMember{c: c, via: ctl, group: "g", id: "m3"}

	settle(ctx, t, c, []*groupMember{m1}, []int{7})
	settle(ctx, t, c, []*groupMember{m1, m2}, []int{4, 3})
	settle(ctx, t, c, []*groupMember{m1, m2, m3}, []int{3, 2, 2})
	if err := m3.leave(ctx); err != nil {
		t.Fatal(err)
	}
	settle(ctx, t, c, []*groupMember{m1, m2}, []int{4, 3})

	d, err := groups(c, others[1]).DescribeGroup(ctx, &quirev1.DescribeGroupRequest{Group: "g"})
	if err != nil {
		t.Fatal(err)
	}
	// A member's address is the host its heartbeats came from (whichever
	// node took them), without the connection's port.
	if d.State != "stable" || d.Assignor != "range" || len(d.Members) != 2 || d.Members[0].MemberId != "m1" ||
		d.Members[0].ClientAddress != "127.0.0.1" ||
		d.Members[0].MemberEpoch != m1.epoch || len(ownedSet(d.Members[0].Assigned)) != 4 {
		t.Fatalf("describe: %v", d)
	}

	// Commits are fenced by the member's epoch.
	commit := func(member string, epoch int32) error {
		_, err := groups(c, others[0]).CommitOffsets(ctx, &quirev1.CommitOffsetsRequest{Group: "g", MemberId: member, MemberEpoch: epoch,
			Offsets: []*quirev1.OffsetCommit{{Topic: "seven", Partition: 0, Offset: 5}}})
		return err
	}
	if err := commit("m1", m1.epoch); err != nil {
		t.Fatalf("commit at the member's epoch: %v", err)
	}
	if err := commit("m1", m1.epoch-1); errCode(err) != quirev1.ErrorCode_STALE_MEMBER_EPOCH {
		t.Fatalf("commit at a stale epoch: %v", err)
	}
	if err := commit("", 0); errCode(err) != quirev1.ErrorCode_UNKNOWN_MEMBER_ID {
		t.Fatalf("commit without a member: %v", err)
	}
	if got := fetchOffset(ctx, t, c, others[1], "g", "seven", 0); got != 5 {
		t.Fatalf("committed offset %d, want 5", got)
	}

	// Bad heartbeats get clear errors.
	_, err = groups(c, others[0]).ConsumerGroupHeartbeat(ctx, &quirev1.ConsumerGroupHeartbeatRequest{Group: "g", MemberId: "m1", MemberEpoch: m1.epoch + 5})
	if errCode(err) != quirev1.ErrorCode_FENCED_MEMBER_EPOCH {
		t.Fatalf("heartbeat ahead of the epoch: %v", err)
	}
	_, err = groups(c, others[0]).ConsumerGroupHeartbeat(ctx, &quirev1.ConsumerGroupHeartbeatRequest{Group: "g2", MemberId: "x",
		Subscription: &quirev1.GroupSubscription{Regex: "("}, RebalanceTimeoutMs: 1000})
	if errCode(err) != quirev1.ErrorCode_INVALID_REGULAR_EXPRESSION || status.Code(err) != codes.InvalidArgument {
		t.Fatalf("bad regex: %v", err)
	}
	_, err = groups(c, others[0]).ConsumerGroupHeartbeat(ctx, &quirev1.ConsumerGroupHeartbeatRequest{Group: "g2", MemberId: "x",
		Subscription: &quirev1.GroupSubscription{Topics: []string{"seven"}}, RebalanceTimeoutMs: 1000, Assignor: "nope"})
	if errCode(err) != quirev1.ErrorCode_UNSUPPORTED_ASSIGNOR {
		t.Fatalf("unknown assignor: %v", err)
	}
	// m1 was fenced by its bad heartbeat: it rejoins owning nothing.
	m1.epoch, m1.owned = 0, nil
	settle(ctx, t, c, []*groupMember{m1, m2}, []int{4, 3})

	// m2 goes silent: after the session timeout m1 owns everything.
	settle(ctx, t, c, []*groupMember{m1}, []int{7})
	if _, err := groups(c, others[0]).ConsumerGroupHeartbeat(ctx, &quirev1.ConsumerGroupHeartbeatRequest{Group: "g", MemberId: "m2", MemberEpoch: m2.epoch}); errCode(err) != quirev1.ErrorCode_UNKNOWN_MEMBER_ID {
		t.Fatalf("heartbeat of an expired member: %v", err)
	}
	m2.epoch, m2.owned = 0, nil
	settle(ctx, t, c, []*groupMember{m1, m2}, []int{4, 3})

	// The controller dies: the new coordinator has the members at their
	// epochs with their partitions.
	e1, e2 := m1.epoch, m2.epoch
	own1, own2 := ownedSet(m1.owned), ownedSet(m2.owned)
	c.Kill(ctl)
	newCtl := c.WaitController(ctx)
	if newCtl == ctl {
		t.Fatalf("controller %d still controller", ctl)
	}
	members := []*groupMember{m1, m2}
	c.Eventually(ctx, "heartbeats reach the new coordinator", func() error {
		for _, m := range members {
			if err := m.heartbeat(ctx); err != nil {
				return fmt.Errorf("member %s: %w", m.id, err)
			}
		}
		return nil
	})
	if m1.epoch != e1 || m2.epoch != e2 || !slices.Equal(ownedSet(m1.owned), own1) || !slices.Equal(ownedSet(m2.owned), own2) {
		t.Fatalf("after failover m1 epoch %d %v (was %d %v), m2 epoch %d %v (was %d %v)",
			m1.epoch, ownedSet(m1.owned), e1, own1, m2.epoch, ownedSet(m2.owned), e2, own2)
	}
	if err := commit("m1", m1.epoch); err != nil {
		t.Fatalf("commit after failover: %v", err)
	}
}
