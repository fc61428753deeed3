package metadata

import (
	"reflect"
	"testing"
)

// TestFSMDeleteOffsets: DeleteOffsets removes the named partitions'
// offsets and no other (of the group or of another group), skips a
// partition the group has none of, drops the group with its last offset,
// is refused below its metadata.version, and what it leaves survives a
// reopen.
func TestFSMDeleteOffsets(t *testing.T) {
	t.Parallel()
	tf := newTestFSM(t)
	tf.threeBrokersAt(SupportedMetadataVersions())
	tf.ok(createTopic("a", []int32{1}, []int32{2}))
	tf.ok(createTopic("b", []int32{3}))
	tf.ok(commit("g1", 1, oc("a", 0, 1), oc("a", 1, 2), oc("b", 0, 3)))
	tf.ok(commit("g2", 1, oc("a", 0, 4)))
	del := DeleteOffsetsCommand("g1", []TopicPartition{{"a", 0}, {"b", 0}})
	tf.rejected(del, ErrUnsupportedVersion)
	tf.ok(featureLevel(MetadataVersionDeleteOffsets))
	tf.ok(del)
	img := tf.f.Image()
	if got := img.Offsets("g1"); len(got) != 1 || got[0].Topic != "a" || got[0].Partition != 1 || got[0].Offset != 2 {
		t.Fatalf("g1 after deleting a-0 and b-0: %+v, want a-1 only", got)
	}
	if got := img.Offsets("g2"); len(got) != 1 || got[0].Offset != 4 {
		t.Fatalf("g2 changed: %+v", got)
	}
	// Again: nothing left of those partitions, and a group with no offsets
	// at all, apply as no-ops.
	tf.ok(del)
	tf.ok(DeleteOffsetsCommand("nope", []TopicPartition{{"a", 0}}))
	tf.rejected(DeleteOffsetsCommand("", []TopicPartition{{"a", 0}}), ErrInvalidGroupID)
	if !reflect.DeepEqual(allOffsets(tf.f.Image()), allOffsets(img)) {
		t.Fatal("a deletion of nothing changed the offsets")
	}
	tf.ok(DeleteOffsetsCommand("g1", []TopicPartition{{"a", 1}}))
	if g := tf.f.Image().Groups(); !reflect.DeepEqual(g, []string{"g2"}) {
		t.Fatalf("groups after deleting g1's last offset: %v", g)
	}
	reopened := reopen(t, tf)
	if !reflect.DeepEqual(allOffsets(reopened.Image()), allOffsets(tf.f.Image())) {
		t.Fatal("reloaded offsets differ")
	}
}
