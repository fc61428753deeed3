// Package tlsconf builds the TLS configurations of a node and of its
// clients from PEM files on disk: a certificate and key, and a CA bundle
// that client certificates (and, for node-to-node connections, the other
// nodes' server certificates) must chain to. The files are read again when
// their modification time or size changes, checked at every handshake, so
// certificates are rotated by replacing the files: new connections see the
// new ones, open connections keep theirs. A file that fails to parse after
// a change leaves the previous certificates in use and is reported once.
//
// TLS 1.2 is the lowest version accepted either way.
package tlsconf

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc/credentials"
)

// ClientAuth is what a server asks of its clients' certificates
// (tls.client.auth, as Kafka's ssl.client.auth).
type ClientAuth string

// The tls.client.auth values.
const (
	// NoClientCert asks for none.
	NoClientCert ClientAuth = "none"
	// RequestClientCert asks for one and verifies it when given.
	RequestClientCert ClientAuth = "request"
	// RequireClientCert refuses a client without a valid one.
	RequireClientCert ClientAuth = "require"
)

// ParseClientAuth checks a tls.client.auth value.
func ParseClientAuth(v string) (ClientAuth, error) {
	switch ClientAuth(v) {
	case NoClientCert, RequestClientCert, RequireClientCert:
		return ClientAuth(v), nil
	}
	return "", fmt.Errorf("want none, request or require, not %q", v)
}

func (a ClientAuth) tlsType() tls.ClientAuthType {
	switch a {
	case RequestClientCert:
		return tls.VerifyClientCertIfGiven
	case RequireClientCert:
		return tls.RequireAndVerifyClientCert
	}
	return tls.NoClientCert
}

// Files names the PEM files of one side of a connection. Cert and Key go
// together (both or neither); CA is the bundle the other side's
// certificate must chain to ("" on a client: the system's roots).
type Files struct {
	Cert string
	Key  string
	CA   string
}

// Enabled reports whether any file is named.
func (f Files) Enabled() bool { return f.Cert != "" || f.Key != "" || f.CA != "" }

// Reloader holds the certificates of Files, reading them again when a
// file changes.
type Reloader struct {
	files Files

	mu      sync.Mutex
	stamps  [3]stamp
	cert    *tls.Certificate
	pool    *x509.CertPool // nil: system roots (client) / none (server)
	lastErr string         // the last reload failure reported, to report it once
	onError func(error)
}

type stamp struct {
	mod  time.Time
	size int64
}

// NewReloader reads the files once; an error there (a missing file, a key
// that does not match its certificate, a CA file with no certificate) is
// returned. onError, when set, hears of later reloads that failed (the
// previous certificates stay in use).
func NewReloader(f Files, onError func(error)) (*Reloader, error) {
	if (f.Cert == "") != (f.Key == "") {
		return nil, errors.New("tlsconf: a certificate needs its key and a key its certificate")
	}
	r := &Reloader{files: f, onError: onError}
	if err := r.reload(true); err != nil {
		return nil, err
	}
	return r, nil
}

// Files returns the files the reloader reads.
func (r *Reloader) Files() Files { return r.files }

func statFile(name string) (stamp, error) {
	if name == "" {
		return stamp{}, nil
	}
	fi, err := os.Stat(name)
	if err != nil {
		return stamp{}, fmt.Errorf("tlsconf: %w", err)
	}
	return stamp{mod: fi.ModTime(), size: fi.Size()}, nil
}

// reload reads the files again when one changed (always when force).
func (r *Reloader) reload(force bool) error {
	var now [3]stamp
	for i, name := range []string{r.files.Cert, r.files.Key, r.files.CA} {
		s, err := statFile(name)
		if err != nil {
			return err
		}
		now[i] = s
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !force && now == r.stamps {
		return nil
	}
	cert, pool, err := r.load()
	if err != nil {
		// These versions of the files are not read again: the next
		// change to one of them is.
		r.stamps = now
		return err
	}
	r.stamps, r.cert, r.pool, r.lastErr = now, cert, pool, ""
	return nil
}

// load reads and parses the files.
func (r *Reloader) load() (*tls.Certificate, *x509.CertPool, error) {
	var cert *tls.Certificate
	if r.files.Cert != "" {
		c, err := tls.LoadX509KeyPair(r.files.Cert, r.files.Key)
		if err != nil {
			return nil, nil, fmt.Errorf("tlsconf: load %s and %s: %w", r.files.Cert, r.files.Key, err)
		}
		cert = &c
	}
	var pool *x509.CertPool
	if r.files.CA != "" {
		pem, err := os.ReadFile(r.files.CA)
		if err != nil {
			return nil, nil, fmt.Errorf("tlsconf: %w", err)
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, nil, fmt.Errorf("tlsconf: %s holds no PEM certificate", r.files.CA)
		}
	}
	return cert, pool, nil
}

// current returns the certificates in use, after reloading changed files.
func (r *Reloader) current() (*tls.Certificate, *x509.CertPool) {
	if err := r.reload(false); err != nil {
		r.mu.Lock()
		report := err.Error() != r.lastErr
		r.lastErr = err.Error()
		r.mu.Unlock()
		if report && r.onError != nil {
			r.onError(err)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cert, r.pool
}

// ServerConfig is a server's configuration: its certificate, and client
// certificates checked against the CA as auth says. Every handshake reads
// the files again when they changed.
func (r *Reloader) ServerConfig(auth ClientAuth) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2"},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cert, pool := r.current()
			if cert == nil {
				return nil, errors.New("tlsconf: no server certificate")
			}
			return &tls.Config{
				MinVersion:   tls.VersionTLS12,
				NextProtos:   []string{"h2"},
				Certificates: []tls.Certificate{*cert},
				ClientCAs:    pool,
				ClientAuth:   auth.tlsType(),
			}, nil
		},
	}
}

// ClientConfig is a client's configuration: the server's certificate
// checked against the CA (the system's roots when none) for serverName,
// and this side's certificate when it has one. It is a snapshot of the
// files now; ClientCredentials reads them again per connection.
func (r *Reloader) ClientConfig(serverName string) *tls.Config {
	cert, pool := r.current()
	c := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool, ServerName: serverName}
	if cert != nil {
		c.Certificates = []tls.Certificate{*cert}
	}
	return c
}

// ClientCredentials are gRPC transport credentials dialling with
// ClientConfig, built afresh for every connection so that a rotated
// certificate or CA is used from the next connection on. The server name
// checked is the host of the address dialled.
func (r *Reloader) ClientCredentials() credentials.TransportCredentials {
	return &clientCreds{r: r}
}

type clientCreds struct {
	r            *Reloader
	overrideName string
}

func (c *clientCreds) ClientHandshake(ctx context.Context, authority string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	name := c.overrideName
	if name == "" {
		name = authority
		if h, _, err := net.SplitHostPort(authority); err == nil {
			name = h
		}
	}
	return credentials.NewTLS(c.r.ClientConfig(name)).ClientHandshake(ctx, authority, conn)
}

func (c *clientCreds) ServerHandshake(net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("tlsconf: client credentials used by a server")
}

func (c *clientCreds) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "tls"}
}

func (c *clientCreds) Clone() credentials.TransportCredentials {
	cp := *c
	return &cp
}

// OverrideServerName sets the name checked instead of the host dialled
// (part of the interface; grpc.WithAuthority is the newer way).
func (c *clientCreds) OverrideServerName(name string) error {
	c.overrideName = name
	return nil
}
