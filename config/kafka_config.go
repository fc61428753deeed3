package config

// The Kafka listeners' security in the configuration: each listener's
// protocol (kafka.listener.security.protocol.map), the SASL mechanisms,
// and the checks of kafka.listener.names against the rest (kafka.go,
// kafka_security.go serve them).

import (
	"fmt"
	"slices"
	"strings"

	"github.com/quirelog/quire/auth"
)

// Kafka's security protocols.
const (
	ProtocolPlaintext     = "PLAINTEXT"
	ProtocolSSL           = "SSL"
	ProtocolSASLPlaintext = "SASL_PLAINTEXT"
	ProtocolSASLSSL       = "SASL_SSL"
)

// SASLPlain is SASL/PLAIN: the password itself, so only over TLS.
const SASLPlain = "PLAIN"

// SASLMechanisms are the mechanisms served, in the order offered.
var SASLMechanisms = []string{auth.MechanismSHA256, auth.MechanismSHA512, SASLPlain}

var kafkaSecurityKeys = []configKey{
	stringKey("security", "kafka.listener.security.protocol.map", "",
		"Security protocol of each Kafka listener (kafka.listener.names), as Kafka's listener.security.protocol.map: NAME:PROTOCOL,... with PLAINTEXT, SSL (TLS; client certificates as tls.client.auth says, mapped to principals as on gRPC), SASL_PLAINTEXT or SASL_SSL (SASL with sasl.enabled.mechanisms; SASL_SSL asks for no client certificate). A Kafka listener not named takes the protocol its name is, if it is one; else SSL when tls.cert.file is set, PLAINTEXT when not.",
		func(c *Config) *string { return &c.Security.KafkaSecurityProtocolMap },
		func(v string) error { _, err := parseProtocolMap(v); return err }),
	stringKey("security", "sasl.enabled.mechanisms", "SCRAM-SHA-256,SCRAM-SHA-512",
		"SASL mechanisms the SASL_PLAINTEXT and SASL_SSL Kafka listeners offer: SCRAM-SHA-256 and SCRAM-SHA-512 (the users of quire user create; users stored before SCRAM-SHA-512 was served need their password set again for it) and PLAIN (the password itself: offered only on SASL_SSL listeners, refused on SASL_PLAINTEXT ones).",
		func(c *Config) *string { return &c.Security.SASLEnabledMechanisms },
		func(v string) error { _, err := ParseSASLMechanisms(v); return err }),
}

// parseProtocolMap parses NAME:PROTOCOL,... (names upper-cased).
func parseProtocolMap(v string) (map[string]string, error) {
	out := map[string]string{}
	if strings.TrimSpace(v) == "" {
		return out, nil
	}
	for _, part := range strings.Split(v, ",") {
		name, proto, ok := strings.Cut(strings.TrimSpace(part), ":")
		name, proto = strings.ToUpper(strings.TrimSpace(name)), strings.ToUpper(strings.TrimSpace(proto))
		if !ok || name == "" {
			return nil, fmt.Errorf("entry %q: want NAME:PROTOCOL", part)
		}
		switch proto {
		case ProtocolPlaintext, ProtocolSSL, ProtocolSASLPlaintext, ProtocolSASLSSL:
		default:
			return nil, fmt.Errorf("%s: protocol %q: want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", name, proto)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("listener %s given twice", name)
		}
		out[name] = proto
	}
	return out, nil
}

// ParseSASLMechanisms parses sasl.enabled.mechanisms.
func ParseSASLMechanisms(v string) ([]string, error) {
	var out []string
	for _, m := range strings.Split(v, ",") {
		m = strings.ToUpper(strings.TrimSpace(m))
		switch {
		case m == "":
			continue
		case !slices.Contains(SASLMechanisms, m):
			return nil, fmt.Errorf("mechanism %q is not served (want %s)", m, strings.Join(SASLMechanisms, ", "))
		case !slices.Contains(out, m):
			out = append(out, m)
		}
	}
	return out, nil
}

