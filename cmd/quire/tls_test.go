package main

import (
	"strings"
	"testing"

	"github.com/quirelog/quire/testcluster"
)

// TestCLIPlaintextAgainstTLSHints: a plaintext CLI against a TLS node is
// refused with a hint to give --tls-ca; with the CA and a certificate it
// connects.
func TestCLIPlaintextAgainstTLSHints(t *testing.T) {
	t.Parallel()
	sec := testcluster.NewSecurity(t)
	c := testcluster.New(t, 1, testcluster.TLS(sec))
	addr := c.Addr(1)
	_, _, err := runCLIStdin("", "--brokers", addr, "cluster", "info")
	if err == nil || !strings.Contains(err.Error(), "give --tls-ca") {
		t.Fatalf("plaintext cluster info against a TLS node: err %v, want the --tls-ca hint", err)
	}
	f := sec.Files("admin", false)
	out, _, err := runCLIStdin("", "--brokers", addr, "--tls-ca", f.CA, "--tls-cert", f.Cert, "--tls-key", f.Key, "cluster", "info")
	if err != nil {
		t.Fatalf("cluster info over TLS: %v", err)
	}
	if !strings.Contains(out, addr) {
		t.Fatalf("cluster info over TLS does not show %s:\n%s", addr, out)
	}
}
