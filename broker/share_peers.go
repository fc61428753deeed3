package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"

	pb "github.com/quirelog/quire/api/internalv1"
	"github.com/quirelog/quire/replica"
	"github.com/quirelog/quire/request"
	"github.com/quirelog/quire/service"
	"github.com/quirelog/quire/share"
	"github.com/quirelog/quire/sharegroup"
)

// Share groups across nodes: the request core's ShareCluster over the
// node-to-node connections (coreForwarder), and this broker's side of it
// (replicaService): whether a member heartbeats here, who left, and the
// share fetches and acknowledgements a SHARED Subscribe stream's node
// passes on to the partitions' leaders. See request/share_members.go.

// shareExpireInterval is how often a broker looks for share group
// members silent past their session timeout, to release their records
// everywhere.
const shareExpireInterval = time.Second

// sharePeerTimeout bounds a membership question or notice to one node:
// a node that does not answer in time is taken as not having the member.
const sharePeerTimeout = 5 * time.Second

// sharePeers are the other registered, unfenced brokers.
func (f coreForwarder) sharePeers() []int32 {
	var out []int32
	for _, br := range f.b.cluster.image().Brokers() {
		if br.ID != f.b.cfg.NodeID && !br.Fenced && br.Addr != "" {
			out = append(out, br.ID)
		}
	}
	return out
}

// ShareMember asks the other brokers at once whether member id
// heartbeats to one of them in group.
func (f coreForwarder) ShareMember(ctx context.Context, group, id string) (bool, error) {
	return f.askSharePeers(ctx, &pb.ShareMemberRequest{Group: group, MemberId: id})
}

// ShareGroupHasMembers asks every other broker at once whether a member
// of group heartbeats to it.
func (f coreForwarder) ShareGroupHasMembers(ctx context.Context, group string) (bool, error) {
	return f.askSharePeers(ctx, &pb.ShareMemberRequest{Group: group, AnyMember: true})
}

// askSharePeers asks every other broker at once: true as soon as one
// says yes.
func (f coreForwarder) askSharePeers(ctx context.Context, req *pb.ShareMemberRequest) (bool, error) {
	peers := f.sharePeers()
	if len(peers) == 0 {
		return false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, sharePeerTimeout)
	defer cancel()
	type answer struct {
		yes bool
		err error
	}
	answers := make(chan answer, len(peers))
	for _, id32 := range peers {
		go func() {
			cc, _, err := f.conn(id32)
			if err != nil {
				answers <- answer{err: err}
				return
			}
			resp, err := pb.NewReplicaServiceClient(cc).ShareMember(ctx, req)
			answers <- answer{yes: err == nil && resp.Member, err: err}
		}()
	}
	var errs []error
	for range peers {
		a := <-answers
		if a.yes {
			return true, nil // the others' answers go to the buffer
		}
		if a.err != nil {
			errs = append(errs, a.err)
		}
	}
	return false, errors.Join(errs...)
}

// ShareMembersLeft tells every other broker at once.
func (f coreForwarder) ShareMembersLeft(ctx context.Context, left []sharegroup.Departure) {
	in := &pb.ShareMembersLeftRequest{}
	for _, d := range left {
		in.Left = append(in.Left, &pb.ShareDeparture{Group: d.Group, MemberId: d.MemberID})
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sharePeerTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, id := range f.sharePeers() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cc, _, err := f.conn(id)
			if err == nil {
				_, err = pb.NewReplicaServiceClient(cc).ShareMembersLeft(ctx, in)
			}
			if err != nil {
				// It releases them when its confirmation of them runs out.
				f.b.logger.Debug("cannot tell a broker that share group members left", "broker", id, "error", err)
			}
		}()
	}
	wg.Wait()
}

func peerSharePartitions(parts []request.SharePartition) []*pb.PeerSharePartition {
	out := make([]*pb.PeerSharePartition, len(parts))
	for i, p := range parts {
		pp := &pb.PeerSharePartition{Topic: p.Topic, Partition: p.Partition}
		for _, a := range p.Acks {
			pp.Acks = append(pp.Acks, &pb.PeerShareAck{First: a.First, Last: a.Last, Type: int32(a.Type)})
		}
		out[i] = pp
	}
	return out
}

func fromPeerSharePartitions(parts []*pb.PeerSharePartition) []request.SharePartition {
	out := make([]request.SharePartition, len(parts))
	for i, p := range parts {
		sp := request.SharePartition{Topic: p.Topic, Partition: p.Partition}
		for _, a := range p.Acks {
			sp.Acks = append(sp.Acks, share.Ack{First: a.First, Last: a.Last, Type: share.AckType(a.Type)})
		}
		out[i] = sp
	}
	return out
}

