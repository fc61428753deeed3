package broker_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/quirelog/quire/broker"
)

func TestSecurityConfigRefusesHalfSettings(t *testing.T) {
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
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := broker.DevConfig(t.TempDir())
			for k, v := range tc.set {
				if err := c.Set(k, v); err != nil {
					t.Fatal(err)
				}
			}
			err := c.Validate()
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
	c := broker.DevConfig(t.TempDir())
	c.Security.TLSCertFile, c.Security.TLSKeyFile = "/nonexistent/cert.pem", "/nonexistent/key.pem"
	if _, err := broker.New(c); !errors.Is(err, broker.ErrInvalidConfig) || !strings.Contains(err.Error(), "cert.pem") {
		t.Fatalf("New = %v, want ErrInvalidConfig naming the file", err)
	}
}
