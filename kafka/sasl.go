package kafka

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SASL authentication on a listener (Kafka's SASL_PLAINTEXT and SASL_SSL
// listeners), as Kafka's brokers do it: a connection first agrees on a
// mechanism (SaslHandshake), then exchanges that mechanism's messages,
// each in a SaslAuthenticate request (handshake version 1) or, after a
// version 0 handshake, as bare size-prefixed frames; until the exchange
// succeeds only ApiVersions and those two are answered. A failed
// exchange is answered SASL_AUTHENTICATION_FAILED with the reason, and
// the connection is closed once the answer is written. The mechanisms
// themselves, and what an authenticated connection's context carries,
// are the caller's (SASL.Start).

// The SASL APIs' keys.
const (
	saslHandshakeKey    = 17
	saslAuthenticateKey = 36
)

// saslMaxReceiveBytes bounds a request on a connection not yet
// authenticated (Kafka's sasl.server.max.receive.size): whoever can
// connect must not make the broker take a full-size request.
const saslMaxReceiveBytes = 512 << 10

// SASL is the authentication a listener requires.
type SASL struct {
	// Mechanisms are those offered, by their SASL names
	// ("SCRAM-SHA-256"), in the order SaslHandshake lists them.
	Mechanisms []string
	// Refused names mechanisms known but not offered on this listener,
	// with why (PLAIN on a listener without TLS); a client asking for
	// one is answered UNSUPPORTED_SASL_MECHANISM and the reason logged.
	Refused map[string]string
	// Start begins an exchange of mechanism (one of Mechanisms) on a
	// connection whose requests run under ctx.
	Start func(ctx context.Context, mechanism string) (SASLExchange, error)
}

// SASLExchange is one authentication in progress.
type SASLExchange interface {
	// Step takes the client's next message and returns the answer to
	// send back. Once the client is authenticated, authed is the
	// context the connection's requests run under from then on (it
	// says who the client is). An error fails the authentication; its
	// text is sent to the client.
	Step(msg []byte) (answer []byte, authed context.Context, err error)
}

// ServeSASL is Serve for a listener whose connections must authenticate
// with sasl before anything but ApiVersions is answered.
func (s *Server) ServeSASL(lis net.Listener, sasl *SASL) error {
	s.mu.Lock()
	if s.saslOf == nil {
		s.saslOf = map[net.Listener]*SASL{}
	}
	s.saslOf[lis] = sasl
	s.mu.Unlock()
	return s.Serve(lis)
}

// saslConn is a connection's authentication state; nil on a listener
// that requires none.
type saslConn struct {
	cfg *SASL
	// exchange is the one in progress, once a handshake chose its
	// mechanism; raw when that handshake was version 0, whose
	// exchange's messages come as bare frames.
	exchange  SASLExchange
	mechanism string
	raw       bool
	// ctx is the authenticated connection's context, nil before.
	ctx context.Context
	// closing: close the connection once the answer is written (a
	// failed authentication, as Kafka does).
	closing bool
}

// newSASLConn is the authentication state of a connection accepted on a
// listener served with ServeSASL; nil on others.
func (s *Server) newSASLConn(c net.Conn) *saslConn {
	s.mu.Lock()
	defer s.mu.Unlock()
	cfg := s.saslOf[s.conns[c].lis]
	if cfg == nil {
		return nil
	}
	return &saslConn{cfg: cfg}
}

// pending reports whether the connection still has to authenticate.
func (sc *saslConn) pending() bool { return sc != nil && sc.ctx == nil }

// maxRequestBytes is the largest request the connection may send next.
func (s *Server) maxRequestBytes(cs *connState) int {
	if cs.sasl.pending() {
		return min(s.cfg.MaxRequestBytes, saslMaxReceiveBytes)
	}
	return s.cfg.MaxRequestBytes
}

// minRequestBytes is the smallest frame the connection may send next: a
// request header's 8 bytes, or 1 for a bare SASL message.
func (cs *connState) minRequestBytes() int32 {
	if cs.sasl != nil && cs.sasl.raw {
		return 1
	}
	return 8
}

// closeAfterAnswer reports whether the connection ends once its last
// answer is written.
func (cs *connState) closeAfterAnswer() bool { return cs.sasl != nil && cs.sasl.closing }

// connContext is the context a connection's next request runs under:
// the authenticated one once SASL has succeeded.
func (cs *connState) connContext(ctx context.Context) context.Context {
	if cs.sasl != nil && cs.sasl.ctx != nil {
		return cs.sasl.ctx
	}
	return ctx
}

// rawToken answers one frame of an exchange begun by a version 0
// handshake: the frame is the mechanism's message, the answer the
// mechanism's, framed by its size alone. A failure closes the
// connection, the only answer this framing has.
func (s *Server) rawToken(cs *connState, buf, out []byte) ([]byte, error) {
	sc := cs.sasl
	answer, authed, err := sc.exchange.Step(buf)
	if err != nil {
		return out, fmt.Errorf("SASL %s authentication failed: %v", sc.mechanism, err)
	}
	if authed != nil {
		sc.ctx, sc.exchange, sc.raw = authed, nil, false
	}
	out = binary.BigEndian.AppendUint32(out, uint32(len(answer)))
	return append(out, answer...), nil
}

// saslGate answers what a connection that must authenticate sends
// before it has: handled is false for a request to serve as usual (an
// ApiVersions, or anything once authenticated but the SASL requests).
func (s *Server) saslGate(ctx context.Context, cs *connState, req kmsg.Request) (resp kmsg.Response, handled bool, err error) {
	sc := cs.sasl
	switch req := req.(type) {
	case *kmsg.ApiVersionsRequest:
		return nil, false, nil
	case *kmsg.SASLHandshakeRequest:
		return s.saslHandshake(ctx, sc, req), true, nil
	case *kmsg.SASLAuthenticateRequest:
		return s.saslAuthenticate(sc, req), true, nil
	}
	if sc.ctx != nil {
		return nil, false, nil
	}
	// As Kafka: anything else before authentication ends the connection.
	return nil, true, fmt.Errorf("%s before SASL authentication (send SaslHandshake and SaslAuthenticate first)", kmsg.NameForKey(req.Key()))
}

func (s *Server) saslHandshake(ctx context.Context, sc *saslConn, req *kmsg.SASLHandshakeRequest) kmsg.Response {
	resp := kmsg.NewPtrSASLHandshakeResponse()
	resp.SupportedMechanisms = slices.Clone(sc.cfg.Mechanisms)
	switch {
	case sc.ctx != nil || sc.exchange != nil:
		// Re-authentication (KIP-368) is not served: the session
		// lifetime answered is 0, so clients do not ask.
		resp.ErrorCode, sc.closing = kerr.IllegalSaslState.Code, true
		return resp
	case !slices.Contains(sc.cfg.Mechanisms, req.Mechanism):
		why := sc.cfg.Refused[req.Mechanism]
		if why == "" {
			why = "not enabled"
		}
		s.cfg.Logger.Warn("SASL mechanism refused", "mechanism", req.Mechanism, "reason", why, "enabled", sc.cfg.Mechanisms)
		resp.ErrorCode, sc.closing = kerr.UnsupportedSaslMechanism.Code, true
		return resp
	}
	ex, err := sc.cfg.Start(ctx, req.Mechanism)
	if err != nil {
		s.cfg.Logger.Warn("SASL mechanism could not start", "mechanism", req.Mechanism, "error", err)
		resp.ErrorCode, sc.closing = kerr.UnsupportedSaslMechanism.Code, true
		return resp
	}
	sc.exchange, sc.mechanism, sc.raw = ex, req.Mechanism, req.Version == 0
	return resp
}

func (s *Server) saslAuthenticate(sc *saslConn, req *kmsg.SASLAuthenticateRequest) kmsg.Response {
	resp := kmsg.NewPtrSASLAuthenticateResponse()
	fail := func(code int16, msg string) kmsg.Response {
		resp.ErrorCode, resp.ErrorMessage, sc.closing = code, kmsg.StringPtr(msg), true
		return resp
	}
	switch {
	case sc.ctx != nil:
		return fail(kerr.IllegalSaslState.Code, "SaslAuthenticate on a connection already authenticated (re-authentication is not served)")
	case sc.exchange == nil:
		return fail(kerr.IllegalSaslState.Code, "SaslAuthenticate before a SaslHandshake chose the mechanism")
	case sc.raw:
		return fail(kerr.IllegalSaslState.Code, "SaslAuthenticate after a version 0 SaslHandshake, whose exchange is sent as bare frames")
	}
	answer, authed, err := sc.exchange.Step(req.SASLAuthBytes)
	if err != nil {
		sc.exchange = nil
		return fail(kerr.SaslAuthenticationFailed.Code, fmt.Sprintf("Authentication failed during authentication with SASL mechanism %s: %v", sc.mechanism, err))
	}
	resp.SASLAuthBytes = answer
	if authed != nil {
		sc.ctx, sc.exchange = authed, nil
	}
	return resp
}

// saslOutside answers the SASL requests on a listener that requires no
// SASL, as Kafka does: ILLEGAL_SASL_STATE.
func saslOutside(req kmsg.Request) kmsg.Response {
	switch req.(type) {
	case *kmsg.SASLHandshakeRequest:
		resp := kmsg.NewPtrSASLHandshakeResponse()
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return resp
	default:
		resp := kmsg.NewPtrSASLAuthenticateResponse()
		resp.ErrorCode = kerr.IllegalSaslState.Code
		resp.ErrorMessage = kmsg.StringPtr("this listener does not authenticate with SASL (its security protocol is PLAINTEXT or SSL)")
		return resp
	}
}

// The SASL requests' layouts, beside the others in schemas.
func init() {
	schemas[saslHandshakeKey] = apiSchema{99, strct[kmsg.SASLHandshakeRequest](
		fld(kString), // mechanism
	)}
	schemas[saslAuthenticateKey] = apiSchema{2, strct[kmsg.SASLAuthenticateRequest](
		fld(kBytes), // auth bytes
	)}
}
