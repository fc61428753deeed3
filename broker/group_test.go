package broker_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

func TestGroupCommitFetchListDelete(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	ctx := ctxT(t)
	g := quirev1.NewGroupsClient(c.conn)
	createTopic(t, c, "orders", 3, nil)
	createTopic(t, c, "audit", 1, nil)

	resp, err := g.CommitOffsets(ctx, &quirev1.CommitOffsetsRequest{Group: "billing", Offsets: []*quirev1.OffsetCommit{
		{Topic: "orders", Partition: 2, Offset: 10, OptionalLeaderEpoch: &quirev1.OffsetCommit_LeaderEpoch{LeaderEpoch: 0}, Metadata: "m"},
		{Topic: "audit", Partition: 0, Offset: 3},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.CommitTimeMs <= 0 {
		t.Fatalf("commit time %d", resp.CommitTimeMs)
	}
	all, err := g.FetchOffsets(ctx, &quirev1.FetchOffsetsRequest{Group: "billing"})
	if err != nil {
		t.Fatal(err)
	}
	want := []*quirev1.CommittedOffset{
		{Topic: "audit", Partition: 0, Offset: 3, LeaderEpoch: -1, CommitTimeMs: resp.CommitTimeMs},
		{Topic: "orders", Partition: 2, Offset: 10, LeaderEpoch: 0, Metadata: "m", CommitTimeMs: resp.CommitTimeMs},
	}
	if !equalOffsets(all.Offsets, want) {
		t.Fatalf("all offsets %v, want %v", all.Offsets, want)
	}
	// Named partitions: -1 for those never committed, sorted.
	some, err := g.FetchOffsets(ctx, &quirev1.FetchOffsetsRequest{Group: "billing", Partitions: []*quirev1.TopicPartition{
		{Topic: "orders", Partition: 2}, {Topic: "orders", Partition: 0},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(some.Offsets) != 2 || some.Offsets[0].Partition != 0 || some.Offsets[0].Offset != -1 ||
		some.Offsets[0].CommitTimeMs != -1 || some.Offsets[1].Offset != 10 {
		t.Fatalf("named offsets %v", some.Offsets)
	}
	// An unknown group has nothing committed.
	none, err := g.FetchOffsets(ctx, &quirev1.FetchOffsetsRequest{Group: "nobody"})
	if err != nil || len(none.Offsets) != 0 {
		t.Fatalf("unknown group: %v %v", none, err)
	}
	if _, err := g.CommitOffsets(ctx, &quirev1.CommitOffsetsRequest{Group: "analytics", Offsets: []*quirev1.OffsetCommit{{Topic: "orders", Offset: 1}}}); err != nil {
		t.Fatal(err)
	}
	list, err := g.ListGroups(ctx, &quirev1.ListGroupsRequest{})
	if err != nil || len(list.Groups) != 2 || list.Groups[0].Group != "analytics" || list.Groups[1].Group != "billing" {
		t.Fatalf("groups %v %v", list, err)
	}

	// Deleting the topic drops its offsets; deleting the group the rest.
	if _, err := c.admin.DeleteTopic(ctx, &quirev1.DeleteTopicRequest{Name: "audit"}); err != nil {
		t.Fatal(err)
	}
	all, err = g.FetchOffsets(ctx, &quirev1.FetchOffsetsRequest{Group: "billing"})
	if err != nil || len(all.Offsets) != 1 || all.Offsets[0].Topic != "orders" {
		t.Fatalf("after deleting topic audit: %v %v", all, err)
	}
	if _, err := g.DeleteGroup(ctx, &quirev1.DeleteGroupRequest{Group: "billing"}); err != nil {
		t.Fatal(err)
	}
	list, err = g.ListGroups(ctx, &quirev1.ListGroupsRequest{})
	if err != nil || len(list.Groups) != 1 || list.Groups[0].Group != "analytics" {
		t.Fatalf("groups after delete %v %v", list, err)
	}
}

func equalOffsets(a, b []*quirev1.CommittedOffset) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !proto.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

func TestGroupBadInput(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	ctx := ctxT(t)
	g := quirev1.NewGroupsClient(c.conn)
	createTopic(t, c, "orders", 2, nil)
	commit := func(group string, offsets ...*quirev1.OffsetCommit) error {
		_, err := g.CommitOffsets(ctx, &quirev1.CommitOffsetsRequest{Group: group, Offsets: offsets})
		return err
	}
	ok := &quirev1.OffsetCommit{Topic: "orders", Partition: 1, Offset: 5}
	wantStatus(t, commit("", ok), codes.InvalidArgument, quirev1.ErrorCode_INVALID_GROUP_ID, "group id is empty")
	wantStatus(t, commit(strings.Repeat("x", 256), ok), codes.InvalidArgument, quirev1.ErrorCode_INVALID_GROUP_ID, "256 bytes")
	wantStatus(t, commit("g"), codes.InvalidArgument, quirev1.ErrorCode_INVALID_REQUEST, "no offsets")
	wantStatus(t, commit("g", ok, &quirev1.OffsetCommit{Topic: "nope", Offset: 1}), codes.NotFound,
		quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, `entry 1: topic "nope" does not exist`)
	wantStatus(t, commit("g", &quirev1.OffsetCommit{Topic: "orders", Partition: 2, Offset: 1}), codes.InvalidArgument,
		quirev1.ErrorCode_INVALID_REQUEST, "no partition 2")
	wantStatus(t, commit("g", ok, &quirev1.OffsetCommit{Topic: "", Offset: 1}), codes.InvalidArgument,
		quirev1.ErrorCode_INVALID_TOPIC_EXCEPTION, "entry 1", "topic name is empty")
	wantStatus(t, commit("g", &quirev1.OffsetCommit{Topic: "orders", Partition: 0, Offset: -1}), codes.InvalidArgument,
		quirev1.ErrorCode_INVALID_REQUEST, "negative offset -1")
	wantStatus(t, commit("g", &quirev1.OffsetCommit{Topic: "orders", Partition: 0, Offset: 1, Metadata: strings.Repeat("m", 4097)}),
		codes.InvalidArgument, quirev1.ErrorCode_INVALID_REQUEST, "metadata is 4097 bytes")
	// Nothing of a refused commit was kept, not even its good entries.
	list, err := g.ListGroups(ctx, &quirev1.ListGroupsRequest{})
	if err != nil || len(list.Groups) != 0 {
		t.Fatalf("groups after refused commits: %v %v", list, err)
	}
	_, err = g.FetchOffsets(ctx, &quirev1.FetchOffsetsRequest{Group: ""})
	wantStatus(t, err, codes.InvalidArgument, quirev1.ErrorCode_INVALID_GROUP_ID)
	_, err = g.FetchOffsets(ctx, &quirev1.FetchOffsetsRequest{Group: "g", Partitions: []*quirev1.TopicPartition{{Topic: "nope"}}})
	wantStatus(t, err, codes.NotFound, quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, "nope")
	_, err = g.DeleteGroup(ctx, &quirev1.DeleteGroupRequest{Group: "never"})
	wantStatus(t, err, codes.NotFound, quirev1.ErrorCode_GROUP_ID_NOT_FOUND, "never")
}
