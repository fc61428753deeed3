package kafka

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/quirelog/quire/request"
)

// testExchange is a mechanism for the tests: "hello" is answered
// "challenge", then "good" authenticates as user "alice" and anything
// else fails.
type testExchange struct {
	ctx   context.Context
	steps int
}

type userKey struct{}

func (e *testExchange) Step(msg []byte) ([]byte, context.Context, error) {
	e.steps++
	switch {
	case e.steps == 1 && string(msg) == "hello":
		return []byte("challenge"), nil, nil
	case e.steps == 2 && string(msg) == "good":
		return []byte("welcome"), context.WithValue(e.ctx, userKey{}, "alice"), nil
	}
	return nil, nil, errors.New("invalid credentials for user \"alice\"")
}

// userBackend records the user each Metadata call ran as.
type userBackend struct {
	fakeBackend
	users chan string
}

func (b *userBackend) Metadata(ctx context.Context, _ *request.MetadataRequest) (*request.MetadataResult, error) {
	u, _ := ctx.Value(userKey{}).(string)
	b.users <- u
	return &request.MetadataResult{}, nil
}

// startSASLServer serves a listener that requires SASL with the TEST
// mechanism (and refuses PLAIN) and returns a function dialing it.
func startSASLServer(t *testing.T, backend Backend) func() *kconn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(Config{Backend: backend, MaxRequestBytes: 4 << 20})
	sasl := &SASL{
		Mechanisms: []string{"TEST"},
		Refused:    map[string]string{"PLAIN": "served only over TLS"},
		Start: func(ctx context.Context, mechanism string) (SASLExchange, error) {
			return &testExchange{ctx: ctx}, nil
		},
	}
	done := make(chan error, 1)
	go func() { done <- s.ServeSASL(lis, sasl) }()
	t.Cleanup(func() {
		s.Close()
		if err := <-done; !errors.Is(err, ErrServerClosed) {
			t.Errorf("ServeSASL returned %v, want ErrServerClosed", err)
		}
	})
	return func() *kconn {
		c, err := net.Dial("tcp", lis.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		return &kconn{t: t, c: c, r: bufio.NewReader(c)}
	}
}

func handshake(k *kconn, version int16, mechanism string) *kmsg.SASLHandshakeResponse {
	k.t.Helper()
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.Version, req.Mechanism = version, mechanism
	k.request(req)
	resp := kmsg.NewPtrSASLHandshakeResponse()
	resp.Version = version
	k.response(resp, false)
	return resp
}

func authenticate(k *kconn, version int16, msg string) *kmsg.SASLAuthenticateResponse {
	k.t.Helper()
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.Version, req.SASLAuthBytes = version, []byte(msg)
	k.request(req)
	resp := kmsg.NewPtrSASLAuthenticateResponse()
	resp.Version = version
	k.response(resp, version >= 2)
	return resp
}

func metadataAs(k *kconn, users chan string) string {
	k.t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 1
	k.request(req)
	resp := kmsg.NewPtrMetadataResponse()
	resp.Version = 1
	k.response(resp, false)
	return <-users
}

func TestKafkaSASLAuthenticates(t *testing.T) {
	t.Parallel()
	backend := &userBackend{users: make(chan string, 1)}
	dial := startSASLServer(t, backend)
	for _, version := range []int16{0, 1, 2} {
		k := dial()
		// ApiVersions is answered before authentication, and lists the
		// SASL APIs.
		av := kmsg.NewPtrApiVersionsRequest()
		k.request(av)
		avr := kmsg.NewPtrApiVersionsResponse()
		k.response(avr, false)
		keys := map[int16]bool{}
		for _, a := range avr.ApiKeys {
			keys[a.ApiKey] = true
		}
		if !keys[17] || !keys[36] {
			t.Fatalf("ApiVersions does not list SaslHandshake and SaslAuthenticate: %v", keys)
		}
		if hs := handshake(k, 1, "TEST"); hs.ErrorCode != 0 || !slices.Equal(hs.SupportedMechanisms, []string{"TEST"}) {
			t.Fatalf("handshake: %+v", hs)
		}
		if a := authenticate(k, version, "hello"); a.ErrorCode != 0 || string(a.SASLAuthBytes) != "challenge" {
			t.Fatalf("v%d first step: %+v", version, a)
		}
		if a := authenticate(k, version, "good"); a.ErrorCode != 0 || string(a.SASLAuthBytes) != "welcome" || a.SessionLifetimeMillis != 0 {
			t.Fatalf("v%d last step: %+v", version, a)
		}
		if u := metadataAs(k, backend.users); u != "alice" {
			t.Fatalf("v%d: metadata ran as %q, want the authenticated alice", version, u)
		}
		// No re-authentication.
		if hs := handshake(k, 1, "TEST"); hs.ErrorCode != kerr.IllegalSaslState.Code {
			t.Fatalf("a second handshake: %+v", hs)
		}
		if !k.closed() {
			t.Fatal("the connection stays open after ILLEGAL_SASL_STATE")
		}
	}
}

