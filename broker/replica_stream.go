package broker

import (
	"context"
	"errors"
	"io"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/quirelog/quire/api/internalv1"
	"github.com/quirelog/quire/replica"
)

// The follower fetch over one stream per fetcher (ReplicaFetchStream in
// replica.proto), both ends. A unary ReplicaFetch costs each fetch a call
// of its own: HEADERS both ways with their HPACK work, a new handler
// goroutine on the leader (whose stack then grows), the interceptor
// chain and a deadline. At a few thousand fetches a second, as a
// partition with a steady trickle of produces makes (every append wakes
// the followers' long polls), that was a quarter of a follower's CPU and
// a fifth of the leader's. Over a stream a fetch is one message each way.

// ReplicaFetchStream answers a follower's fetches one at a time, each as
// ReplicaFetch does (replica.Manager.HandleFetch).
func (s *replicaService) ReplicaFetchStream(stream pb.ReplicaService_ReplicaFetchStreamServer) error {
	ctx := stream.Context()
	session := newLeaderSession()
	defer session.close()
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
			return toStatus(ErrShuttingDown)
		default:
		}
		// Answered as the unary call is, its read buffers held aside for
		// serverCodec to send the records from and give back
		// (replica_codec.go).
		hold := &replicaFetchHold{}
		start := time.Now()
		whole, err := session.request(req)
		var out *pb.ReplicaFetchResponse
		if err == nil {
			out, err = s.fetch(context.WithValue(ctx, replicaFetchHoldKey{}, hold), whole, session, req.GetIncremental())
		} else {
			err = toStatus(err)
		}
		if s.b.cfg.MetricsRequestsEnable {
			// Counted as a ReplicaFetch call, as over the unary call;
			// the stream itself counts once, when it ends.
			s.b.rpcStats.Observe(pb.ReplicaService_ReplicaFetch_FullMethodName, start, err)
		}
		if err != nil {
			return err
		}
		if err := stream.SendMsg(&pooledReplicaFetch{resp: out, bufs: hold.bufs}); err != nil {
			return err
		}
	}
}

// unaryFallback is how long a follower uses ReplicaFetch with a leader
// that answered ReplicaFetchStream with UNIMPLEMENTED (an older version)
// before it tries the stream again: a rolling upgrade moves to streams
// within this of the leader's restart.
const unaryFallback = time.Minute

// errStreamEnded: the leader closed the stream instead of answering.
var errStreamEnded = status.Error(codes.Unavailable, "the leader ended the replica fetch stream without answering")

var replicaFetchStreamDesc = &grpc.StreamDesc{StreamName: "ReplicaFetchStream", ServerStreams: true, ClientStreams: true}

// OpenFetchSession opens a follower's session with a leader broker
// (replica.SessionPeers); its stream is opened by the first fetch.
func (c *cluster) OpenFetchSession(leader int32) replica.FetchSession {
	return &fetchSession{
		leader: leader,
		addr:   func() (string, bool) { return c.brokerAddr(leader) },
		peer:   c.peer,
		unary:  c.ReplicaFetch,
	}
}

// fetchSession is a fetcher's ReplicaFetchStream to its leader. One fetch
// is in flight at most (the fetcher's goroutine is its only user); a fetch
// whose context ends cancels the stream, and the next fetch opens another.
type fetchSession struct {
	leader int32
	addr   func() (string, bool)
	peer   func(addr string) (*grpc.ClientConn, error)
	unary  func(ctx context.Context, leader int32, req *replica.FetchRequest) (*replica.FetchResponse, error)

	stream     grpc.ClientStream // nil until opened, and after it failed
	streamAddr string            // the address stream is to
	cancel     context.CancelFunc
	session    followerSession // of stream
	answered   bool            // stream has answered a fetch (see Fetch)
	unaryUntil time.Time       // the leader lacks the stream until then
}

