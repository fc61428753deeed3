package metadata

import (
	"reflect"
	"testing"

	pb "github.com/quirelog/quire/api/metapb"
)

func registerWith(id int32, inc string, eps ...*pb.Endpoint) *pb.Command {
	cmd := register(id, inc)
	cmd.GetRegisterBroker().Endpoints = eps
	return cmd
}

// TestFSMBrokerEndpoints: a registration's listener endpoints reach the
// image and the store; AddrFor picks a listener's address and falls back to
// Addr; the next registration replaces them; an endpoint without a name or
// an address is refused.
func TestFSMBrokerEndpoints(t *testing.T) {
	t.Parallel()
	tf := newTestFSM(t)
	tf.ok(registerWith(1, "a", &pb.Endpoint{Listener: "INTERNAL", Addr: "127.0.0.1:1"}, &pb.Endpoint{Listener: "EXTERNAL", Addr: "10.0.0.1:2"}))
	want := []Endpoint{{"INTERNAL", "127.0.0.1:1"}, {"EXTERNAL", "10.0.0.1:2"}}
	b, _ := tf.f.Image().Broker(1)
	if !reflect.DeepEqual(b.Endpoints, want) {
		t.Fatalf("endpoints %+v, want %+v", b.Endpoints, want)
	}
	if b.AddrFor("EXTERNAL") != "10.0.0.1:2" || b.AddrFor("INTERNAL") != "127.0.0.1:1" || b.AddrFor("OTHER") != b.Addr {
		t.Fatalf("AddrFor: %q %q %q (Addr %q)", b.AddrFor("EXTERNAL"), b.AddrFor("INTERNAL"), b.AddrFor("OTHER"), b.Addr)
	}
	stored := tf.storedImage()
	if sb, _ := stored.Broker(1); !reflect.DeepEqual(sb.Endpoints, want) {
		t.Fatalf("stored endpoints %+v, want %+v", sb.Endpoints, want)
	}

	tf.ok(register(1, "b"))
	if b, _ := tf.f.Image().Broker(1); b.Endpoints != nil || b.AddrFor("EXTERNAL") != b.Addr {
		t.Fatalf("after a registration without endpoints: %+v", b)
	}

	tf.rejected(registerWith(2, "a", &pb.Endpoint{Listener: "", Addr: "127.0.0.1:3"}), ErrUnknownBroker)
	tf.rejected(registerWith(2, "a", &pb.Endpoint{Listener: "EXTERNAL"}), ErrUnknownBroker)
}
