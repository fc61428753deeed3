package metadata

// SCRAM credentials and ACLs, kept in the metadata log from
// metadata.version 3 (MetadataVersionSecurity). The image holds each
// user's salted credential (never a password) and the ACL list; brokers
// authenticate and authorize calls against their own image, so a change
// takes effect on each node as it applies the command.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	pb "github.com/quirelog/quire/api/metapb"
	"github.com/quirelog/quire/auth"
)

// Security sentinels.
var (
	// ErrUnknownUser: a user to delete that does not exist.
	ErrUnknownUser = errors.New("metadata: unknown user")
	// ErrInvalidUser: a user name that is empty, too long or holds a
	// control character, or a credential of the wrong shape.
	ErrInvalidUser = errors.New("metadata: invalid user")
	// ErrInvalidACL: an ACL (or filter) naming an unknown permission,
	// operation, resource type or pattern type, or no resource.
	ErrInvalidACL = errors.New("metadata: invalid ACL")
)

// MaxUserNameLen is the longest user name, in bytes.
const MaxUserNameLen = 255

// MaxACLsPerCommand bounds one CreateAcls or DeleteAcls.
const MaxACLsPerCommand = 1000

// ValidateUserName checks a SCRAM user name.
func ValidateUserName(name string) error {
	if name == "" || len(name) > MaxUserNameLen {
		return fmt.Errorf("%w: name must be 1 to %d bytes", ErrInvalidUser, MaxUserNameLen)
	}
	if strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return fmt.Errorf("%w: %q holds a control character", ErrInvalidUser, name)
	}
	return nil
}

// Users lists the users with a credential, sorted by name.
func (img *Image) Users() []string {
	out := make([]string, 0, len(img.users))
	for u := range img.users {
		out = append(out, u)
	}
	slices.Sort(out)
	return out
}

// UserCredential returns a user's SCRAM credential.
func (img *Image) UserCredential(name string) (auth.Credential, bool) {
	c, ok := img.users[name]
	return c, ok
}

// ACLs returns every ACL, in a stable order (the caller must not modify it).
func (img *Image) ACLs() []auth.ACL { return img.acls }

// CredentialFromRecord is a stored credential in its evaluated form.
func CredentialFromRecord(r *pb.UserCredentialRecord) auth.Credential {
	return auth.Credential{Salt: r.Salt, Iterations: int(r.Iterations), StoredKey: r.StoredKey, ServerKey: r.ServerKey,
		StoredKey512: r.StoredKeySha512, ServerKey512: r.ServerKeySha512, Salt512: r.SaltSha512, Iterations512: int(r.IterationsSha512)}
}

func credentialFromRecord(r *pb.UserCredentialRecord) auth.Credential { return CredentialFromRecord(r) }

// CredentialRecord is the stored form of a user's credential.
func CredentialRecord(user string, c auth.Credential) *pb.UserCredentialRecord {
	return &pb.UserCredentialRecord{User: user, Mechanism: auth.Mechanism, Salt: c.Salt, Iterations: int32(c.Iterations), StoredKey: c.StoredKey, ServerKey: c.ServerKey,
		StoredKeySha512: c.StoredKey512, ServerKeySha512: c.ServerKey512, SaltSha512: c.Salt512, IterationsSha512: int32(c.Iterations512)}
}

// ACLFromRecord and ACLRecord convert between the stored and the
// evaluated form.
func ACLFromRecord(r *pb.AclRecord) auth.ACL {
	return auth.ACL{Principal: r.Principal, Permission: auth.Permission(r.Permission), Operation: auth.Operation(r.Operation),
		ResourceType: auth.ResourceType(r.ResourceType), ResourceName: r.ResourceName, PatternType: auth.PatternType(r.PatternType)}
}

func ACLRecord(a auth.ACL) *pb.AclRecord {
	return &pb.AclRecord{Principal: a.Principal, Permission: string(a.Permission), Operation: string(a.Operation),
		ResourceType: string(a.ResourceType), ResourceName: a.ResourceName, PatternType: string(a.PatternType)}
}

// aclKey is an ACL's key in bucketACLs: its fields NUL-separated (no
// field holds a NUL: Normalize refuses none, so the key is checked here).
func aclKey(a auth.ACL) []byte {
	return []byte(strings.Join([]string{string(a.ResourceType), string(a.PatternType), a.ResourceName, a.Principal, string(a.Permission), string(a.Operation)}, "\x00"))
}

// loadSecurity reads the users and ACLs of the store into img.
func loadSecurity(tx *bolt.Tx, img *Image) error {
	img.users = map[string]auth.Credential{}
	err := tx.Bucket(bucketUsers).ForEach(func(k, v []byte) error {
		var r pb.UserCredentialRecord
		if err := proto.Unmarshal(v, &r); err != nil {
			return err
		}
		img.users[string(k)] = credentialFromRecord(&r)
		return nil
	})
	if err != nil {
		return fmt.Errorf("metadata: load users: %w", err)
	}
	img.acls = nil
	err = tx.Bucket(bucketACLs).ForEach(func(_, v []byte) error {
		var r pb.AclRecord
		if err := proto.Unmarshal(v, &r); err != nil {
			return err
		}
		img.acls = append(img.acls, ACLFromRecord(&r))
		return nil
	})
	if err != nil {
		return fmt.Errorf("metadata: load ACLs: %w", err)
	}
	return nil
}

