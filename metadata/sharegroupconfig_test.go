package metadata

import (
	"errors"
	"reflect"
	"testing"

	pb "github.com/quirelog/quire/api/metapb"
)

func putShareGroupConfig(group string, kv map[string]string) *pb.Command {
	return &pb.Command{Cmd: &pb.Command_PutShareGroupConfig{PutShareGroupConfig: &pb.PutShareGroupConfig{Group: group, Configs: kv}}}
}

func deleteShareGroup(group string) *pb.Command {
	return &pb.Command{Cmd: &pb.Command_DeleteShareGroup{DeleteShareGroup: &pb.DeleteShareGroup{Group: group}}}
}

// TestFSMShareGroupConfig: a share group's settings are stored from
// metadata.version 16, each change with a new generation; a
// share-partition state is stored only under the generation it names
// (with its pending dead letters); a delete removes the group's states
// and settings and fences states written before it; all of it survives a
// reopen.
func TestFSMShareGroupConfig(t *testing.T) {
	t.Parallel()
	tf := newTestFSM(t)
	tf.threeBrokersAt(SupportedMetadataVersions())
	tf.ok(createTopic("t", []int32{1, 2, 3}, []int32{2, 3, 1}))
	tf.ok(featureLevel(MetadataVersionShareState))
	kv := map[string]string{"share.key.ordering": "true", "errors.deadletterqueue.topic.name": "dlq"}
	tf.rejected(putShareGroupConfig("g", kv), ErrUnsupportedVersion)
	tf.rejected(deleteShareGroup("g"), ErrUnsupportedVersion)
	tf.ok(featureLevel(MetadataVersionShareGroupConfig))

	tf.rejected(putShareGroupConfig("", kv), ErrInvalidGroupID)
	tf.rejected(putShareGroupConfig("g", map[string]string{"": "x"}), ErrInvalidShareGroupConfig)
	tf.ok(putShareGroupConfig("g", kv))
	c, ok := tf.f.Image().ShareGroupConfig("g")
	if !ok || !reflect.DeepEqual(c.Configs, kv) || c.Generation == 0 || c.Deleted != 0 {
		t.Fatalf("stored %+v %v", c, ok)
	}
	gen := c.Generation

	// A state names the generation its writer saw.
	s := shareState("g", 0, 0, 10, ShareRun{Length: 1, State: runArchived, DeliveryCount: 2})
	s.DeadLetters = []ShareDeadLetter{{Offset: 10, DeliveryCount: 2, Reason: 1, ArchivedMs: 1234}}
	res := tf.ok(putShareStates(1, s)).(ShareStateResults)
	if !errors.Is(res[0], ErrShareStateFenced) {
		t.Fatalf("a state under generation 0 of a group at %d: %v", gen, res[0])
	}
	s.GroupGeneration = gen
	if res := tf.ok(putShareStates(1, s)).(ShareStateResults); res[0] != nil {
		t.Fatalf("a state under the group's generation: %v", res[0])
	}
	if got, _ := tf.f.Image().ShareState(s.ShareKey); !reflect.DeepEqual(got, s) {
		t.Fatalf("stored %+v, want %+v", got, s)
	}
	if g := tf.f.Image().ShareGroups(); !reflect.DeepEqual(g, []string{"g"}) {
		t.Fatalf("share groups %v", g)
	}

	// A change of settings makes a new generation: older states refused.
	tf.ok(putShareGroupConfig("g", map[string]string{"share.key.ordering": "false"}))
	c2, _ := tf.f.Image().ShareGroupConfig("g")
	if c2.Generation <= gen {
		t.Fatalf("generation %d after %d", c2.Generation, gen)
	}
	if res := tf.ok(putShareStates(1, s)).(ShareStateResults); !errors.Is(res[0], ErrShareStateFenced) {
		t.Fatalf("a state under the old generation: %v", res[0])
	}
	if f := reopen(t, tf); !reflect.DeepEqual(f.Image().shareGroupConfigs, tf.f.Image().shareGroupConfigs) ||
		!reflect.DeepEqual(f.Image().shareStates, tf.f.Image().shareStates) {
		t.Fatalf("reopened %+v %+v", f.Image().shareGroupConfigs, f.Image().shareStates)
	}

	// Delete: states and settings go; a state written before it is refused.
	other := shareState("h", 0, 0, 3)
	if res := tf.ok(putShareStates(1, other)).(ShareStateResults); res[0] != nil {
		t.Fatal(res[0])
	}
	if n := tf.ok(deleteShareGroup("g")).(ShareGroupDeleted).States; n != 1 {
		t.Fatalf("deleted %d states, want 1", n)
	}
	c3, ok := tf.f.Image().ShareGroupConfig("g")
	if !ok || c3.Configs != nil || c3.Deleted == 0 || c3.Deleted != c3.Generation || c3.Generation <= c2.Generation {
		t.Fatalf("after the delete: %+v", c3)
	}
	if _, ok := tf.f.Image().ShareState(s.ShareKey); ok {
		t.Fatal("the group's state survived its delete")
	}
	if _, ok := tf.f.Image().ShareState(other.ShareKey); !ok {
		t.Fatal("another group's state went with the delete")
	}
	s.GroupGeneration = c2.Generation
	if res := tf.ok(putShareStates(1, s)).(ShareStateResults); !errors.Is(res[0], ErrShareStateFenced) {
		t.Fatalf("a state written before the delete: %v", res[0])
	}
	if g := tf.f.Image().ShareGroups(); !reflect.DeepEqual(g, []string{"h"}) {
		t.Fatalf("share groups after the delete %v", g)
	}
	if stored := tf.storedImage(); !reflect.DeepEqual(stored.shareGroupConfigs, tf.f.Image().shareGroupConfigs) ||
		!reflect.DeepEqual(stored.shareStates, tf.f.Image().shareStates) {
		t.Fatalf("store %+v %+v", stored.shareGroupConfigs, stored.shareStates)
	}
}

