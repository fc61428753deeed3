package metadata

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	pb "github.com/quirelog/quire/api/metapb"
)

// allOffsets is every group's committed offsets, by group.
func allOffsets(img *Image) map[string][]CommittedOffset {
	out := map[string][]CommittedOffset{}
	for _, g := range img.Groups() {
		out[g] = img.Offsets(g)
	}
	return out
}

func commit(group string, at int64, offsets ...*pb.OffsetCommit) *pb.Command {
	return &pb.Command{Cmd: &pb.Command_CommitOffsets{CommitOffsets: &pb.CommitOffsets{Group: group, Offsets: offsets, CommitTimeMs: at}}}
}

func oc(topic string, p int32, offset int64) *pb.OffsetCommit {
	return &pb.OffsetCommit{Topic: topic, Partition: p, Offset: offset, LeaderEpoch: -1}
}

func deleteGroup(group string) *pb.Command {
	return &pb.Command{Cmd: &pb.Command_DeleteGroup{DeleteGroup: &pb.DeleteGroup{Group: group}}}
}

// groupsFSM has brokers 1..3 and topics a (2 partitions) and b (1).
func groupsFSM(t *testing.T) *testFSM {
	tf := newTestFSM(t)
	tf.threeBrokers()
	tf.ok(createTopic("a", []int32{1}, []int32{2}))
	tf.ok(createTopic("b", []int32{3}))
	return tf
}

func TestFSMCommitOffsets(t *testing.T) {
	t.Parallel()
	tf := groupsFSM(t)
	withMeta := oc("a", 1, 7)
	withMeta.LeaderEpoch, withMeta.Metadata = 3, "host-1"
	tf.ok(commit("g1", 1000, oc("b", 0, 2), withMeta, oc("a", 0, 0)))
	before := tf.f.Image()
	want := []CommittedOffset{
		{Topic: "a", Partition: 0, Offset: 0, LeaderEpoch: -1, CommitTimeMs: 1000},
		{Topic: "a", Partition: 1, Offset: 7, LeaderEpoch: 3, Metadata: "host-1", CommitTimeMs: 1000},
		{Topic: "b", Partition: 0, Offset: 2, LeaderEpoch: -1, CommitTimeMs: 1000},
	}
	if got := before.Offsets("g1"); !reflect.DeepEqual(got, want) {
		t.Fatalf("offsets:\n%+v\nwant\n%+v", got, want)
	}
	// A later commit replaces one partition's offset; another group and
	// the image published before are left as they were (copy-on-write).
	tf.ok(commit("g1", 2000, oc("a", 1, 9)))
	tf.ok(commit("g0", 2500, oc("a", 1, 1)))
	img := tf.f.Image()
	if o, _ := img.Offset("g1", "a", 1); o.Offset != 9 || o.CommitTimeMs != 2000 || o.LeaderEpoch != -1 || o.Metadata != "" {
		t.Fatalf("a-1 after the second commit: %+v", o)
	}
	if o, _ := img.Offset("g1", "a", 0); o.Offset != 0 || o.CommitTimeMs != 1000 {
		t.Fatalf("a-0 changed by a commit of a-1: %+v", o)
	}
	if got := before.Offsets("g1"); !reflect.DeepEqual(got, want) {
		t.Fatalf("a published image changed: %+v", got)
	}
	if g := img.Groups(); !reflect.DeepEqual(g, []string{"g0", "g1"}) {
		t.Fatalf("groups %v", g)
	}
	if _, ok := img.Offset("g0", "a", 0); ok {
		t.Fatal("g0 has an offset it never committed")
	}
	if img.Offsets("nobody") != nil {
		t.Fatal("an unknown group has offsets")
	}
	// What the controller answers: -1 for a partition never committed.
	got, err := groupOffsets(img, "g0", []TopicPartition{{"a", 1}, {"b", 0}})
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Offset != 1 || got[1].Offset != -1 || got[1].CommitTimeMs != -1 || got[1].LeaderEpoch != -1 {
		t.Fatalf("fetched %+v", got)
	}
	if _, err := groupOffsets(img, "g0", []TopicPartition{{"a", 2}}); !errors.Is(err, ErrInvalidPartition) {
		t.Fatalf("fetch of a partition that does not exist: %v", err)
	}
	if _, err := groupOffsets(img, "", nil); !errors.Is(err, ErrInvalidGroupID) {
		t.Fatalf("fetch without a group: %v", err)
	}
}

