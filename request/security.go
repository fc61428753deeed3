package request

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/quirelog/quire/auth"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/replica"
)

// Security administration: SCRAM users and ACLs, kept in the metadata
// log through the controller. Changing either needs Alter on the
// cluster, seeing either Describe on the cluster, as Kafka's
// AlterUserScramCredentials, CreateAcls and their kin need. A change
// returns once this node's image shows it, so that the node that took
// it answers by it from the next call on (the others follow as they
// apply the log).

// SecurityStore is where users and ACLs live: the controller, which
// changes them, and this node's image, which answers them.
type SecurityStore interface {
	// UpsertUserCredential stores cred as user's; with mechanisms, only
	// those mechanisms' keys, the user's others kept.
	UpsertUserCredential(ctx context.Context, user string, cred auth.Credential, mechanisms []string) error
	// DeleteUserCredential removes a user; with mechanism, only that
	// mechanism's keys (the user goes with its last).
	DeleteUserCredential(ctx context.Context, user, mechanism string) error
	CreateACLs(ctx context.Context, acls []auth.ACL) error
	// DeleteACLs removes the ACLs the filters match and returns them.
	DeleteACLs(ctx context.Context, filters []auth.ACL) ([]auth.ACL, error)
	// ACLs, Users and UserCredential are this node's view now (its
	// metadata image).
	ACLs() []auth.ACL
	Users() []string
	UserCredential(user string) (auth.Credential, bool)
	// WaitFor waits until cond holds of this node's view, as this node
	// applies the metadata log.
	WaitFor(ctx context.Context, cond func() bool) error
}

// ACL is one access control entry, or a filter of them (an empty field
// matches any value), each field in its text form (auth's names:
// "User:alice", "ALLOW", "READ", "TOPIC", "LITERAL").
type ACL struct {
	Principal, Permission, Operation, ResourceType, ResourceName, PatternType string
}

func (a ACL) auth() auth.ACL {
	return auth.ACL{Principal: a.Principal, Permission: auth.Permission(a.Permission), Operation: auth.Operation(a.Operation),
		ResourceType: auth.ResourceType(a.ResourceType), ResourceName: a.ResourceName, PatternType: auth.PatternType(a.PatternType)}
}

func aclOf(a auth.ACL) ACL {
	return ACL{Principal: a.Principal, Permission: string(a.Permission), Operation: string(a.Operation),
		ResourceType: string(a.ResourceType), ResourceName: a.ResourceName, PatternType: string(a.PatternType)}
}

// UserDescription is a SCRAM user: its mechanisms, comma-separated, and
// iteration count (the first mechanism's), and each mechanism's own.
type UserDescription struct {
	Name        string
	Mechanism   string
	Iterations  int32
	Credentials []ScramCredentialInfo
}

// ScramCredentialInfo is one mechanism a user has keys for, with their
// iteration count.
type ScramCredentialInfo struct {
	Mechanism  string
	Iterations int32
}

// store is the configured SecurityStore, or the error for none.
func (c *Core) store() (SecurityStore, error) {
	if c.cfg.Security == nil {
		return nil, c.fail(fmt.Errorf("%w: this node serves no security administration", replica.ErrInvalidRequest))
	}
	return c.cfg.Security, nil
}

// authorizeCluster refuses unless the principal of ctx may do op on the
// cluster.
func (c *Core) authorizeCluster(ctx context.Context, op auth.Operation) error {
	z := c.cfg.Authorizer
	if z == nil {
		return nil
	}
	r := auth.Request{Principal: Principal(ctx), Operation: op, ResourceType: auth.ResourceCluster, ResourceName: auth.ClusterName}
	if !z.Authorize(r) {
		return c.fail(Refusal(r))
	}
	return nil
}

// securityCall is the store after the check of op on the cluster.
func (c *Core) securityCall(ctx context.Context, op auth.Operation) (SecurityStore, error) {
	s, err := c.store()
	if err != nil {
		return nil, err
	}
	if err := c.authorizeCluster(ctx, op); err != nil {
		return nil, err
	}
	return s, nil
}

// applied waits until this node's image satisfies cond.
func (c *Core) applied(ctx context.Context, s SecurityStore, cond func() bool) error {
	if err := s.WaitFor(ctx, cond); err != nil {
		return c.fail(fmt.Errorf("waiting for the metadata: %w", err))
	}
	return nil
}