// TestFSMDeleteShareGroupTopics: a delete naming topics removes the
// group's states on them only, keeps its settings, and still marks the
// group deleted, naming the topics (every node drops what it holds of
// the group on them).
func TestFSMDeleteShareGroupTopics(t *testing.T) {
	t.Parallel()
	tf := newTestFSM(t)
	tf.threeBrokersAt(SupportedMetadataVersions())
	tf.ok(createTopic("t", []int32{1, 2, 3}, []int32{2, 3, 1}))
	tf.ok(featureLevel(MetadataVersionShareGroupConfig))
	kv := map[string]string{"share.key.ordering": "true"}
	tf.ok(putShareGroupConfig("g", kv))
	c, _ := tf.f.Image().ShareGroupConfig("g")
	s0, s1 := shareState("g", 0, 0, 1), shareState("g", 1, 0, 2)
	s0.GroupGeneration, s1.GroupGeneration = c.Generation, c.Generation
	if res := tf.ok(putShareStates(1, s0)).(ShareStateResults); res[0] != nil {
		t.Fatal(res[0])
	}
	if res := tf.ok(putShareStates(2, s1)).(ShareStateResults); res[0] != nil {
		t.Fatal(res[0])
	}
	del := deleteShareGroup("g")
	del.GetDeleteShareGroup().Topics = []string{"other"}
	if n := tf.ok(del).(ShareGroupDeleted).States; n != 0 {
		t.Fatalf("deleted %d states of another topic", n)
	}
	del.GetDeleteShareGroup().Topics = []string{"t"}
	if n := tf.ok(del).(ShareGroupDeleted).States; n != 2 {
		t.Fatalf("deleted %d states, want 2", n)
	}
	c2, _ := tf.f.Image().ShareGroupConfig("g")
	if !reflect.DeepEqual(c2.Configs, kv) || c2.Deleted != c2.Generation || c2.Generation <= c.Generation || !reflect.DeepEqual(c2.DeletedTopics, []string{"t"}) {
		t.Fatalf("after deleting the topic's states: %+v", c2)
	}
	if n := tf.f.Image().ShareGroupStates("g"); n != 0 {
		t.Fatalf("%d states left", n)
	}
}

