package errcode

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

func grpcMessageLen(msg string) int {
	n := 0
	for i := 0; i < len(msg); i++ {
		if c := msg[i]; c < ' ' || c > '~' || c == '%' {
			n += 3
		} else {
			n++
		}
	}
	return n
}

// TestStatusFitsHeaderLimit builds the status of refusals echoing huge
// values (a 2 KiB config value, a long list, bytes that are not UTF-8)
// and checks that what travels in the headers, grpc-message plus
// grpc-status-details-bin, stays well under a client's default 8 KiB
// header limit, with the detail present.
func TestStatusFitsHeaderLimit(t *testing.T) {
	const bound = 6 << 10
	for name, msg := range map[string]string{
		"quoted":   fmt.Sprintf("broker: invalid config: cleanup.policy %q (want delete or compact)", strings.Repeat("x", 2048)),
		"unquoted": "broker: invalid config: " + strings.Repeat("key=value, ", 1000),
		"not utf8": fmt.Sprintf("group %s: %q", strings.Repeat("\xff", 4096), strings.Repeat("\x00é", 4096)),
		"many":     strings.Repeat(fmt.Sprintf("%q ", strings.Repeat("y", 500)), 40),
	} {
		err := Status(codes.InvalidArgument, &quirev1.Error{Code: quirev1.ErrorCode_INVALID_CONFIG, Message: msg})
		st := status.Convert(err)
		if len(st.Details()) != 1 {
			t.Fatalf("%s: details %v", name, st.Details())
		}
		e, ok := st.Details()[0].(*quirev1.Error)
		if !ok || e.Code != quirev1.ErrorCode_INVALID_CONFIG || e.Message != st.Message() {
			t.Fatalf("%s: detail %v", name, st.Details()[0])
		}
		raw, merr := proto.Marshal(st.Proto())
		if merr != nil {
			t.Fatal(merr)
		}
		n := grpcMessageLen(st.Message()) + base64.RawStdEncoding.EncodedLen(len(raw))
		if n > bound {
			t.Errorf("%s: %d header bytes for a %d-byte message, over %d", name, n, len(msg), bound)
		}
		t.Logf("%s: %d-byte message -> %d header bytes", name, len(msg), n)
	}
}