// UpsertUser stores a user's SCRAM credential derived from its password
// with iterations rounds (0: auth.DefaultIterations).
func (c *Core) UpsertUser(ctx context.Context, name, password string, iterations int32) error {
	s, err := c.securityCall(ctx, auth.OpAlter)
	if err != nil {
		return err
	}
	if err := metadata.ValidateUserName(name); err != nil {
		return c.fail(err)
	}
	iters := int(iterations)
	if iters == 0 {
		iters = auth.DefaultIterations
	}
	cred, err := auth.NewCredential(password, iters)
	if err != nil {
		return c.fail(fmt.Errorf("%w: %v", metadata.ErrInvalidUser, err))
	}
	return c.upsertCredential(ctx, s, name, cred)
}

// UpsertScramCredential sets one mechanism's credential (SCRAM-SHA-256 or
// SCRAM-SHA-512) of a user from a salted password, as Kafka's
// AlterUserScramCredentials sends it (never the password), with its own
// salt and iterations; the user's other mechanism is kept, as Kafka
// keeps it. Needs metadata.version 13.
func (c *Core) UpsertScramCredential(ctx context.Context, user, mechanism string, iterations int32, salt, salted []byte) error {
	s, err := c.securityCall(ctx, auth.OpAlter)
	if err != nil {
		return err
	}
	if err := metadata.ValidateUserName(user); err != nil {
		return c.fail(err)
	}
	cred, err := auth.CredentialFromSalted(mechanism, salt, salted, int(iterations))
	if err != nil {
		return c.fail(fmt.Errorf("%w: user %q: %v", metadata.ErrInvalidUser, user, err))
	}
	if err := s.UpsertUserCredential(ctx, user, cred, []string{mechanism}); err != nil {
		return c.fail(err)
	}
	return c.applied(ctx, s, func() bool {
		got, ok := s.UserCredential(user)
		if mechanism == auth.MechanismSHA512 {
			return ok && bytes.Equal(got.StoredKey512, cred.StoredKey512)
		}
		return ok && bytes.Equal(got.StoredKey, cred.StoredKey)
	})
}

func (c *Core) upsertCredential(ctx context.Context, s SecurityStore, user string, cred auth.Credential) error {
	if err := s.UpsertUserCredential(ctx, user, cred, nil); err != nil {
		return c.fail(err)
	}
	return c.applied(ctx, s, func() bool {
		got, ok := s.UserCredential(user)
		return ok && bytes.Equal(got.Salt, cred.Salt) && bytes.Equal(got.StoredKey, cred.StoredKey)
	})
}

// DeleteUser removes a user.
func (c *Core) DeleteUser(ctx context.Context, name string) error {
	return c.DeleteScramCredential(ctx, name, "")
}

// DeleteScramCredential removes one mechanism's credential of a user
// (the user with its last), as Kafka's AlterUserScramCredentials
// deletions do; no mechanism removes the user. A mechanism needs
// metadata.version 13.
func (c *Core) DeleteScramCredential(ctx context.Context, name, mechanism string) error {
	s, err := c.securityCall(ctx, auth.OpAlter)
	if err != nil {
		return err
	}
	if err := s.DeleteUserCredential(ctx, name, mechanism); err != nil {
		return c.fail(err)
	}
	return c.applied(ctx, s, func() bool {
		got, ok := s.UserCredential(name)
		switch {
		case !ok:
			return true
		case mechanism == auth.MechanismSHA256:
			return !got.Has256()
		case mechanism == auth.MechanismSHA512:
			return !got.Has512()
		}
		return false
	})
}

// ListUsers lists the users this node's image has.
func (c *Core) ListUsers(ctx context.Context) ([]UserDescription, error) {
	s, err := c.securityCall(ctx, auth.OpDescribe)
	if err != nil {
		return nil, err
	}
	var out []UserDescription
	for _, u := range s.Users() {
		cred, _ := s.UserCredential(u)
		// A password gives both mechanisms (a user stored before
		// SCRAM-SHA-512 was served has the one until its password is
		// set again); Kafka's AlterUserScramCredentials sets each on its
		// own, with its own iterations.
		var infos []ScramCredentialInfo
		var mechs []string
		if cred.Has256() {
			infos = append(infos, ScramCredentialInfo{Mechanism: auth.MechanismSHA256, Iterations: int32(cred.Iterations)})
			mechs = append(mechs, auth.MechanismSHA256)
		}
		if cred.Has512() {
			_, iters := cred.SaltIterations512()
			infos = append(infos, ScramCredentialInfo{Mechanism: auth.MechanismSHA512, Iterations: int32(iters)})
			mechs = append(mechs, auth.MechanismSHA512)
		}
		d := UserDescription{Name: u, Mechanism: strings.Join(mechs, ","), Credentials: infos}
		if len(infos) > 0 {
			d.Iterations = infos[0].Iterations
		}
		out = append(out, d)
	}
	return out, nil
}

