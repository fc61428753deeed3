package metadata

import (
	"testing"

	pb "github.com/quirelog/quire/api/metapb"
)

// TestFSMDeleteTopicIncarnation: a DeleteTopic naming a topic id deletes
// only the incarnation with that id: once the topic was deleted and
// created again (another id) it is refused as unknown and the new one
// stays; it is refused below its metadata.version, where the controller
// checks the id itself.
func TestFSMDeleteTopicIncarnation(t *testing.T) {
	t.Parallel()
	tf := newTestFSM(t)
	tf.threeBrokersAt(SupportedMetadataVersions())
	tf.ok(createTopic("t", []int32{1}))
	del := func(id string) *pb.Command {
		return &pb.Command{Cmd: &pb.Command_DeleteTopic{DeleteTopic: &pb.DeleteTopic{Name: "t", TopicId: id}}}
	}
	tf.rejected(del("id-t"), ErrUnsupportedVersion)
	tf.ok(featureLevel(MetadataVersionIncarnations))
	tf.ok(del("id-t"))
	if _, ok := tf.f.Image().Topic("t"); ok {
		t.Fatal("t still there after deleting it by its id")
	}
	again := createTopic("t", []int32{2})
	again.GetCreateTopic().TopicId = "id-t-again"
	tf.ok(again)
	tf.rejected(del("id-t"), ErrUnknownTopic)
	if got, ok := tf.f.Image().Topic("t"); !ok || got.ID != "id-t-again" {
		t.Fatalf("the new incarnation after a delete by the old id: %+v %v", got, ok)
	}
	tf.ok(del("id-t-again"))
	if _, ok := tf.f.Image().Topic("t"); ok {
		t.Fatal("t still there after deleting it by its new id")
	}
}