func TestFSMCommitOffsetsRejectedWhole(t *testing.T) {
	t.Parallel()
	tf := groupsFSM(t)
	tf.ok(commit("g", 1, oc("a", 0, 5)))
	long := strings.Repeat("g", MaxGroupIDLen+1)
	bigMeta := oc("a", 1, 1)
	bigMeta.Metadata = strings.Repeat("m", MaxOffsetMetadataLen+1)
	badEpoch := oc("a", 1, 1)
	badEpoch.LeaderEpoch = -2
	tooMany := make([]*pb.OffsetCommit, MaxOffsetCommitEntries+1)
	for i := range tooMany {
		tooMany[i] = oc("a", 0, int64(i))
	}
	for _, c := range []struct {
		name    string
		cmd     *pb.Command
		want    error
		mention string
	}{
		{"empty group", commit("", 1, oc("a", 0, 1)), ErrInvalidGroupID, "empty"},
		{"long group", commit(long, 1, oc("a", 0, 1)), ErrInvalidGroupID, "256 bytes"},
		{"NUL in group", commit("g\x00h", 1, oc("a", 0, 1)), ErrInvalidGroupID, "NUL"},
		{"no offsets", commit("g", 1), ErrInvalidOffsetCommit, "no offsets"},
		{"unknown topic", commit("g", 1, oc("a", 1, 1), oc("zz", 0, 1)), ErrUnknownTopic, `entry 1: topic "zz"`},
		{"partition too high", commit("g", 1, oc("a", 1, 1), oc("a", 2, 1)), ErrInvalidPartition, "no partition 2"},
		{"negative partition", commit("g", 1, oc("a", -1, 1)), ErrInvalidPartition, "no partition -1"},
		{"negative offset", commit("g", 1, oc("a", 1, 1), oc("b", 0, -1)), ErrInvalidOffsetCommit, "entry 1 (b-0): negative offset -1"},
		{"metadata too large", commit("g", 1, oc("a", 0, 9), bigMeta), ErrInvalidOffsetCommit, "metadata is 4097 bytes"},
		{"partition twice", commit("g", 1, oc("a", 0, 9), oc("a", 0, 10)), ErrInvalidOffsetCommit, "also entry 0"},
		{"leader epoch below -1", commit("g", 1, oc("a", 0, 9), badEpoch), ErrInvalidOffsetCommit, "entry 1 (a-1): leader epoch -2"},
		{"too many entries", commit("g", 1, tooMany...), ErrInvalidOffsetCommit, "10001 offsets in one commit, the limit is 10000"},
		{"new group, bad entry", commit("h", 1, oc("a", 0, 1), oc("b", 3, 1)), ErrInvalidPartition, "no partition 3"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tf.t = t
			tf.rejected(c.cmd, c.want)
			resp := tf.apply(c.cmd)
			if err, _ := resp.(error); err == nil || !strings.Contains(err.Error(), c.mention) {
				t.Fatalf("error %v does not say %q", resp, c.mention)
			}
		})
	}
	tf.t = t
	if got := allOffsets(tf.f.Image()); len(got) != 1 || len(got["g"]) != 1 || got["g"][0].Offset != 5 {
		t.Fatalf("offsets after rejected commits: %+v", got)
	}
}

// TestValidateOffsetCommitLimit: the entry limit is checked before the
// entries, and a commit of exactly the limit gets past it (to fail here on
// its repeated partition, not on its size).
func TestValidateOffsetCommitLimit(t *testing.T) {
	t.Parallel()
	tf := groupsFSM(t)
	offsets := make([]OffsetCommit, MaxOffsetCommitEntries)
	for i := range offsets {
		offsets[i] = OffsetCommit{Topic: "a", Offset: 1, LeaderEpoch: -1}
	}
	if err := ValidateOffsetCommit(tf.f.Image(), "g", offsets); !errors.Is(err, ErrInvalidOffsetCommit) || !strings.Contains(err.Error(), "also entry 0") {
		t.Fatalf("commit of %d entries: %v", len(offsets), err)
	}
	offsets = append(offsets, offsets[0])
	if err := ValidateOffsetCommit(tf.f.Image(), "g", offsets); !errors.Is(err, ErrInvalidOffsetCommit) || !strings.Contains(err.Error(), "the limit is 10000") {
		t.Fatalf("commit of %d entries: %v", len(offsets), err)
	}
	if err := ValidateOffsetCommit(tf.f.Image(), "g", []OffsetCommit{{Topic: "a", Offset: 1, LeaderEpoch: -1}}); err != nil {
		t.Fatalf("epoch -1 (unknown): %v", err)
	}
}