// A version 0 handshake: the exchange's messages are bare frames.
func TestKafkaSASLHandshakeV0RawFrames(t *testing.T) {
	t.Parallel()
	backend := &userBackend{users: make(chan string, 1)}
	k := startSASLServer(t, backend)()
	if hs := handshake(k, 0, "TEST"); hs.ErrorCode != 0 {
		t.Fatalf("handshake v0: %+v", hs)
	}
	for _, step := range [][2]string{{"hello", "challenge"}, {"good", "welcome"}} {
		k.raw([]byte(step[0]))
		var size [4]byte
		if _, err := io.ReadFull(k.r, size[:]); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(k.r, got); err != nil {
			t.Fatal(err)
		}
		if string(got) != step[1] {
			t.Fatalf("raw answer to %q: %q, want %q", step[0], got, step[1])
		}
	}
	if u := metadataAs(k, backend.users); u != "alice" {
		t.Fatalf("metadata ran as %q", u)
	}
}

func TestKafkaSASLRefusals(t *testing.T) {
	t.Parallel()
	backend := &userBackend{users: make(chan string, 1)}
	dial := startSASLServer(t, backend)

	t.Run("a request before authentication closes the connection", func(t *testing.T) {
		k := dial()
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 1
		k.request(req)
		if !k.closed() {
			t.Fatal("Metadata before authentication was answered")
		}
		if len(backend.users) != 0 {
			t.Fatal("the backend was called")
		}
	})
	t.Run("wrong credentials", func(t *testing.T) {
		k := dial()
		handshake(k, 1, "TEST")
		authenticate(k, 1, "hello")
		a := authenticate(k, 1, "bad")
		if a.ErrorCode != kerr.SaslAuthenticationFailed.Code || a.ErrorMessage == nil ||
			!strings.Contains(*a.ErrorMessage, `invalid credentials for user "alice"`) || !strings.Contains(*a.ErrorMessage, "TEST") {
			t.Fatalf("wrong credentials: %+v", a)
		}
		if !k.closed() {
			t.Fatal("the connection stays open after a failed authentication")
		}
	})
	t.Run("an unsupported or refused mechanism", func(t *testing.T) {
		for _, m := range []string{"GSSAPI", "PLAIN"} {
			k := dial()
			hs := handshake(k, 1, m)
			if hs.ErrorCode != kerr.UnsupportedSaslMechanism.Code || !slices.Equal(hs.SupportedMechanisms, []string{"TEST"}) {
				t.Fatalf("%s: %+v", m, hs)
			}
			if !k.closed() {
				t.Fatalf("%s: the connection stays open", m)
			}
		}
	})
	t.Run("SaslAuthenticate before a handshake", func(t *testing.T) {
		k := dial()
		a := authenticate(k, 1, "hello")
		if a.ErrorCode != kerr.IllegalSaslState.Code || a.ErrorMessage == nil || !strings.Contains(*a.ErrorMessage, "before a SaslHandshake") {
			t.Fatalf("%+v", a)
		}
		if !k.closed() {
			t.Fatal("the connection stays open")
		}
	})
	t.Run("a large request before authentication closes the connection", func(t *testing.T) {
		k := dial()
		// The size alone: the connection is closed on reading it.
		if _, err := k.c.Write(binary.BigEndian.AppendUint32(nil, saslMaxReceiveBytes+1)); err != nil {
			t.Fatal(err)
		}
		if !k.closed() {
			t.Fatal("a request over sasl.server.max.receive.size was read before authentication")
		}
	})
}

// On a listener without SASL the SASL requests are ILLEGAL_SASL_STATE.
func TestKafkaSASLOnPlainListener(t *testing.T) {
	t.Parallel()
	_, k := startServer(t, &fakeBackend{})
	if hs := handshake(k, 1, "SCRAM-SHA-256"); hs.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("handshake: %+v", hs)
	}
	if a := authenticate(k, 2, "x"); a.ErrorCode != kerr.IllegalSaslState.Code || a.ErrorMessage == nil {
		t.Fatalf("authenticate: %+v", a)
	}
}

// After a version 0 handshake a failed exchange can only close the
// connection: the bare framing has no error code.
func TestKafkaSASLHandshakeV0FailureCloses(t *testing.T) {
	t.Parallel()
	k := startSASLServer(t, &userBackend{users: make(chan string, 1)})()
	if hs := handshake(k, 0, "TEST"); hs.ErrorCode != 0 {
		t.Fatalf("handshake v0: %+v", hs)
	}
	k.raw([]byte("wrong"))
	if !k.closed() {
		t.Fatal("a failed bare-frame exchange left the connection open")
	}
}
