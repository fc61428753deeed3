package client

import (
	"context"

	"google.golang.org/grpc"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

// ACL is one access control entry (quire.v1.Acl): Principal "User:NAME"
// (or "User:*"), Permission Allow or Deny, Operation (Read, Write,
// Create, Delete, Alter, Describe, DescribeConfigs, AlterConfigs,
// ClusterAction, IdempotentWrite, All), ResourceType Topic, Group or Cluster, ResourceName
// ("*" for all with Literal), PatternType Literal (default) or Prefixed.
// As a filter, empty fields match anything.
type ACL struct {
	Principal    string `json:"principal"`
	Permission   string `json:"permission"`
	Operation    string `json:"operation"`
	ResourceType string `json:"resource_type"`
	ResourceName string `json:"resource_name"`
	PatternType  string `json:"pattern_type"`
}

func (a ACL) toPB() *quirev1.Acl {
	return &quirev1.Acl{Principal: a.Principal, Permission: a.Permission, Operation: a.Operation,
		ResourceType: a.ResourceType, ResourceName: a.ResourceName, PatternType: a.PatternType}
}

func aclFromPB(a *quirev1.Acl) ACL {
	return ACL{Principal: a.GetPrincipal(), Permission: a.GetPermission(), Operation: a.GetOperation(),
		ResourceType: a.GetResourceType(), ResourceName: a.GetResourceName(), PatternType: a.GetPatternType()}
}

// UserDescription is one SCRAM user.
type UserDescription struct {
	Name       string `json:"name"`
	Mechanism  string `json:"mechanism"`
	Iterations int32  `json:"iterations"`
}

func (c *Client) security(ctx context.Context, fn func(ctx context.Context, s quirev1.SecurityClient) error) error {
	return c.anyBrokerRetried(ctx, func(ctx context.Context, cc *grpc.ClientConn) error {
		return fn(ctx, quirev1.NewSecurityClient(cc))
	})
}

// UpsertUser creates a SCRAM-SHA-256 user or replaces its password
// (iterations 0: the broker's default). Only the salted credential is
// stored.
func (c *Client) UpsertUser(ctx context.Context, name, password string, iterations int32) error {
	return c.security(ctx, func(ctx context.Context, s quirev1.SecurityClient) error {
		_, err := s.UpsertUser(ctx, &quirev1.UpsertUserRequest{Name: name, Password: password, Iterations: iterations})
		return err
	})
}

// DeleteUser removes a user.
func (c *Client) DeleteUser(ctx context.Context, name string) error {
	return c.security(ctx, func(ctx context.Context, s quirev1.SecurityClient) error {
		_, err := s.DeleteUser(ctx, &quirev1.DeleteUserRequest{Name: name})
		return err
	})
}

// ListUsers lists the users.
func (c *Client) ListUsers(ctx context.Context) ([]UserDescription, error) {
	var out []UserDescription
	err := c.security(ctx, func(ctx context.Context, s quirev1.SecurityClient) error {
		resp, err := s.ListUsers(ctx, &quirev1.ListUsersRequest{})
		for _, u := range resp.GetUsers() {
			out = append(out, UserDescription{Name: u.Name, Mechanism: u.Mechanism, Iterations: u.Iterations})
		}
		return err
	})
	return out, err
}

// CreateACLs adds ACLs.
func (c *Client) CreateACLs(ctx context.Context, acls ...ACL) error {
	req := &quirev1.CreateAclsRequest{}
	for _, a := range acls {
		req.Acls = append(req.Acls, a.toPB())
	}
	return c.security(ctx, func(ctx context.Context, s quirev1.SecurityClient) error {
		_, err := s.CreateAcls(ctx, req)
		return err
	})
}

// DeleteACLs removes the ACLs the filters match and returns them.
func (c *Client) DeleteACLs(ctx context.Context, filters ...ACL) ([]ACL, error) {
	req := &quirev1.DeleteAclsRequest{}
	for _, a := range filters {
		req.Filters = append(req.Filters, a.toPB())
	}
	var out []ACL
	err := c.security(ctx, func(ctx context.Context, s quirev1.SecurityClient) error {
		resp, err := s.DeleteAcls(ctx, req)
		for _, a := range resp.GetDeleted() {
			out = append(out, aclFromPB(a))
		}
		return err
	})
	return out, err
}

// ListACLs lists the ACLs the filter matches.
func (c *Client) ListACLs(ctx context.Context, filter ACL) ([]ACL, error) {
	var out []ACL
	err := c.security(ctx, func(ctx context.Context, s quirev1.SecurityClient) error {
		resp, err := s.ListAcls(ctx, &quirev1.ListAclsRequest{Filter: filter.toPB()})
		for _, a := range resp.GetAcls() {
			out = append(out, aclFromPB(a))
		}
		return err
	})
	return out, err
}

// WhoAmI returns the principal the broker sees this client as, and how it
// authenticated ("certificate", "scram" or "none").
func (c *Client) WhoAmI(ctx context.Context) (principal, by string, err error) {
	err = c.security(ctx, func(ctx context.Context, s quirev1.SecurityClient) error {
		resp, err := s.WhoAmI(ctx, &quirev1.WhoAmIRequest{})
		principal, by = resp.GetPrincipal(), resp.GetAuthenticatedBy()
		return err
	})
	return principal, by, err
}