// CreateACLs adds ACLs, each checked and normalized as the metadata
// keeps it.
func (c *Core) CreateACLs(ctx context.Context, acls []ACL) error {
	s, err := c.securityCall(ctx, auth.OpAlter)
	if err != nil {
		return err
	}
	if len(acls) == 0 {
		return c.fail(fmt.Errorf("%w: no ACLs", metadata.ErrInvalidACL))
	}
	norm := make([]auth.ACL, len(acls))
	for i, a := range acls {
		n, err := metadata.NormalizeACL(metadata.ACLRecord(a.auth()))
		if err != nil {
			return c.fail(err)
		}
		norm[i] = n
	}
	if err := s.CreateACLs(ctx, norm); err != nil {
		return c.fail(err)
	}
	return c.applied(ctx, s, func() bool {
		have := s.ACLs()
		for _, a := range norm {
			if !slices.Contains(have, a) {
				return false
			}
		}
		return true
	})
}

// DeleteACLs removes the ACLs any filter matches and returns them.
func (c *Core) DeleteACLs(ctx context.Context, filters []ACL) ([]ACL, error) {
	s, err := c.securityCall(ctx, auth.OpAlter)
	if err != nil {
		return nil, err
	}
	if len(filters) == 0 {
		return nil, c.fail(fmt.Errorf("%w: no filters (an empty filter matches every ACL)", metadata.ErrInvalidACL))
	}
	fs := make([]auth.ACL, len(filters))
	for i, f := range filters {
		if err := checkACLFilter(f); err != nil {
			return nil, c.fail(err)
		}
		fs[i] = f.auth()
	}
	deleted, err := s.DeleteACLs(ctx, fs)
	if err != nil {
		return nil, c.fail(err)
	}
	if err := c.applied(ctx, s, func() bool {
		have := s.ACLs()
		for _, a := range deleted {
			if slices.Contains(have, a) {
				return false
			}
		}
		return true
	}); err != nil {
		return nil, err
	}
	out := make([]ACL, len(deleted))
	for i, a := range deleted {
		out[i] = aclOf(a)
	}
	return out, nil
}

// ListACLs lists the ACLs filter matches, from this node's image.
func (c *Core) ListACLs(ctx context.Context, filter ACL) ([]ACL, error) {
	s, err := c.securityCall(ctx, auth.OpDescribe)
	if err != nil {
		return nil, err
	}
	if err := checkACLFilter(filter); err != nil {
		return nil, c.fail(err)
	}
	f := filter.auth()
	var out []ACL
	for _, a := range s.ACLs() {
		if f.Matches(a) {
			out = append(out, aclOf(a))
		}
	}
	return out, nil
}

// checkACLFilter refuses a filter naming a permission, operation,
// resource type, pattern type or principal no ACL can have
// (INVALID_REQUEST, as CreateACLs refuses it): such a filter would match
// nothing, silently. An empty field matches any value.
func checkACLFilter(f ACL) error {
	var errs []error
	if f.Principal != "" {
		_, err := auth.ParsePrincipal(f.Principal)
		errs = append(errs, err)
	}
	if f.Permission != "" {
		_, err := auth.ParsePermission(f.Permission)
		errs = append(errs, err)
	}
	if f.Operation != "" {
		_, err := auth.ParseOperation(f.Operation)
		errs = append(errs, err)
	}
	if f.ResourceType != "" {
		_, err := auth.ParseResourceType(f.ResourceType)
		errs = append(errs, err)
	}
	if f.PatternType != "" {
		_, err := auth.ParsePatternType(f.PatternType)
		errs = append(errs, err)
	}
	for _, err := range errs {
		if err != nil {
			return fmt.Errorf("%w: filter: %v", metadata.ErrInvalidACL, err)
		}
	}
	return nil
}
