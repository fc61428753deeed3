package broker

import (
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	protobuf "google.golang.org/protobuf/proto"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/internal/wire"
)

// Fetch responses skip the proto marshal: encodeFetchResponse writes the
// small fields into one buffer and hands gRPC each partition's records as
// a buffer of its own, the very bytes storage read, so the records are not
// copied into a marshalled message before gRPC's framer copies them into
// its write buffer (one user-space copy of every fetched byte less).
// gRPC only reads the buffers; the records slices are the broker's own
// (a fresh read per fetch), nothing writes them afterwards.

// encodeFetchResponse encodes resp as proto does (same bytes: fields in
// number order, zero values left out), referencing the records.
// With pf, records in pooled buffers are handed over with their buffers.
func encodeFetchResponse(resp *quirev1.FetchResponse, pf *pooledFetch) (mem.BufferSlice, error) {
	var errBufs [][]byte
	metaCap := 0
	for _, p := range resp.Partitions {
		metaCap += 6*(1+binaryMaxVarint) + 2*(1+binaryMaxVarint) + len(p.Topic)
		if p.Error != nil {
			eb, err := protobuf.Marshal(p.Error)
			if err != nil {
				return nil, err
			}
			errBufs = append(errBufs, eb)
			metaCap += 1 + binaryMaxVarint + len(eb)
		}
		if len(p.Records) < inlineRecords {
			metaCap += len(p.Records)
		}
	}
	// meta never grows past metaCap, so slices of it stay valid.
	meta := make([]byte, 0, metaCap)
	data := make(mem.BufferSlice, 0, 1+2*len(resp.Partitions))
	from := 0
	flushMeta := func() {
		if len(meta) > from {
			data = append(data, mem.SliceBuffer(meta[from:len(meta):len(meta)]))
			from = len(meta)
		}
	}
	ei := 0
	for pi, p := range resp.Partitions {
		var eb []byte
		if p.Error != nil {
			eb = errBufs[ei]
			ei++
		}
		n := 0
		if p.Topic != "" {
			n += protowire.SizeTag(wire.FetchTopic) + protowire.SizeBytes(len(p.Topic))
		}
		if p.Partition != 0 {
			n += protowire.SizeTag(wire.FetchPartition) + protowire.SizeVarint(uint64(int64(p.Partition)))
		}
		if p.Error != nil {
			n += protowire.SizeTag(wire.FetchError) + protowire.SizeBytes(len(eb))
		}
		for _, v := range [...]int64{p.HighWatermark, p.LogEndOffset, p.LogStartOffset} {
			if v != 0 {
				n += protowire.SizeTag(wire.FetchHighWatermark) + protowire.SizeVarint(uint64(v))
			}
		}
		if len(p.Records) > 0 {
			n += protowire.SizeTag(wire.FetchRecords) + protowire.SizeBytes(len(p.Records))
		}
		meta = protowire.AppendTag(meta, wire.FetchPartitions, protowire.BytesType)
		meta = protowire.AppendVarint(meta, uint64(n))
		if p.Topic != "" {
			meta = protowire.AppendTag(meta, wire.FetchTopic, protowire.BytesType)
			meta = protowire.AppendString(meta, p.Topic)
		}
		if p.Partition != 0 {
			meta = protowire.AppendTag(meta, wire.FetchPartition, protowire.VarintType)
			meta = protowire.AppendVarint(meta, uint64(int64(p.Partition)))
		}
		if p.Error != nil {
			meta = protowire.AppendTag(meta, wire.FetchError, protowire.BytesType)
			meta = protowire.AppendBytes(meta, eb)
		}
		for _, f := range [...]struct {
			num protowire.Number
			v   int64
		}{{wire.FetchHighWatermark, p.HighWatermark}, {wire.FetchLogEndOffset, p.LogEndOffset}, {wire.FetchLogStartOffset, p.LogStartOffset}} {
			if f.v != 0 {
				meta = protowire.AppendTag(meta, f.num, protowire.VarintType)
				meta = protowire.AppendVarint(meta, uint64(f.v))
			}
		}
		if len(p.Records) > 0 {
			meta = protowire.AppendTag(meta, wire.FetchRecords, protowire.BytesType)
			meta = protowire.AppendVarint(meta, uint64(len(p.Records)))
			if len(p.Records) < inlineRecords {
				meta = append(meta, p.Records...)
				pf.inlined(pi)
			} else {
				flushMeta()
				data = append(data, pf.recordsBuffer(pi, p.Records))
			}
		}
	}
	flushMeta()
	return data, nil
}

// inlineRecords: records sections smaller than this are copied into the
// meta buffer rather than given a buffer of their own.
const inlineRecords = 4 << 10

const binaryMaxVarint = 10
