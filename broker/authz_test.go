package broker

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

// TestAuthzEveryPublicCallIsListed fails when a quire.v1 RPC has no row
// in requestNeeds: it would need Alter on the cluster (safe, but surely
// not what was meant), so whoever adds an RPC decides what it needs.
func TestAuthzEveryPublicCallIsListed(t *testing.T) {
	t.Parallel()
	_ = quirev1.File_quire_v1_security_proto // the package's files are registered
	b := &Broker{}
	n := 0
	protoregistry.GlobalFiles.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		if fd.Package() != "quire.v1" {
			return true
		}
		for i := 0; i < fd.Services().Len(); i++ {
			svc := fd.Services().Get(i)
			for j := 0; j < svc.Methods().Len(); j++ {
				m := svc.Methods().Get(j)
				mt, err := protoregistry.GlobalTypes.FindMessageByName(m.Input().FullName())
				if err != nil {
					t.Fatalf("%s: %v", m.FullName(), err)
				}
				n++
				if _, known := b.requestNeeds(mt.New().Interface()); !known {
					t.Errorf("%s/%s (%s) has no row in requestNeeds (broker/authz.go)", svc.FullName(), m.Name(), m.Input().FullName())
				}
			}
		}
		return true
	})
	if n < 30 {
		t.Fatalf("found only %d public RPCs: is the registry walk right?", n)
	}
	// ProduceStream receives into the services' pooled message, which
	// service.ProduceRequestOf opens (service/codec_test.go).
}

func TestAuthzRefusalNamesPrincipalOperationAndResource(t *testing.T) {
	t.Parallel()
	b := &Broker{}
	needs, _ := b.requestNeeds(&quirev1.DeleteGroupRequest{Group: "g1"})
	if len(needs) != 1 {
		t.Fatalf("needs %v", needs)
	}
	err := refusal(requestOf("User:x", needs[0]))
	for _, want := range []string{"group authorization failed", "User:x", "Delete", `group "g1"`} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("%q does not say %q", err, want)
		}
	}
}
