package client

import (
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"

	"github.com/quirelog/quire/internal/wire"
)

// Produce requests skip the proto marshal: the sink encodes a
// quire.v1.ProduceRequest itself as a mem.BufferSlice whose record bytes
// are the batch builders' own buffers (record.Builder.BuildParts), so the
// bytes of a record are copied once by the client (into the batch), then
// by gRPC's framer into its write buffer, rather than also into a built
// batch, a per-partition payload and the marshalled message.
//
// gRPC frees a buffer of the slice once the transport has written it; the
// batch counts its buffers still held (pbatch.held) and is only reused
// when none is, so a buffer is never rewritten while gRPC may read it.
// The atomic count is also the happens-before edge the race detector
// needs.

// produceCodec marshals *encodedProduce as is and everything else (the
// responses it unmarshals) as protobuf. It is forced on the produce
// stream only.
type produceCodec struct{}

var protoCodec = encoding.GetCodecV2(proto.Name)

func (produceCodec) Marshal(v any) (mem.BufferSlice, error) {
	if m, ok := v.(*encodedProduce); ok {
		return m.data, nil
	}
	return protoCodec.Marshal(v)
}

func (produceCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return protoCodec.Unmarshal(data, v)
}

func (produceCodec) Name() string { return proto.Name }

var produceCallOpt = grpc.ForceCodecV2(produceCodec{})

// encodedProduce is a ProduceRequest encoded by encodeProduce.
type encodedProduce struct {
	data mem.BufferSlice
}

// heldBuffers is the mem.BufferPool of a batch's records buffer: gRPC
// "returns" the buffer to it once written, which is all it records.
type heldBuffers struct{ n atomic.Int32 }

func (h *heldBuffers) Get(length int) *[]byte {
	b := make([]byte, length)
	return &b
}

func (h *heldBuffers) Put(*[]byte) { h.n.Add(-1) }

// encodeProduce encodes the request for the batches of ir (already built:
// hdr and body set), referencing the big record sections (wire.EncodeProduce).
func encodeProduce(acks *int32, timeoutMs int32, corr int64, ir *inflightReq) *encodedProduce {
	return &encodedProduce{data: wire.EncodeProduce(acks, timeoutMs, corr, ir)}
}

// inflightReq is the wire.ProduceSource of its request.

func (ir *inflightReq) Partitions() int { return len(ir.parts) }

func (ir *inflightReq) Partition(i int) (string, int32, int) {
	return ir.parts[i].topic, ir.parts[i].partition, len(ir.batches[i])
}

func (ir *inflightReq) Batch(i, j int) (hdr, body []byte) {
	b := ir.batches[i][j]
	return b.hdr, b.body
}

// Hold counts the batch's body as held by gRPC until its pool's Put.
func (ir *inflightReq) Hold(i, j int) mem.BufferPool {
	b := ir.batches[i][j]
	b.held.n.Add(1)
	return &b.held
}
