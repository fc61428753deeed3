package metadata

import (
	"reflect"
	"testing"

	pb "github.com/quirelog/quire/api/metapb"
	"github.com/quirelog/quire/auth"
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

// TestFSMScramMechanisms: an UpsertUserCredential naming mechanisms sets
// only theirs (each with its own salt and iterations) and keeps the
// user's others; a DeleteUserCredential naming one removes only it, and
// the user with its last; both are refused below their metadata.version,
// and what they leave survives a reopen.
func TestFSMScramMechanisms(t *testing.T) {
	t.Parallel()
	tf := newTestFSM(t)
	tf.ok(featureLevel(MetadataVersionSecurity))
	tf.ok(upsertUser(t, "alice", "pw"))
	salt := []byte("sha-512's salt!!")
	c512, err := auth.DeriveCredential("pw-512", salt, 8192)
	if err != nil {
		t.Fatal(err)
	}
	only512 := auth.Credential{Salt512: salt, Iterations512: 8192, StoredKey512: c512.StoredKey512, ServerKey512: c512.ServerKey512}
	up := &pb.Command{Cmd: &pb.Command_UpsertUserCredential{UpsertUserCredential: &pb.UpsertUserCredential{
		Credential: CredentialRecord("alice", only512), Mechanisms: []string{auth.MechanismSHA512}}}}
	del := func(mech string) *pb.Command {
		return &pb.Command{Cmd: &pb.Command_DeleteUserCredential{DeleteUserCredential: &pb.DeleteUserCredential{User: "alice", Mechanism: mech}}}
	}
	tf.rejected(up, ErrUnsupportedVersion)
	tf.rejected(del(auth.MechanismSHA256), ErrUnsupportedVersion)
	tf.ok(featureLevel(MetadataVersionIncarnations))
	tf.ok(up)
	c, _ := tf.f.Image().UserCredential("alice")
	if !c.Verify("pw") || string(c.StoredKey512) != string(c512.StoredKey512) {
		t.Fatal("a SCRAM-SHA-512 upsert did not keep SCRAM-SHA-256 or set SCRAM-SHA-512")
	}
	if s, it := c.SaltIterations512(); string(s) != string(salt) || it != 8192 || c.Iterations != auth.MinIterations {
		t.Fatalf("SCRAM-SHA-512 salt %q iterations %d, SCRAM-SHA-256 iterations %d", s, it, c.Iterations)
	}
	tf.rejected(&pb.Command{Cmd: &pb.Command_UpsertUserCredential{UpsertUserCredential: &pb.UpsertUserCredential{
		Credential: CredentialRecord("alice", only512), Mechanisms: []string{"SCRAM-SHA-1"}}}}, ErrInvalidUser)
	tf.ok(del(auth.MechanismSHA256))
	c, ok := tf.f.Image().UserCredential("alice")
	if !ok || c.Has256() || !c.Verify("pw-512") {
		t.Fatal("after deleting SCRAM-SHA-256 alice does not have SCRAM-SHA-512 alone")
	}
	if r := reopen(t, tf); !reflect.DeepEqual(r.Image().users, tf.f.Image().users) {
		t.Fatal("reloaded users differ")
	}
	tf.rejected(del(auth.MechanismSHA256), ErrUnknownUser)
	tf.ok(del(auth.MechanismSHA512))
	if _, ok := tf.f.Image().UserCredential("alice"); ok {
		t.Fatal("alice is still there without credentials")
	}
}
