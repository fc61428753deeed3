package metadata

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/quirelog/quire/group"
	"github.com/quirelog/quire/internal/clock"
	"github.com/quirelog/quire/internal/poll"
)

// TestCoordinatorExpireKeepsLateCommit: offsets retention's deletion is
// judged again where it is applied. A group whose retention ran out at a
// cutoff, but that was committed to after it (between the coordinator's
// look and its DeleteGroup, which does not wait for the commits),
// keeps its offsets and its membership state; once the cutoff is at or
// past every commit, both go.
func TestCoordinatorExpireKeepsLateCommit(t *testing.T) {
	t.Parallel()
	clk := &clock.Jumped{}
	n := groupNode(t, LatestMetadataVersion, func(cfg *Config) { cfg.Clock = clk })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ctl := n.Ctl()
	// A member joins and leaves, so the group has membership state.
	if _, err := ctl.ConsumerGroupHeartbeat(ctx, join("g", "m", time.Time{})); err != nil {
		t.Fatal(err)
	}
	if _, err := ctl.ConsumerGroupHeartbeat(ctx, group.Heartbeat{Group: "g", MemberID: "m", MemberEpoch: group.LeaveEpoch}); err != nil {
		t.Fatal(err)
	}
	// The commit is 10 s after the leave, so a cutoff between them is past
	// the moment the group was left without members: only the commit's
	// time keeps it.
	clk.Set(10 * time.Second)
	at, err := ctl.CommitOffsets(ctx, "g", GroupMember{}, []OffsetCommit{{Topic: "t", Partition: 0, Offset: 5, LeaderEpoch: -1}})
	if err != nil {
		t.Fatal(err)
	}
	kept := func() (offsets int, state bool) {
		img := n.Image()
		_, state = img.groupStates["g"]
		return len(img.Offsets("g")), state
	}
	if o, s := kept(); o != 1 || !s {
		t.Fatalf("before expiry: %d offsets, state %v", o, s)
	}

	// Expired a millisecond before the commit: the FSM refuses.
	ctl.coord.expireGroup(ctx, "g", at.Add(-time.Millisecond))
	if o, s := kept(); o != 1 || !s {
		t.Fatalf("expired before its last commit: %d offsets left, state %v; want both kept", o, s)
	}
	ctl.coord.expireGroup(ctx, "g", at)
	if o, s := kept(); o != 0 || s {
		t.Fatalf("expired at its last commit: %d offsets left, state %v; want both gone", o, s)
	}
}

// TestCoordinatorJoinBeforeTheLevelRises: a heartbeat that needs a
// metadata.version the controller has not raised yet, but will on its own
// (a new cluster whose voter has not registered), is ErrNotCoordinator,
// which members retry, not ErrUnsupportedVersion, which a KIP-848 client
// takes as the protocol not served (franz-go falls back to the classic
// protocol for good). With the level kept by hand it is
// ErrUnsupportedVersion.
func TestCoordinatorJoinBeforeTheLevelRises(t *testing.T) {
	t.Parallel()
	for _, manual := range []bool{false, true} {
		c := newTestCluster(t, 1, 0, func(cfg *Config) { cfg.ManualMetadataVersion = manual })
		n := c.waitController()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := n.Ctl().ConsumerGroupHeartbeat(ctx, join("g", "m", time.Time{}))
		cancel()
		want, not := ErrNotCoordinator, ErrUnsupportedVersion
		if manual {
			want, not = ErrUnsupportedVersion, ErrNotCoordinator
		}
		if !errors.Is(err, want) || errors.Is(err, not) {
			t.Fatalf("manual %v: a join at level %d: %v, want %v", manual, n.Image().MetadataVersion(), err, want)
		}
	}
}

// TestCoordinatorStaticBelowItsLevel: below metadata.version 6, which
// keeps instance ids, a member joining with one is dynamic (no instance
// id in its records, which would be refused) and its -2 is a leave, so
// a static client closing does not hold its partitions for a session
// timeout.
func TestCoordinatorStaticBelowItsLevel(t *testing.T) {
	t.Parallel()
	n := groupNode(t, MetadataVersionGuardedGroupDelete, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hb := join("g", "m", time.Time{})
	hb.InstanceID = "pod-1"
	if _, err := n.Ctl().ConsumerGroupHeartbeat(ctx, hb); err != nil {
		t.Fatal(err)
	}
	d, err := n.Ctl().DescribeGroup(ctx, "g")
	if err != nil || len(d.Members) != 1 || d.Members[0].InstanceID != "" {
		t.Fatalf("a static join at level 5: %+v (%v), want one dynamic member", d, err)
	}
	resp, err := n.Ctl().ConsumerGroupHeartbeat(ctx, group.Heartbeat{Group: "g", MemberID: "m", MemberEpoch: group.StaticLeaveEpoch})
	if err != nil || resp.MemberEpoch != group.LeaveEpoch {
		t.Fatalf("-2 at level 5: %+v (%v), want a leave", resp, err)
	}
	if d, err := n.Ctl().DescribeGroup(ctx, "g"); err != nil || len(d.Members) != 0 {
		t.Fatalf("after -2 at level 5: %+v (%v), want no member", d, err)
	}
}

// groupNode starts a one-node cluster whose broker supports metadata
// .version up to level, with topic t (one partition), and returns its
// controller once the level is finalized.
func groupNode(t *testing.T, level int32, mod func(*Config)) *Node {
	t.Helper()
	c := newTestCluster(t, 1, 0, mod)
	c.startBrokerAt(1, VersionRange{Min: 1, Max: level})
	c.waitBrokersLive(1)
	c.createTopic(TopicSpec{Name: "t", Partitions: 1, ReplicationFactor: 1})
	n := c.waitController()
	poll.True(t, fmt.Sprintf("metadata.version %d", level), func() bool {
		return n.Image().metadataVersion() == level
	})
	return n
}