// ShareFetch passes a share fetch on to leader as the caller's principal.
func (f coreForwarder) ShareFetch(ctx context.Context, leader int32, req *request.ShareFetchRequest) ([]request.ShareFetchResult, error) {
	cc, _, err := f.conn(leader)
	if err != nil {
		return nil, err
	}
	in := &pb.PeerShareFetchRequest{Principal: request.Principal(ctx), Group: req.Group, MemberId: req.MemberID,
		MaxWaitMs: int32(req.MaxWait.Milliseconds()), MaxRecords: int32(req.MaxRecords), Partitions: peerSharePartitions(req.Partitions),
		KeyOrdered: req.KeyOrdered}
	resp, err := pb.NewReplicaServiceClient(cc).ShareFetch(f.b.forwardContext(ctx), in, grpc.MaxCallRecvMsgSize(request.MaxSendBytes))
	if err != nil {
		return nil, err
	}
	if resp.Error != nil {
		return nil, fromWire(resp.Error)
	}
	out := make([]request.ShareFetchResult, len(resp.Partitions))
	for i, p := range resp.Partitions {
		r := request.ShareFetchResult{Topic: p.Topic, Partition: p.Partition, Records: p.Records, AckErr: fromWire(p.AckError), Err: fromWire(p.Error)}
		for _, a := range p.Acquired {
			r.Acquired = append(r.Acquired, share.AcquiredRange{First: a.First, Last: a.Last, DeliveryCount: int(a.DeliveryCount)})
		}
		out[i] = r
	}
	return out, nil
}

// ShareAcknowledge passes acknowledgements on to leader as the caller's
// principal.
func (f coreForwarder) ShareAcknowledge(ctx context.Context, leader int32, group, member string, keyOrdered bool, parts []request.SharePartition) ([]request.ShareAckResult, error) {
	cc, _, err := f.conn(leader)
	if err != nil {
		return nil, err
	}
	in := &pb.PeerShareAckRequest{Principal: request.Principal(ctx), Group: group, MemberId: member, Partitions: peerSharePartitions(parts),
		KeyOrdered: keyOrdered}
	resp, err := pb.NewReplicaServiceClient(cc).ShareAcknowledge(f.b.forwardContext(ctx), in)
	if err != nil {
		return nil, err
	}
	if resp.Error != nil {
		return nil, fromWire(resp.Error)
	}
	out := make([]request.ShareAckResult, len(resp.Partitions))
	for i, p := range resp.Partitions {
		out[i] = request.ShareAckResult{Topic: p.Topic, Partition: p.Partition, Err: fromWire(p.Error)}
	}
	return out, nil
}

// ShareMember answers whether member_id heartbeats here in group.
func (s *replicaService) ShareMember(_ context.Context, req *pb.ShareMemberRequest) (*pb.ShareMemberResponse, error) {
	if req.AnyMember {
		return &pb.ShareMemberResponse{Member: s.b.core.ShareGroupMembersHere(req.Group)}, nil
	}
	return &pb.ShareMemberResponse{Member: s.b.core.ShareMemberHere(req.Group, req.MemberId)}, nil
}

// ShareMembersLeft releases what the members named hold here.
func (s *replicaService) ShareMembersLeft(_ context.Context, req *pb.ShareMembersLeftRequest) (*pb.ShareMembersLeftResponse, error) {
	byGroup := map[string][]string{}
	for _, d := range req.Left {
		byGroup[d.Group] = append(byGroup[d.Group], d.MemberId)
	}
	for g, ids := range byGroup {
		s.b.core.ShareMembersGone(g, ids)
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
func (s *replicaService) ShareFetch(ctx context.Context, req *pb.PeerShareFetchRequest) (*pb.PeerShareFetchResponse, error) {
	if req.MaxWaitMs < 0 || req.MaxRecords < 0 {
		return &pb.PeerShareFetchResponse{Error: service.ErrorOf(fmt.Errorf("%w: negative max wait or records", replica.ErrInvalidRequest))}, nil
	}
	res, err := s.b.core.ShareFetch(peerContext(ctx, req.Principal), &request.ShareFetchRequest{Group: req.Group, MemberID: req.MemberId,
		MaxWait: time.Duration(req.MaxWaitMs) * time.Millisecond, MaxRecords: int(req.MaxRecords), Partitions: fromPeerSharePartitions(req.Partitions),
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
func (s *replicaService) ShareAcknowledge(ctx context.Context, req *pb.PeerShareAckRequest) (*pb.PeerShareAckResponse, error) {
	ack := s.b.core.ShareAcknowledge
	if req.KeyOrdered {
		ack = s.b.core.ShareAcknowledgeKeyOrdered
	}
	res, err := ack(peerContext(ctx, req.Principal), req.Group, req.MemberId, fromPeerSharePartitions(req.Partitions))
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
