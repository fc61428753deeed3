package metadata

import (
	"errors"
	"testing"
	"time"

	pb "github.com/quirelog/quire/api/metapb"
	"github.com/quirelog/quire/group"
)

func memberCommit(g, member string, epoch int32, at, offset int64) *pb.CommitOffsets {
	return &pb.CommitOffsets{Group: g, CommitTimeMs: at, MemberId: member, MemberEpoch: epoch,
		Offsets: []*pb.OffsetCommit{{Topic: "t", Partition: 0, Offset: offset, LeaderEpoch: -1}}}
}

func commitCmdOf(c *pb.CommitOffsets) *pb.Command {
	return &pb.Command{Cmd: &pb.Command_CommitOffsets{CommitOffsets: c}}
}

// TestFSMCommitFencedWhenApplied: a member's commit the coordinator
// validated, then held up (the commit batcher, raft) while the member was
// fenced and its partition given to a new member who committed, is
// refused by the FSM when it finally applies, whatever order the entries
// reach it in: the committed offset stays the new owner's. Fed straight
// into the FSM, in the order the log would hold them.
func TestFSMCommitFencedWhenApplied(t *testing.T) {
	tf := newTestFSM(t)
	tf.threeBrokersAt(SupportedMetadataVersions())
	tf.ok(createTopic("t", []int32{1, 2, 3}))
	tf.ok(featureLevel(MetadataVersionFencedCommits))
	cfg := group.DefaultConfig()
	m, err := group.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m.SetTopics(map[string]int32{"t": 1})
	t0 := time.UnixMilli(1_700_000_000_000)
	r1 := tf.heartbeat(m, join("g", "old", t0))
	if len(r1.Assignment) != 1 {
		t.Fatalf("the first member got %v", r1.Assignment)
	}
	// The coordinator validates the old owner's commit at its epoch...
	if err := m.ValidateCommit("g", "old", r1.MemberEpoch); err != nil {
		t.Fatal(err)
	}
	stale := memberCommit("g", "old", r1.MemberEpoch, t0.UnixMilli(), 10)
	// ...then, before that commit is applied, the member misses its
	// session and is fenced, and a new member takes the partition.
	expiry := t0.Add(cfg.SessionTimeout + time.Second)
	tf.ok(groupRecordsCmd(m.Tick(expiry)))
	r2 := tf.heartbeat(m, join("g", "new", expiry))
	if len(r2.Assignment) != 1 {
		t.Fatalf("the new member got %v", r2.Assignment)
	}
	tf.ok(commitCmdOf(memberCommit("g", "new", r2.MemberEpoch, expiry.UnixMilli(), 20)))
	// The old commit lands last: refused, nothing changed.
	tf.rejected(commitCmdOf(stale), group.ErrUnknownMemberID)
	if o, ok := tf.f.Image().Offset("g", "t", 0); !ok || o.Offset != 20 {
		t.Fatalf("committed offset %+v, want the new owner's 20", o)
	}
	// The same in a batch: the stale commit is refused on its own, the
	// other applies.
	batch := &pb.Command{Cmd: &pb.Command_CommitOffsetsBatch{CommitOffsetsBatch: &pb.CommitOffsetsBatch{Commits: []*pb.CommitOffsets{
		stale, memberCommit("g", "new", r2.MemberEpoch, expiry.UnixMilli(), 21)}}}}
	res, ok := tf.ok(batch).(CommitBatchResult)
	if !ok || len(res) != 2 || !errors.Is(res[0], group.ErrUnknownMemberID) || res[1] != nil {
		t.Fatalf("batch answered %v", res)
	}
	if o, _ := tf.f.Image().Offset("g", "t", 0); o.Offset != 21 {
		t.Fatalf("committed offset %d after the batch, want 21", o.Offset)
	}
	// A member still in the group but at a newer epoch (a rebalance moved
	// it on): its commit at the older one is STALE_MEMBER_EPOCH.
	r3 := tf.heartbeat(m, join("g", "third", expiry))
	d, err := m.Describe("g")
	if err != nil {
		t.Fatal(err)
	}
	var newEpoch int32
	for _, mem := range d.Members {
		if mem.MemberID == "new" {
			newEpoch = mem.Epoch
		}
	}
	if newEpoch == r2.MemberEpoch {
		// Not moved on by the join alone: heartbeat it to the new epoch.
		r := tf.heartbeat(m, group.Heartbeat{Group: "g", MemberID: "new", MemberEpoch: r2.MemberEpoch, HasOwned: true, Owned: r2.Assignment, Now: expiry})
		newEpoch = r.MemberEpoch
	}
	if newEpoch == r2.MemberEpoch {
		t.Fatalf("member new still at epoch %d after member %q joined at %d", newEpoch, "third", r3.MemberEpoch)
	}
	tf.rejected(commitCmdOf(memberCommit("g", "new", r2.MemberEpoch, expiry.UnixMilli(), 30)), group.ErrStaleMemberEpoch)
	tf.ok(commitCmdOf(memberCommit("g", "new", newEpoch, expiry.UnixMilli(), 30)))
	// A group the log has no membership for.
	tf.rejected(commitCmdOf(memberCommit("nobody", "x", 1, 0, 1)), group.ErrUnknownMemberID)
	// A commit naming no member (manual assignment, or written before
	// metadata.version 8) is not fenced here.
	tf.ok(commit("manual", 1, &pb.OffsetCommit{Topic: "t", Partition: 0, Offset: 5, LeaderEpoch: -1}))
}

// TestFSMCommitFenceNeedsItsLevel: a commit naming its member needs
// metadata.version 8 (an older node would drop the member and store what
// the others refuse); one naming none does not, so a log written before
// the fence applies the same way on replay.
func TestFSMCommitFenceNeedsItsLevel(t *testing.T) {
	tf := newTestFSM(t)
	tf.threeBrokersAt(SupportedMetadataVersions())
	tf.ok(createTopic("t", []int32{1, 2, 3}))
	tf.ok(featureLevel(MetadataVersionIdempotentWrite))
	fenced := commitCmdOf(memberCommit("g", "m", 1, 1, 1))
	if got := commandLevel(fenced); got != MetadataVersionFencedCommits {
		t.Fatalf("a commit naming its member needs level %d, want %d", got, MetadataVersionFencedCommits)
	}
	batch := &pb.Command{Cmd: &pb.Command_CommitOffsetsBatch{CommitOffsetsBatch: &pb.CommitOffsetsBatch{Commits: []*pb.CommitOffsets{
		{Group: "h", Offsets: []*pb.OffsetCommit{{Topic: "t", Offset: 1}}}, memberCommit("g", "m", 1, 1, 1)}}}}
	if got := commandLevel(batch); got != MetadataVersionFencedCommits {
		t.Fatalf("a batch with a commit naming its member needs level %d", got)
	}
	tf.rejected(fenced, ErrUnsupportedVersion)
	tf.rejected(batch, ErrUnsupportedVersion)
	tf.ok(commit("g", 1, &pb.OffsetCommit{Topic: "t", Partition: 0, Offset: 7, LeaderEpoch: -1}))
	if o, ok := tf.f.Image().Offset("g", "t", 0); !ok || o.Offset != 7 {
		t.Fatalf("a commit naming no member below level 8: %+v", o)
	}
}
