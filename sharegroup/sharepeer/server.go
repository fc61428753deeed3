package sharepeer

import (
	"context"
	"fmt"
	"time"

	pb "github.com/quirelog/quire/api/internalv1"
	"github.com/quirelog/quire/replica"
	"github.com/quirelog/quire/request"
	"github.com/quirelog/quire/service"
)

// Core is what Server needs of this node's request core
// (*request.Core).
type Core interface {
	ShareMemberHere(group, id string) bool
	ShareGroupMembersHere(group string) bool
	ShareMembersGone(group string, ids []string)
	ShareFetch(ctx context.Context, req *request.ShareFetchRequest) ([]request.ShareFetchResult, error)
	ShareAcknowledge(ctx context.Context, group, member string, parts []request.SharePartition) ([]request.ShareAckResult, error)
	ShareAcknowledgeKeyOrdered(ctx context.Context, group, member string, parts []request.SharePartition) ([]request.ShareAckResult, error)
}

// Server answers the share calls of the internal ReplicaService that
// other nodes' Clusters make; the node's ReplicaService passes them to
// it.
type Server struct {
	core Core
}

// NewServer returns a Server answering from core.
func NewServer(core Core) *Server { return &Server{core: core} }

// ShareMember answers whether member_id heartbeats here in group.
func (s *Server) ShareMember(_ context.Context, req *pb.ShareMemberRequest) (*pb.ShareMemberResponse, error) {
	if req.AnyMember {
		return &pb.ShareMemberResponse{Member: s.core.ShareGroupMembersHere(req.Group)}, nil
	}
	return &pb.ShareMemberResponse{Member: s.core.ShareMemberHere(req.Group, req.MemberId)}, nil
}

// ShareMembersLeft releases what the members named hold here.
func (s *Server) ShareMembersLeft(_ context.Context, req *pb.ShareMembersLeftRequest) (*pb.ShareMembersLeftResponse, error) {
	byGroup := map[string][]string{}
	for _, d := range req.Left {
		byGroup[d.Group] = append(byGroup[d.Group], d.MemberId)
	}
	for g, ids := range byGroup {
		s.core.ShareMembersGone(g, ids)
	}
	return &pb.ShareMembersLeftResponse{}, nil
}

// peerContext is a passed-on share call's context: the client's
// principal, named by the broker that passed it on (only brokers call
// the internal services).
func peerContext(ctx context.Context, principal string) context.Context {
	if principal == "" || principal == request.Anonymous {
		return ctx
	}
	return request.WithPrincipal(ctx, principal)
}

// ShareFetch serves a share fetch passed on by another broker.
func (s *Server) ShareFetch(ctx context.Context, req *pb.PeerShareFetchRequest) (*pb.PeerShareFetchResponse, error) {
	if req.MaxWaitMs < 0 || req.MaxRecords < 0 {
		return &pb.PeerShareFetchResponse{Error: service.ErrorOf(fmt.Errorf("%w: negative max wait or records", replica.ErrInvalidRequest))}, nil
	}
	res, err := s.core.ShareFetch(peerContext(ctx, req.Principal), &request.ShareFetchRequest{Group: req.Group, MemberID: req.MemberId,
		MaxWait: time.Duration(req.MaxWaitMs) * time.Millisecond, MaxRecords: int(req.MaxRecords), Partitions: fromWire(req.Partitions),
		KeyOrdered: req.KeyOrdered})
	if err != nil {
		return &pb.PeerShareFetchResponse{Error: service.ErrorOf(err)}, nil
	}
	resp := &pb.PeerShareFetchResponse{Partitions: make([]*pb.PeerShareFetchResult, len(res))}
	for i, r := range res {
		p := &pb.PeerShareFetchResult{Topic: r.Topic, Partition: r.Partition, Records: r.Records}
		if r.AckErr != nil {
			p.AckError = service.ErrorOf(r.AckErr)
		}
		if r.Err != nil {
			p.Error = service.ErrorOf(r.Err)
		}
		for _, a := range r.Acquired {
			p.Acquired = append(p.Acquired, &pb.PeerAcquiredRange{First: a.First, Last: a.Last, DeliveryCount: int32(a.DeliveryCount)})
		}
		resp.Partitions[i] = p
	}
	return resp, nil
}

// ShareAcknowledge applies acknowledgements passed on by another broker.
func (s *Server) ShareAcknowledge(ctx context.Context, req *pb.PeerShareAckRequest) (*pb.PeerShareAckResponse, error) {
	ack := s.core.ShareAcknowledge
	if req.KeyOrdered {
		ack = s.core.ShareAcknowledgeKeyOrdered
	}
	res, err := ack(peerContext(ctx, req.Principal), req.Group, req.MemberId, fromWire(req.Partitions))
	if err != nil {
		return &pb.PeerShareAckResponse{Error: service.ErrorOf(err)}, nil
	}
	resp := &pb.PeerShareAckResponse{Partitions: make([]*pb.PeerShareAckResult, len(res))}
	for i, r := range res {
		p := &pb.PeerShareAckResult{Topic: r.Topic, Partition: r.Partition}
		if r.Err != nil {
			p.Error = service.ErrorOf(r.Err)
		}
		resp.Partitions[i] = p
	}
	return resp, nil
}
