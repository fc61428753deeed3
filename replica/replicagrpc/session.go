package replicagrpc

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

// A follower's fetches over one stream per fetcher (ReplicaFetchStream in
// replica.proto), in a fetch session (replica.FollowerSession). A unary
// ReplicaFetch costs each fetch a call of its own: HEADERS both ways with
// their HPACK work, a new handler goroutine on the leader (whose stack
// then grows), the interceptor chain and a deadline. At a few thousand
// fetches a second, as a partition with a steady trickle of produces
// makes (every append wakes the followers' long polls), that was a
// quarter of a follower's CPU and a fifth of the leader's. Over a stream
// a fetch is one message each way.

// unaryFallback is how long a follower uses ReplicaFetch with a leader
// that answered ReplicaFetchStream with UNIMPLEMENTED (an older version)
// before it tries the stream again: a rolling upgrade moves to streams
// within this of the leader's restart.
const unaryFallback = time.Minute

// errStreamEnded: the leader closed the stream instead of answering.
var errStreamEnded = status.Error(codes.Unavailable, "the leader ended the replica fetch stream without answering")

var replicaFetchStreamDesc = &grpc.StreamDesc{StreamName: "ReplicaFetchStream", ServerStreams: true, ClientStreams: true}

// Session is a fetcher's ReplicaFetchStream to its leader
// (replica.FetchSession). One fetch is in flight at most (the fetcher's
// goroutine is its only user); a fetch whose context ends cancels the
// stream, and the next fetch opens another.
type Session struct {
	codec  *Codec
	leader int32
	addr   func() (string, bool)
	peer   func(addr string) (*grpc.ClientConn, error)
	unary  func(ctx context.Context, leader int32, req *replica.FetchRequest) (*replica.FetchResponse, error)

	stream     grpc.ClientStream // nil until opened, and after it failed
	streamAddr string            // the address stream is to
	cancel     context.CancelFunc
	session    replica.FollowerSession // of stream
	answered   bool                    // stream has answered a fetch (see Fetch)
	unaryUntil time.Time               // the leader lacks the stream until then
}

// OpenSession opens a follower's session with leader, which listens at
// addr() and is reached over the connection peer(addr), or with unary
// fetches (Codec.Fetch, say) while it lacks the stream. The stream is
// opened by the first fetch.
func (c *Codec) OpenSession(leader int32, addr func() (string, bool), peer func(addr string) (*grpc.ClientConn, error),
	unary func(ctx context.Context, leader int32, req *replica.FetchRequest) (*replica.FetchResponse, error)) *Session {
	return &Session{codec: c, leader: leader, addr: addr, peer: peer, unary: unary}
}

// Fetch sends req over the stream and waits for its answer, as
// Codec.Fetch does over a call of its own.
func (s *Session) Fetch(ctx context.Context, req *replica.FetchRequest) (*replica.FetchResponse, error) {
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

func (s *Session) fetchOnce(ctx context.Context, addr string, req *replica.FetchRequest) (*replica.FetchResponse, error) {
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
			grpc.MaxCallRecvMsgSize(s.codec.maxAnswer), grpc.WaitForReady(true), grpc.ForceCodecV2(peerCodec{}))
		if !stop() || err != nil {
			cancel()
			return nil, callError(ctx, err)
		}
		s.stream, s.streamAddr, s.cancel, s.answered = cs, addr, cancel, false
	}
	// The call's end (its deadline, or the fetcher interrupting a long
	// poll because its partitions changed) cancels the stream.
	stop := context.AfterFunc(ctx, s.cancel)
	sent := s.session.Message(req)
	if err := s.stream.SendMsg(RequestToPB(sent)); err != nil {
		err = sendError(s.stream, err)
		stop()
		s.drop()
		return nil, callError(ctx, err)
	}
	ans := &pooledAnswer{}
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
	resp, err := s.session.Response(req, sent, s.codec.ResponseFromPB(&ans.msg))
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
		ans := &pooledAnswer{}
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
func (s *Session) drop() {
	if s.cancel != nil {
		s.cancel()
	}
	s.stream, s.cancel, s.answered = nil, nil, false
	s.session.Reset()
}

// Close ends the session and its stream.
func (s *Session) Close() { s.drop() }

// callError is err as a call made under ctx reports it: once ctx has
// ended, its status (Canceled, DeadlineExceeded), not that of the stream
// it cancelled.
func callError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return status.FromContextError(ctx.Err()).Err()
	}
	return err
}
