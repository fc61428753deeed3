package rpcstats

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestRPCStatsCountsByCode(t *testing.T) {
	s := New()
	info := &grpc.UnaryServerInfo{FullMethod: "/quire.v1.Producer/Produce"}
	ok := func(context.Context, any) (any, error) { return "ok", nil }
	bad := func(context.Context, any) (any, error) { return nil, status.Error(codes.InvalidArgument, "no") }
	for range 3 {
		if _, err := s.Unary(context.Background(), nil, info, ok); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Unary(context.Background(), nil, info, bad); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("error passed through as %v", err)
	}
	snap := s.Snapshot()
	if len(snap) != 1 || snap[0].Name != info.FullMethod || snap[0].Stream {
		t.Fatalf("snapshot %+v", snap)
	}
	m := snap[0]
	if m.ByCode[codes.OK] != 3 || m.ByCode[codes.InvalidArgument] != 1 || len(m.ByCode) != 2 || m.Latency.Count != 4 {
		t.Fatalf("counts %+v latency count %d", m.ByCode, m.Latency.Count)
	}
}

// BenchmarkRPCStatsUnary is the interceptor's cost per unary call.
func BenchmarkRPCStatsUnary(b *testing.B) {
	s := New()
	info := &grpc.UnaryServerInfo{FullMethod: "/quire.v1.Producer/Produce"}
	h := func(context.Context, any) (any, error) { return nil, nil }
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_, _ = s.Unary(context.Background(), nil, info, h)
		}
	})
}
