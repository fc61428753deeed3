package broker

// Transport security: TLS on every listener (tls.* keys), node-to-node
// connections with the node's own certificate, and the warning for a node
// reachable from other hosts with neither. Who a caller is and what it may
// do is auth.go's.

import (
	"fmt"
	"net"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/quirelog/quire/tlsconf"
)

// transport is a node's TLS state: nil reloader with TLS off.
type transport struct {
	tls *tlsconf.Reloader
}

// newTransport reads the TLS files once (a bad file stops New).
func newTransport(cfg *Config, logger hclog.Logger) (*transport, error) {
	f := cfg.TLSFiles()
	if !f.Enabled() {
		return &transport{}, nil
	}
	r, err := tlsconf.NewReloader(f, func(err error) {
		logger.Error("reloading TLS files failed; the previous certificates stay in use", "error", err)
	})
	if err != nil {
		return nil, fmt.Errorf("%w: tls: %v", ErrInvalidConfig, err)
	}
	return &transport{tls: r}, nil
}

// serverOptions are the gRPC server's credentials.
func (t *transport) serverOptions(cfg *Config) []grpc.ServerOption {
	if t.tls == nil {
		return nil
	}
	auth, _ := tlsconf.ParseClientAuth(cfg.Security.TLSClientAuth)
	if auth == "" {
		auth = tlsconf.NoClientCert
	}
	return []grpc.ServerOption{grpc.Creds(credentials.NewTLS(t.tls.ServerConfig(auth)))}
}

// peerCredentials are those of node-to-node connections: TLS with the
// node's certificate when TLS is on.
func (t *transport) peerCredentials() credentials.TransportCredentials {
	if t.tls == nil {
		return insecure.NewCredentials()
	}
	return t.tls.ClientCredentials()
}

// warnIfOpen logs, for every listener reachable from other hosts, that
// it has neither TLS nor authorization.
func (b *Broker) warnIfOpen() {
	if b.transport.tls != nil || b.cfg.Security.AuthorizerEnable {
		return
	}
	for _, l := range b.listeners {
		host, _, err := net.SplitHostPort(l.lis.Addr().String())
		if err != nil {
			continue
		}
		if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
			continue
		}
		b.logger.Warn("listener reachable from other hosts without TLS or authorization: anyone who can connect may read, write and delete every topic and pose as a node; set tls.cert.file, tls.key.file and authorizer.enable",
			"listener", l.name, "addr", l.lis.Addr().String())
	}
}
