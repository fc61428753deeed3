package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// serve accepts TLS connections with cfg until the test ends, finishing
// each handshake and echoing nothing.
func serve(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	lis, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lis.Close() })
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if err := c.(*tls.Conn).Handshake(); err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, c)
			}()
		}
	}()
	return lis.Addr().String()
}

// dial completes a handshake and one round trip (a refused client
// certificate only shows on the client's first read under TLS 1.3).
func dial(addr string, cfg *tls.Config) (*tls.ConnectionState, error) {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	var b [1]byte
	if _, err := c.Read(b[:]); err != nil {
		if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
			return nil, err
		}
	}
	st := c.ConnectionState()
	return &st, nil
}

func newNode(t *testing.T, ca *CA, dir, name string) Files {
	t.Helper()
	if err := ca.WriteCA(dir); err != nil {
		t.Fatal(err)
	}
	f, err := ca.WriteFiles(dir, name, name, []string{"127.0.0.1", "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestTLSRequireRefusesMissingAndForeignCertificates(t *testing.T) {
	dir := t.TempDir()
	ca, err := NewCA("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	srv := newNode(t, ca, dir, "node-1")
	r, err := NewReloader(srv, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, r.ServerConfig(RequireClientCert))

	// The right CA and certificate: accepted, at TLS 1.2 or above.
	cr, err := NewReloader(srv, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := dial(addr, cr.ClientConfig("127.0.0.1"))
	if err != nil {
		t.Fatalf("node certificate refused: %v", err)
	}
	if st.Version < tls.VersionTLS12 {
		t.Fatalf("version %x below TLS 1.2", st.Version)
	}

	// No client certificate.
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM)
	if _, err := dial(addr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}); err == nil {
		t.Fatal("a client without a certificate was accepted")
	}

	// A certificate from another CA.
	other, err := NewCA("other-ca")
	if err != nil {
		t.Fatal(err)
	}
	odir := t.TempDir()
	of := newNode(t, other, odir, "intruder")
	of.CA = srv.CA
	or, err := NewReloader(of, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dial(addr, or.ClientConfig("127.0.0.1")); err == nil {
		t.Fatal("a certificate from another CA was accepted")
	}

	// TLS 1.1 is refused.
	if _, err := dial(addr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MaxVersion: tls.VersionTLS11}); err == nil {
		t.Fatal("TLS 1.1 accepted")
	}
}

func TestTLSClientVerifiesServerCA(t *testing.T) {
	ca, _ := NewCA("a")
	other, _ := NewCA("b")
	dir, odir := t.TempDir(), t.TempDir()
	srv := newNode(t, other, odir, "node-x")
	r, err := NewReloader(srv, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, r.ServerConfig(NoClientCert))
	cf := newNode(t, ca, dir, "client")
	cr, err := NewReloader(cf, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dial(addr, cr.ClientConfig("127.0.0.1")); err == nil {
		t.Fatal("a server certificate from another CA was trusted")
	}
}

func TestTLSRotationWithoutRestart(t *testing.T) {
	dir := t.TempDir()
	ca, _ := NewCA("test-ca")
	f := newNode(t, ca, dir, "node-1")
	var mu sync.Mutex
	var reported []error
	r, err := NewReloader(f, func(err error) { mu.Lock(); reported = append(reported, err); mu.Unlock() })
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, r.ServerConfig(RequestClientCert))
	client := &tls.Config{RootCAs: x509.NewCertPool(), ServerName: "127.0.0.1"}
	client.RootCAs.AppendCertsFromPEM(ca.CertPEM)
	serialOf := func() string {
		t.Helper()
		st, err := dial(addr, client)
		if err != nil {
			t.Fatal(err)
		}
		return st.PeerCertificates[0].SerialNumber.String()
	}
	first := serialOf()

	// Replace the certificate and key on disk; the next handshake sees
	// the new one. The mtime is moved on explicitly so that the change is
	// seen on filesystems with coarse timestamps too.
	if _, err := ca.WriteFiles(dir, "node-1", "node-1", []string{"127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Minute)
	for _, p := range []string{f.Cert, f.Key} {
		if err := os.Chtimes(p, later, later); err != nil {
			t.Fatal(err)
		}
	}
	second := serialOf()
	if second == first {
		t.Fatal("the server still presents the old certificate after rotation")
	}

	// A broken file keeps the last good certificate and is reported once.
	if err := os.WriteFile(f.Cert, []byte("not a certificate"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := serialOf(); got != second {
		t.Fatalf("serial %s after a bad file, want the last good %s", got, second)
	}
	_ = serialOf()
	mu.Lock()
	defer mu.Unlock()
	if len(reported) != 1 {
		t.Fatalf("reported %d reload failures, want 1: %v", len(reported), reported)
	}
}

func TestTLSReloaderRefusesBadFiles(t *testing.T) {
	dir := t.TempDir()
	if _, err := NewReloader(Files{Cert: filepath.Join(dir, "x.pem")}, nil); err == nil {
		t.Fatal("a certificate without a key was accepted")
	}
	if _, err := NewReloader(Files{CA: filepath.Join(dir, "missing.pem")}, nil); err == nil {
		t.Fatal("a missing CA file was accepted")
	}
	bad := filepath.Join(dir, "bad.pem")
	_ = os.WriteFile(bad, []byte("nothing"), 0o644)
	if _, err := NewReloader(Files{CA: bad}, nil); err == nil {
		t.Fatal("a CA file without certificates was accepted")
	}
	if _, err := ParseClientAuth("sometimes"); err == nil {
		t.Fatal("tls.client.auth=sometimes accepted")
	}
}
