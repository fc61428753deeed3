package wire

import (
	"unicode/utf8"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

// The fetch response, both directions. The broker skips the proto marshal:
// EncodeFetchResponse writes the small fields into one buffer and hands
// gRPC each partition's records as a buffer of its own, the very bytes
// storage read, so the records are not copied into a marshalled message
// before gRPC's framer copies them into its write buffer. The client
// decodes it by hand (DecodeFetchResponse) with each partition's records
// aliasing one copy of the message, where proto would copy the records a
// second time out of it.

// RecordsBuffers hands EncodeFetchResponse the gRPC buffers of the
// records it references.
type RecordsBuffers interface {
	// Buffer is the gRPC buffer of partition i's records.
	Buffer(i int, records []byte) mem.Buffer
	// Inlined says that partition i's records were copied into the
	// encoding instead, so whatever holds them can be let go.
	Inlined(i int)
}

// SliceBuffers references each partition's records as they are
// (mem.SliceBuffer), for records that nothing reuses.
type SliceBuffers struct{}

func (SliceBuffers) Buffer(_ int, records []byte) mem.Buffer { return mem.SliceBuffer(records) }

func (SliceBuffers) Inlined(int) {}

// EncodeFetchResponse encodes resp as proto.Marshal does (same bytes:
// fields in number order, zero values left out), referencing the records
// sections of inlineRecords bytes or more through bufs.
func EncodeFetchResponse(resp *quirev1.FetchResponse, bufs RecordsBuffers) (mem.BufferSlice, error) {
	var errBufs, abortBufs [][]byte
	metaCap := 0
	for _, p := range resp.Partitions {
		metaCap += 7*(1+maxVarint) + 2*(1+maxVarint) + len(p.Topic)
		for _, a := range p.AbortedTransactions {
			ab, err := proto.Marshal(a)
			if err != nil {
				return nil, err
			}
			abortBufs = append(abortBufs, ab)
			metaCap += 1 + maxVarint + len(ab)
		}
		if p.Error != nil {
			eb, err := proto.Marshal(p.Error)
			if err != nil {
				return nil, err
			}
			errBufs = append(errBufs, eb)
			metaCap += 1 + maxVarint + len(eb)
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
	ei, ai := 0, 0
	for pi, p := range resp.Partitions {
		aborted := abortBufs[ai : ai+len(p.AbortedTransactions)]
		ai += len(p.AbortedTransactions)
		var eb []byte
		if p.Error != nil {
			eb = errBufs[ei]
			ei++
		}
		n := 0
		if p.Topic != "" {
			n += protowire.SizeTag(FetchTopic) + protowire.SizeBytes(len(p.Topic))
		}
		if p.Partition != 0 {
			n += protowire.SizeTag(FetchPartition) + protowire.SizeVarint(uint64(int64(p.Partition)))
		}
		if p.Error != nil {
			n += protowire.SizeTag(FetchError) + protowire.SizeBytes(len(eb))
		}
		offsets := [...]struct {
			num protowire.Number
			v   int64
		}{{FetchHighWatermark, p.HighWatermark}, {FetchLogEndOffset, p.LogEndOffset}, {FetchLogStartOffset, p.LogStartOffset}}
		for _, f := range offsets {
			if f.v != 0 {
				n += protowire.SizeTag(f.num) + protowire.SizeVarint(uint64(f.v))
			}
		}
		if len(p.Records) > 0 {
			n += protowire.SizeTag(FetchRecords) + protowire.SizeBytes(len(p.Records))
		}
		if p.LastStableOffset != 0 {
			n += protowire.SizeTag(FetchLastStable) + protowire.SizeVarint(uint64(p.LastStableOffset))
		}
		for _, ab := range aborted {
			n += protowire.SizeTag(FetchAborted) + protowire.SizeBytes(len(ab))
		}
		meta = protowire.AppendTag(meta, FetchPartitions, protowire.BytesType)
		meta = protowire.AppendVarint(meta, uint64(n))
		if p.Topic != "" {
			meta = protowire.AppendTag(meta, FetchTopic, protowire.BytesType)
			meta = protowire.AppendString(meta, p.Topic)
		}
		if p.Partition != 0 {
			meta = protowire.AppendTag(meta, FetchPartition, protowire.VarintType)
			meta = protowire.AppendVarint(meta, uint64(int64(p.Partition)))
		}
		if p.Error != nil {
			meta = protowire.AppendTag(meta, FetchError, protowire.BytesType)
			meta = protowire.AppendBytes(meta, eb)
		}
		for _, f := range offsets {
			if f.v != 0 {
				meta = protowire.AppendTag(meta, f.num, protowire.VarintType)
				meta = protowire.AppendVarint(meta, uint64(f.v))
			}
		}
		if len(p.Records) > 0 {
			meta = protowire.AppendTag(meta, FetchRecords, protowire.BytesType)
			meta = protowire.AppendVarint(meta, uint64(len(p.Records)))
			if len(p.Records) < inlineRecords {
				meta = append(meta, p.Records...)
				bufs.Inlined(pi)
			} else {
				flushMeta()
				data = append(data, bufs.Buffer(pi, p.Records))
			}
		}
		if p.LastStableOffset != 0 {
			meta = protowire.AppendTag(meta, FetchLastStable, protowire.VarintType)
			meta = protowire.AppendVarint(meta, uint64(p.LastStableOffset))
		}
		for _, ab := range aborted {
			meta = protowire.AppendTag(meta, FetchAborted, protowire.BytesType)
			meta = protowire.AppendBytes(meta, ab)
		}
	}
	flushMeta()
	return data, nil
}

// inlineRecords: records sections smaller than this are copied into the
// meta buffer rather than given a buffer of their own.
const inlineRecords = 4 << 10

// DecodeFetchResponse decodes b into resp, aliasing b for the records. It
// reports false (resp then undefined) for anything but the fields of
// FetchResponse and FetchPartitionResult with their wire types: the caller
// then falls back to proto.Unmarshal.
func DecodeFetchResponse(b []byte, resp *quirev1.FetchResponse) bool {
	proto.Reset(resp)
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || num != FetchPartitions || typ != protowire.BytesType {
			return false
		}
		b = b[n:]
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		pr := &quirev1.FetchPartitionResult{}
		if !decodeFetchPartitionResult(v, pr) {
			return false
		}
		resp.Partitions = append(resp.Partitions, pr)
	}
	return true
}

func decodeFetchPartitionResult(b []byte, pr *quirev1.FetchPartitionResult) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		switch {
		case typ == protowire.VarintType && (num == FetchPartition || num == FetchHighWatermark || num == FetchLogEndOffset || num == FetchLogStartOffset || num == FetchLastStable):
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return false
			}
			b = b[n:]
			switch num {
			case FetchPartition:
				pr.Partition = int32(v)
			case FetchHighWatermark:
				pr.HighWatermark = int64(v)
			case FetchLogEndOffset:
				pr.LogEndOffset = int64(v)
			case FetchLastStable:
				pr.LastStableOffset = int64(v)
			default:
				pr.LogStartOffset = int64(v)
			}
		case typ == protowire.BytesType && (num == FetchTopic || num == FetchError || num == FetchRecords || num == FetchAborted):
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return false
			}
			b = b[n:]
			switch num {
			case FetchTopic:
				if !utf8.Valid(v) {
					return false // proto reports invalid UTF-8
				}
				pr.Topic = string(v)
			case FetchError:
				if pr.Error == nil {
					pr.Error = &quirev1.Error{}
				}
				if (proto.UnmarshalOptions{Merge: true}).Unmarshal(v, pr.Error) != nil {
					return false
				}
			case FetchAborted:
				a := &quirev1.AbortedTransaction{}
				if proto.Unmarshal(v, a) != nil {
					return false
				}
				pr.AbortedTransactions = append(pr.AbortedTransactions, a)
			default:
				if len(v) == 0 {
					pr.Records = nil // as proto: an empty bytes field is nil
				} else {
					pr.Records = v[:len(v):len(v)]
				}
			}
		default:
			return false
		}
	}
	return true
}