// TestFSMShareGroupConfigMerges: a change applies to the settings the
// entry finds, so that two changes of different keys, each decided on an
// image without the other, both hold; a deleted key goes; a change that
// changes nothing keeps the generation.
func TestFSMShareGroupConfigMerges(t *testing.T) {
	t.Parallel()
	tf := newTestFSM(t)
	tf.threeBrokersAt(SupportedMetadataVersions())
	tf.ok(featureLevel(MetadataVersionShareGroupConfig))
	tf.ok(putShareGroupConfig("g", map[string]string{"share.key.ordering": "true"}))
	gen := tf.ok(putShareGroupConfig("g", map[string]string{"share.delivery.count.limit": "3"})).(uint64)
	c, _ := tf.f.Image().ShareGroupConfig("g")
	want := map[string]string{"share.key.ordering": "true", "share.delivery.count.limit": "3"}
	if !reflect.DeepEqual(c.Configs, want) || c.Generation != gen {
		t.Fatalf("after two changes: %+v (answered generation %d), want %v", c, gen, want)
	}
	if g := tf.ok(putShareGroupConfig("g", map[string]string{"share.key.ordering": "true"})).(uint64); g != gen {
		t.Fatalf("a change that changes nothing answered generation %d, want %d", g, gen)
	}
	if c2, _ := tf.f.Image().ShareGroupConfig("g"); c2.Generation != gen {
		t.Fatalf("a change that changes nothing made generation %d, want %d", c2.Generation, gen)
	}
	del := putShareGroupConfig("g", nil)
	del.GetPutShareGroupConfig().Delete = []string{"share.key.ordering", "share.delivery.count.limit"}
	tf.ok(del)
	if c3, _ := tf.f.Image().ShareGroupConfig("g"); c3.Configs != nil || c3.Generation <= gen {
		t.Fatalf("after deleting both keys: %+v", c3)
	}
	if stored := tf.storedImage(); !reflect.DeepEqual(stored.shareGroupConfigs, tf.f.Image().shareGroupConfigs) {
		t.Fatalf("store %+v, image %+v", stored.shareGroupConfigs, tf.f.Image().shareGroupConfigs)
	}
}

// TestFSMShareStateFieldsNeedLevel16: a share-partition state carrying
// pending dead letters or a group generation needs metadata.version 16
// (a node of 15 would drop them from its image); one without them is
// stored at 15.
func TestFSMShareStateFieldsNeedLevel16(t *testing.T) {
	t.Parallel()
	tf := newTestFSM(t)
	tf.threeBrokersAt(SupportedMetadataVersions())
	tf.ok(createTopic("t", []int32{1, 2, 3}, []int32{2, 3, 1}))
	tf.ok(featureLevel(MetadataVersionShareState))
	s := shareState("g", 0, 0, 10, ShareRun{Length: 1, State: runArchived, DeliveryCount: 2})
	s.DeadLetters = []ShareDeadLetter{{Offset: 10, DeliveryCount: 2, Reason: 1, ArchivedMs: 1234}}
	tf.rejected(putShareStates(1, s), ErrUnsupportedVersion)
	gen := shareState("g", 1, 0, 10)
	gen.GroupGeneration = 7
	tf.rejected(putShareStates(2, gen), ErrUnsupportedVersion)
	plain := s
	plain.DeadLetters = nil
	if res := tf.ok(putShareStates(1, plain)).(ShareStateResults); res[0] != nil {
		t.Fatal(res[0])
	}
	tf.ok(featureLevel(MetadataVersionShareGroupConfig))
	if res := tf.ok(putShareStates(1, s)).(ShareStateResults); res[0] != nil {
		t.Fatal(res[0])
	}
}

