package auth

import (
	"errors"
	"strings"
	"testing"
)

// Principals (an ACL's, super.users'): whatever the text, ParsePrincipal
// accepts exactly "User:NAME" with a non-empty NAME, and ParseSuperUsers
// keeps only principals it accepts.
func FuzzParsePrincipal(f *testing.F) {
	for _, s := range []string{"User:alice", "User:*", "User:", "user:alice", "Group:x", "User:CN=a,O=b", "", ":", "User:a:b",
		"User:a; User:b", ";;User:x;", "User:a;Group:b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePrincipal(s)
		typ, name, ok := strings.Cut(s, ":")
		valid := ok && typ == PrincipalType && name != ""
		switch {
		case valid && (err != nil || p != s):
			t.Fatalf("ParsePrincipal(%q) = %q, %v; want it accepted as it is", s, p, err)
		case !valid && (err == nil || !errors.Is(err, ErrInvalidPrincipal)):
			t.Fatalf("ParsePrincipal(%q) = %q, %v; want ErrInvalidPrincipal", s, p, err)
		}
		users, err := ParseSuperUsers(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidPrincipal) {
				t.Fatalf("ParseSuperUsers(%q): %v, not ErrInvalidPrincipal", s, err)
			}
			return
		}
		for u := range users {
			if _, err := ParsePrincipal(u); err != nil || u != strings.TrimSpace(u) {
				t.Fatalf("ParseSuperUsers(%q) kept %q", s, u)
			}
		}
	})
}

// Principal mapping rules and the certificate subjects they map: any rule
// text parses or fails with ErrInvalidRule; any subject maps to a
// non-empty name or fails with ErrInvalidPrincipal; DEFAULT maps a
// subject to itself.
func FuzzMappingRules(f *testing.F) {
	f.Add("RULE:^CN=(.*?),O=(.*)$/$1@$2/L,DEFAULT", "CN=Node-1,O=Quire")
	f.Add(`RULE:CN=([^,]*).*/$1/U`, "CN=a,OU=b")
	f.Add(`RULE:a\/b/x/`, "a/b")
	f.Add("DEFAULT", "")
	f.Add("RULE:(/", "x")
	f.Add(" RULE:.*//, DEFAULT ", "CN=x")
	f.Fuzz(func(t *testing.T, rules, subject string) {
		if len(rules) > 4096 {
			return // a configuration value, not a client's: keep the regexps small
		}
		m, err := ParseMappingRules(rules)
		if err != nil {
			if !errors.Is(err, ErrInvalidRule) {
				t.Fatalf("ParseMappingRules(%q): %v, not ErrInvalidRule", rules, err)
			}
			return
		}
		name, err := m.Map(subject)
		switch {
		case err != nil && !errors.Is(err, ErrInvalidPrincipal):
			t.Fatalf("Map(%q) under %q: %v, not ErrInvalidPrincipal", subject, rules, err)
		case err == nil && name == "" && !m.rules[0].def:
			t.Fatalf("Map(%q) under %q gave an empty name", subject, rules)
		case len(m.rules) > 0 && m.rules[0].def && (err != nil || name != subject):
			t.Fatalf("DEFAULT first: Map(%q) = %q, %v", subject, name, err)
		}
	})
}

// ACL patterns: any ACL normalizes or fails with a clear error; a
// normalized one normalizes to itself, and allows (or denies) the request
// it names exactly: its principal, operation and resource (a prefixed
// pattern matches its own prefix).
func FuzzACLPattern(f *testing.F) {
	f.Add("User:alice", "ALLOW", "READ", "TOPIC", "orders", "LITERAL")
	f.Add("User:*", "deny", "all", "topic", "*", "")
	f.Add("User:bob", "Allow", "Write", "Topic", "ord", "PREFIXED")
	f.Add("User:svc", "ALLOW", "ALTER", "CLUSTER", "", "LITERAL")
	f.Add("User:x", "ALLOW", "READ", "GROUP", "*", "PREFIXED")
	f.Add("alice", "MAYBE", "EAT", "TABLE", "t", "REGEX")
	f.Fuzz(func(t *testing.T, principal, permission, operation, resourceType, resourceName, patternType string) {
		a := ACL{Principal: principal, Permission: Permission(permission), Operation: Operation(operation),
			ResourceType: ResourceType(resourceType), ResourceName: resourceName, PatternType: PatternType(patternType)}
		n, err := a.Normalize()
		if err != nil {
			if err.Error() == "" || !strings.HasPrefix(err.Error(), "auth: ") {
				t.Fatalf("Normalize(%+v): unclear error %q", a, err)
			}
			return
		}
		again, err := n.Normalize()
		if err != nil || again != n {
			t.Fatalf("Normalize(%+v) = %+v, which normalizes to %+v, %v", a, n, again, err)
		}
		if !n.Matches(n) || !(ACL{}).Matches(n) {
			t.Fatalf("%+v does not match itself or the empty filter", n)
		}
		if n.Principal == Wildcard || n.Operation == OpAll {
			return
		}
		req := Request{Principal: n.Principal, Operation: n.Operation, ResourceType: n.ResourceType, ResourceName: n.ResourceName}
		got := NewAuthorizer([]ACL{n}, nil).Authorize(req)
		if want := n.Permission == Allow; got != want {
			t.Fatalf("%+v: Authorize(%v) = %v, want %v", n, req, got, want)
		}
		if NewAuthorizer(nil, nil).Authorize(req) {
			t.Fatalf("no ACLs allowed %v", req)
		}
	})
}

// SCRAM: a stored credential of any shape is validated before use, and a
// password (what a client sends) is checked against it without panicking;
// a credential derived from a password verifies that password and no
// other.
func FuzzSCRAMCredential(f *testing.F) {
	f.Add("secret", []byte("0123456789abcdef"), MinIterations, []byte("k"), []byte("s"))
	f.Add("", []byte{}, 0, []byte(nil), []byte(nil))
	f.Add("p\x00w", []byte{1}, MaxIterations+1, make([]byte, 32), make([]byte, 32))
	f.Fuzz(func(t *testing.T, password string, salt []byte, iterations int, storedKey, serverKey []byte) {
		stored := Credential{Salt: salt, Iterations: iterations, StoredKey: storedKey, ServerKey: serverKey}
		if err := stored.Validate(); err == nil {
			if stored.Iterations > MinIterations {
				stored.Iterations = MinIterations // the cost of a check is not under test
			}
			_ = stored.Verify(password)
		} else if !errors.Is(err, ErrInvalidCredential) {
			t.Fatalf("Validate: %v, not ErrInvalidCredential", err)
		}
		c, err := DeriveCredential(password, salt, MinIterations)
		if err != nil {
			if password != "" || !errors.Is(err, ErrInvalidCredential) {
				t.Fatalf("DeriveCredential(%q): %v", password, err)
			}
			return
		}
		if len(salt) > 0 {
			if err := c.Validate(); err != nil {
				t.Fatalf("a derived credential is invalid: %v", err)
			}
		}
		if !c.Verify(password) || c.Verify(password+"x") {
			t.Fatalf("credential of %q: verifies it %v, verifies another %v", password, c.Verify(password), c.Verify(password+"x"))
		}
	})
}
