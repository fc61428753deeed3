package metadata

import (
	"errors"
	"path/filepath"
	"reflect"
	"testing"

	pb "github.com/quirelog/quire/api/metapb"
	"github.com/quirelog/quire/auth"
)

func upsertUser(t *testing.T, name, password string) *pb.Command {
	t.Helper()
	c, err := auth.NewCredential(password, auth.MinIterations)
	if err != nil {
		t.Fatal(err)
	}
	return &pb.Command{Cmd: &pb.Command_UpsertUserCredential{UpsertUserCredential: &pb.UpsertUserCredential{Credential: CredentialRecord(name, c)}}}
}

func aclCmd(acls ...*pb.AclRecord) *pb.Command {
	return &pb.Command{Cmd: &pb.Command_CreateAcls{CreateAcls: &pb.CreateAcls{Acls: acls}}}
}

func TestFSMSecurityUsersAndACLs(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "metadata.db")
	f, err := OpenFSM(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	tf := &testFSM{t: t, f: f}
	// Refused below metadata.version 3.
	tf.rejected(upsertUser(t, "alice", "pw"), ErrUnsupportedVersion)
	tf.ok(featureLevel(MetadataVersionSecurity))

	tf.ok(upsertUser(t, "alice", "pw-a"))
	tf.ok(upsertUser(t, "bob", "pw-b"))
	img := f.Image()
	if got := img.Users(); !reflect.DeepEqual(got, []string{"alice", "bob"}) {
		t.Fatalf("users %v", got)
	}
	c, ok := img.UserCredential("alice")
	if !ok || !c.Verify("pw-a") || c.Verify("pw-b") {
		t.Fatal("alice's stored credential does not verify her password alone")
	}
	// A new password replaces the old one.
	tf.ok(upsertUser(t, "alice", "pw-a2"))
	if c, _ := f.Image().UserCredential("alice"); c.Verify("pw-a") || !c.Verify("pw-a2") {
		t.Fatal("the password was not replaced")
	}
	tf.ok(&pb.Command{Cmd: &pb.Command_DeleteUserCredential{DeleteUserCredential: &pb.DeleteUserCredential{User: "bob"}}})
	if _, ok := f.Image().UserCredential("bob"); ok {
		t.Fatal("bob still has a credential")
	}
	tf.rejected(&pb.Command{Cmd: &pb.Command_DeleteUserCredential{DeleteUserCredential: &pb.DeleteUserCredential{User: "bob"}}}, ErrUnknownUser)
	bad := upsertUser(t, "", "x")
	tf.rejected(bad, ErrInvalidUser)
	short := upsertUser(t, "carol", "x")
	short.GetUpsertUserCredential().Credential.StoredKey = []byte{1}
	tf.rejected(short, ErrInvalidUser)

	read := &pb.AclRecord{Principal: "User:alice", Permission: "allow", Operation: "read", ResourceType: "topic", ResourceName: "orders"}
	write := &pb.AclRecord{Principal: "User:alice", Permission: "Allow", Operation: "Write", ResourceType: "Topic", ResourceName: "orders"}
	tf.ok(aclCmd(read, write, read)) // the duplicate is kept once
	if n := len(f.Image().ACLs()); n != 2 {
		t.Fatalf("%d ACLs, want 2", n)
	}
	if a := f.Image().ACLs()[0]; a.Permission != auth.Allow || a.Operation != auth.OpRead || a.PatternType != auth.Literal {
		t.Fatalf("stored ACL not normalized: %+v", a)
	}
	tf.rejected(aclCmd(&pb.AclRecord{Principal: "alice", Permission: "Allow", Operation: "Read", ResourceType: "Topic", ResourceName: "x"}), ErrInvalidACL)
	tf.rejected(aclCmd(), ErrInvalidACL)

	want := f.Image()
	f.Close()
	f2, err := OpenFSM(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer f2.Close()
	if !reflect.DeepEqual(f2.Image().Users(), want.Users()) || !reflect.DeepEqual(f2.Image().ACLs(), want.ACLs()) {
		t.Fatal("users or ACLs differ after reopening the store")
	}
	tf.f = f2
	resp := tf.ok(&pb.Command{Cmd: &pb.Command_DeleteAcls{DeleteAcls: &pb.DeleteAcls{Filters: []*pb.AclRecord{{Operation: "Write"}}}}})
	if deleted := resp.([]auth.ACL); len(deleted) != 1 || deleted[0].Operation != auth.OpWrite {
		t.Fatalf("deleted %v", deleted)
	}
	if acls := f2.Image().ACLs(); len(acls) != 1 || acls[0].Operation != auth.OpRead {
		t.Fatalf("left %v", acls)
	}
	if !errors.Is(ValidateUserName("a\x00b"), ErrInvalidUser) {
		t.Fatal("a NUL in a user name accepted")
	}
}

// TestFSMSecurityIdempotentWriteNeedsItsLevel: an ACL of the operation
// IdempotentWrite is stored only from metadata.version 7 (a node below
// would refuse it where the others store it); below, the command is
// refused and nothing stored, and other ACLs are stored as before.
func TestFSMSecurityIdempotentWriteNeedsItsLevel(t *testing.T) {
	f, err := OpenFSM(filepath.Join(t.TempDir(), "metadata.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	tf := &testFSM{t: t, f: f}
	tf.ok(featureLevel(MetadataVersionStaticMembers))
	idem := aclCmd(&pb.AclRecord{Principal: "User:p", Permission: "Allow", Operation: "idempotentWRITE", ResourceType: "Cluster", PatternType: "Literal"})
	if got := commandLevel(idem); got != MetadataVersionIdempotentWrite {
		t.Fatalf("CreateAcls with IdempotentWrite needs level %d, want %d", got, MetadataVersionIdempotentWrite)
	}
	tf.rejected(idem, ErrUnsupportedVersion)
	if acls := f.Image().ACLs(); len(acls) != 0 {
		t.Fatalf("a refused CreateAcls stored %v", acls)
	}
	tf.ok(aclCmd(&pb.AclRecord{Principal: "User:p", Permission: "Allow", Operation: "Write", ResourceType: "Topic", ResourceName: "t", PatternType: "Literal"}))
	tf.ok(featureLevel(MetadataVersionIdempotentWrite))
	tf.ok(idem)
	for name, img := range map[string]*Image{"image": f.Image(), "store": tf.storedImage()} {
		var ops []auth.Operation
		for _, a := range img.ACLs() {
			ops = append(ops, a.Operation)
		}
		if !reflect.DeepEqual(ops, []auth.Operation{auth.OpWrite, auth.OpIdempotentWrite}) && !reflect.DeepEqual(ops, []auth.Operation{auth.OpIdempotentWrite, auth.OpWrite}) {
			t.Fatalf("%s: ACL operations %v", name, ops)
		}
	}
}
