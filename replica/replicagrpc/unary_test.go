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
