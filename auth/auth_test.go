package auth

import (
	"errors"
	"testing"
)

func TestAuthMappingRules(t *testing.T) {
	cases := []struct {
		rules, subject, want string
		err                  bool
	}{
		{"", "CN=node-1,O=quire", "CN=node-1,O=quire", false},
		{"DEFAULT", "CN=a", "CN=a", false},
		{`RULE:^CN=(.*?),O=quire$/$1/,DEFAULT`, "CN=node-1,O=quire", "node-1", false},
		{`RULE:^CN=(.*?),O=quire$/$1/,DEFAULT`, "CN=x,O=other", "CN=x,O=other", false},
		{`RULE:^CN=(.*?),.*$/$1/U`, "CN=admin,O=quire", "ADMIN", false},
		{`RULE:^CN=(.*?),.*$/$1/L`, "CN=Admin,O=quire", "admin", false},
		{`RULE:^CN=(.*?)$/a\/$1/`, "CN=b", "a/b", false},
		{`RULE:^CN=(.*?),O=quire$/$1/`, "CN=x,O=other", "", true}, // no rule matches
	}
	for _, tc := range cases {
		m, err := ParseMappingRules(tc.rules)
		if err != nil {
			t.Fatalf("%q: %v", tc.rules, err)
		}
		got, err := m.Map(tc.subject)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("rules %q on %q = %q, %v; want %q (error %v)", tc.rules, tc.subject, got, err, tc.want, tc.err)
		}
	}
	for _, bad := range []string{"RULE:abc", "NOPE", `RULE:(/x/`, "DEFAULT,,"} {
		if _, err := ParseMappingRules(bad); !errors.Is(err, ErrInvalidRule) {
			t.Errorf("rules %q: %v, want ErrInvalidRule", bad, err)
		}
	}
}

