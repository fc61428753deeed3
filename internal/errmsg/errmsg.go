// Package errmsg bounds the text of an error a client receives, on
// either door: the gRPC door's statuses (internal/errcode) and the Kafka
// door's error messages cut the same way. It imports the standard
// library only, so a door free of gRPC may use it.
package errmsg

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Bounds on the text of an error a client receives. A refusal's message
// travels twice in a gRPC status: as grpc-message (percent-encoded, up to
// three bytes a byte) and inside grpc-status-details-bin (a quire.v1.Error,
// base64), and gRPC clients refuse a header block over 8 KiB (grpc-core's
// default) with a bare INTERNAL "Received RST_STREAM". With a message of
// at most MaxMessage bytes, the two together stay under 5 KiB.
const (
	// MaxQuoted is how much of a quoted value (a topic name, a config
	// value: what %q printed) a message keeps.
	MaxQuoted = 128
	// MaxMessage is how long a message may be in all.
	MaxMessage = 1024
)

// Message returns msg as a client may receive it: valid UTF-8 (a proto
// string field, as quire.v1.Error's message is, cannot hold anything
// else), every quoted value longer than MaxQuoted bytes cut to that many
// and followed by "…(N bytes)" with its length, and the whole cut the same
// way to MaxMessage bytes. A short message comes back unchanged, and so
// does one Message made (a peer's refusal passed on is not cut twice).
func Message(msg string) string {
	if len(msg) <= MaxQuoted && utf8.ValidString(msg) {
		return msg
	}
	msg = strings.ToValidUTF8(msg, "\uFFFD")
	msg = shortenQuoted(msg)
	if len(msg) > MaxMessage {
		suffix := "…(" + strconv.Itoa(len(msg)) + " bytes)"
		msg = cut(msg, MaxMessage-len(suffix)) + suffix
	}
	return msg
}

// shortenQuoted cuts every Go-quoted string in msg (as %q prints it)
// longer than MaxQuoted bytes once unquoted.
func shortenQuoted(msg string) string {
	var b strings.Builder
	rest := msg
	for {
		i := strings.IndexByte(rest, '"')
		if i < 0 {
			break
		}
		q, err := strconv.QuotedPrefix(rest[i:])
		if err != nil {
			// An unmatched quote: keep it and look past it.
			b.WriteString(rest[:i+1])
			rest = rest[i+1:]
			continue
		}
		b.WriteString(rest[:i])
		rest = rest[i+len(q):]
		v, err := strconv.Unquote(q)
		if err != nil || len(v) <= MaxQuoted {
			b.WriteString(q)
			continue
		}
		b.WriteString(strconv.Quote(cut(v, MaxQuoted)))
		b.WriteString("…(" + strconv.Itoa(len(v)) + " bytes)")
	}
	if b.Len() == 0 {
		return msg
	}
	b.WriteString(rest)
	return b.String()
}

// cut returns at most n bytes of s, never splitting a character.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
