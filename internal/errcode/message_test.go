package errcode

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

func TestMessageShortMessagesUnchanged(t *testing.T) {
	for _, m := range []string{"", "broker: invalid topic: topic name is empty",
		fmt.Sprintf("broker: invalid config: %q is not a number", strings.Repeat("9", MaxQuoted)),
		`a "quote that never ends` + strings.Repeat("x", 300)} {
		if got := Message(m); got != m {
			t.Errorf("Message(%.60q...) = %.60q..., want it unchanged", m, got)
		}
	}
}

func TestMessageCutsQuotedValues(t *testing.T) {
	v := strings.Repeat("v", 2048)
	got := Message(fmt.Sprintf("broker: invalid config: retention.ms %q is not a number; see %q", v, "docs"))
	want := fmt.Sprintf("broker: invalid config: retention.ms %q…(2048 bytes) is not a number; see \"docs\"", strings.Repeat("v", MaxQuoted))
	if got != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	// A quoted value holding escapes is cut on a character, requoted.
	got = Message(fmt.Sprintf("bad %q", strings.Repeat("é\"\x01", 200)))
	if !strings.HasSuffix(got, "…(800 bytes)") || !utf8.ValidString(got) || len(got) > 3*MaxQuoted {
		t.Fatalf("escaped value: got %q", got)
	}
}

func TestMessageCutsWholeAndMendsUTF8(t *testing.T) {
	m := "bad group " + strings.Repeat("\xff\xfeé", 1000)
	got := Message(m)
	if !utf8.ValidString(got) {
		t.Fatalf("not valid UTF-8: %q", got)
	}
	if len(got) > MaxMessage || !strings.HasSuffix(got, "…(5010 bytes)") {
		t.Fatalf("got %d bytes (%q...%q)", len(got), got[:40], got[len(got)-20:])
	}
}

// TestMessageIdempotent: a message made by Message and passed on (a
// peer's or the controller's refusal, wrapped again) is not cut again.
func TestMessageIdempotent(t *testing.T) {
	for _, m := range []string{
		fmt.Sprintf("a %q b", strings.Repeat("q", 500)),
		strings.Repeat("long ", 1000),
		strings.Repeat(fmt.Sprintf("%q ", strings.Repeat("y", 500)), 40),
		"x \"" + strings.Repeat("z", 3000),
	} {
		once := Message(m)
		if twice := Message(once); twice != once {
			t.Errorf("Message changed its own output:\n%.80q...\n%.80q...", once, twice)
		}
	}
}

// grpcMessageLen is the size of msg in grpc-message: percent-encoded,
// every byte outside printable ASCII (and '%') taking three.
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