// TestFSMPublishedImagesUnchanged: deleting a topic or a group and
// committing again build new maps; an image published before each keeps
// the offsets it had (readers hold images without locks).
func TestFSMPublishedImagesUnchanged(t *testing.T) {
	t.Parallel()
	tf := groupsFSM(t)
	tf.ok(commit("g1", 1, oc("a", 0, 1), oc("a", 1, 2), oc("b", 0, 3)))
	tf.ok(commit("g2", 1, oc("a", 1, 4), oc("b", 0, 5)))
	var imgs []*Image
	var wants []map[string][]CommittedOffset
	snap := func() {
		img := tf.f.Image()
		imgs, wants = append(imgs, img), append(wants, allOffsets(img))
	}
	snap()
	tf.ok(&pb.Command{Cmd: &pb.Command_DeleteTopic{DeleteTopic: &pb.DeleteTopic{Name: "a"}}})
	snap()
	tf.ok(deleteGroup("g2"))
	snap()
	tf.ok(commit("g1", 2, oc("b", 0, 30)))
	snap()
	tf.ok(commit("g2", 3, oc("b", 0, 50)))
	for i, img := range imgs {
		if got := allOffsets(img); !reflect.DeepEqual(got, wants[i]) {
			t.Fatalf("image %d changed by a later command:\n%+v\nwant\n%+v", i, got, wants[i])
		}
	}
	// And each step did change what it should.
	if len(wants[0]["g1"]) != 3 || len(wants[1]["g1"]) != 1 || len(wants[1]["g2"]) != 1 || wants[2]["g2"] != nil ||
		wants[3]["g1"][0].Offset != 30 || wants[2]["g1"][0].Offset != 3 {
		t.Fatalf("offsets by step: %+v", wants)
	}
	if o, _ := tf.f.Image().Offset("g2", "b", 0); o.Offset != 50 {
		t.Fatalf("g2 committed again: %+v", o)
	}
}

func TestFSMDeleteTopicDropsItsOffsets(t *testing.T) {
	t.Parallel()
	tf := groupsFSM(t)
	tf.ok(commit("g1", 1, oc("a", 0, 1), oc("a", 1, 2), oc("b", 0, 3)))
	tf.ok(commit("g2", 1, oc("a", 1, 4)))
	tf.ok(&pb.Command{Cmd: &pb.Command_DeleteTopic{DeleteTopic: &pb.DeleteTopic{Name: "a"}}})
	img := tf.f.Image()
	if got := allOffsets(img); !reflect.DeepEqual(got, map[string][]CommittedOffset{
		"g1": {{Topic: "b", Partition: 0, Offset: 3, LeaderEpoch: -1, CommitTimeMs: 1}},
	}) {
		t.Fatalf("after deleting topic a (g2 had only a: gone): %+v", got)
	}
	// Created again, the topic starts without offsets, also after a reload.
	tf.ok(createTopic("a", []int32{1}, []int32{2}))
	if _, ok := tf.f.Image().Offset("g1", "a", 0); ok {
		t.Fatal("a recreated topic inherited a committed offset")
	}
	reopened := reopen(t, tf)
	if !reflect.DeepEqual(allOffsets(reopened.Image()), allOffsets(tf.f.Image())) {
		t.Fatalf("reloaded offsets %+v, want %+v", allOffsets(reopened.Image()), allOffsets(tf.f.Image()))
	}
}

