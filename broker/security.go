package broker

// Transport security: TLS on every listener (tls.* keys), node-to-node
// connections with the node's own certificate, and the warning for a node
// reachable from other hosts with neither. Who a caller is and what it may
// do is auth.go's.

import (
	"fmt"
	"net"
	"strings"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/quirelog/quire/auth"
	"github.com/quirelog/quire/tlsconf"
)

// SecurityConfig is the security section of Config.
type SecurityConfig struct {
	// TLSCertFile and TLSKeyFile are tls.cert.file and tls.key.file: the
	// node's PEM certificate (chain) and key. Both set turn TLS on for
	// every listener and every node-to-node connection, where the same
	// certificate is the node's client certificate.
	TLSCertFile string
	TLSKeyFile  string
	// TLSClientCAFile is tls.client.ca.file: the PEM CA bundle client
	// certificates must chain to, and the one other nodes' server
	// certificates are checked against; empty trusts the system's roots
	// for the latter and accepts no client certificate.
	TLSClientCAFile string
	// TLSClientAuth is tls.client.auth: none, request (verified when
	// given) or require.
	TLSClientAuth string
	// PrincipalMappingRules is tls.principal.mapping.rules (Kafka's
	// ssl.principal.mapping.rules): how a certificate's subject becomes a
	// principal's name.
	PrincipalMappingRules string
	// SuperUsers is super.users: principals, "User:NAME;User:NAME2", that
	// every ACL check lets pass; those authenticated by certificate are
	// the node principals, the only ones the internal services answer.
	SuperUsers string
	// AuthorizerEnable is authorizer.enable: check every call against the
	// ACLs in the metadata log.
	AuthorizerEnable bool
	// KafkaSecurityProtocolMap is kafka.listener.security.protocol.map
	// and SASLEnabledMechanisms sasl.enabled.mechanisms: the security of
	// the Kafka listeners (kafka_security.go).
	KafkaSecurityProtocolMap string
	SASLEnabledMechanisms    string
}

var securityKeys = []configKey{
	stringKey("security", "tls.cert.file", "", "PEM certificate (chain) of this node; with tls.key.file it turns TLS on for every listener and every node-to-node connection (where it is also this node's client certificate). Read again when the file changes, no restart needed.",
		func(c *Config) *string { return &c.Security.TLSCertFile }, nil),
	stringKey("security", "tls.key.file", "", "PEM private key of tls.cert.file.",
		func(c *Config) *string { return &c.Security.TLSKeyFile }, nil),
	stringKey("security", "tls.client.ca.file", "", "PEM CA bundle that client certificates must chain to, also used to check other nodes' certificates; empty: no client certificates, system roots for nodes.",
		func(c *Config) *string { return &c.Security.TLSClientCAFile }, nil),
	stringKey("security", "tls.client.auth", "none", "Client certificates (mutual TLS): none, request (checked when given) or require.",
		func(c *Config) *string { return &c.Security.TLSClientAuth },
		func(v string) error { _, err := tlsconf.ParseClientAuth(v); return err }),
	stringKey("security", "tls.principal.mapping.rules", "DEFAULT", "How a client certificate's subject (RFC 2253, e.g. CN=node-1,O=quire) becomes the principal User:NAME, as Kafka's ssl.principal.mapping.rules: RULE:pattern/replacement/[L|U] and DEFAULT (the subject itself), comma-separated, first match wins.",
		func(c *Config) *string { return &c.Security.PrincipalMappingRules },
		func(v string) error { _, err := auth.ParseMappingRules(v); return err }),
	stringKey("security", "super.users", "", "Principals every ACL check lets pass, separated by semicolons (User:CN=node-1,O=quire;User:admin). Those authenticated by certificate are the node principals: once set, only they may call the internal services (replication, raft, controller).",
		func(c *Config) *string { return &c.Security.SuperUsers },
		func(v string) error { _, err := auth.ParseSuperUsers(v); return err }),
	boolKey("security", "authorizer.enable", "false", "Check every call against the ACLs in the metadata log (quire acl); a call no ACL allows is refused with PERMISSION_DENIED. Needs super.users naming the nodes.",
		func(c *Config) *bool { return &c.Security.AuthorizerEnable }),
}

// appendSecurityKeys adds the security keys after the others.
func appendSecurityKeys(keys []configKey) []configKey {
	return append(append(keys, securityKeys...), kafkaSecurityKeys...)
}

// tlsFiles are the node's TLS files; Enabled is false with TLS off.
func (c *Config) tlsFiles() tlsconf.Files {
	s := &c.Security
	if s.TLSCertFile == "" && s.TLSKeyFile == "" {
		return tlsconf.Files{}
	}
	return tlsconf.Files{Cert: s.TLSCertFile, Key: s.TLSKeyFile, CA: s.TLSClientCAFile}
}

// validateSecurity checks the security keys against each other.
func (c *Config) validateSecurity() []error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %s: %s", ErrInvalidConfig, key, fmt.Sprintf(format, args...)))
	}
	s := &c.Security
	if (s.TLSCertFile == "") != (s.TLSKeyFile == "") {
		bad("tls.cert.file", "tls.cert.file and tls.key.file go together")
	}
	if s.TLSClientAuth != "" && s.TLSClientAuth != string(tlsconf.NoClientCert) {
		if s.TLSCertFile == "" {
			bad("tls.client.auth", "%s needs TLS (tls.cert.file and tls.key.file)", s.TLSClientAuth)
		}
		if s.TLSClientCAFile == "" {
			bad("tls.client.auth", "%s needs tls.client.ca.file to check client certificates against", s.TLSClientAuth)
		}
	}
	if s.AuthorizerEnable && strings.TrimSpace(s.SuperUsers) == "" {
		bad("authorizer.enable", "needs super.users naming the node principals, or nodes cannot reach each other")
	}
	if strings.TrimSpace(s.SuperUsers) != "" && (s.TLSCertFile == "" || s.TLSClientAuth == "" || s.TLSClientAuth == string(tlsconf.NoClientCert)) {
		bad("super.users", "nodes are known by their certificates: set tls.client.auth to request or require (with TLS on), or the internal services refuse every node")
	}
	if s.TLSClientCAFile != "" && s.TLSCertFile == "" {
		bad("tls.client.ca.file", "set without tls.cert.file and tls.key.file: TLS is off")
	}
	return errs
}

// transport is a node's TLS state: nil reloader with TLS off.
type transport struct {
	tls *tlsconf.Reloader
}

// newTransport reads the TLS files once (a bad file stops New).
func newTransport(cfg *Config, logger hclog.Logger) (*transport, error) {
	f := cfg.tlsFiles()
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
