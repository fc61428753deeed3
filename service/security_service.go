package service

import (
	"context"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/request"
)

// securityService is quire.v1.Security over the request core, which
// authorizes each call and keeps users and ACLs through the controller
// (request/security.go); this is quire.v1 to and from the core's types.
type securityService struct {
	quirev1.UnimplementedSecurityServer
	b *node
}

func (s *securityService) UpsertUser(ctx context.Context, req *quirev1.UpsertUserRequest) (*quirev1.UpsertUserResponse, error) {
	if err := s.b.core.UpsertUser(coreContext(ctx), req.Name, req.Password, req.Iterations); err != nil {
		return nil, toStatus(err)
	}
	return &quirev1.UpsertUserResponse{}, nil
}

func (s *securityService) DeleteUser(ctx context.Context, req *quirev1.DeleteUserRequest) (*quirev1.DeleteUserResponse, error) {
	if err := s.b.core.DeleteUser(coreContext(ctx), req.Name); err != nil {
		return nil, toStatus(err)
	}
	return &quirev1.DeleteUserResponse{}, nil
}

func (s *securityService) ListUsers(ctx context.Context, _ *quirev1.ListUsersRequest) (*quirev1.ListUsersResponse, error) {
	users, err := s.b.core.ListUsers(coreContext(ctx))
	if err != nil {
		return nil, toStatus(err)
	}
	out := &quirev1.ListUsersResponse{}
	for _, u := range users {
		out.Users = append(out.Users, &quirev1.UserDescription{Name: u.Name, Mechanism: u.Mechanism, Iterations: u.Iterations})
	}
	return out, nil
}

func aclFromPB(a *quirev1.Acl) request.ACL {
	return request.ACL{Principal: a.GetPrincipal(), Permission: a.GetPermission(), Operation: a.GetOperation(),
		ResourceType: a.GetResourceType(), ResourceName: a.GetResourceName(), PatternType: a.GetPatternType()}
}

func aclToPB(a request.ACL) *quirev1.Acl {
	return &quirev1.Acl{Principal: a.Principal, Permission: a.Permission, Operation: a.Operation,
		ResourceType: a.ResourceType, ResourceName: a.ResourceName, PatternType: a.PatternType}
}

func aclsFromPB(in []*quirev1.Acl) []request.ACL {
	out := make([]request.ACL, len(in))
	for i, a := range in {
		out[i] = aclFromPB(a)
	}
	return out
}

func (s *securityService) CreateAcls(ctx context.Context, req *quirev1.CreateAclsRequest) (*quirev1.CreateAclsResponse, error) {
	if err := s.b.core.CreateACLs(coreContext(ctx), aclsFromPB(req.Acls)); err != nil {
		return nil, toStatus(err)
	}
	return &quirev1.CreateAclsResponse{}, nil
}

func (s *securityService) DeleteAcls(ctx context.Context, req *quirev1.DeleteAclsRequest) (*quirev1.DeleteAclsResponse, error) {
	deleted, err := s.b.core.DeleteACLs(coreContext(ctx), aclsFromPB(req.Filters))
	if err != nil {
		return nil, toStatus(err)
	}
	out := &quirev1.DeleteAclsResponse{}
	for _, a := range deleted {
		out.Deleted = append(out.Deleted, aclToPB(a))
	}
	return out, nil
}

func (s *securityService) ListAcls(ctx context.Context, req *quirev1.ListAclsRequest) (*quirev1.ListAclsResponse, error) {
	acls, err := s.b.core.ListACLs(coreContext(ctx), aclFromPB(req.GetFilter()))
	if err != nil {
		return nil, toStatus(err)
	}
	out := &quirev1.ListAclsResponse{}
	for _, a := range acls {
		out.Acls = append(out.Acls, aclToPB(a))
	}
	return out, nil
}

func (s *securityService) WhoAmI(ctx context.Context, _ *quirev1.WhoAmIRequest) (*quirev1.WhoAmIResponse, error) {
	id, _ := IdentityFrom(ctx)
	return &quirev1.WhoAmIResponse{Principal: id.Principal, AuthenticatedBy: id.By}, nil
}
