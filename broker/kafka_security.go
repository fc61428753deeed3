package broker

// Security on the Kafka listeners, in Kafka's terms: each listener has a
// security protocol (kafka.listener.security.protocol.map, as Kafka's
// listener.security.protocol.map): PLAINTEXT, SSL (TLS, with client
// certificates as tls.client.auth says), SASL_PLAINTEXT or SASL_SSL (a
// SASL exchange with one of sasl.enabled.mechanisms before anything but
// ApiVersions is answered). The certificates, the client CA and the
// mapping of a certificate's subject to a principal are the gRPC
// listeners'; SASL/SCRAM checks the users the metadata log stores, as the
// gRPC services do. The principal a connection establishes goes into its
// requests' context as the gRPC interceptors put it there (IdentityFrom),
// and with authorizer.enable every request is checked against the same
// ACLs, by the request core (kafka_bytopic.go).

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	"github.com/quirelog/quire/auth"
	"github.com/quirelog/quire/config"
	"github.com/quirelog/quire/kafka"
	"github.com/quirelog/quire/service"
	"github.com/quirelog/quire/tlsconf"
)

// kafkaListener is a Kafka listener's net.Listener with its security:
// TLS-wrapped for SSL and SASL_SSL, and the SASL it requires (nil for
// none). An SSL or SASL_SSL listener without the node's TLS is an error,
// never served in the clear (the configuration's checks refuse it first).
func (b *Broker) kafkaListener(l boundListener) (net.Listener, *kafka.SASL, string, error) {
	p := b.cfg.KafkaProtocol(l.name)
	lis := l.lis
	if (p == config.ProtocolSSL || p == config.ProtocolSASLSSL) && b.transport.tls == nil {
		return nil, nil, p, fmt.Errorf("%w: Kafka listener %s is %s but the node has no TLS certificate (tls.cert.file)", ErrInvalidConfig, l.name, p)
	}
	if p == config.ProtocolSSL || p == config.ProtocolSASLSSL {
		clientAuth := tlsconf.NoClientCert
		if p == config.ProtocolSSL {
			clientAuth, _ = tlsconf.ParseClientAuth(b.cfg.Security.TLSClientAuth)
			if clientAuth == "" {
				clientAuth = tlsconf.NoClientCert
			}
		}
		lis = tls.NewListener(lis, kafkaTLSConfig(b.transport.tls.ServerConfig(clientAuth)))
	}
	if p != config.ProtocolSASLPlaintext && p != config.ProtocolSASLSSL {
		return lis, nil, p, nil
	}
	mechs, _ := config.ParseSASLMechanisms(b.cfg.Security.SASLEnabledMechanisms)
	sasl := &kafka.SASL{Refused: map[string]string{}, Start: b.startSASL}
	for _, m := range mechs {
		if m == config.SASLPlain && p != config.ProtocolSASLSSL {
			sasl.Refused[m] = "PLAIN sends the password in the clear: it is served only over TLS, on SASL_SSL listeners (listener " + l.name + " is SASL_PLAINTEXT)"
			continue
		}
		sasl.Mechanisms = append(sasl.Mechanisms, m)
	}
	for _, m := range config.SASLMechanisms {
		if !slices.Contains(mechs, m) {
			sasl.Refused[m] = "not in sasl.enabled.mechanisms"
		}
	}
	return lis, sasl, p, nil
}

// kafkaTLSConfig is the gRPC listeners' TLS configuration without their
// ALPN protocol (h2): Kafka's clients name none, and one that did would
// be refused for not naming h2.
func kafkaTLSConfig(base *tls.Config) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			c, err := base.GetConfigForClient(hello)
			if err != nil || c == nil {
				return c, err
			}
			c = c.Clone()
			c.NextProtos = nil
			return c, nil
		},
	}
}

// kafkaHandshakeTimeout bounds a Kafka client's TLS handshake.
const kafkaHandshakeTimeout = 10 * time.Second

// kafkaConnContext is the context of a Kafka connection's requests:
// tagged with the listener (so Metadata gives that listener's addresses)
// and, for a TLS connection, with the handshake's state, from which the
// identity is found as for a gRPC call (a verified client certificate's
// subject mapped by tls.principal.mapping.rules, else User:ANONYMOUS). A
// SASL exchange replaces that identity once it succeeds. A connection
// whose handshake fails or whose certificate maps to no principal is
// closed; its first read then ends it.
func (b *Broker) kafkaConnContext(ctx context.Context, c net.Conn) context.Context {
	p := &peer.Peer{Addr: c.RemoteAddr(), LocalAddr: c.LocalAddr()}
	if tc, ok := c.(*tls.Conn); ok {
		hctx, cancel := context.WithTimeout(ctx, kafkaHandshakeTimeout)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			b.logger.Debug("kafka: TLS handshake failed", "client", c.RemoteAddr().String(), "error", err)
			_ = c.Close()
			return ctx
		}
		p.AuthInfo = credentials.TLSInfo{State: tc.ConnectionState()}
	}
	ctx = peer.NewContext(ctx, p)
	id, err := b.guard.authenticate(ctx, b.cluster.node.Image())
	if err != nil {
		b.logger.Warn("kafka: client refused", "client", c.RemoteAddr().String(), "error", err)
		_ = c.Close()
		return ctx
	}
	return service.WithIdentity(ctx, id)
}

// startSASL begins an exchange of mechanism for a Kafka connection.
func (b *Broker) startSASL(ctx context.Context, mechanism string) (kafka.SASLExchange, error) {
	if mechanism == config.SASLPlain {
		return &plainExchange{b: b, ctx: ctx}, nil
	}
	lookup := func(user string) (auth.Credential, bool) { return b.cluster.node.Image().UserCredential(user) }
	s, err := auth.NewScramServer(mechanism, lookup)
	if err != nil {
		return nil, err
	}
	return &scramExchange{ctx: ctx, s: s}, nil
}

// scramExchange is a SCRAM exchange on a Kafka connection.
type scramExchange struct {
	ctx context.Context
	s   *auth.ScramServer
}

func (e *scramExchange) Step(msg []byte) ([]byte, context.Context, error) {
	answer, done, err := e.s.Step(msg)
	if err != nil || !done {
		return answer, nil, err
	}
	return answer, service.WithIdentity(e.ctx, Identity{Principal: auth.UserPrincipal(e.s.User()), By: "scram"}), nil
}

// plainExchange is SASL/PLAIN (RFC 4616): one message,
// authzid NUL user NUL password, checked as a gRPC call's password is.
type plainExchange struct {
	b   *Broker
	ctx context.Context
}

func (e *plainExchange) Step(msg []byte) ([]byte, context.Context, error) {
	parts := strings.Split(string(msg), "\x00")
	if len(parts) != 3 || parts[1] == "" || parts[2] == "" {
		return nil, nil, errors.New("a PLAIN message is [authzid] NUL user NUL password")
	}
	authzid, user, password := parts[0], parts[1], parts[2]
	if authzid != "" && authzid != user {
		return nil, nil, fmt.Errorf("authorization identity %q is not the user %q", authzid, user)
	}
	if !e.b.guard.verify(e.b.cluster.node.Image(), user, password) {
		return nil, nil, fmt.Errorf("invalid credentials for user %q", user)
	}
	return nil, service.WithIdentity(e.ctx, Identity{Principal: auth.UserPrincipal(user), By: "plain"}), nil
}
