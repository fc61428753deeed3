package request_test

import (
	"errors"
	"testing"

	"github.com/quirelog/quire/auth"
	"github.com/quirelog/quire/group"
	"github.com/quirelog/quire/replica"
	"github.com/quirelog/quire/request"
	"github.com/quirelog/quire/share"
)

// TestCoreShareGroupOffsets: DescribeShareGroupOffsets answers a share
// group's start offset and lag per share-partition (from memory before
// anything is saved, from the saved state after; the lag from the
// partition's leader, here or another node), -1 for a partition
// with no state, and refuses an unknown topic or partition in its
// result; AlterShareGroupOffsets is refused below metadata.version 17
// and while the group has a member, then sets the offsets it may,
// refusing a negative offset, an unknown partition and a partition named
// twice in their results. Describe needs Describe on the group and the
// topic, Alter Read on both.
func TestCoreShareGroupOffsets(t *testing.T) {
	store := &groupStore{supported: true}
	lister := &offsetLister{asked: map[int32]int{}}
	f, _ := newShareCore(t, false, func(c *request.Config) {
		c.ShareStore = store
		c.OffsetLister = lister
		c.Authorizer = writeAnyone{acls{auth.OpRead: {"g": true, "t": true}, auth.OpDescribe: {"g": true, "t": true, "h": true, "nope": true}}}
	})
	alice := request.WithPrincipal(ctxT(t), "User:alice")
	bob := request.WithPrincipal(ctxT(t), "User:bob")
	produceKeyed(t, f, 0, 6, 3)

	if _, err := f.core.DescribeShareGroupOffsets(alice, "g", nil); !errors.Is(err, request.ErrShareGroupNotFound) {
		t.Fatalf("describe before any member: %v, want ErrShareGroupNotFound", err)
	}
	if _, err := f.core.ShareGroupHeartbeat(alice, &request.ShareHeartbeat{Group: "g", MemberID: "m", Topics: []string{"t"}}); err != nil {
		t.Fatal(err)
	}
	res, err := f.core.ShareFetch(alice, &request.ShareFetchRequest{Group: "g", MemberID: "m", MaxRecords: 4,
		Partitions: []request.SharePartition{{Topic: "t", Partition: 0}}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("fetch: %v %+v", err, res)
	}
	if _, err := f.core.ShareAcknowledge(alice, "g", "m", []request.SharePartition{{Topic: "t", Partition: 0,
		Acks: []share.Ack{{First: 0, Last: 1, Type: share.Accept}, {First: 3, Last: 3, Type: share.Accept}}}}); err != nil {
		t.Fatal(err)
	}

	// From memory: start 2, 3 accepted past it, so 6-2-1 = 3 to go.
	got, err := f.core.DescribeShareGroupOffsets(alice, "g", nil)
	if err != nil || len(got) != 1 || got[0].Topic != "t" || got[0].Partition != 0 || got[0].StartOffset != 2 || got[0].Lag != 3 ||
		got[0].LeaderEpoch != 1 || got[0].Err != nil {
		t.Fatalf("described %+v, %v: want t-0 at 2, lag 3, leader epoch 1", got, err)
	}
	got, err = f.core.DescribeShareGroupOffsets(alice, "g", []request.ShareOffsetTopic{{Topic: "t", Partitions: []int32{0, 1, 9}}, {Topic: "nope", Partitions: []int32{0}}})
	if err != nil || len(got) != 4 {
		t.Fatalf("described %+v, %v", got, err)
	}
	if got[0].StartOffset != 2 || got[1].StartOffset != -1 || got[1].Lag != -1 || got[1].Err != nil {
		t.Errorf("t-0 and t-1 described %+v %+v: want 2, and -1 with no state", got[0], got[1])
	}
	if !errors.Is(got[2].Err, replica.ErrUnknownTopicOrPartition) || !errors.Is(got[3].Err, replica.ErrUnknownTopicOrPartition) {
		t.Errorf("t-9 and nope-0: %v, %v, want UNKNOWN_TOPIC_OR_PARTITION", got[2].Err, got[3].Err)
	}
	if _, err := f.core.DescribeShareGroupOffsets(bob, "g", nil); !errors.Is(err, request.ErrGroupAuthorizationFailed) {
		t.Errorf("bob's describe: %v", err)
	}

	set := []request.ShareStartOffset{{Topic: "t", Partition: 0, StartOffset: 5}}
	if _, err := f.core.AlterShareGroupOffsets(alice, "g", set); !errors.Is(err, request.ErrShareOffsetsUnsupported) {
		t.Fatalf("alter below 17: %v", err)
	}
	store.offsets = true
	if _, err := f.core.AlterShareGroupOffsets(alice, "g", set); !errors.Is(err, group.ErrNonEmptyGroup) {
		t.Fatalf("alter with a member: %v, want NON_EMPTY_GROUP", err)
	}
	if _, err := f.core.ShareGroupHeartbeat(alice, &request.ShareHeartbeat{Group: "g", MemberID: "m", Epoch: -1}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.core.AlterShareGroupOffsets(bob, "g", set); !errors.Is(err, request.ErrGroupAuthorizationFailed) {
		t.Fatalf("bob's alter: %v", err)
	}
	alt, err := f.core.AlterShareGroupOffsets(alice, "g", append(set,
		request.ShareStartOffset{Topic: "t", Partition: 1, StartOffset: -1},
		request.ShareStartOffset{Topic: "t", Partition: 9},
		request.ShareStartOffset{Topic: "t", Partition: 0, StartOffset: 3}))
	if err != nil || len(alt) != 4 {
		t.Fatalf("alter: %+v, %v", alt, err)
	}
	if alt[0].Err != nil || alt[0].StartOffset != 5 || alt[0].LeaderEpoch != 1 {
		t.Errorf("t-0 altered %+v", alt[0])
	}
	if !errors.Is(alt[1].Err, replica.ErrInvalidRequest) || !errors.Is(alt[2].Err, replica.ErrUnknownTopicOrPartition) || !errors.Is(alt[3].Err, replica.ErrInvalidRequest) {
		t.Errorf("a negative offset, an unknown partition, one named twice: %v, %v, %v", alt[1].Err, alt[2].Err, alt[3].Err)
	}
	if s := store.ShareStarts("g"); len(s) != 1 || s[0].StartOffset != 5 {
		t.Fatalf("saved %+v, want t-0 at 5 only", s)
	}
	got, err = f.core.DescribeShareGroupOffsets(alice, "g", nil)
	if err != nil || len(got) != 1 || got[0].StartOffset != 5 || got[0].Lag != 1 {
		t.Fatalf("described after the alter %+v, %v: want t-0 at 5, lag 1", got, err)
	}

	// A share-partition this node does not hold (t-1 is led by node 2):
	// describe lists it with its saved start.
	if alt, err := f.core.AlterShareGroupOffsets(alice, "g", []request.ShareStartOffset{{Topic: "t", Partition: 1, StartOffset: 7}}); err != nil || alt[0].Err != nil {
		t.Fatalf("alter of t-1: %+v, %v", alt, err)
	}
	d, err := f.core.ShareGroupDescribe(alice, "g")
	if err != nil || len(d.Partitions) != 2 || d.Partitions[1].Partition != 1 || d.Partitions[1].StartOffset != 7 || d.Partitions[1].EndOffset != -1 {
		t.Fatalf("share group described %+v, %v: want t-1 at its saved start 7, end -1", d, err)
	}
	got, err = f.core.DescribeShareGroupOffsets(alice, "g", nil)
	// Its lag is from the high watermark its leader answers (50).
	if err != nil || len(got) != 2 || got[1].Partition != 1 || got[1].StartOffset != 7 || got[1].Lag != 43 {
		t.Fatalf("offsets described %+v, %v: want t-1 at 7 with lag 50-7 from its leader", got, err)
	}
	if n := lister.asked[2]; n != 1 {
		t.Errorf("t-1's leader, node 2, asked %d times for its high watermark, want 1", n)
	}

	// Read on the topic: h's reader may describe it but not alter it.
	alt, err = f.core.AlterShareGroupOffsets(alice, "g", []request.ShareStartOffset{{Topic: "h", Partition: 0}})
	if err != nil || len(alt) != 1 || !errors.Is(alt[0].Err, request.ErrTopicAuthorizationFailed) {
		t.Fatalf("alter of a topic not readable: %+v, %v", alt, err)
	}
}

// writeAnyone lets anyone write (the records produced here) and alice do
// what acls grant her.
type writeAnyone struct{ acls }

func (w writeAnyone) Authorize(r auth.Request) bool {
	return r.Operation == auth.OpWrite || w.acls.Authorize(r)
}
