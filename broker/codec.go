package broker

import (
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	protobuf "google.golang.org/protobuf/proto"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/internal/wire"
)

// transportOptions are the gRPC server options of the hot paths: the
// produce-request codec below, and flow-control windows and socket
// buffers sized for megabyte messages (gRPC's 64 KiB default window, even
// with its BDP estimator, stalls 1–4 MiB produce requests on loopback
// and on fast LANs).
func transportOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ForceServerCodecV2(serverCodec{}),
		grpc.InitialWindowSize(4 << 20),
		grpc.InitialConnWindowSize(16 << 20),
		grpc.ReadBufferSize(256 << 10),
		grpc.WriteBufferSize(256 << 10),
	}
}

var protoCodec = encoding.GetCodecV2(proto.Name)

// serverCodec is the proto codec, except that a ProduceRequest is decoded
// by hand with each partition's records aliasing one copy of the message,
// rather than copied out of it again by proto (one copy of every produced
// byte less; the records are then modified in place by the append, which
// is fine as they are the broker's own). Anything unusual in a
// ProduceRequest (unknown fields, odd wire types) falls back to proto.
type serverCodec struct{}

func (serverCodec) Marshal(v any) (mem.BufferSlice, error) {
	switch m := v.(type) {
	case *quirev1.FetchResponse:
		return encodeFetchResponse(m, nil) // fetch_codec.go
	case *pooledFetch:
		return encodeFetchResponse(m.resp, m) // fetch_buf.go
	}
	return protoCodec.Marshal(v)
}

func (serverCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if m, ok := v.(*pooledProduce); ok {
		return m.unmarshal(data) // produce_buf.go
	}
	req, ok := v.(*quirev1.ProduceRequest)
	if !ok {
		return protoCodec.Unmarshal(data, v)
	}
	// Our own copy: gRPC reuses data's buffers once Unmarshal returns.
	buf := data.Materialize()
	if decodeProduceRequest(buf, req) {
		return nil
	}
	return protobuf.Unmarshal(buf, req)
}

func (serverCodec) Name() string { return proto.Name }

// decodeProduceRequest decodes b into req, aliasing b for the records. It
// reports false (req then undefined) for anything but the fields of
// quire.v1.ProduceRequest and PartitionRecords with their wire types.
func decodeProduceRequest(b []byte, req *quirev1.ProduceRequest) bool {
	protobuf.Reset(req)
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		switch {
		case num == wire.ProduceAcks && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return false
			}
			req.OptionalAcks, b = &quirev1.ProduceRequest_Acks{Acks: int32(v)}, b[n:]
		case num == wire.ProduceTimeoutMs && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return false
			}
			req.TimeoutMs, b = int32(v), b[n:]
		case num == wire.ProduceCorrelationID && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return false
			}
			req.CorrelationId, b = int64(v), b[n:]
		case num == wire.ProducePartitions && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return false
			}
			pr := &quirev1.PartitionRecords{}
			if !decodePartitionRecords(v, pr) {
				return false
			}
			req.Partitions, b = append(req.Partitions, pr), b[n:]
		default:
			return false
		}
	}
	return true
}

func decodePartitionRecords(b []byte, pr *quirev1.PartitionRecords) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		switch {
		case num == wire.PartitionTopic && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 || !utf8.Valid(v) {
				return false // proto reports invalid UTF-8
			}
			pr.Topic, b = string(v), b[n:]
		case num == wire.PartitionPartition && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return false
			}
			pr.Partition, b = int32(v), b[n:]
		case num == wire.PartitionRecords && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return false
			}
			pr.Records, b = v[:len(v):len(v)], b[n:]
			if len(v) == 0 {
				pr.Records = nil // as proto: an empty bytes field is nil
			}
		default:
			return false
		}
	}
	return true
}
