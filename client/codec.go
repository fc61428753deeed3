package client

import (
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"

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

// Field numbers of quire.v1.ProduceRequest and PartitionRecords.

// encodeProduce encodes the request for the batches of ir (already built:
// hdr and body set). Small pieces (tags, lengths, batch headers, small
// record sections) are copied into one meta buffer; record sections big
// enough for gRPC to track are referenced.
func encodeProduce(acks *int32, timeoutMs int32, corr int64, ir *inflightReq) *encodedProduce {
	// Upper bound of the meta bytes, so that meta never moves while
	// slices of it are in data.
	metaCap := 3 * (1 + binaryMaxVarint)
	nbufs := 1
	for i, bs := range ir.batches {
		metaCap += 4*(1+binaryMaxVarint) + len(ir.parts[i].topic)
		for _, b := range bs {
			metaCap += len(b.hdr)
			if !bigEnough(b.body) {
				metaCap += len(b.body)
			}
			nbufs += 2
		}
	}
	meta := make([]byte, 0, metaCap)
	data := make(mem.BufferSlice, 0, nbufs)
	from := 0
	flushMeta := func() {
		if len(meta) > from {
			data = append(data, mem.SliceBuffer(meta[from:len(meta):len(meta)]))
			from = len(meta)
		}
	}
	if corr != 0 {
		meta = protowire.AppendTag(meta, wire.ProduceCorrelationID, protowire.VarintType)
		meta = protowire.AppendVarint(meta, uint64(corr))
	}
	if acks != nil {
		meta = protowire.AppendTag(meta, wire.ProduceAcks, protowire.VarintType)
		meta = protowire.AppendVarint(meta, uint64(int64(*acks)))
	}
	if timeoutMs != 0 {
		meta = protowire.AppendTag(meta, wire.ProduceTimeoutMs, protowire.VarintType)
		meta = protowire.AppendVarint(meta, uint64(int64(timeoutMs)))
	}
	for i, bs := range ir.batches {
		pp := ir.parts[i]
		recLen := 0
		for _, b := range bs {
			recLen += len(b.hdr) + len(b.body)
		}
		partLen := protowire.SizeTag(wire.PartitionRecords) + protowire.SizeBytes(recLen)
		if pp.topic != "" {
			partLen += protowire.SizeTag(wire.PartitionTopic) + protowire.SizeBytes(len(pp.topic))
		}
		if pp.partition != 0 {
			partLen += protowire.SizeTag(wire.PartitionPartition) + protowire.SizeVarint(uint64(int64(pp.partition)))
		}
		meta = protowire.AppendTag(meta, wire.ProducePartitions, protowire.BytesType)
		meta = protowire.AppendVarint(meta, uint64(partLen))
		if pp.topic != "" {
			meta = protowire.AppendTag(meta, wire.PartitionTopic, protowire.BytesType)
			meta = protowire.AppendString(meta, pp.topic)
		}
		if pp.partition != 0 {
			meta = protowire.AppendTag(meta, wire.PartitionPartition, protowire.VarintType)
			meta = protowire.AppendVarint(meta, uint64(int64(pp.partition)))
		}
		meta = protowire.AppendTag(meta, wire.PartitionRecords, protowire.BytesType)
		meta = protowire.AppendVarint(meta, uint64(recLen))
		for _, b := range bs {
			meta = append(meta, b.hdr...)
			if !bigEnough(b.body) {
				meta = append(meta, b.body...)
				continue
			}
			flushMeta()
			b.held.n.Add(1)
			body := b.body
			data = append(data, mem.NewBuffer(&body, &b.held))
		}
	}
	flushMeta()
	return &encodedProduce{data: data}
}

const binaryMaxVarint = 10

// bigEnough says whether gRPC tracks a buffer of b's capacity (and calls
// its pool's Put when done); smaller ones are copied instead.
func bigEnough(b []byte) bool { return !mem.IsBelowBufferPoolingThreshold(cap(b)) }