// KafkaProtocol is a Kafka listener's security protocol.
func (c *Config) KafkaProtocol(name string) string {
	m, _ := parseProtocolMap(c.Security.KafkaSecurityProtocolMap)
	if p, ok := m[name]; ok {
		return p
	}
	switch name {
	case ProtocolPlaintext, ProtocolSSL, ProtocolSASLPlaintext, ProtocolSASLSSL:
		// Kafka's default map: a listener named for a protocol has it.
		return name
	}
	if c.Security.TLSCertFile != "" {
		return ProtocolSSL
	}
	return ProtocolPlaintext
}

// kafkaSecurityErrors checks the Kafka listeners' security against the
// rest of the configuration.
func (c *Config) kafkaSecurityErrors(kafkaNames map[string]bool) []error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %s: %s", ErrInvalidConfig, key, fmt.Sprintf(format, args...)))
	}
	const mapKey = "kafka.listener.security.protocol.map"
	m, err := parseProtocolMap(c.Security.KafkaSecurityProtocolMap)
	if err != nil {
		bad(mapKey, "%v", err)
	}
	for name := range m {
		if !kafkaNames[name] {
			bad(mapKey, "%s is not a Kafka listener (kafka.listener.names); gRPC listeners are secured by tls.cert.file and the gRPC credentials", name)
		}
	}
	mechs, err := ParseSASLMechanisms(c.Security.SASLEnabledMechanisms)
	if err != nil {
		bad("sasl.enabled.mechanisms", "%v", err)
	}
	s := &c.Security
	names := make([]string, 0, len(kafkaNames))
	for n := range kafkaNames {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		p := c.KafkaProtocol(name)
		switch {
		case (p == ProtocolSSL || p == ProtocolSASLSSL) && s.TLSCertFile == "":
			bad(mapKey, "Kafka listener %s is %s, which needs TLS: set tls.cert.file and tls.key.file", name, p)
		case (p == ProtocolSASLPlaintext || p == ProtocolSASLSSL) && len(mechs) == 0 && err == nil:
			bad("sasl.enabled.mechanisms", "Kafka listener %s is %s but no mechanism is enabled", name, p)
		case p == ProtocolSASLPlaintext && len(mechs) == 1 && mechs[0] == SASLPlain:
			bad("sasl.enabled.mechanisms", "Kafka listener %s is SASL_PLAINTEXT, where PLAIN (the password in the clear) is refused, and PLAIN is the only mechanism enabled: enable SCRAM-SHA-256 or SCRAM-SHA-512, or make it SASL_SSL", name)
		case p == ProtocolPlaintext && s.TLSCertFile != "" && !s.AuthorizerEnable:
			// TLS on the gRPC listeners and no ACLs: this listener
			// would be the one door where anyone who can connect may
			// read, write and delete every topic, in the clear.
			bad(mapKey, "Kafka listener %s is PLAINTEXT beside TLS listeners with authorizer.enable off: anyone could read and write every topic through it unauthenticated and in the clear; make it SSL, SASL_SSL or SASL_PLAINTEXT, or turn authorizer.enable on to judge its User:ANONYMOUS clients by the ACLs", name)
		}
	}
	return errs
}

// kafkaListenerNames parses kafka.listener.names against the listeners:
// each must be one of them and none the inter-broker one (other nodes
// speak gRPC to it). Their security is kafka_security.go's.
func (c *Config) kafkaListenerNames(ls []ListenerSpec, inter string) (map[string]bool, []error) {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: kafka.listener.names: %s", ErrInvalidConfig, fmt.Sprintf(format, args...)))
	}
	out := map[string]bool{}
	if strings.TrimSpace(c.KafkaListenerNames) == "" {
		return out, nil
	}
	names := map[string]bool{}
	for _, l := range ls {
		names[l.Name] = true
	}
	for _, n := range strings.Split(c.KafkaListenerNames, ",") {
		n = strings.ToUpper(strings.TrimSpace(n))
		switch {
		case n == "":
			bad("empty entry in %q", c.KafkaListenerNames)
		case len(ls) > 0 && !names[n]:
			bad("%s is not one of the listeners (%s)", n, listenerNames(ls))
		case n == inter:
			bad("%s is the inter-broker listener, which other nodes reach over gRPC; name another listener for Kafka clients", n)
		default:
			out[n] = true
		}
	}
	return out, errs
}
