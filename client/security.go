package client

import (
	"context"
	"crypto/tls"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/quirelog/quire/tlsconf"
)

// TLS dials brokers over TLS with cfg (its RootCAs checking the brokers'
// certificates, its Certificates the client's own for mutual TLS). The
// server name checked is each broker's host unless cfg.ServerName is set.
func TLS(cfg *tls.Config) Opt {
	c := cfg.Clone()
	if c.MinVersion < tls.VersionTLS12 {
		c.MinVersion = tls.VersionTLS12
	}
	return DialOptions(grpc.WithTransportCredentials(credentials.NewTLS(c)))
}

// TLSFiles dials brokers over TLS with PEM files: caFile the CA bundle the
// brokers' certificates must chain to ("" for the system's roots), certFile
// and keyFile the client's certificate and key for mutual TLS (both or
// neither). The files are read again when they change, so a long-running
// client follows certificate rotation on its next connection.
func TLSFiles(caFile, certFile, keyFile string) (Opt, error) {
	r, err := tlsconf.NewReloader(tlsconf.Files{Cert: certFile, Key: keyFile, CA: caFile}, nil)
	if err != nil {
		return nil, err
	}
	return DialOptions(grpc.WithTransportCredentials(r.ClientCredentials())), nil
}

// SCRAM authenticates every call as user with password (SCRAM-SHA-256
// credentials stored by the cluster; `quire user create`), sent as gRPC
// metadata. It needs TLS: the client refuses to send a password in
// plaintext.
func SCRAM(user, password string) Opt {
	return DialOptions(grpc.WithPerRPCCredentials(scramCreds{user: user, password: password}))
}

// The gRPC metadata keys of SCRAM authentication (broker.UserMetadataKey
// and broker.PasswordMetadataKey).
const (
	userMetadataKey     = "quire-user"
	passwordMetadataKey = "quire-password"
)

type scramCreds struct{ user, password string }

func (c scramCreds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{userMetadataKey: c.user, passwordMetadataKey: c.password}, nil
}

func (scramCreds) RequireTransportSecurity() bool { return true }

// SCRAMCredentials are SCRAM's per-call credentials as a gRPC option's
// value, for a program that dials brokers itself besides the client (the
// same as SCRAM gives the client).
func SCRAMCredentials(user, password string) credentials.PerRPCCredentials {
	return scramCreds{user: user, password: password}
}
