package controlplane

// SCRAM credentials and ACLs: the controller's handlers and the
// Forwarder's calls to them.

import (
	"context"

	pb "github.com/quirelog/quire/api/internalv1"
	"github.com/quirelog/quire/api/metapb"
	"github.com/quirelog/quire/auth"
	"github.com/quirelog/quire/metadata"
)

func (s *Service) UpsertUserCredential(ctx context.Context, in *pb.UpsertUserCredentialRequest) (*pb.UpsertUserCredentialResponse, error) {
	r := in.GetCredential()
	if r == nil {
		r = &metapb.UserCredentialRecord{}
	}
	if err := s.node.Ctl().UpsertUserCredential(ctx, r.User, metadata.CredentialFromRecord(r), in.Mechanisms); err != nil {
		return nil, toStatus(err)
	}
	return &pb.UpsertUserCredentialResponse{}, nil
}

func (s *Service) DeleteUserCredential(ctx context.Context, in *pb.DeleteUserCredentialRequest) (*pb.DeleteUserCredentialResponse, error) {
	if err := s.node.Ctl().DeleteUserCredential(ctx, in.User, in.Mechanism); err != nil {
		return nil, toStatus(err)
	}
	return &pb.DeleteUserCredentialResponse{}, nil
}

func (s *Service) CreateAcls(ctx context.Context, in *pb.CreateAclsRequest) (*pb.CreateAclsResponse, error) {
	if err := s.node.Ctl().CreateACLs(ctx, in.Acls); err != nil {
		return nil, toStatus(err)
	}
	return &pb.CreateAclsResponse{}, nil
}

func (s *Service) DeleteAcls(ctx context.Context, in *pb.DeleteAclsRequest) (*pb.DeleteAclsResponse, error) {
	deleted, err := s.node.Ctl().DeleteACLs(ctx, in.Filters)
	if err != nil {
		return nil, toStatus(err)
	}
	out := &pb.DeleteAclsResponse{}
	for _, a := range deleted {
		out.Deleted = append(out.Deleted, metadata.ACLRecord(a))
	}
	return out, nil
}

// UpsertUserCredential stores a user's salted credential on the
// controller; with mechanisms, only theirs, the user's others kept.
func (f *Forwarder) UpsertUserCredential(ctx context.Context, user string, cred auth.Credential, mechanisms []string) error {
	_, err := Call(ctx, f, (*Service).UpsertUserCredential, pb.ControllerServiceClient.UpsertUserCredential,
		&pb.UpsertUserCredentialRequest{Credential: metadata.CredentialRecord(user, cred), Mechanisms: mechanisms})
	return err
}

// DeleteUserCredential removes a user on the controller; with mechanism,
// only that mechanism's keys.
func (f *Forwarder) DeleteUserCredential(ctx context.Context, user, mechanism string) error {
	_, err := Call(ctx, f, (*Service).DeleteUserCredential, pb.ControllerServiceClient.DeleteUserCredential,
		&pb.DeleteUserCredentialRequest{User: user, Mechanism: mechanism})
	return err
}

// CreateACLs adds ACLs on the controller.
func (f *Forwarder) CreateACLs(ctx context.Context, acls []auth.ACL) error {
	req := &pb.CreateAclsRequest{}
	for _, a := range acls {
		req.Acls = append(req.Acls, metadata.ACLRecord(a))
	}
	_, err := Call(ctx, f, (*Service).CreateAcls, pb.ControllerServiceClient.CreateAcls, req)
	return err
}

// DeleteACLs removes the ACLs the filters match on the controller.
func (f *Forwarder) DeleteACLs(ctx context.Context, filters []auth.ACL) ([]auth.ACL, error) {
	req := &pb.DeleteAclsRequest{}
	for _, a := range filters {
		req.Filters = append(req.Filters, metadata.ACLRecord(a))
	}
	resp, err := Call(ctx, f, (*Service).DeleteAcls, pb.ControllerServiceClient.DeleteAcls, req)
	if err != nil {
		return nil, err
	}
	out := make([]auth.ACL, len(resp.Deleted))
	for i, r := range resp.Deleted {
		out[i] = metadata.ACLFromRecord(r)
	}
	return out, nil
}
