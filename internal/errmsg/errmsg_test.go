package errmsg

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
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
