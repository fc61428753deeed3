package replicagrpc

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	pb "github.com/quirelog/quire/api/internalv1"
	"github.com/quirelog/quire/replica"
)

// fakeLeader answers replica fetches with the fetch offset as the high
// watermark, so an answer shows which request it is for. blockAt makes a
// stream hold a fetch at that offset until the stream ends; endAfter ends
// every stream (UNAVAILABLE, as a stopping leader does) after that many
// answers; failAt answers a fetch at that offset with an error of the whole
// request.
type fakeLeader struct {
	pb.UnimplementedReplicaServiceServer
	streams, fetches atomic.Int32
	blockAt          int64
	blocked          chan struct{}
	streamEnded      chan struct{}
	endAfter         int
	failAt           int64
}

func answerFor(req *pb.ReplicaFetchRequest) *pb.ReplicaFetchResponse {
	p := req.GetPartitions()[0]
	return &pb.ReplicaFetchResponse{Partitions: []*pb.ReplicaFetchPartitionResult{
		{Topic: p.GetTopic(), Partition: p.GetPartition(), HighWatermark: p.GetFetchOffset(), LogEndOffset: p.GetFetchOffset(), Records: []byte("r")}}}
}

func (l *fakeLeader) ReplicaFetch(_ context.Context, req *pb.ReplicaFetchRequest) (*pb.ReplicaFetchResponse, error) {
	l.fetches.Add(1)
	return answerFor(req), nil
}

func (l *fakeLeader) ReplicaFetchStream(stream pb.ReplicaService_ReplicaFetchStreamServer) error {
	l.streams.Add(1)
	answered := 0
	for {
		req, err := stream.Recv()
		if err != nil {
			return err
		}
		l.fetches.Add(1)
		off := req.GetPartitions()[0].GetFetchOffset()
		switch {
		case l.blocked != nil && off == l.blockAt:
			close(l.blocked)
			<-stream.Context().Done()
			close(l.streamEnded)
			return stream.Context().Err()
		case l.failAt != 0 && off == l.failAt:
			return status.Error(codes.FailedPrecondition, "refused")
		}
		if err := stream.Send(answerFor(req)); err != nil {
			return err
		}
		if answered++; l.endAfter > 0 && answered == l.endAfter {
			return status.Error(codes.Unavailable, "shutting down")
		}
	}
}

// unaryOnlyLeader is a leader of a version without ReplicaFetchStream.
type unaryOnlyLeader struct {
	pb.UnimplementedReplicaServiceServer
	fetches atomic.Int32
}

func (l *unaryOnlyLeader) ReplicaFetch(_ context.Context, req *pb.ReplicaFetchRequest) (*pb.ReplicaFetchResponse, error) {
	l.fetches.Add(1)
	return answerFor(req), nil
}

// startFakeLeader serves srv on a loopback port and returns a session to
// it, with the count of the stream calls the server saw (answered or
// not).
func startFakeLeader(t testing.TB, srv pb.ReplicaServiceServer) (*Session, *atomic.Int32) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var streamCalls atomic.Int32
	s := grpc.NewServer(grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		streamCalls.Add(1)
		return h(srv, ss)
	}))
	pb.RegisterReplicaServiceServer(s, srv)
	go func() { _ = s.Serve(lis) }()
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close(); s.Stop() })
	unary := func(ctx context.Context, _ int32, req *replica.FetchRequest) (*replica.FetchResponse, error) {
		return testCodec.Fetch(ctx, cc, req)
	}
	sess := testCodec.OpenSession(1, func() (string, bool) { return lis.Addr().String(), true },
		func(string) (*grpc.ClientConn, error) { return cc, nil }, unary)
	t.Cleanup(sess.Close)
	return sess, &streamCalls
}

func fetchAt(offset int64) *replica.FetchRequest {
	return &replica.FetchRequest{ReplicaID: 2, MaxWaitMs: 500, MinBytes: 1,
		Partitions: []replica.FetchPartition{{Topic: "t", Partition: 0, FetchOffset: offset}}}
}

// mustFetch fetches at offset and checks that the answer is for it.
func mustFetch(t *testing.T, sess *Session, offset int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := sess.Fetch(ctx, fetchAt(offset))
	if err != nil {
		t.Fatalf("fetch at %d: %v", offset, err)
	}
	defer resp.Done()
	if len(resp.Partitions) != 1 || resp.Partitions[0].HighWatermark != offset || string(resp.Partitions[0].Records) != "r" {
		t.Fatalf("fetch at %d answered %+v", offset, resp.Partitions)
	}
}