// TestFSMAlterShareGroupOffsets: from metadata.version 17, setting start
// offsets replaces the named share-partitions' states with new ones
// starting there, under their leadership in the image and the entry's
// generation (so that the leader can go on writing them), keeps the
// group's other states and settings, and marks the topics deleted (every
// node drops what it holds of the group there); an unknown partition or
// a negative offset refuses the whole entry. It survives a reopen.
func TestFSMAlterShareGroupOffsets(t *testing.T) {
	t.Parallel()
	tf := newTestFSM(t)
	tf.threeBrokersAt(SupportedMetadataVersions())
	tf.ok(createTopic("t", []int32{1, 2, 3}, []int32{2, 3, 1}))
	tf.ok(createTopic("u", []int32{3, 1, 2}))
	tf.ok(featureLevel(MetadataVersionShareGroupConfig))
	set := []ShareStartOffset{{Topic: "t", Partition: 1, StartOffset: 7}}
	tf.rejected(AlterShareGroupOffsetsCommand("g", set), ErrUnsupportedVersion)
	tf.ok(featureLevel(MetadataVersionShareOffsets))

	tf.ok(putShareGroupConfig("g", map[string]string{"share.key.ordering": "true"}))
	c, _ := tf.f.Image().ShareGroupConfig("g")
	kept := shareState("g", 0, 0, 4, ShareRun{Length: 2, State: runAcquired, DeliveryCount: 1})
	kept.GroupGeneration = c.Generation
	old := shareState("g", 1, 0, 20, ShareRun{Length: 1, State: runArchived, DeliveryCount: 5})
	old.GroupGeneration = c.Generation
	old.DeadLetters = []ShareDeadLetter{{Offset: 20, DeliveryCount: 5, Reason: 2, ArchivedMs: 99}}
	if res := tf.ok(putShareStates(1, kept)).(ShareStateResults); res[0] != nil {
		t.Fatal(res[0])
	}
	if res := tf.ok(putShareStates(2, old)).(ShareStateResults); res[0] != nil {
		t.Fatal(res[0])
	}

	tf.rejected(AlterShareGroupOffsetsCommand("g", []ShareStartOffset{{Topic: "t", Partition: 2, StartOffset: 1}}), ErrUnknownTopic)
	tf.rejected(AlterShareGroupOffsetsCommand("g", []ShareStartOffset{{Topic: "nope", Partition: 0, StartOffset: 1}}), ErrUnknownTopic)
	tf.rejected(AlterShareGroupOffsetsCommand("g", append(set, ShareStartOffset{Topic: "u", Partition: 0, StartOffset: -1})), ErrInvalidPartition)
	tf.rejected(AlterShareGroupOffsetsCommand("g", nil), ErrInvalidShareGroupConfig)
	tf.rejected(AlterShareGroupOffsetsCommand("", set), ErrInvalidGroupID)

	gen := tf.ok(AlterShareGroupOffsetsCommand("g", append(set, ShareStartOffset{Topic: "u", Partition: 0, StartOffset: 0}))).(uint64)
	c2, _ := tf.f.Image().ShareGroupConfig("g")
	if gen <= c.Generation || c2.Generation != gen || c2.Deleted != gen || !reflect.DeepEqual(c2.DeletedTopics, []string{"t", "u"}) ||
		!reflect.DeepEqual(c2.Configs, c.Configs) {
		t.Fatalf("after the alter, generation %d: %+v (before %+v)", gen, c2, c)
	}
	got, _ := tf.f.Image().ShareState(old.ShareKey)
	want := ShareState{ShareKey: old.ShareKey, TopicID: "id-t", LeaderEpoch: 0, Start: 7, GroupGeneration: gen}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("altered state %+v, want %+v", got, want)
	}
	if got, _ := tf.f.Image().ShareState(ShareKey{Group: "g", Topic: "u"}); got.Start != 0 || got.TopicID != "id-u" || got.GroupGeneration != gen {
		t.Fatalf("state on u %+v", got)
	}
	if got, _ := tf.f.Image().ShareState(kept.ShareKey); !reflect.DeepEqual(got, kept) {
		t.Fatalf("a partition not named: %+v, want %+v", got, kept)
	}
	// The leader goes on from the new state under the new generation.
	next := want
	next.Start, next.Runs = 8, []ShareRun{{Length: 1, State: runAcquired, DeliveryCount: 1}}
	if res := tf.ok(putShareStates(2, next)).(ShareStateResults); res[0] != nil {
		t.Fatalf("the leader's state after the alter: %v", res[0])
	}
	if res := tf.ok(putShareStates(1, kept)).(ShareStateResults); !errors.Is(res[0], ErrShareStateFenced) {
		t.Fatalf("a state written before the alter: %v", res[0])
	}
	if f := reopen(t, tf); !reflect.DeepEqual(f.Image().shareGroupConfigs, tf.f.Image().shareGroupConfigs) ||
		!reflect.DeepEqual(f.Image().shareStates, tf.f.Image().shareStates) {
		t.Fatalf("reopened %+v %+v", f.Image().shareGroupConfigs, f.Image().shareStates)
	}
}
