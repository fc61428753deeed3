package testcluster_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/testcluster"
	"github.com/quirelog/quire/tlsconf"
)

// healthOver asks node addr's health service over a connection made with
// creds; an error is a refused (or failed) handshake.
func healthOver(t *testing.T, addr string, creds credentials.TransportCredentials) error {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err = healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
	return err
}

func TestClusterTLSReplicatesAndRefusesStrangers(t *testing.T) {
	t.Parallel()
	sec := testcluster.NewSecurity(t)
	c := testcluster.New(t, 3, testcluster.TLS(sec))
	createReplicatedTopic(t, c, "secure")
	offsets := produceAll(t, c, "secure", []string{"a", "b", "c"})
	// Every replica has them: followers fetched over TLS with their node
	// certificates.
	if leo := waitInSync(t, c, "secure"); leo != offsets[2]+1 {
		t.Fatalf("log end %d, want %d", leo, offsets[2]+1)
	}

	addr := c.Addr(1)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(sec.CA.CertPEM)

	// Plaintext against a TLS listener.
	if err := healthOver(t, addr, insecure.NewCredentials()); err == nil {
		t.Fatal("a plaintext client was answered")
	}
	// TLS without a client certificate.
	if err := healthOver(t, addr, credentials.NewTLS(&tls.Config{RootCAs: pool})); err == nil {
		t.Fatal("a client without a certificate was answered")
	}
	// A certificate from another CA.
	other, err := tlsconf.NewCA("other")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := other.Issue("intruder", nil)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	if err := healthOver(t, addr, credentials.NewTLS(&tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}})); err == nil {
		t.Fatal("a certificate from another CA was answered")
	}
	// A client certificate from the cluster's CA.
	cf := sec.Files("client-a", false)
	r, err := tlsconf.NewReloader(cf, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := healthOver(t, addr, r.ClientCredentials()); err != nil {
		t.Fatalf("a client certificate from the cluster's CA was refused: %v", err)
	}
}

// serverSerial is the serial of the certificate addr presents now.
func serverSerial(t *testing.T, addr string, pool *x509.CertPool, client tlsconf.Files) string {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(client.Cert, client.Key)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 3 * time.Second}, "tcp", addr,
		&tls.Config{RootCAs: pool, ServerName: "127.0.0.1", Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

func TestClusterTLSRotatesCertificatesWithoutRestart(t *testing.T) {
	t.Parallel()
	sec := testcluster.NewSecurity(t)
	c := testcluster.New(t, 1, testcluster.TLS(sec))
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(sec.CA.CertPEM)
	client := sec.Files("client-a", false)
	before := serverSerial(t, c.Addr(1), pool, client)

	f := sec.Files(testcluster.NodeName(1), true)
	later := time.Now().Add(time.Minute) // coarse mtimes see the change too
	for _, p := range []string{f.Cert, f.Key} {
		if err := os.Chtimes(p, later, later); err != nil {
			t.Fatal(err)
		}
	}
	after := serverSerial(t, c.Addr(1), pool, client)
	if after == before {
		t.Fatal("the node still presents its old certificate after the files were replaced")
	}
	// The node still works, and talks to itself (controller calls) with
	// the new certificate.
	createTopic(t, c, 1, "after-rotation", 1, 1)
	if _, err := quirev1.NewMetadataClient(c.Conn(1)).GetMetadata(testCtx(t), &quirev1.GetMetadataRequest{}); err != nil {
		t.Fatal(err)
	}
}