func TestAuthSuperUsers(t *testing.T) {
	su, err := ParseSuperUsers("User:CN=node-1,O=quire; User:admin;")
	if err != nil || !su["User:CN=node-1,O=quire"] || !su["User:admin"] || len(su) != 2 {
		t.Fatalf("%v %v", su, err)
	}
	for _, bad := range []string{"admin", "Group:x", "User:"} {
		if _, err := ParseSuperUsers(bad); !errors.Is(err, ErrInvalidPrincipal) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestAuthSCRAMVerifies(t *testing.T) {
	c, err := NewCredential("s3cret", MinIterations)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if !c.Verify("s3cret") {
		t.Fatal("the right password was refused")
	}
	for _, wrong := range []string{"", "s3cret ", "S3cret", "other"} {
		if c.Verify(wrong) {
			t.Fatalf("password %q accepted", wrong)
		}
	}
	d, _ := NewCredential("s3cret", MinIterations)
	if string(d.Salt) == string(c.Salt) || string(d.StoredKey) == string(c.StoredKey) {
		t.Fatal("two credentials of one password share salt or key")
	}
	// The same password and salt derive the same keys (what a broker
	// checks a sent password by).
	salt := c.Salt
	v, err := DeriveCredential("s3cret", salt, MinIterations)
	if err != nil || string(v.StoredKey) != string(c.StoredKey) || string(v.ServerKey) != string(c.ServerKey) {
		t.Fatalf("derived again: %v", err)
	}
	if _, err := DeriveCredential("x", salt, 100); !errors.Is(err, ErrInvalidCredential) {
		t.Fatalf("100 iterations: %v", err)
	}
	if _, err := DeriveCredential("", salt, 4096); !errors.Is(err, ErrInvalidCredential) {
		t.Fatalf("empty password: %v", err)
	}
}

func TestAuthACLs(t *testing.T) {
	acl := func(p string, perm Permission, op Operation, rt ResourceType, name string, pt PatternType) ACL {
		a, err := ACL{Principal: p, Permission: perm, Operation: op, ResourceType: rt, ResourceName: name, PatternType: pt}.Normalize()
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	z := NewAuthorizer([]ACL{
		acl("User:reader", Allow, OpRead, ResourceTopic, "orders", Literal),
		acl("User:reader", Allow, OpRead, ResourceGroup, "app-", Prefixed),
		acl("User:writer", Allow, OpWrite, ResourceTopic, "*", Literal),
		acl("User:writer", Deny, OpWrite, ResourceTopic, "secret", Literal),
		acl("User:*", Allow, OpDescribe, ResourceTopic, "public-", Prefixed),
		acl("User:ops", Allow, OpAll, ResourceCluster, "", Literal),
		acl("User:ops", Deny, OpAll, ResourceTopic, "audit", Literal),
		acl("User:ops", Allow, OpAll, ResourceTopic, "*", Literal),
	}, map[string]bool{"User:node": true})
	cases := []struct {
		p    string
		op   Operation
		rt   ResourceType
		name string
		want bool
	}{
		{"User:reader", OpRead, ResourceTopic, "orders", true},
		{"User:reader", OpDescribe, ResourceTopic, "orders", true}, // implied by Read
		{"User:reader", OpWrite, ResourceTopic, "orders", false},
		{"User:reader", OpDelete, ResourceTopic, "orders", false},
		{"User:reader", OpRead, ResourceTopic, "orders2", false}, // literal is exact
		{"User:reader", OpRead, ResourceGroup, "app-1", true},
		{"User:reader", OpRead, ResourceGroup, "other", false},
		{"User:reader", OpDescribe, ResourceCluster, ClusterName, false},
		{"User:writer", OpWrite, ResourceTopic, "anything", true},
		{"User:writer", OpWrite, ResourceTopic, "secret", false}, // deny over allow
		{"User:writer", OpRead, ResourceTopic, "anything", false},
		{"User:someone", OpDescribe, ResourceTopic, "public-x", true}, // wildcard principal
		{"User:someone", OpRead, ResourceTopic, "public-x", false},
		{"User:ops", OpAlter, ResourceCluster, ClusterName, true},
		{"User:ops", OpDescribe, ResourceTopic, "audit", false}, // deny All
		{"User:ops", OpDelete, ResourceTopic, "x", true},
		{"User:node", OpDelete, ResourceTopic, "audit", true}, // super user
		{Anonymous, OpDescribe, ResourceTopic, "orders", false},
	}
	for _, tc := range cases {
		r := Request{Principal: tc.p, Operation: tc.op, ResourceType: tc.rt, ResourceName: tc.name}
		if got := z.Authorize(r); got != tc.want {
			t.Errorf("%s %s %s %s = %v, want %v", tc.p, tc.op, tc.rt, tc.name, got, tc.want)
		}
	}
}

func TestAuthACLValidation(t *testing.T) {
	bad := []ACL{
		{Principal: "reader", Permission: Allow, Operation: OpRead, ResourceType: ResourceTopic, ResourceName: "x"},
		{Principal: "User:a", Permission: "Maybe", Operation: OpRead, ResourceType: ResourceTopic, ResourceName: "x"},
		{Principal: "User:a", Permission: Allow, Operation: "Fly", ResourceType: ResourceTopic, ResourceName: "x"},
		{Principal: "User:a", Permission: Allow, Operation: OpRead, ResourceType: "Broker", ResourceName: "x"},
		{Principal: "User:a", Permission: Allow, Operation: OpRead, ResourceType: ResourceTopic, ResourceName: ""},
		{Principal: "User:a", Permission: Allow, Operation: OpRead, ResourceType: ResourceTopic, ResourceName: "*", PatternType: Prefixed},
	}
	for _, a := range bad {
		if _, err := a.Normalize(); !errors.Is(err, ErrInvalidACL) {
			t.Errorf("%v: %v, want ErrInvalidACL", a, err)
		}
	}
	a, err := ACL{Principal: "User:a", Permission: "allow", Operation: "read", ResourceType: "topic", ResourceName: "x"}.Normalize()
	if err != nil || a.Permission != Allow || a.Operation != OpRead || a.ResourceType != ResourceTopic || a.PatternType != Literal {
		t.Fatalf("%+v %v", a, err)
	}
	if !(ACL{Principal: "User:a"}).Matches(a) || (ACL{Principal: "User:b"}).Matches(a) {
		t.Fatal("filter matching")
	}
}

// TestAuthAuthorizeAny: an Allow of Write on some topics is Write on "any
// topic" unless Denies cover every name it allows; All implies it; the
// principal must match; super users pass.
func TestAuthAuthorizeAny(t *testing.T) {
	acl := func(p string, perm Permission, op Operation, rt ResourceType, name string, pt PatternType) ACL {
		a, err := ACL{Principal: p, Permission: perm, Operation: op, ResourceType: rt, ResourceName: name, PatternType: pt}.Normalize()
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	cases := []struct {
		name string
		acls []ACL
		want bool
	}{
		{"none", nil, false},
		{"literal", []ACL{acl("User:a", Allow, OpWrite, ResourceTopic, "orders", Literal)}, true},
		{"all", []ACL{acl("User:a", Allow, OpAll, ResourceTopic, "orders", Literal)}, true},
		{"wildcard principal", []ACL{acl("User:*", Allow, OpWrite, ResourceTopic, "x-", Prefixed)}, true},
		{"other principal", []ACL{acl("User:b", Allow, OpWrite, ResourceTopic, "orders", Literal)}, false},
		{"read only", []ACL{acl("User:a", Allow, OpRead, ResourceTopic, "*", Literal)}, false},
		{"write on a group", []ACL{acl("User:a", Allow, OpWrite, ResourceGroup, "*", Literal)}, false},
		{"denied same literal", []ACL{
			acl("User:a", Allow, OpWrite, ResourceTopic, "orders", Literal),
			acl("User:a", Deny, OpWrite, ResourceTopic, "orders", Literal)}, false},
		{"denied other literal", []ACL{
			acl("User:a", Allow, OpWrite, ResourceTopic, "orders", Literal),
			acl("User:a", Deny, OpWrite, ResourceTopic, "audit", Literal)}, true},
		{"denied everything", []ACL{
			acl("User:a", Allow, OpWrite, ResourceTopic, "o", Prefixed),
			acl("User:*", Deny, OpAll, ResourceTopic, "*", Literal)}, false},
		{"denied a shorter prefix", []ACL{
			acl("User:a", Allow, OpWrite, ResourceTopic, "orders-", Prefixed),
			acl("User:a", Deny, OpWrite, ResourceTopic, "ord", Prefixed)}, false},
		{"denied a longer prefix", []ACL{
			acl("User:a", Allow, OpWrite, ResourceTopic, "ord", Prefixed),
			acl("User:a", Deny, OpWrite, ResourceTopic, "orders-", Prefixed)}, true},
		{"wildcard allow, some denied", []ACL{
			acl("User:a", Allow, OpWrite, ResourceTopic, "*", Literal),
			acl("User:a", Deny, OpWrite, ResourceTopic, "a", Prefixed)}, true},
		{"deny of another op", []ACL{
			acl("User:a", Allow, OpWrite, ResourceTopic, "orders", Literal),
			acl("User:a", Deny, OpRead, ResourceTopic, "*", Literal)}, true},
	}
	for _, tc := range cases {
		z := NewAuthorizer(tc.acls, map[string]bool{"User:root": true})
		if got := z.AuthorizeAny("User:a", OpWrite, ResourceTopic); got != tc.want {
			t.Errorf("%s: AuthorizeAny = %v, want %v", tc.name, got, tc.want)
		}
		if !z.AuthorizeAny("User:root", OpWrite, ResourceTopic) {
			t.Errorf("%s: a super user refused", tc.name)
		}
	}
	z := NewAuthorizer([]ACL{acl("User:a", Allow, OpIdempotentWrite, ResourceCluster, "", Literal)}, nil)
	if !z.Authorize(Request{Principal: "User:a", Operation: OpIdempotentWrite, ResourceType: ResourceCluster, ResourceName: ClusterName}) {
		t.Error("IdempotentWrite on the cluster refused with its ACL")
	}
	if op, err := ParseOperation("idempotentwrite"); err != nil || op != OpIdempotentWrite {
		t.Errorf("ParseOperation(idempotentwrite) = %q, %v", op, err)
	}
}
