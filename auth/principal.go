package auth

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Errors of this package.
var (
	ErrInvalidPrincipal = errors.New("auth: invalid principal")
	ErrInvalidRule      = errors.New("auth: invalid principal mapping rule")
)

// PrincipalType is the one principal type, Kafka's.
const PrincipalType = "User"

// Anonymous is the principal of a caller that authenticated neither by
// certificate nor by password.
const Anonymous = "User:ANONYMOUS"

// Wildcard is the principal an ACL names to match every principal.
const Wildcard = "User:*"

// UserPrincipal is the principal of user name.
func UserPrincipal(name string) string { return PrincipalType + ":" + name }

// ParsePrincipal checks "User:NAME" (NAME non-empty, "*" the wildcard).
func ParsePrincipal(p string) (string, error) {
	typ, name, ok := strings.Cut(p, ":")
	if !ok || typ != PrincipalType || name == "" {
		return "", fmt.Errorf("%w: %q: want User:NAME", ErrInvalidPrincipal, p)
	}
	return p, nil
}

// ParseSuperUsers parses super.users: principals separated by semicolons
// (as Kafka: names may hold commas, as certificate subjects do).
func ParseSuperUsers(v string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, s := range strings.Split(v, ";") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		p, err := ParsePrincipal(s)
		if err != nil {
			return nil, err
		}
		out[p] = true
	}
	return out, nil
}

// MappingRules turn a certificate's subject, in RFC 2253 form
// ("CN=node-1,O=quire"), into a principal name, as Kafka's
// ssl.principal.mapping.rules: a comma-separated list of
// RULE:pattern/replacement/ (with an optional L or U after the last slash
// to lower- or upper-case the result) and DEFAULT (the subject itself).
// The first rule whose pattern matches the whole subject wins; a subject
// no rule matches is refused.
type MappingRules struct {
	rules []mappingRule
}

type mappingRule struct {
	def         bool
	pattern     *regexp.Regexp
	replacement string
	caseFold    byte // 0, 'L' or 'U'
}

// ruleRE matches one rule at the start of what is left to parse.
var ruleRE = regexp.MustCompile(`^\s*(?:(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?))\s*(?:,|$)`)

// ParseMappingRules parses tls.principal.mapping.rules; empty is DEFAULT.
func ParseMappingRules(v string) (*MappingRules, error) {
	if strings.TrimSpace(v) == "" {
		v = "DEFAULT"
	}
	var m MappingRules
	rest := v
	for strings.TrimSpace(rest) != "" {
		g := ruleRE.FindStringSubmatchIndex(rest)
		if g == nil {
			return nil, fmt.Errorf("%w: cannot parse %q (want RULE:pattern/replacement/[L|U] or DEFAULT, comma-separated)", ErrInvalidRule, rest)
		}
		if g[2] >= 0 {
			m.rules = append(m.rules, mappingRule{def: true})
		} else {
			pat := unescapeSlash(rest[g[4]:g[5]])
			re, err := regexp.Compile("^(?:" + pat + ")$")
			if err != nil {
				return nil, fmt.Errorf("%w: pattern %q: %v", ErrInvalidRule, pat, err)
			}
			r := mappingRule{pattern: re, replacement: unescapeSlash(rest[g[6]:g[7]])}
			if g[8] < g[9] {
				r.caseFold = rest[g[8]]
			}
			m.rules = append(m.rules, r)
		}
		rest = rest[g[1]:]
	}
	return &m, nil
}

func unescapeSlash(s string) string { return strings.ReplaceAll(s, `\/`, `/`) }

// Map returns the principal name for a subject.
func (m *MappingRules) Map(subject string) (string, error) {
	for _, r := range m.rules {
		if r.def {
			return subject, nil
		}
		if !r.pattern.MatchString(subject) {
			continue
		}
		out := r.pattern.ReplaceAllString(subject, r.replacement)
		switch r.caseFold {
		case 'L':
			out = strings.ToLower(out)
		case 'U':
			out = strings.ToUpper(out)
		}
		if out == "" {
			return "", fmt.Errorf("%w: %q maps to an empty name", ErrInvalidPrincipal, subject)
		}
		return out, nil
	}
	return "", fmt.Errorf("%w: no principal mapping rule matches %q", ErrInvalidPrincipal, subject)
}
