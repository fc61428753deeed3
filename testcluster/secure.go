package testcluster

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"

	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/tlsconf"
)

// Security is a throwaway CA with certificates for a cluster's nodes and
// its test clients, written under a temporary directory. Node id gets
// the certificate CN=node-<id>,O=quire for 127.0.0.1.
type Security struct {
	t   testing.TB
	CA  *tlsconf.CA
	Dir string

	mu    sync.Mutex
	files map[string]tlsconf.Files
}

// NewSecurity makes the CA.
func NewSecurity(t testing.TB) *Security {
	t.Helper()
	ca, err := tlsconf.NewCA("testcluster-ca")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := ca.WriteCA(dir); err != nil {
		t.Fatal(err)
	}
	return &Security{t: t, CA: ca, Dir: dir, files: map[string]tlsconf.Files{}}
}

// Files returns the certificate files of name (issued with CN=name on
// first use; reissued when reissue is true, as a rotation).
func (s *Security) Files(name string, reissue bool) tlsconf.Files {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f, ok := s.files[name]; ok && !reissue {
		return f
	}
	f, err := s.CA.WriteFiles(s.Dir, name, name, []string{"127.0.0.1", "localhost"})
	if err != nil {
		s.t.Fatal(err)
	}
	s.files[name] = f
	return f
}

// NodeName is the certificate name of node id.
func NodeName(id int32) string { return fmt.Sprintf("node-%d", id) }

// NodePrincipal is the principal node id's certificate maps to under the
// default mapping rule.
func NodePrincipal(id int32) string { return "User:CN=" + NodeName(id) + ",O=quire" }

// CAFile is the CA bundle clients trust.
func (s *Security) CAFile() string { return filepath.Join(s.Dir, "ca.pem") }

// TLS gives every node its certificate, with client certificates
// required (mutual TLS) and the nodes as super.users (so only they may
// call the internal services), and makes Conn dial with node 1's
// certificate.
func TLS(s *Security) Option {
	return func(o *options) {
		o.tweak = append(o.tweak, func(id int32, c *broker.Config) {
			f := s.Files(NodeName(id), false)
			c.Security.TLSCertFile, c.Security.TLSKeyFile, c.Security.TLSClientCAFile = f.Cert, f.Key, f.CA
			c.Security.TLSClientAuth = string(tlsconf.RequireClientCert)
			var su []string
			for i := 1; i <= o.n; i++ {
				su = append(su, NodePrincipal(int32(i)))
			}
			c.Security.SuperUsers = strings.Join(su, ";")
		})
		o.connOpts = func() []grpc.DialOption {
			r, err := tlsconf.NewReloader(s.Files(NodeName(1), false), nil)
			if err != nil {
				s.t.Fatal(err)
			}
			return []grpc.DialOption{grpc.WithTransportCredentials(r.ClientCredentials())}
		}
	}
}

// Authorizer turns authorizer.enable on (use with TLS): every call a node
// did not make needs an ACL.
func Authorizer() Option {
	return Config(func(_ int32, c *broker.Config) { c.Security.AuthorizerEnable = true })
}

// ClientCredentials are transport credentials presenting name's
// certificate (issued on first use).
func (s *Security) ClientCredentials(name string) grpc.DialOption {
	r, err := tlsconf.NewReloader(s.Files(name, false), nil)
	if err != nil {
		s.t.Fatal(err)
	}
	return grpc.WithTransportCredentials(r.ClientCredentials())
}

// WaitMetadataVersion waits until every running node's image has
// metadata.version at least level (users and ACLs need
// metadata.MetadataVersionSecurity, which the controller finalizes a
// moment after every node registered).
func (c *Cluster) WaitMetadataVersion(ctx context.Context, level int32) {
	c.t.Helper()
	c.WaitImage(ctx, func(img *metadata.Image) bool { return img.MetadataVersion() >= level })
}
