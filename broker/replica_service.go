package broker

import (
	"context"
	"errors"
	"io"
	"time"

	"google.golang.org/grpc/status"

	pb "github.com/quirelog/quire/api/internalv1"
	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/replica"
	"github.com/quirelog/quire/replica/replicagrpc"
	"github.com/quirelog/quire/request"
	"github.com/quirelog/quire/service"
)

// replicaService implements quire.internal.v1.ReplicaService: node-to-node
// calls answered from the replicas this broker hosts, the follower fetch
// (replica.Manager.HandleFetch, HandleSessionFetch) and DescribeLogs
// (describe.go). It turns the wire messages into the replica package's
// plain types and back (replicagrpc) and errors into statuses.
type replicaService struct {
	pb.UnimplementedReplicaServiceServer
	b *Broker
}

// DescribeLogs answers the offsets of the named replicas hosted here.
func (s *replicaService) DescribeLogs(ctx context.Context, req *pb.DescribeLogsRequest) (*pb.DescribeLogsResponse, error) {
	resp := &pb.DescribeLogsResponse{Logs: make([]*pb.LogDescription, 0, len(req.Partitions))}
	for _, ref := range req.Partitions {
		d := s.b.describeLog(ref.GetTopic(), ref.GetPartition())
		if d.Leader && len(ref.TimestampOffsets) > 0 {
			d.Timestamps = s.b.recordTimestamps(ref.GetTopic(), ref.GetPartition(), ref.TimestampOffsets)
		}
		resp.Logs = append(resp.Logs, d)
	}
	return resp, nil
}

// The share groups' calls between nodes, answered by sharegroup/sharepeer.

func (s *replicaService) ShareMember(ctx context.Context, req *pb.ShareMemberRequest) (*pb.ShareMemberResponse, error) {
	return s.b.sharePeers.ShareMember(ctx, req)
}

func (s *replicaService) ShareMembersLeft(ctx context.Context, req *pb.ShareMembersLeftRequest) (*pb.ShareMembersLeftResponse, error) {
	return s.b.sharePeers.ShareMembersLeft(ctx, req)
}

func (s *replicaService) ShareFetch(ctx context.Context, req *pb.PeerShareFetchRequest) (*pb.PeerShareFetchResponse, error) {
	return s.b.sharePeers.ShareFetch(ctx, req)
}

func (s *replicaService) ShareAcknowledge(ctx context.Context, req *pb.PeerShareAckRequest) (*pb.PeerShareAckResponse, error) {
	return s.b.sharePeers.ShareAcknowledge(ctx, req)
}

// replicaWire turns replica fetches into the service's messages and back,
// a partition's refusal coded by the error table.
var replicaWire = replicagrpc.NewCodec(func(err error) (quirev1.ErrorCode, string) {
	e := service.ErrorOf(err)
	return e.Code, e.Message
}, request.MaxSendBytes)

// ReplicaFetch is a follower's pull (see replica.proto), answered by the
// replica manager (replica.Manager.HandleFetch). Its records are sent
// from the buffers they were read into (replicagrpc.WithPooledFetch).
func (s *replicaService) ReplicaFetch(ctx context.Context, req *pb.ReplicaFetchRequest) (*pb.ReplicaFetchResponse, error) {
	resp, err := s.b.rm.HandleFetch(ctx, replicagrpc.RequestFromPB(req))
	if err != nil {
		return nil, replicaFetchError(ctx, err)
	}
	return replicagrpc.Unary(ctx, replicaWire.Answer(resp)), nil
}

// ReplicaFetchStream answers a follower's fetches one at a time in a
// fetch session (replica.Manager.HandleSessionFetch). A unary ReplicaFetch
// costs each fetch a call of its own: HEADERS both ways with their HPACK
// work, a new handler goroutine (whose stack then grows), the interceptor
// chain and a deadline. At a few thousand fetches a second, as a
// partition with a steady trickle of produces makes (every append wakes
// the followers' long polls), that was a quarter of a follower's CPU and
// a fifth of the leader's. Over a stream a fetch is one message each way.
func (s *replicaService) ReplicaFetchStream(stream pb.ReplicaService_ReplicaFetchStreamServer) error {
	ctx := stream.Context()
	session := replica.NewLeaderSession()
	defer session.Close()
	var fetch replica.FetchRequest // each fetch's, in turn
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil // the follower closed its session
		}
		if err != nil {
			return err
		}
		// A draining broker ends its streams at their next fetch, so the
		// drain does not wait for them, nor answer empty fetches at once
		// from stopped replicas until it gives up. Not earlier: through
		// a controlled shutdown this broker still leads, and its
		// followers' fetches move the HW of what it takes meanwhile. A
		// follower that sends nothing (every partition held back, or the
		// process paused) holds the drain until its bound, as a produce
		// stream does.
		select {
		case <-s.b.draining:
			return service.Status(ErrShuttingDown)
		default:
		}
		start := time.Now()
		replicagrpc.RequestInto(&fetch, req)
		resp, err := s.b.rm.HandleSessionFetch(ctx, session, &fetch)
		if err != nil {
			err = replicaFetchError(ctx, err)
		}
		if s.b.cfg.MetricsRequestsEnable {
			// Counted as a ReplicaFetch call, as over the unary call;
			// the stream itself counts once, when it ends.
			s.b.rpcStats.Observe(pb.ReplicaService_ReplicaFetch_FullMethodName, start, err)
		}
		if err != nil {
			return err
		}
		// Sent from the read buffers, which gRPC gives back (serverCodec).
		if err := stream.SendMsg(replicaWire.Answer(resp)); err != nil {
			return err
		}
	}
}

// replicaFetchError is the status of a replica fetch that failed: once
// the call's context has ended, its own (Canceled, DeadlineExceeded).
func replicaFetchError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return status.FromContextError(ctx.Err()).Err()
	}
	return service.Status(err)
}
