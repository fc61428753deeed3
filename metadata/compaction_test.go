package metadata

import (
	"testing"

	pb "github.com/quirelog/quire/api/metapb"
)

// TestFSMCompactionNeedsItsLevel: a topic created or altered with a
// cleanup.policy that includes compact is refused below
// MetadataVersionCompaction (an older node would apply retention to it and
// refuse its leader's gaps), other configs are not, and from that level
// both go in.
func TestFSMCompactionNeedsItsLevel(t *testing.T) {
	t.Parallel()
	tf := newTestFSM(t)
	tf.threeBrokersAt(SupportedMetadataVersions())
	tf.ok(featureLevel(MetadataVersionDeleteOffsets))
	create := createTopic("kv", []int32{1})
	create.GetCreateTopic().Configs = map[string]string{"cleanup.policy": "compact"}
	alter := func(policy string) *pb.Command {
		return &pb.Command{Cmd: &pb.Command_AlterConfigs{AlterConfigs: &pb.AlterConfigs{
			Topic: "plain", Set: map[string]string{"cleanup.policy": policy}}}}
	}
	tf.ok(createTopic("plain", []int32{1}))
	tf.rejected(create, ErrUnsupportedVersion)
	tf.rejected(alter("delete,COMPACT"), ErrUnsupportedVersion)
	tf.ok(alter("delete"))
	tf.ok(featureLevel(MetadataVersionCompaction))
	tf.ok(create)
	tf.ok(alter("compact,delete"))
	if ti, _ := tf.f.Image().Topic("plain"); ti.Configs["cleanup.policy"] != "compact,delete" {
		t.Fatalf("plain's configs %v", ti.Configs)
	}
}
