package service

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/quirelog/quire/internal/errcode"
	"github.com/quirelog/quire/storage"
)

// ErrRequestTooLarge: a request is over the broker's receive limit
// (MaxRequestBytes). Clients see MESSAGE_TOO_LARGE.
var ErrRequestTooLarge = fmt.Errorf("%w: request over the broker's receive limit", storage.ErrRecordTooLarge)

// MaxRequestBytes is the largest request a broker takes: room for a
// request carrying the largest batch (message.max.bytes) twice over plus
// 1 MiB of framing, and never under 8 MiB (so 8 MiB with Kafka's default
// message.max.bytes). Raising message.max.bytes raises it.
func MaxRequestBytes(messageMaxBytes int32) int {
	n := int(messageMaxBytes) * 2
	return max(n+1<<20, 8<<20)
}

// MaxReceiveBytes is the gRPC server's own receive limit: twice
// MaxRequestBytes, so that a request somewhat over the limit is read and
// answered with a quire.v1.Error naming the key to raise, while gRPC drops
// anything larger unread (RESOURCE_EXHAUSTED, with no details).
func MaxReceiveBytes(messageMaxBytes int32) int { return 2 * MaxRequestBytes(messageMaxBytes) }

// WithRequestLimit returns sd with every handler refusing a request over
// limit with ErrRequestTooLarge, a status whose quire.v1.Error says which
// key to raise.
func WithRequestLimit(sd *grpc.ServiceDesc, limit int) *grpc.ServiceDesc {
	out := *sd
	out.Methods = append([]grpc.MethodDesc(nil), sd.Methods...)
	for i := range out.Methods {
		h := out.Methods[i].Handler
		out.Methods[i].Handler = func(srv any, ctx context.Context, dec func(any) error, in grpc.UnaryServerInterceptor) (any, error) {
			return h(srv, ctx, func(m any) error {
				if err := decodeInto(dec, m); err != nil { // decode.go
					return err
				}
				return checkRequestSize(m, limit)
			}, in)
		}
	}
	out.Streams = append([]grpc.StreamDesc(nil), sd.Streams...)
	for i := range out.Streams {
		h := out.Streams[i].Handler
		out.Streams[i].Handler = func(srv any, ss grpc.ServerStream) error {
			return h(srv, &limitedStream{ServerStream: ss, limit: limit})
		}
	}
	return &out
}

// limitedStream checks the size of each message a stream receives.
type limitedStream struct {
	grpc.ServerStream
	limit int
}

func (s *limitedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	return checkRequestSize(m, s.limit)
}

func checkRequestSize(m any, limit int) error {
	var n int
	switch m := m.(type) {
	case *pooledProduce: // ProduceStream's (produce_buf.go)
		n = proto.Size(&m.req)
	case proto.Message:
		n = proto.Size(m)
	default:
		return nil
	}
	if n <= limit {
		return nil
	}
	err := fmt.Errorf("%w: a request of %d bytes is over this broker's limit of %d bytes (2 x message.max.bytes + 1 MiB, at least 8 MiB): raise message.max.bytes on the brokers, or send smaller requests",
		ErrRequestTooLarge, n, limit)
	return errcode.Status(codes.ResourceExhausted, toError(err))
}
