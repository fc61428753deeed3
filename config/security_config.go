package config

// The security section of the configuration: its keys and their checks
// against each other (security.go builds the node's TLS from it).

import (
	"fmt"
	"strings"

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

// TLSFiles are the node's TLS files; Enabled is false with TLS off.
func (c *Config) TLSFiles() tlsconf.Files {
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