// A session sends every fetch over one stream, each answered in turn.
func TestFetchSessionOneStreamForManyFetches(t *testing.T) {
	t.Parallel()
	l := &fakeLeader{}
	sess, _ := startFakeLeader(t, l)
	for off := int64(1); off <= 50; off++ {
		mustFetch(t, sess, off)
	}
	if got := l.streams.Load(); got != 1 {
		t.Fatalf("50 fetches opened %d streams, want 1", got)
	}
	if got := l.fetches.Load(); got != 50 {
		t.Fatalf("the leader saw %d fetches, want 50", got)
	}
}

// Ending a fetch's context (the fetcher interrupting a long poll) ends
// that fetch with Canceled and the stream at the leader; the next fetch
// goes out on a new stream.
func TestFetchSessionCancelEndsTheFetchNotTheSession(t *testing.T) {
	t.Parallel()
	l := &fakeLeader{blockAt: 7, blocked: make(chan struct{}), streamEnded: make(chan struct{})}
	sess, _ := startFakeLeader(t, l)
	mustFetch(t, sess, 6)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-l.blocked
		cancel()
	}()
	_, err := sess.Fetch(ctx, fetchAt(7))
	if status.Code(err) != codes.Canceled {
		t.Fatalf("cancelled fetch: %v, want Canceled", err)
	}
	select {
	case <-l.streamEnded:
	case <-time.After(time.Minute):
		t.Fatal("the leader's stream did not end when the fetch was cancelled")
	}
	mustFetch(t, sess, 8)
	if got := l.streams.Load(); got != 2 {
		t.Fatalf("streams opened: %d, want 2", got)
	}
}

// A deadline bounds a fetch over the stream as it does a call.
func TestFetchSessionDeadline(t *testing.T) {
	t.Parallel()
	l := &fakeLeader{blockAt: 3, blocked: make(chan struct{}), streamEnded: make(chan struct{})}
	sess, _ := startFakeLeader(t, l)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := sess.Fetch(ctx, fetchAt(3)); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("fetch past its deadline: %v, want DeadlineExceeded", err)
	}
	mustFetch(t, sess, 4)
}

// A stream that the leader ended after an answer (a leader stopping, a
// connection replaced) does not fail the next fetch: it goes again on a
// new stream.
func TestFetchSessionReusedStreamEndedIsRetried(t *testing.T) {
	t.Parallel()
	l := &fakeLeader{endAfter: 1}
	sess, _ := startFakeLeader(t, l)
	for off := int64(1); off <= 3; off++ {
		mustFetch(t, sess, off)
	}
	// Each stream answered one fetch; fetches 2 and 3 each found the
	// stream before ended.
	if got := l.streams.Load(); got != 3 {
		t.Fatalf("streams opened: %d, want 3", got)
	}
}

// An error of the whole request ends the stream with its status, which the
// fetch returns as the unary call would; the next fetch opens a new
// stream.
func TestFetchSessionRequestErrorIsReturned(t *testing.T) {
	t.Parallel()
	l := &fakeLeader{failAt: 2}
	sess, _ := startFakeLeader(t, l)
	mustFetch(t, sess, 1)
	_, err := sess.Fetch(context.Background(), fetchAt(2))
	if status.Code(err) != codes.FailedPrecondition || status.Convert(err).Message() != "refused" {
		t.Fatalf("refused fetch: %v, want the leader's FailedPrecondition", err)
	}
	if got := l.fetches.Load(); got != 2 {
		t.Fatalf("the refused fetch was sent %d times in all fetches %d, want once", got-1, got)
	}
	mustFetch(t, sess, 3)
	if got := l.streams.Load(); got != 2 {
		t.Fatalf("streams opened: %d, want 2", got)
	}
}

// A leader without ReplicaFetchStream (an older version) is fetched from
// with unary calls, without asking for the stream on every fetch.
func TestFetchSessionFallsBackToUnary(t *testing.T) {
	t.Parallel()
	l := &unaryOnlyLeader{}
	sess, streamCalls := startFakeLeader(t, l)
	for off := int64(1); off <= 5; off++ {
		mustFetch(t, sess, off)
	}
	if got := l.fetches.Load(); got != 5 {
		t.Fatalf("unary fetches: %d, want 5", got)
	}
	if got := streamCalls.Load(); got != 1 {
		t.Fatalf("stream calls tried: %d, want 1 (then unary for %v)", got, unaryFallback)
	}
	// Past the fallback, the stream is tried again.
	sess.unaryUntil = time.Now().Add(-time.Second)
	mustFetch(t, sess, 6)
	if got := streamCalls.Load(); got != 2 {
		t.Fatalf("stream calls tried after the fallback: %d, want 2", got)
	}
}
