package request_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/quirelog/quire/auth"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/request"
)

// store is the users and ACLs in memory, applied as each change is made:
// WaitFor finds its condition true at once, or fails.
type store struct {
	mu    sync.Mutex
	users map[string]auth.Credential
	acls  []auth.ACL
	calls int
}

func (s *store) UpsertUserCredential(_ context.Context, user string, cred auth.Credential, mechanisms []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	s.users[user] = s.users[user].Merge(cred, mechanisms)
	return nil
}

func (s *store) DeleteUserCredential(_ context.Context, user, mechanism string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	cred, ok := s.users[user]
	if !ok {
		return metadata.ErrInvalidUser
	}
	if mechanism != "" {
		rest, had := cred.Without(mechanism)
		if !had {
			return metadata.ErrInvalidUser
		}
		if rest.Has256() || rest.Has512() {
			s.users[user] = rest
			return nil
		}
	}
	delete(s.users, user)
	return nil
}

func (s *store) CreateACLs(_ context.Context, acls []auth.ACL) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	s.acls = append(s.acls, acls...)
	return nil
}

func (s *store) DeleteACLs(_ context.Context, filters []auth.ACL) ([]auth.ACL, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	var deleted []auth.ACL
	s.acls = slices.DeleteFunc(s.acls, func(a auth.ACL) bool {
		for _, f := range filters {
			if f.Matches(a) {
				deleted = append(deleted, a)
				return true
			}
		}
		return false
	})
	return deleted, nil
}

func (s *store) ACLs() []auth.ACL {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.acls)
}

func (s *store) Users() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for u := range s.users {
		out = append(out, u)
	}
	slices.Sort(out)
	return out
}

func (s *store) UserCredential(user string) (auth.Credential, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.users[user]
	return c, ok
}

var errNotApplied = errors.New("store: the change is not applied")

func (s *store) WaitFor(_ context.Context, cond func() bool) error {
	if !cond() {
		return errNotApplied
	}
	return nil
}

func securityCodes(err error) int32 {
	switch {
	case errors.Is(err, metadata.ErrInvalidACL), errors.Is(err, metadata.ErrInvalidUser):
		return 42
	}
	return groupCodes(err)
}

func newSecurityCore(t *testing.T, z request.Authorizer) (*request.Core, *store) {
	s := &store{users: map[string]auth.Credential{}}
	f := newCore(t, func(c *request.Config) {
		c.Security, c.Codes, c.Authorizer = s, securityCodes, z
	})
	return f.core, s
}

