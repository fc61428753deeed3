package service

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/mem"
	protobuf "google.golang.org/protobuf/proto"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/internal/bufpool"
	"github.com/quirelog/quire/internal/wire"
	"github.com/quirelog/quire/replica/replicagrpc"
)

// TransportOptions are the gRPC server options of the hot paths: the
// produce-request codec below, flow-control windows and socket buffers
// sized for megabyte messages (gRPC's 64 KiB default window, even with its
// BDP estimator, stalls 1–4 MiB produce requests on loopback and on fast
// LANs), and a buffer pool that does not zero the frames it reads into
// (internal/bufpool).
func TransportOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ForceServerCodecV2(serverCodec{}),
		// First in the chain, so that its stream sits nearest gRPC's
		// (decode.go).
		grpc.ChainStreamInterceptor(decodeStreamInterceptor),
		experimental.BufferPool(bufpool.Shared),
		grpc.InitialWindowSize(4 << 20),
		grpc.InitialConnWindowSize(16 << 20),
		grpc.ReadBufferSize(256 << 10),
		grpc.WriteBufferSize(256 << 10),
	}
}

var protoCodec = encoding.GetCodecV2(proto.Name)

// serverCodec is the proto codec, except that a ProduceRequest is decoded
// by hand (wire.DecodeProduceRequest) with each partition's records
// aliasing one copy of the message,
// rather than copied out of it again by proto (one copy of every produced
// byte less; the records are then modified in place by the append, which
// is fine as they are the broker's own). Anything unusual in a
// ProduceRequest (unknown fields, odd wire types) falls back to proto. A
// FetchResponse is encoded by hand (wire.EncodeFetchResponse) with the
// records referenced rather than copied into a marshalled message, and a
// Subscribe stream's records come encoded already (wire.Encoded).
type serverCodec struct{}

func (serverCodec) Marshal(v any) (mem.BufferSlice, error) {
	switch m := v.(type) {
	case *quirev1.FetchResponse:
		return wire.EncodeFetchResponse(m, wire.SliceBuffers{})
	case *pooledFetch:
		return wire.EncodeFetchResponse(m.resp, m) // fetch_buf.go
	case *replicagrpc.Answer:
		return m.Encode() // a replica fetch's records, from the leader's read buffers
	case *wire.Encoded:
		return m.Data, nil // a Subscribe stream's records (subscribe/records.go)
	}
	return protoCodec.Marshal(v)
}

// Unmarshal decodes data into v, or into the message of a decodeProbe
// (decode.go), leaving any error in the probe for its holder to answer.
func (c serverCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if p, ok := v.(*decodeProbe); ok {
		p.err = c.unmarshal(data, p.m)
		return nil
	}
	return c.unmarshal(data, v)
}

func (serverCodec) unmarshal(data mem.BufferSlice, v any) error {
	if m, ok := v.(*pooledProduce); ok {
		return m.unmarshal(data) // produce_buf.go
	}
	req, ok := v.(*quirev1.ProduceRequest)
	if !ok {
		return protoCodec.Unmarshal(data, v)
	}
	// Our own copy: gRPC reuses data's buffers once Unmarshal returns.
	buf := data.Materialize()
	if wire.DecodeProduceRequest(buf, req) {
		return nil
	}
	return protobuf.Unmarshal(buf, req)
}

func (serverCodec) Name() string { return proto.Name }
