package wire

import (
	"unicode/utf8"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

// The produce request, both directions: the Go client encodes it straight
// from its batch builders' buffers (EncodeProduce), and the broker decodes
// it with each partition's records aliasing one copy of the message
// (DecodeProduceRequest). The decoder accepts only what proto.Unmarshal
// accepts and decodes it to an equal message, and the encoder writes what
// proto.Unmarshal decodes to the request; the tests and fuzz targets beside
// them check both against proto.

// DecodeProduceRequest decodes b into req, aliasing b for the records. It
// reports false (req then undefined) for anything but the fields of
// quire.v1.ProduceRequest and PartitionRecords with their wire types: the
// caller then falls back to proto.Unmarshal, which keeps unknown fields and
// says what is wrong with a malformed message.
//
// The messages req held are reused (a stream decodes every request into
// one): the previous request's partitions are overwritten.
func DecodeProduceRequest(b []byte, req *quirev1.ProduceRequest) bool {
	prev := req.Partitions[:cap(req.Partitions)]
	acks, _ := req.OptionalAcks.(*quirev1.ProduceRequest_Acks)
	proto.Reset(req)
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		switch {
		case num == ProduceAcks && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return false
			}
			if acks == nil {
				acks = &quirev1.ProduceRequest_Acks{}
			}
			acks.Acks = int32(v)
			req.OptionalAcks, b = acks, b[n:]
		case num == ProduceTimeoutMs && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return false
			}
			req.TimeoutMs, b = int32(v), b[n:]
		case num == ProduceCorrelationID && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return false
			}
			req.CorrelationId, b = int64(v), b[n:]
		case num == ProducePartitions && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return false
			}
			k := len(req.Partitions)
			var pr *quirev1.PartitionRecords
			topic := ""
			if k < len(prev) && prev[k] != nil {
				pr, topic = prev[k], prev[k].Topic
				proto.Reset(pr)
			} else {
				pr = &quirev1.PartitionRecords{}
			}
			if !decodePartitionRecords(v, pr, topic) {
				return false
			}
			req.Partitions, b = append(prev[:k], pr), b[n:]
			prev = req.Partitions[:cap(req.Partitions)]
		default:
			return false
		}
	}
	return true
}

// decodePartitionRecords decodes b into pr; topic is the topic pr had
// (kept rather than copied again when it is the same).
func decodePartitionRecords(b []byte, pr *quirev1.PartitionRecords, topic string) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		switch {
		case num == PartitionTopic && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 || !utf8.Valid(v) {
				return false // proto reports invalid UTF-8
			}
			if string(v) != topic {
				topic = string(v)
			}
			pr.Topic, b = topic, b[n:]
		case num == PartitionPartition && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return false
			}
			pr.Partition, b = int32(v), b[n:]
		case num == PartitionRecords && typ == protowire.BytesType:
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

// ProduceSource is a produce request's partitions and their batches as
// EncodeProduce reads them: partition i holds Batches(i) batches, batch j
// of it a header and a records section (a batch is hdr then body).
type ProduceSource interface {
	Partitions() int
	Partition(i int) (topic string, partition int32, batches int)
	Batch(i, j int) (hdr, body []byte)
	// Hold is called for each body that the encoding references rather
	// than copies, before it is referenced; it returns the pool whose Put
	// gRPC calls once it has written the body.
	Hold(i, j int) mem.BufferPool
}

// EncodeProduce encodes the quire.v1.ProduceRequest of the batches of src:
// bytes that proto.Unmarshal decodes to that request (zero values left out
// as proto does; correlation_id comes first, where a stream reader finds
// it at once). Small pieces (tags, lengths,
// batch headers, small record sections) are copied into one meta buffer;
// record sections big enough for gRPC to track are referenced, with
// src.Hold's pool, so the bytes of a record are copied only by gRPC's
// framer.
func EncodeProduce(acks *int32, timeoutMs int32, corr int64, src ProduceSource) mem.BufferSlice {
	// Upper bound of the meta bytes, so that meta never moves while
	// slices of it are in data.
	metaCap := 3 * (1 + maxVarint)
	nbufs := 1
	for i := range src.Partitions() {
		topic, _, nb := src.Partition(i)
		metaCap += 4*(1+maxVarint) + len(topic)
		for j := range nb {
			hdr, body := src.Batch(i, j)
			metaCap += len(hdr)
			if !bigEnough(body) {
				metaCap += len(body)
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
		meta = protowire.AppendTag(meta, ProduceCorrelationID, protowire.VarintType)
		meta = protowire.AppendVarint(meta, uint64(corr))
	}
	if acks != nil {
		meta = protowire.AppendTag(meta, ProduceAcks, protowire.VarintType)
		meta = protowire.AppendVarint(meta, uint64(int64(*acks)))
	}
	if timeoutMs != 0 {
		meta = protowire.AppendTag(meta, ProduceTimeoutMs, protowire.VarintType)
		meta = protowire.AppendVarint(meta, uint64(int64(timeoutMs)))
	}
	for i := range src.Partitions() {
		topic, partition, nb := src.Partition(i)
		recLen := 0
		for j := range nb {
			hdr, body := src.Batch(i, j)
			recLen += len(hdr) + len(body)
		}
		partLen := 0
		if recLen > 0 {
			partLen += protowire.SizeTag(PartitionRecords) + protowire.SizeBytes(recLen)
		}
		if topic != "" {
			partLen += protowire.SizeTag(PartitionTopic) + protowire.SizeBytes(len(topic))
		}
		if partition != 0 {
			partLen += protowire.SizeTag(PartitionPartition) + protowire.SizeVarint(uint64(int64(partition)))
		}
		meta = protowire.AppendTag(meta, ProducePartitions, protowire.BytesType)
		meta = protowire.AppendVarint(meta, uint64(partLen))
		if topic != "" {
			meta = protowire.AppendTag(meta, PartitionTopic, protowire.BytesType)
			meta = protowire.AppendString(meta, topic)
		}
		if partition != 0 {
			meta = protowire.AppendTag(meta, PartitionPartition, protowire.VarintType)
			meta = protowire.AppendVarint(meta, uint64(int64(partition)))
		}
		if recLen == 0 {
			continue
		}
		meta = protowire.AppendTag(meta, PartitionRecords, protowire.BytesType)
		meta = protowire.AppendVarint(meta, uint64(recLen))
		for j := range nb {
			hdr, body := src.Batch(i, j)
			meta = append(meta, hdr...)
			if !bigEnough(body) {
				meta = append(meta, body...)
				continue
			}
			flushMeta()
			pool := src.Hold(i, j)
			data = append(data, mem.NewBuffer(&body, pool))
		}
	}
	flushMeta()
	return data
}

// maxVarint is the longest varint, in bytes.
const maxVarint = 10

// bigEnough says whether gRPC tracks a buffer of b's capacity (and calls
// its pool's Put when done); smaller ones are copied instead.
func bigEnough(b []byte) bool { return !mem.IsBelowBufferPoolingThreshold(cap(b)) }