// ACLs are created (normalized as the metadata keeps them), listed by
// filter and deleted by filter; users are stored from a password or a
// salted password and listed with their mechanisms.
func TestCoreSecurityAdministration(t *testing.T) {
	t.Parallel()
	c, s := newSecurityCore(t, nil)
	ctx := ctxT(t)
	acls := []request.ACL{
		{Principal: "User:alice", Permission: "allow", Operation: "read", ResourceType: "topic", ResourceName: "orders", PatternType: "literal"},
		{Principal: "User:alice", Permission: "allow", Operation: "write", ResourceType: "topic", ResourceName: "ord", PatternType: "prefixed"},
		{Principal: "User:bob", Permission: "deny", Operation: "read", ResourceType: "group", ResourceName: "g", PatternType: "literal"},
	}
	if err := c.CreateACLs(ctx, acls); err != nil {
		t.Fatal(err)
	}
	if got := s.ACLs(); len(got) != 3 || got[0].Operation != auth.OpRead || got[1].PatternType != auth.Prefixed {
		t.Fatalf("stored %+v", got)
	}
	alices, err := c.ListACLs(ctx, request.ACL{Principal: "User:alice"})
	if err != nil || len(alices) != 2 || alices[1].Operation != "Write" || alices[1].ResourceType != "Topic" {
		t.Fatalf("alice's ACLs: %+v %v", alices, err)
	}
	deleted, err := c.DeleteACLs(ctx, []request.ACL{{Principal: "User:bob"}})
	if err != nil || len(deleted) != 1 || deleted[0].ResourceName != "g" || len(s.ACLs()) != 2 {
		t.Fatalf("delete bob's: %+v %v; left %v", deleted, err, s.ACLs())
	}

	calls := s.calls
	for name, err := range map[string]error{
		"no ACLs":          c.CreateACLs(ctx, nil),
		"a bad operation":  c.CreateACLs(ctx, []request.ACL{{Principal: "User:x", Permission: "allow", Operation: "fly", ResourceType: "topic", ResourceName: "t", PatternType: "literal"}}),
		"no filters":       func() error { _, err := c.DeleteACLs(ctx, nil); return err }(),
		"a bad filter":     func() error { _, err := c.DeleteACLs(ctx, []request.ACL{{ResourceType: "table"}}); return err }(),
		"a bad list":       func() error { _, err := c.ListACLs(ctx, request.ACL{PatternType: "regex"}); return err }(),
		"a bad user name":  c.UpsertUser(ctx, "", "secret", 0),
		"a short salted":   c.UpsertScramCredential(ctx, "carol", auth.MechanismSHA256, 4096, []byte("salt"), []byte("short")),
		"too few rounds":   c.UpsertScramCredential(ctx, "carol", auth.MechanismSHA256, 1, []byte("salt"), make([]byte, 32)),
		"an unknown users": c.DeleteUser(ctx, "nobody"),
	} {
		if code(t, err) != 42 {
			t.Errorf("%s: %v, want INVALID_REQUEST", name, err)
		}
	}
	if s.calls != calls+1 { // only the delete of an unknown user reaches the store
		t.Fatalf("refused requests reached the store: %d calls, want %d", s.calls, calls+1)
	}

	if err := c.UpsertUser(ctx, "alice", "secret", 0); err != nil {
		t.Fatal(err)
	}
	if err := c.UpsertScramCredential(ctx, "bob", auth.MechanismSHA256, 8192, []byte("0123456789abcdef"), make([]byte, 32)); err != nil {
		t.Fatal(err)
	}
	users, err := c.ListUsers(ctx)
	if err != nil || len(users) != 2 || users[0].Name != "alice" || users[0].Iterations != int32(auth.DefaultIterations) ||
		users[0].Mechanism != auth.MechanismSHA256+","+auth.MechanismSHA512 || users[1].Iterations != 8192 {
		t.Fatalf("users: %+v %v", users, err)
	}
	if err := c.DeleteUser(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.UserCredential("alice"); ok {
		t.Fatal("alice is still stored")
	}
}

// Changing users or ACLs needs Alter on the cluster, seeing them
// Describe; a refused call reaches nothing.
func TestCoreSecurityAuthorized(t *testing.T) {
	t.Parallel()
	acl := []request.ACL{{Principal: "User:x", Permission: "allow", Operation: "read", ResourceType: "topic", ResourceName: "t", PatternType: "literal"}}
	calls := map[string]struct {
		call func(c *request.Core, ctx context.Context) error
		need string
	}{
		"create ACLs": {func(c *request.Core, ctx context.Context) error { return c.CreateACLs(ctx, acl) }, "ALTER CLUSTER kafka-cluster"},
		"delete ACLs": {func(c *request.Core, ctx context.Context) error { _, err := c.DeleteACLs(ctx, acl); return err }, "ALTER CLUSTER kafka-cluster"},
		"list ACLs":   {func(c *request.Core, ctx context.Context) error { _, err := c.ListACLs(ctx, request.ACL{}); return err }, "DESCRIBE CLUSTER kafka-cluster"},
		"upsert user": {func(c *request.Core, ctx context.Context) error { return c.UpsertUser(ctx, "u", "pw", 0) }, "ALTER CLUSTER kafka-cluster"},
		"upsert salted": {func(c *request.Core, ctx context.Context) error {
			return c.UpsertScramCredential(ctx, "u", auth.MechanismSHA256, 4096, []byte("salt"), make([]byte, 32))
		}, "ALTER CLUSTER kafka-cluster"},
		"delete user": {func(c *request.Core, ctx context.Context) error { return c.DeleteUser(ctx, "u") }, "ALTER CLUSTER kafka-cluster"},
		"list users":  {func(c *request.Core, ctx context.Context) error { _, err := c.ListUsers(ctx); return err }, "DESCRIBE CLUSTER kafka-cluster"},
	}
	for name, tc := range calls {
		c, s := newSecurityCore(t, grants{"DESCRIBE GROUP g"})
		if err := tc.call(c, alice(t)); code(t, err) != 31 || s.calls != 0 {
			t.Errorf("%s without %s: %v, %d calls to the store", name, tc.need, err, s.calls)
		}
		c, s = newSecurityCore(t, grants{tc.need})
		s.users["u"] = auth.Credential{}
		if err := tc.call(c, alice(t)); err != nil {
			t.Errorf("%s with %s: %v", name, tc.need, err)
		}
	}
}
