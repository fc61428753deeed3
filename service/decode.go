package service

import (
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// A request whose bytes do not parse (broken wire format, a string field
// that is not UTF-8) is the client's fault, and gets INVALID_ARGUMENT with
// a quire.v1.Error (INVALID_REQUEST). gRPC itself answers a codec's error
// at once, INTERNAL and without details, before the handler can say
// anything. The handlers therefore decode into a decodeProbe, which
// serverCodec unwraps: it keeps its error in the probe and tells gRPC all
// went well, and the holder of the probe refuses the request.

// decodeProbe carries the message to decode into, and the codec's error.
type decodeProbe struct {
	m   any
	err error
}

// decodeInto decodes a unary request into m with dec (the handler's
// decoder); a request that does not parse is refused as malformed.
func decodeInto(dec func(any) error, m any) error {
	p := &decodeProbe{m: m}
	if err := dec(p); err != nil {
		return err
	}
	if p.err != nil {
		return malformedRequest(m, p.err)
	}
	return nil
}

// malformedRequest is the status of a request that did not parse.
func malformedRequest(m any, err error) error {
	name := "request"
	switch m := m.(type) {
	case *pooledProduce:
		name = string(proto.MessageName(&m.req))
	case proto.Message:
		name = string(proto.MessageName(m))
	}
	return toStatus(fmt.Errorf("%w: malformed %s: %v", ErrInvalidRequest, name, err))
}

// decodeStreamInterceptor makes every message a stream receives decode
// through a probe, as decodeInto does for unary calls. It comes first in
// the chain, so the other interceptors and the handler see the message
// itself.
func decodeStreamInterceptor(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, &decodeStream{ServerStream: ss})
}

// decodeStream's probe is its own, reused by every RecvMsg (which
// gRPC does not allow to run twice at once).
type decodeStream struct {
	grpc.ServerStream
	probe decodeProbe
}

func (s *decodeStream) RecvMsg(m any) error {
	s.probe = decodeProbe{m: m}
	err := s.ServerStream.RecvMsg(&s.probe)
	perr := s.probe.err
	s.probe = decodeProbe{}
	if err != nil {
		return err
	}
	if perr != nil {
		return malformedRequest(m, perr)
	}
	return nil
}
