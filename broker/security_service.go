package broker

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/auth"
	"github.com/quirelog/quire/metadata"
)

// securityService is quire.v1.Security: SCRAM users and ACLs, kept in the
// metadata log through the controller.
type securityService struct {
	quirev1.UnimplementedSecurityServer
	b *Broker
}

func (s *securityService) UpsertUser(ctx context.Context, req *quirev1.UpsertUserRequest) (*quirev1.UpsertUserResponse, error) {
	if err := metadata.ValidateUserName(req.Name); err != nil {
		return nil, toStatus(err)
	}
	iters := int(req.Iterations)
	if iters == 0 {
		iters = auth.DefaultIterations
	}
	cred, err := auth.NewCredential(req.Password, iters)
	if err != nil {
		return nil, toStatus(fmt.Errorf("%w: %v", metadata.ErrInvalidUser, err))
	}
	if err := s.b.cluster.fwd.UpsertUserCredential(ctx, req.Name, cred); err != nil {
		return nil, toStatus(err)
	}
	if err := s.applied(ctx, func(img *metadata.Image) bool {
		c, ok := img.UserCredential(req.Name)
		return ok && bytes.Equal(c.Salt, cred.Salt)
	}); err != nil {
		return nil, err
	}
	return &quirev1.UpsertUserResponse{}, nil
}

func (s *securityService) DeleteUser(ctx context.Context, req *quirev1.DeleteUserRequest) (*quirev1.DeleteUserResponse, error) {
	if err := s.b.cluster.fwd.DeleteUserCredential(ctx, req.Name); err != nil {
		return nil, toStatus(err)
	}
	if err := s.applied(ctx, func(img *metadata.Image) bool { _, ok := img.UserCredential(req.Name); return !ok }); err != nil {
		return nil, err
	}
	return &quirev1.DeleteUserResponse{}, nil
}

// applied waits until this node's image shows a change the controller
// has committed, so that the node that took it answers by it from the
// next call on (the others follow as they apply the log).
func (s *securityService) applied(ctx context.Context, cond func(*metadata.Image) bool) error {
	if _, err := s.b.cluster.waitFor(ctx, cond); err != nil {
		return toStatus(fmt.Errorf("waiting for the metadata: %w", err))
	}
	return nil
}

// hasACL reports whether img holds a.
func hasACL(img *metadata.Image, a auth.ACL) bool {
	return slices.Contains(img.ACLs(), a)
}

func (s *securityService) ListUsers(context.Context, *quirev1.ListUsersRequest) (*quirev1.ListUsersResponse, error) {
	img := s.b.cluster.node.Image()
	out := &quirev1.ListUsersResponse{}
	for _, u := range img.Users() {
		c, _ := img.UserCredential(u)
		mech := auth.MechanismSHA256
		if len(c.StoredKey512) > 0 {
			// Derived with the password since Kafka's listener serves
			// SCRAM-SHA-512; a user stored before has the one mechanism
			// until its password is set again.
			mech += "," + auth.MechanismSHA512
		}
		out.Users = append(out.Users, &quirev1.UserDescription{Name: u, Mechanism: mech, Iterations: int32(c.Iterations)})
	}
	return out, nil
}

func aclFromPB(a *quirev1.Acl) auth.ACL {
	return auth.ACL{Principal: a.GetPrincipal(), Permission: auth.Permission(a.GetPermission()), Operation: auth.Operation(a.GetOperation()),
		ResourceType: auth.ResourceType(a.GetResourceType()), ResourceName: a.GetResourceName(), PatternType: auth.PatternType(a.GetPatternType())}
}

func aclToPB(a auth.ACL) *quirev1.Acl {
	return &quirev1.Acl{Principal: a.Principal, Permission: string(a.Permission), Operation: string(a.Operation),
		ResourceType: string(a.ResourceType), ResourceName: a.ResourceName, PatternType: string(a.PatternType)}
}

func (s *securityService) CreateAcls(ctx context.Context, req *quirev1.CreateAclsRequest) (*quirev1.CreateAclsResponse, error) {
	if len(req.Acls) == 0 {
		return nil, toStatus(fmt.Errorf("%w: no ACLs", metadata.ErrInvalidACL))
	}
	acls := make([]auth.ACL, len(req.Acls))
	for i, a := range req.Acls {
		n, err := metadata.NormalizeACL(metadata.ACLRecord(aclFromPB(a)))
		if err != nil {
			return nil, toStatus(err)
		}
		acls[i] = n
	}
	if err := s.b.cluster.fwd.CreateACLs(ctx, acls); err != nil {
		return nil, toStatus(err)
	}
	if err := s.applied(ctx, func(img *metadata.Image) bool {
		for _, a := range acls {
			if !hasACL(img, a) {
				return false
			}
		}
		return true
	}); err != nil {
		return nil, err
	}
	return &quirev1.CreateAclsResponse{}, nil
}

func (s *securityService) DeleteAcls(ctx context.Context, req *quirev1.DeleteAclsRequest) (*quirev1.DeleteAclsResponse, error) {
	if len(req.Filters) == 0 {
		return nil, toStatus(fmt.Errorf("%w: no filters (an empty filter matches every ACL)", metadata.ErrInvalidACL))
	}
	filters := make([]auth.ACL, len(req.Filters))
	for i, f := range req.Filters {
		if err := checkACLFilter(f); err != nil { // validate.go
			return nil, toStatus(err)
		}
		filters[i] = aclFromPB(f)
	}
	deleted, err := s.b.cluster.fwd.DeleteACLs(ctx, filters)
	if err != nil {
		return nil, toStatus(err)
	}
	if err := s.applied(ctx, func(img *metadata.Image) bool {
		for _, a := range deleted {
			if hasACL(img, a) {
				return false
			}
		}
		return true
	}); err != nil {
		return nil, err
	}
	out := &quirev1.DeleteAclsResponse{}
	for _, a := range deleted {
		out.Deleted = append(out.Deleted, aclToPB(a))
	}
	return out, nil
}

func (s *securityService) ListAcls(_ context.Context, req *quirev1.ListAclsRequest) (*quirev1.ListAclsResponse, error) {
	if err := checkACLFilter(req.GetFilter()); err != nil { // validate.go
		return nil, toStatus(err)
	}
	f := aclFromPB(req.GetFilter())
	out := &quirev1.ListAclsResponse{}
	for _, a := range s.b.cluster.node.Image().ACLs() {
		if f.Matches(a) {
			out.Acls = append(out.Acls, aclToPB(a))
		}
	}
	return out, nil
}

func (s *securityService) WhoAmI(ctx context.Context, _ *quirev1.WhoAmIRequest) (*quirev1.WhoAmIResponse, error) {
	id, _ := IdentityFrom(ctx)
	return &quirev1.WhoAmIResponse{Principal: id.Principal, AuthenticatedBy: id.By}, nil
}