// Fetch sends req over the stream and waits for its answer, as
// cluster.ReplicaFetch does over a call of its own.
func (s *fetchSession) Fetch(ctx context.Context, req *replica.FetchRequest) (*replica.FetchResponse, error) {
	if time.Now().Before(s.unaryUntil) {
		return s.unary(ctx, s.leader, req)
	}
	addr, ok := s.addr()
	if !ok {
		s.drop()
		return s.unary(ctx, s.leader, req) // says that the leader has no address
	}
	if s.stream != nil && addr != s.streamAddr {
		s.drop()
	}
	// A stream that answered before may have broken since, idle (the
	// connection was replaced, the leader restarted): that says nothing
	// of the leader now, so the fetch goes once more, on a new stream. A
	// fetch is safe to repeat: it only reads, and tells the leader an
	// offset it already had.
	reused := s.stream != nil && s.answered
	resp, err := s.fetchOnce(ctx, addr, req)
	if err != nil && reused && ctx.Err() == nil && status.Code(err) == codes.Unavailable {
		resp, err = s.fetchOnce(ctx, addr, req)
	}
	if status.Code(err) == codes.Unimplemented && ctx.Err() == nil {
		s.unaryUntil = time.Now().Add(unaryFallback)
		return s.unary(ctx, s.leader, req)
	}
	return resp, err
}

func (s *fetchSession) fetchOnce(ctx context.Context, addr string, req *replica.FetchRequest) (*replica.FetchResponse, error) {
	if s.stream == nil {
		cc, err := s.peer(addr)
		if err != nil {
			return nil, err
		}
		sctx, cancel := context.WithCancel(context.Background())
		// Opening waits for the connection (WaitForReady, as the unary
		// fetch does) within ctx: a fetch made while the link is down
		// goes out as soon as it is back.
		stop := context.AfterFunc(ctx, cancel)
		// Answers may be far above gRPC's default receive limit, and
		// their records alias a pooled buffer (peerCodec).
		cs, err := cc.NewStream(sctx, replicaFetchStreamDesc, pb.ReplicaService_ReplicaFetchStream_FullMethodName,
			grpc.MaxCallRecvMsgSize(maxSendBytes), grpc.WaitForReady(true), grpc.ForceCodecV2(peerCodec{}))
		if !stop() || err != nil {
			cancel()
			return nil, callError(ctx, err)
		}
		s.stream, s.streamAddr, s.cancel, s.answered = cs, addr, cancel, false
	}
	// The call's end (its deadline, or the fetcher interrupting a long
	// poll because its partitions changed) cancels the stream.
	stop := context.AfterFunc(ctx, s.cancel)
	msg := s.session.message(req)
	if err := s.stream.SendMsg(msg); err != nil {
		err = sendError(s.stream, err)
		stop()
		s.drop()
		return nil, callError(ctx, err)
	}
	ans := &pooledReplicaAnswer{}
	if err := s.stream.RecvMsg(ans); err != nil {
		stop()
		ans.release()
		s.drop()
		if errors.Is(err, io.EOF) {
			err = errStreamEnded
		}
		return nil, callError(ctx, err)
	}
	// Read through the session before anything may drop it.
	resp, err := s.session.response(req, msg, &ans.msg)
	if !stop() {
		// ctx ended as the answer came: the stream is cancelled, the
		// answer good.
		s.drop()
	} else if err == nil {
		s.answered = true
	}
	if err != nil {
		ans.release()
		s.drop()
		return nil, status.Error(codes.Internal, err.Error())
	}
	resp.Done = ans.release
	return resp, nil
}

// sendError is the error of a failed send on cs: gRPC reports io.EOF
// there, and why the stream ended on the next receive.
func sendError(cs grpc.ClientStream, err error) error {
	if errors.Is(err, io.EOF) {
		ans := &pooledReplicaAnswer{}
		rerr := cs.RecvMsg(ans)
		ans.release()
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return rerr
		}
		return errStreamEnded
	}
	return err
}

// drop cancels the stream; the next fetch opens another.
func (s *fetchSession) drop() {
	if s.cancel != nil {
		s.cancel()
	}
	s.stream, s.cancel, s.answered = nil, nil, false
	s.session.reset()
}

// Close ends the session and its stream.
func (s *fetchSession) Close() { s.drop() }

// callError is err as a call made under ctx reports it: once ctx has
// ended, its status (Canceled, DeadlineExceeded), not that of the stream
// it cancelled.
func callError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return status.FromContextError(ctx.Err()).Err()
	}
	return err
}