func TestFSMDeleteGroup(t *testing.T) {
	t.Parallel()
	tf := groupsFSM(t)
	tf.ok(commit("g1", 1, oc("a", 0, 1), oc("b", 0, 3)))
	tf.ok(commit("g2", 1, oc("a", 0, 4)))
	tf.rejected(deleteGroup("nope"), ErrUnknownGroup)
	tf.rejected(deleteGroup(""), ErrInvalidGroupID)
	tf.ok(deleteGroup("g1"))
	img := tf.f.Image()
	if g := img.Groups(); !reflect.DeepEqual(g, []string{"g2"}) {
		t.Fatalf("groups after delete: %v", g)
	}
	tf.rejected(deleteGroup("g1"), ErrUnknownGroup)
	// Committing again starts the group afresh.
	tf.ok(commit("g1", 2, oc("b", 0, 9)))
	if got := tf.f.Image().Offsets("g1"); len(got) != 1 || got[0].Offset != 9 {
		t.Fatalf("g1 after delete and commit: %+v", got)
	}
	reopened := reopen(t, tf)
	if !reflect.DeepEqual(allOffsets(reopened.Image()), allOffsets(tf.f.Image())) {
		t.Fatal("reloaded offsets differ")
	}
}

// reopen closes tf's store and opens it again from disk; tf keeps
// applying to the reopened FSM.
func reopen(t *testing.T, tf *testFSM) *FSM {
	t.Helper()
	path := tf.f.path
	if err := tf.f.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := OpenFSM(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	tf.f = f
	return f
}

func TestFSMOffsetsSurviveSnapshotRestoreAndReopen(t *testing.T) {
	t.Parallel()
	tf := groupsFSM(t)
	tf.ok(commit("g1", 10, oc("a", 0, 1), oc("a", 1, 2)))
	tf.ok(commit("g2", 11, &pb.OffsetCommit{Topic: "b", Partition: 0, Offset: 3, LeaderEpoch: 2, Metadata: "m"}))
	snap, err := tf.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	want := allOffsets(tf.f.Image())
	tf.ok(commit("g3", 12, oc("a", 0, 4))) // after the snapshot
	var s sink
	if err := snap.Persist(&s); err != nil {
		t.Fatal(err)
	}
	snap.Release()

	other := newTestFSM(t)
	other.ok(register(9, "x")) // replaced by the restore
	if err := other.f.Restore(io.NopCloser(bytes.NewReader(s.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if got := allOffsets(other.f.Image()); !reflect.DeepEqual(got, want) {
		t.Fatalf("restored offsets %+v, want %+v", got, want)
	}
	// The restored FSM applies the same later command to the same image,
	// and keeps it across a reopen.
	other.index = other.f.Image().Index()
	other.ok(commit("g3", 12, oc("a", 0, 4)))
	if !reflect.DeepEqual(allOffsets(other.f.Image()), allOffsets(tf.f.Image())) {
		t.Fatal("images diverge after the same commands")
	}
	reopened := reopen(t, other)
	if !reflect.DeepEqual(allOffsets(reopened.Image()), allOffsets(tf.f.Image())) {
		t.Fatal("reopened restored image differs")
	}
}

// An image store written before committed offsets existed has no offsets
// bucket; it opens, and takes commits.
func TestFSMOpensStoreWithoutOffsetsBucket(t *testing.T) {
	t.Parallel()
	tf := newTestFSM(t)
	tf.threeBrokers()
	tf.ok(createTopic("a", []int32{1}))
	tf.f.Close()
	db, err := bolt.Open(tf.f.path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { return tx.DeleteBucket(bucketOffsets) }); err != nil {
		t.Fatal(err)
	}
	db.Close()
	reopened := reopen(t, tf)
	if len(reopened.Image().Groups()) != 0 || reopened.Image().Index() != tf.index {
		t.Fatalf("old store opened with groups %v at index %d", reopened.Image().Groups(), reopened.Image().Index())
	}
	tf.ok(commit("g", 1, oc("a", 0, 1)))
	if _, ok := tf.f.Image().Offset("g", "a", 0); !ok {
		t.Fatal("commit on an old store not applied")
	}
}

// TestFSMCommitOffsetsBatch: each commit of a batch is applied or refused
// on its own, answered in order; before metadata.version 3 the batch is
// refused whole.
func TestFSMCommitOffsetsBatch(t *testing.T) {
	t.Parallel()
	batch := &pb.Command{Cmd: &pb.Command_CommitOffsetsBatch{CommitOffsetsBatch: &pb.CommitOffsetsBatch{Commits: []*pb.CommitOffsets{
		{Group: "g1", CommitTimeMs: 1000, Offsets: []*pb.OffsetCommit{oc("a", 0, 4)}},
		{Group: "g2", CommitTimeMs: 1000, Offsets: []*pb.OffsetCommit{oc("nope", 0, 1)}},
		{Group: "", CommitTimeMs: 1000, Offsets: []*pb.OffsetCommit{oc("a", 0, 1)}},
		{Group: "g3", CommitTimeMs: 1000, Offsets: []*pb.OffsetCommit{oc("b", 0, 2), oc("a", 1, 3)}},
	}}}}

	old := groupsFSM(t)
	if err, ok := old.apply(batch).(error); !ok || !errors.Is(err, ErrUnsupportedVersion) {
		t.Fatalf("a batch at level 1: %v", err)
	}

	tf := newTestFSM(t)
	tf.threeBrokersAt(SupportedMetadataVersions())
	tf.ok(featureLevel(MetadataVersionOffsetBatches))
	tf.ok(createTopic("a", []int32{1}, []int32{2}))
	tf.ok(createTopic("b", []int32{3}))
	res, ok := tf.apply(batch).(CommitBatchResult)
	if !ok || len(res) != 4 {
		t.Fatalf("batch answered %v", res)
	}
	if res[0] != nil || !errors.Is(res[1], ErrUnknownTopic) || !errors.Is(res[2], ErrInvalidGroupID) || res[3] != nil {
		t.Fatalf("per-commit answers %v", res)
	}
	img := tf.f.Image()
	if o, _ := img.Offset("g1", "a", 0); o.Offset != 4 {
		t.Fatalf("g1 a-0: %+v", o)
	}
	if o, _ := img.Offset("g3", "a", 1); o.Offset != 3 {
		t.Fatalf("g3 a-1: %+v", o)
	}
	if g := img.Groups(); !reflect.DeepEqual(g, []string{"g1", "g3"}) {
		t.Fatalf("groups %v (a refused commit left none)", g)
	}
}

// TestFSMDeleteGroupCommittedBefore: a DeleteGroup carrying
// committed_before_ms (offsets retention's) deletes nothing while one of
// the group's offsets was committed after it, and needs metadata.version
// 5 on every node.
func TestFSMDeleteGroupCommittedBefore(t *testing.T) {
	t.Parallel()
	tf := newTestFSM(t)
	tf.threeBrokersAt(SupportedMetadataVersions())
	tf.ok(createTopic("a", []int32{1}, []int32{2}))
	tf.ok(createTopic("b", []int32{3}))
	tf.ok(commit("g", 1000, oc("a", 0, 1), oc("b", 0, 3)))
	tf.ok(commit("g", 2000, oc("a", 1, 5)))
	guarded := func(before int64) *pb.Command {
		cmd := deleteGroup("g")
		cmd.GetDeleteGroup().CommittedBeforeMs = before
		return cmd
	}
	if commandLevel(guarded(1)) != MetadataVersionGuardedGroupDelete || commandLevel(deleteGroup("g")) != MetadataVersionBaseline {
		t.Fatalf("levels: guarded %d, plain %d", commandLevel(guarded(1)), commandLevel(deleteGroup("g")))
	}
	tf.rejected(guarded(2000), ErrUnsupportedVersion)
	tf.ok(featureLevel(MetadataVersionGuardedGroupDelete))
	want := allOffsets(tf.f.Image())
	// a-1 was committed at 2000, after 1999.
	tf.rejected(guarded(1999), ErrCommittedSince)
	if got := allOffsets(tf.f.Image()); !reflect.DeepEqual(got, want) {
		t.Fatalf("offsets after a refused delete: %+v, want %+v", got, want)
	}
	tf.ok(guarded(2000))
	if g := tf.f.Image().Groups(); len(g) != 0 {
		t.Fatalf("groups after the delete: %v", g)
	}
	tf.rejected(guarded(2000), ErrUnknownGroup)
}