func (d *draft) applyUpsertUserCredential(c *pb.UpsertUserCredential, _ uint64) any {
	r := c.Credential
	if r == nil {
		return fmt.Errorf("%w: no credential", ErrInvalidUser)
	}
	if err := ValidateUserName(r.User); err != nil {
		return err
	}
	if r.Mechanism != auth.Mechanism {
		return fmt.Errorf("%w: mechanism %q, want %s", ErrInvalidUser, r.Mechanism, auth.Mechanism)
	}
	for _, m := range c.Mechanisms {
		if m != auth.MechanismSHA256 && m != auth.MechanismSHA512 {
			return fmt.Errorf("%w: mechanism %q", ErrInvalidUser, m)
		}
	}
	// With mechanisms, only theirs are set, the user's others kept
	// (Kafka's AlterUserScramCredentials, one mechanism at a time).
	cred := d.img.users[r.User].Merge(credentialFromRecord(r), c.Mechanisms)
	if err := cred.Validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidUser, err)
	}
	d.img.users = cloneMap(d.img.users)
	d.img.users[r.User] = cred
	d.put(bucketUsers, []byte(r.User), CredentialRecord(r.User, cred))
	return nil
}

func (d *draft) applyDeleteUserCredential(c *pb.DeleteUserCredential, _ uint64) any {
	cred, ok := d.img.users[c.User]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownUser, c.User)
	}
	d.img.users = cloneMap(d.img.users)
	if c.Mechanism != "" {
		rest, had := cred.Without(c.Mechanism)
		if !had {
			return fmt.Errorf("%w: %q has no %s credential", ErrUnknownUser, c.User, c.Mechanism)
		}
		if rest.Has256() || rest.Has512() {
			d.img.users[c.User] = rest
			d.put(bucketUsers, []byte(c.User), CredentialRecord(c.User, rest))
			return nil
		}
	}
	delete(d.img.users, c.User)
	d.must(d.tx.Bucket(bucketUsers).Delete([]byte(c.User)))
	return nil
}

// NormalizeACL checks an ACL to store.
func NormalizeACL(r *pb.AclRecord) (auth.ACL, error) {
	a, err := ACLFromRecord(r).Normalize()
	if err != nil {
		return auth.ACL{}, fmt.Errorf("%w: %v", ErrInvalidACL, err)
	}
	if strings.ContainsRune(a.Principal+a.ResourceName, 0) {
		return auth.ACL{}, fmt.Errorf("%w: NUL byte in a name", ErrInvalidACL)
	}
	return a, nil
}

func (d *draft) applyCreateAcls(c *pb.CreateAcls, _ uint64) any {
	if len(c.Acls) == 0 || len(c.Acls) > MaxACLsPerCommand {
		return fmt.Errorf("%w: 1 to %d ACLs per call, not %d", ErrInvalidACL, MaxACLsPerCommand, len(c.Acls))
	}
	add := make([]auth.ACL, 0, len(c.Acls))
	for _, r := range c.Acls {
		a, err := NormalizeACL(r)
		if err != nil {
			return err
		}
		add = append(add, a)
	}
	acls := slices.Clone(d.img.acls)
	for _, a := range add {
		if !slices.Contains(acls, a) {
			acls = append(acls, a)
		}
		d.put(bucketACLs, aclKey(a), ACLRecord(a))
	}
	d.img.acls = acls
	return nil
}

// applyDeleteAcls answers the ACLs it removed.
func (d *draft) applyDeleteAcls(c *pb.DeleteAcls, _ uint64) any {
	if len(c.Filters) == 0 || len(c.Filters) > MaxACLsPerCommand {
		return fmt.Errorf("%w: 1 to %d filters per call, not %d", ErrInvalidACL, MaxACLsPerCommand, len(c.Filters))
	}
	filters := make([]auth.ACL, len(c.Filters))
	for i, f := range c.Filters {
		filters[i] = ACLFromRecord(f)
	}
	var kept, deleted []auth.ACL
	for _, a := range d.img.acls {
		if slices.ContainsFunc(filters, func(f auth.ACL) bool { return f.Matches(a) }) {
			deleted = append(deleted, a)
			d.must(d.tx.Bucket(bucketACLs).Delete(aclKey(a)))
		} else {
			kept = append(kept, a)
		}
	}
	d.img.acls = kept
	return deleted
}

// UpsertUserCredential stores a user's credential (needs metadata.version
// 3); with mechanisms, only theirs, the user's others kept (needs 13).
func (c *Controller) UpsertUserCredential(ctx context.Context, user string, cred auth.Credential, mechanisms []string) error {
	_, err := c.propose(ctx, &pb.Command{Cmd: &pb.Command_UpsertUserCredential{UpsertUserCredential: &pb.UpsertUserCredential{
		Credential: CredentialRecord(user, cred), Mechanisms: mechanisms}}})
	return err
}

// DeleteUserCredential removes a user; with mechanism, only that
// mechanism's keys, and the user with its last (needs 13).
func (c *Controller) DeleteUserCredential(ctx context.Context, user, mechanism string) error {
	_, err := c.propose(ctx, &pb.Command{Cmd: &pb.Command_DeleteUserCredential{DeleteUserCredential: &pb.DeleteUserCredential{User: user, Mechanism: mechanism}}})
	return err
}

// CreateACLs adds ACLs.
func (c *Controller) CreateACLs(ctx context.Context, acls []*pb.AclRecord) error {
	_, err := c.propose(ctx, &pb.Command{Cmd: &pb.Command_CreateAcls{CreateAcls: &pb.CreateAcls{Acls: acls}}})
	return err
}

// DeleteACLs removes the ACLs the filters match and returns them.
func (c *Controller) DeleteACLs(ctx context.Context, filters []*pb.AclRecord) ([]auth.ACL, error) {
	resp, err := c.propose(ctx, &pb.Command{Cmd: &pb.Command_DeleteAcls{DeleteAcls: &pb.DeleteAcls{Filters: filters}}})
	if err != nil {
		return nil, err
	}
	deleted, _ := resp.([]auth.ACL)
	return deleted, nil
}
