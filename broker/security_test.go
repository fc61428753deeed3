package broker_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/broker/brokertest"
)

func TestSecurityConfigRefusesHalfSettings(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		set  map[string]string
		want string
	}{
		{"cert without key", map[string]string{"tls.cert.file": "/x.pem"}, "tls.key.file go together"},
		{"key without cert", map[string]string{"tls.key.file": "/x.pem"}, "tls.key.file go together"},
		{"client auth without TLS", map[string]string{"tls.client.auth": "require", "tls.client.ca.file": "/ca.pem"}, "needs TLS"},
		{"client auth without CA", map[string]string{"tls.cert.file": "/c", "tls.key.file": "/k", "tls.client.auth": "request"}, "needs tls.client.ca.file"},
		{"CA without TLS", map[string]string{"tls.client.ca.file": "/ca.pem"}, "TLS is off"},
		{"authorizer without super users", map[string]string{"authorizer.enable": "true"}, "needs super.users"},
		{"super users without client certificates", map[string]string{"super.users": "User:CN=node-1", "tls.cert.file": "/c", "tls.key.file": "/k"}, "tls.client.auth to request or require"},
		{"bad super users", map[string]string{"super.users": "node-1"}, "User:NAME"},
		{"bad mapping rule", map[string]string{"tls.principal.mapping.rules": "RULE:x"}, "mapping rule"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := broker.DevConfig(t.TempDir())
			var err error
			for k, v := range tc.set {
				if err == nil {
					err = c.Set(k, v) // a bad value fails here already
				}
			}
			if err == nil {
				err = c.Validate()
			}
			if !errors.Is(err, broker.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want ErrInvalidConfig saying %q", err, tc.want)
			}
		})
	}
	c := broker.DevConfig(t.TempDir())
	if err := c.Set("tls.client.auth", "sometimes"); !errors.Is(err, broker.ErrInvalidConfig) {
		t.Fatalf("tls.client.auth=sometimes: %v", err)
	}
}

func TestSecurityMissingCertificateStopsNew(t *testing.T) {
	t.Parallel()
	c := broker.DevConfig(t.TempDir())
	c.Security.TLSCertFile, c.Security.TLSKeyFile = "/nonexistent/cert.pem", "/nonexistent/key.pem"
	if _, err := broker.New(c); !errors.Is(err, broker.ErrInvalidConfig) || !strings.Contains(err.Error(), "cert.pem") {
		t.Fatalf("New = %v, want ErrInvalidConfig naming the file", err)
	}
}

// syncBuffer collects log output written from the broker's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestSecurityWarnsOfOpenNonLoopbackListeners(t *testing.T) {
	t.Parallel()
	const warning = "without TLS or authorization"
	cases := []struct {
		listen string
		warn   bool
	}{
		{"127.0.0.1:0", false}, // --dev: open, on loopback, quiet
		{"0.0.0.0:0", true},
	}
	for _, tc := range cases {
		t.Run(tc.listen, func(t *testing.T) {
			var logs syncBuffer
			cfg := brokertest.Config(t)
			cfg.ListenAddr = tc.listen
			cfg.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: &logs})
			b := brokertest.StartConfig(t, cfg)
			if err := b.WaitReady(ctxT(t)); err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(logs.String(), warning); got != tc.warn {
				t.Fatalf("listening on %s: warned %v, want %v; logs:\n%s", tc.listen, got, tc.warn, logs.String())
			}
		})
	}
}
