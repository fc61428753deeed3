package coordinator

import (
	"context"
	"errors"
	"testing"
	"time"

	pb "github.com/quirelog/quire/api/metapb"
	"github.com/quirelog/quire/group"
	"github.com/quirelog/quire/internal/clock"
	"github.com/quirelog/quire/metadata"
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
	l := newFSMLog(t, metadata.LatestMetadataVersion)
	co := newTestCoordinator(t, l, clk)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A member joins and leaves, so the group has membership state.
	if _, err := co.Heartbeat(ctx, join("g", "m")); err != nil {
		t.Fatal(err)
	}
	if _, err := co.Heartbeat(ctx, group.Heartbeat{Group: "g", MemberID: "m", MemberEpoch: group.LeaveEpoch}); err != nil {
		t.Fatal(err)
	}
	// The commit is 10 s after the leave, so a cutoff between them is past
	// the moment the group was left without members: only the commit's
	// time keeps it.
	clk.Set(10 * time.Second)
	if err := co.ValidateCommit(ctx, "g", metadata.GroupMember{}); err != nil {
		t.Fatal(err)
	}
	at := clk.Now().UnixMilli()
	if _, err := l.Apply(ctx, &pb.Command{Cmd: &pb.Command_CommitOffsets{CommitOffsets: &pb.CommitOffsets{
		Group: "g", CommitTimeMs: at, Offsets: []*pb.OffsetCommit{{Topic: "t", Partition: 0, Offset: 5, LeaderEpoch: -1}},
	}}}); err != nil {
		t.Fatal(err)
	}
	kept := func() (offsets int, state bool) {
		img := l.Image()
		return len(img.Offsets("g")), img.HasGroupState("g")
	}
	if o, s := kept(); o != 1 || !s {
		t.Fatalf("before expiry: %d offsets, state %v", o, s)
	}

	// Expired a millisecond before the commit: the FSM refuses.
	co.expireGroup(ctx, "g", time.UnixMilli(at).Add(-time.Millisecond))
	if o, s := kept(); o != 1 || !s {
		t.Fatalf("expired before its last commit: %d offsets left, state %v; want both kept", o, s)
	}
	co.expireGroup(ctx, "g", time.UnixMilli(at))
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
	for _, rising := range []bool{true, false} {
		l := newFSMLog(t, 1)
		l.rising = rising
		co := newTestCoordinator(t, l, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := co.Heartbeat(ctx, join("g", "m"))
		cancel()
		want, not := metadata.ErrNotCoordinator, metadata.ErrUnsupportedVersion
		if !rising {
			want, not = metadata.ErrUnsupportedVersion, metadata.ErrNotCoordinator
		}
		if !errors.Is(err, want) || errors.Is(err, not) {
			t.Fatalf("rising %v: a join at level 1: %v, want %v", rising, err, want)
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
	co := newTestCoordinator(t, newFSMLog(t, metadata.MetadataVersionGuardedGroupDelete), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hb := join("g", "m")
	hb.InstanceID = "pod-1"
	if _, err := co.Heartbeat(ctx, hb); err != nil {
		t.Fatal(err)
	}
	d, err := co.Describe(ctx, "g")
	if err != nil || len(d.Members) != 1 || d.Members[0].InstanceID != "" {
		t.Fatalf("a static join at level 5: %+v (%v), want one dynamic member", d, err)
	}
	resp, err := co.Heartbeat(ctx, group.Heartbeat{Group: "g", MemberID: "m", MemberEpoch: group.StaticLeaveEpoch})
	if err != nil || resp.MemberEpoch != group.LeaveEpoch {
		t.Fatalf("-2 at level 5: %+v (%v), want a leave", resp, err)
	}
	if d, err := co.Describe(ctx, "g"); err != nil || len(d.Members) != 0 {
		t.Fatalf("after -2 at level 5: %+v (%v), want no member", d, err)
	}
}
