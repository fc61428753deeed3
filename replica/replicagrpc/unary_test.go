package replicagrpc

import (
	"bytes"
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"

	pb "github.com/quirelog/quire/api/internalv1"
	"github.com/quirelog/quire/internal/bufpool"
	"github.com/quirelog/quire/replica"
)

// answerCodec is a server's proto codec that sends an Answer with Encode,
// as the broker's does.
type answerCodec struct{}

func (answerCodec) Marshal(v any) (mem.BufferSlice, error) {
	if a, ok := v.(*Answer); ok {
		return a.Encode()
	}
	return peerProto.Marshal(v)
}

func (answerCodec) Unmarshal(data mem.BufferSlice, v any) error { return peerProto.Unmarshal(data, v) }

func (answerCodec) Name() string { return proto.Name }

// pooledLeader answers a unary ReplicaFetch with records read into pooled
// buffers, size bytes of them for each partition, as HandleFetch does.
type pooledLeader struct {
	pb.UnimplementedReplicaServiceServer
	size int
}

func (l *pooledLeader) ReplicaFetch(ctx context.Context, req *pb.ReplicaFetchRequest) (*pb.ReplicaFetchResponse, error) {
	fetch := RequestFromPB(req)
	resp := &replica.FetchResponse{}
	for i, p := range fetch.Partitions {
		buf := bufpool.Shared.Get(l.size)
		for j := range *buf {
			(*buf)[j] = byte(i + j)
		}
		resp.Partitions = append(resp.Partitions, replica.FetchResult{Topic: p.Topic, Partition: p.Partition, Records: *buf, Buffer: buf,
			HighWatermark: p.FetchOffset, LogEndOffset: p.FetchOffset})
	}
	return Unary(ctx, testCodec.Answer(resp)), nil
}

// A unary fetch's answer, sent from the leader's read buffers through
// WithPooledFetch (or as a plain message without it), reaches the
// follower whole: records inlined and referenced alike.
func TestUnaryFetchSendsTheReadBuffers(t *testing.T) {
	t.Parallel()
	for _, pooled := range []bool{true, false} {
		for _, size := range []int{10, 100 << 10} {
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			s := grpc.NewServer(grpc.ForceServerCodecV2(answerCodec{}))
			sd := &pb.ReplicaService_ServiceDesc
			if pooled {
				sd = WithPooledFetch(sd)
			}
			s.RegisterService(sd, &pooledLeader{size: size})
			go func() { _ = s.Serve(lis) }()
			cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			req := &replica.FetchRequest{ReplicaID: 2, Partitions: []replica.FetchPartition{{Topic: "t", FetchOffset: 4}, {Topic: "t", Partition: 1, FetchOffset: 8}}}
			resp, err := testCodec.Fetch(ctx, cc, req)
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range resp.Partitions {
				want := make([]byte, size)
				for j := range want {
					want[j] = byte(i + j)
				}
				if r.Topic != "t" || r.Partition != int32(i) || r.HighWatermark != req.Partitions[i].FetchOffset || !bytes.Equal(r.Records, want) {
					t.Fatalf("pooled %v, %d bytes: partition %d answered %s-%d HW %d with %d bytes, want t-%d HW %d and its records",
						pooled, size, i, r.Topic, r.Partition, r.HighWatermark, len(r.Records), i, req.Partitions[i].FetchOffset)
				}
			}
			resp.Done()
			_ = cc.Close()
			s.Stop()
		}
	}
}

// repeatingLeader answers every unary ReplicaFetch with a new Answer of
// one pooled buffer, kept in answers.
type repeatingLeader struct {
	pb.UnimplementedReplicaServiceServer
	answers []*Answer
}

func (l *repeatingLeader) ReplicaFetch(ctx context.Context, _ *pb.ReplicaFetchRequest) (*pb.ReplicaFetchResponse, error) {
	buf := bufpool.Shared.Get(10 << 10)
	resp := &replica.FetchResponse{Partitions: []replica.FetchResult{{Topic: "t", Records: *buf, Buffer: buf}}}
	a := testCodec.Answer(resp)
	l.answers = append(l.answers, a)
	return Unary(ctx, a), nil
}

// An interceptor that calls ReplicaFetch twice and answers the first
// message: that answer is sent from its read buffer, which stays out of
// the pool until gRPC writes it; only the second call's goes back. (The
// second call used to give the first's buffer back, and the handler then
// sent the first message from a buffer already back in the pool.)
func TestUnaryFetchInterceptorCallingTwice(t *testing.T) {
	t.Parallel()
	sd := WithPooledFetch(&pb.ReplicaService_ServiceDesc)
	var h func(any, context.Context, func(any) error, grpc.UnaryServerInterceptor) (any, error)
	for _, m := range sd.Methods {
		if m.MethodName == "ReplicaFetch" {
			h = m.Handler
		}
	}
	if h == nil {
		t.Fatal("no ReplicaFetch method")
	}
	twice := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		first, err := handler(ctx, req)
		if err != nil {
			return nil, err
		}
		if _, err := handler(ctx, req); err != nil {
			return nil, err
		}
		return first, nil
	}
	srv := &repeatingLeader{}
	got, err := h(srv, context.Background(), func(any) error { return nil }, twice)
	if err != nil || len(srv.answers) != 2 {
		t.Fatalf("answered %T %v after %d calls", got, err, len(srv.answers))
	}
	if got != any(srv.answers[0]) {
		t.Fatalf("answered %T, want the first call's *Answer", got)
	}
	if srv.answers[0].bufs[0] == nil {
		t.Fatal("the answer's buffer was given back before it was sent")
	}
	if srv.answers[1].bufs[0] != nil {
		t.Fatal("the unanswered call kept its buffer")
	}
	data, err := srv.answers[0].Encode()
	if err != nil {
		t.Fatal(err)
	}
	if n := data.Len(); n < 10<<10 {
		t.Fatalf("encoded %d bytes, want the records' %d and more", n, 10<<10)
	}
	data.Free()
}
