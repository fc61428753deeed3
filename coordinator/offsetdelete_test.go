package coordinator

import (
	"context"
	"testing"
	"time"

	pb "github.com/quirelog/quire/api/metapb"
	"github.com/quirelog/quire/group"
	"github.com/quirelog/quire/metadata"
)

// TestCoordinatorDeleteOffsetsKeepsSubscribed: the offsets of a topic a
// member subscribes to are kept (and the topic reported), those of
// another topic go; once the member leaves, the first go too.
func TestCoordinatorDeleteOffsetsKeepsSubscribed(t *testing.T) {
	t.Parallel()
	l := newFSMLog(t, metadata.LatestMetadataVersion)
	co := newTestCoordinator(t, l, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := l.Apply(ctx, &pb.Command{Cmd: &pb.Command_CreateTopic{CreateTopic: &pb.CreateTopic{Name: "u", TopicId: "id-u",
		Partitions: []*pb.PartitionAssignment{{Partition: 0, Replicas: []int32{1}, Leader: 1, Isr: []int32{1}}}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := co.Heartbeat(ctx, join("g", "m")); err != nil { // subscribes to t
		t.Fatal(err)
	}
	if _, err := l.Apply(ctx, &pb.Command{Cmd: &pb.Command_CommitOffsets{CommitOffsets: &pb.CommitOffsets{
		Group: "g", CommitTimeMs: 1, Offsets: []*pb.OffsetCommit{
			{Topic: "t", Partition: 0, Offset: 5, LeaderEpoch: -1}, {Topic: "u", Partition: 0, Offset: 6, LeaderEpoch: -1}},
	}}}); err != nil {
		t.Fatal(err)
	}
	both := []metadata.TopicPartition{{Topic: "t", Partition: 0}, {Topic: "u", Partition: 0}}
	subscribed, err := co.DeleteOffsets(ctx, "g", both)
	if err != nil {
		t.Fatal(err)
	}
	if !subscribed["t"] || subscribed["u"] || len(subscribed) != 1 {
		t.Fatalf("subscribed topics %v, want t", subscribed)
	}
	if got := l.Image().Offsets("g"); len(got) != 1 || got[0].Topic != "t" {
		t.Fatalf("offsets left %+v, want t-0 only", got)
	}

	if _, err := co.Heartbeat(ctx, group.Heartbeat{Group: "g", MemberID: "m", MemberEpoch: group.LeaveEpoch}); err != nil {
		t.Fatal(err)
	}
	subscribed, err = co.DeleteOffsets(ctx, "g", both)
	if err != nil {
		t.Fatal(err)
	}
	if len(subscribed) != 0 {
		t.Fatalf("subscribed topics %v with no members", subscribed)
	}
	if got := l.Image().Offsets("g"); len(got) != 0 {
		t.Fatalf("offsets left %+v after the member left", got)
	}
}
