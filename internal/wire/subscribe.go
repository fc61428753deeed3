package wire

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

// The records a Subscribe stream sends, encoded by the broker straight
// from the batches it read: one SubscribeResponse per partition, either a
// SubscribeBatch of BatchRecords or SubscribeRecords of ConsumedRecords
// (which name their topic and partition each), with no message built and
// marshalled per record. The bytes are those proto.Marshal writes for the
// same message (the plain fields in number order and then the oneofs, zero
// values left out, the chosen field of a oneof always written).

// quire.v1.SubscribeResponse, SubscribeRecords, SubscribeBatch.
var (
	SubscribeEventRecords = field(&quirev1.SubscribeResponse{}, "records")
	SubscribeEventBatch   = field(&quirev1.SubscribeResponse{}, "batch")

	SubscribeRecordsRecords = field(&quirev1.SubscribeRecords{}, "records")

	BatchTopic      = field(&quirev1.SubscribeBatch{}, "topic")
	BatchPartition  = field(&quirev1.SubscribeBatch{}, "partition")
	BatchRecords    = field(&quirev1.SubscribeBatch{}, "records")
	BatchNextOffset = field(&quirev1.SubscribeBatch{}, "next_offset")
	BatchFencing    = field(&quirev1.SubscribeBatch{}, "fencing_epoch")

	SubscribeRecordsFencing = field(&quirev1.SubscribeRecords{}, "fencing_epoch")
)

// quire.v1.ConsumedRecord; a BatchRecord has the same numbers for the
// fields it has (checked in init).
var (
	RecordTopic       = field(&quirev1.ConsumedRecord{}, "topic")
	RecordPartition   = field(&quirev1.ConsumedRecord{}, "partition")
	RecordOffset      = field(&quirev1.ConsumedRecord{}, "offset")
	RecordTimestamp   = field(&quirev1.ConsumedRecord{}, "timestamp_ms")
	RecordKey         = field(&quirev1.ConsumedRecord{}, "key")
	RecordKeyBytes    = field(&quirev1.ConsumedRecord{}, "key_bytes")
	RecordValue       = field(&quirev1.ConsumedRecord{}, "value")
	RecordValueBytes  = field(&quirev1.ConsumedRecord{}, "value_bytes")
	RecordHeaders     = field(&quirev1.ConsumedRecord{}, "headers")
	RecordLeaderEpoch = field(&quirev1.ConsumedRecord{}, "leader_epoch")

	HeaderKey   = field(&quirev1.RecordHeader{}, "key")
	HeaderValue = field(&quirev1.RecordHeader{}, "value")
)

// The tags of the fields Append writes for every record, each one byte
// (field numbers below 16, or tag1 panics at start-up).
var (
	tagBatchRecords      = tag1(BatchRecords, protowire.BytesType)
	tagRecordsRecords    = tag1(SubscribeRecordsRecords, protowire.BytesType)
	tagRecordTopic       = tag1(RecordTopic, protowire.BytesType)
	tagRecordPartition   = tag1(RecordPartition, protowire.VarintType)
	tagRecordOffset      = tag1(RecordOffset, protowire.VarintType)
	tagRecordTimestamp   = tag1(RecordTimestamp, protowire.VarintType)
	tagRecordHeaders     = tag1(RecordHeaders, protowire.BytesType)
	tagRecordLeaderEpoch = tag1(RecordLeaderEpoch, protowire.VarintType)
	tagRecordKey         = tag1(RecordKey, protowire.BytesType)
	tagRecordKeyBytes    = tag1(RecordKeyBytes, protowire.BytesType)
	tagRecordValue       = tag1(RecordValue, protowire.BytesType)
	tagRecordValueBytes  = tag1(RecordValueBytes, protowire.BytesType)
)

func tag1(num protowire.Number, typ protowire.Type) byte {
	t := protowire.EncodeTag(num, typ)
	if t >= 0x80 {
		panic("wire: field " + fmt.Sprint(num) + " needs a tag of more than one byte")
	}
	return byte(t)
}

func init() {
	for name, num := range map[string]protowire.Number{"offset": RecordOffset, "timestamp_ms": RecordTimestamp,
		"key": RecordKey, "key_bytes": RecordKeyBytes, "value": RecordValue, "value_bytes": RecordValueBytes,
		"headers": RecordHeaders, "leader_epoch": RecordLeaderEpoch} {
		if field(&quirev1.BatchRecord{}, name) != num {
			panic("wire: quire.v1.BatchRecord." + name + " is not numbered as ConsumedRecord's")
		}
	}
}

// Record is one record to encode. A nil Key or Value is null (neither
// field of its pair is written); an empty one is written empty.
type Record struct {
	Offset      int64
	TimestampMs int64
	LeaderEpoch int32
	Key, Value  []byte
	Headers     []Header
}

// Header is a record header. A key that is not valid UTF-8 (which a
// protobuf string may not hold) is written with each invalid sequence
// replaced by U+FFFD.
type Header struct {
	Key   string
	Value []byte
}

// RecordsEncoder encodes one partition's records as one SubscribeResponse.
// The message is its Head followed by its Body; Finish writes both ends.
// The zero value is not ready: Reset it.
type RecordsEncoder struct {
	topic     string
	partition int32
	batch     bool // a SubscribeBatch, else SubscribeRecords
	text      bool // RECORD_FORMAT_AUTO: valid UTF-8 as key and value
	tag       byte // of each record in the message
	// prefix is what every record begins with: its topic and partition
	// in SubscribeRecords, nothing in a batch (they are the batch's).
	prefix  []byte
	body    []byte
	records int
	fencing int32 // the message's fencing_epoch
}

// Reset starts a message of topic's partition, its body in buf (from its
// start; buf's capacity is reused), as a SubscribeBatch when batch is set,
// else as SubscribeRecords, with keys and values that are valid UTF-8 as
// text when text is set (RECORD_FORMAT_AUTO), else always as bytes.
func (e *RecordsEncoder) Reset(buf []byte, topic string, partition int32, batch, text bool) {
	*e = RecordsEncoder{topic: topic, partition: partition, batch: batch, text: text, tag: tagBatchRecords, body: buf[:0]}
	if !batch {
		e.tag = tagRecordsRecords
		if topic != "" {
			e.prefix = append(e.prefix, tagRecordTopic)
			e.prefix = appendVarint(e.prefix, uint64(len(topic)))
			e.prefix = append(e.prefix, topic...)
		}
		if partition != 0 {
			e.prefix = append(e.prefix, tagRecordPartition)
			e.prefix = appendVarint(e.prefix, uint64(int64(partition)))
		}
	}
}

// SetFencingEpoch sets the message's fencing_epoch (0, the default after
// Reset, writes none).
func (e *RecordsEncoder) SetFencingEpoch(epoch int32) { e.fencing = epoch }

// Records is the number of records appended since Reset.
func (e *RecordsEncoder) Records() int { return e.records }

// Len is the size of the body so far.
func (e *RecordsEncoder) Len() int { return len(e.body) }

// Append appends r and returns the size of its record message (a
// BatchRecord or a ConsumedRecord, without its tag and length). It may
// rewrite the keys of r's headers (see Header).
func (e *RecordsEncoder) Append(r *Record) int {
	keyTag, valueTag := tagRecordKeyBytes, tagRecordValueBytes
	if e.text {
		if r.Key != nil && utf8.Valid(r.Key) {
			keyTag = tagRecordKey
		}
		if r.Value != nil && utf8.Valid(r.Value) {
			valueTag = tagRecordValue
		}
	}
	// Every tag is one byte.
	n := len(e.prefix)
	if r.Offset != 0 {
		n += 1 + protowire.SizeVarint(uint64(r.Offset))
	}
	if r.TimestampMs != 0 {
		n += 1 + protowire.SizeVarint(uint64(r.TimestampMs))
	}
	if r.Key != nil {
		n += 1 + protowire.SizeBytes(len(r.Key))
	}
	if r.Value != nil {
		n += 1 + protowire.SizeBytes(len(r.Value))
	}
	for i := range r.Headers {
		if h := &r.Headers[i]; !utf8.ValidString(h.Key) {
			h.Key = strings.ToValidUTF8(h.Key, "\uFFFD")
		}
		n += 1 + protowire.SizeBytes(headerSize(&r.Headers[i]))
	}
	if r.LeaderEpoch != 0 {
		n += 1 + protowire.SizeVarint(uint64(int64(r.LeaderEpoch)))
	}

	b := slices.Grow(e.body, 1+maxVarint+n)
	b = append(b, e.tag)
	b = appendVarint(b, uint64(n))
	b = append(b, e.prefix...)
	if r.Offset != 0 {
		b = append(b, tagRecordOffset)
		b = appendVarint(b, uint64(r.Offset))
	}
	if r.TimestampMs != 0 {
		b = append(b, tagRecordTimestamp)
		b = appendVarint(b, uint64(r.TimestampMs))
	}
	for i := range r.Headers {
		h := &r.Headers[i]
		b = append(b, tagRecordHeaders)
		b = appendVarint(b, uint64(headerSize(h)))
		if h.Key != "" {
			b = protowire.AppendTag(b, HeaderKey, protowire.BytesType)
			b = protowire.AppendString(b, h.Key)
		}
		if len(h.Value) > 0 {
			b = protowire.AppendTag(b, HeaderValue, protowire.BytesType)
			b = protowire.AppendBytes(b, h.Value)
		}
	}
	if r.LeaderEpoch != 0 {
		b = append(b, tagRecordLeaderEpoch)
		b = appendVarint(b, uint64(int64(r.LeaderEpoch)))
	}
	// The oneofs last, in declaration order, as proto.Marshal writes them.
	if r.Key != nil {
		b = append(b, keyTag)
		b = appendVarint(b, uint64(len(r.Key)))
		b = append(b, r.Key...)
	}
	if r.Value != nil {
		b = append(b, valueTag)
		b = appendVarint(b, uint64(len(r.Value)))
		b = append(b, r.Value...)
	}
	e.body = b
	e.records++
	return n
}

// appendVarint is protowire.AppendVarint with its one-byte case inlined.
func appendVarint(b []byte, v uint64) []byte {
	if v < 0x80 {
		return append(b, byte(v))
	}
	return protowire.AppendVarint(b, v)
}

func headerSize(h *Header) int {
	n := 0
	if h.Key != "" {
		n += protowire.SizeTag(HeaderKey) + protowire.SizeBytes(len(h.Key))
	}
	if len(h.Value) > 0 {
		n += protowire.SizeTag(HeaderValue) + protowire.SizeBytes(len(h.Value))
	}
	return n
}

// Finish ends the message: it returns its head (a small buffer of its own)
// and its body, in the buffer given to Reset: the records (and, for a
// batch, next, the offset after its last record).
func (e *RecordsEncoder) Finish(next int64) (head, body []byte) {
	if e.batch && next != 0 {
		e.body = protowire.AppendTag(e.body, BatchNextOffset, protowire.VarintType)
		e.body = protowire.AppendVarint(e.body, uint64(next))
	}
	if e.fencing != 0 {
		num := SubscribeRecordsFencing
		if e.batch {
			num = BatchFencing
		}
		e.body = protowire.AppendTag(e.body, num, protowire.VarintType)
		e.body = protowire.AppendVarint(e.body, uint64(int64(e.fencing)))
	}
	var inner int // the batch's fields before its records
	if e.batch {
		if e.topic != "" {
			inner += protowire.SizeTag(BatchTopic) + protowire.SizeBytes(len(e.topic))
		}
		if e.partition != 0 {
			inner += protowire.SizeTag(BatchPartition) + protowire.SizeVarint(uint64(int64(e.partition)))
		}
	}
	n := inner + len(e.body)
	head = make([]byte, 0, 2*(1+maxVarint)+inner)
	if e.batch {
		head = protowire.AppendTag(head, SubscribeEventBatch, protowire.BytesType)
		head = protowire.AppendVarint(head, uint64(n))
		if e.topic != "" {
			head = protowire.AppendTag(head, BatchTopic, protowire.BytesType)
			head = protowire.AppendString(head, e.topic)
		}
		if e.partition != 0 {
			head = protowire.AppendTag(head, BatchPartition, protowire.VarintType)
			head = protowire.AppendVarint(head, uint64(int64(e.partition)))
		}
	} else {
		head = protowire.AppendTag(head, SubscribeEventRecords, protowire.BytesType)
		head = protowire.AppendVarint(head, uint64(n))
	}
	return head, e.body
}

// quire.v1.SubscribeResponse.raw_batch and SubscribeRawBatch.
var (
	SubscribeEventRawBatch = field(&quirev1.SubscribeResponse{}, "raw_batch")

	RawBatchTopic       = field(&quirev1.SubscribeRawBatch{}, "topic")
	RawBatchPartition   = field(&quirev1.SubscribeRawBatch{}, "partition")
	RawBatchRecords     = field(&quirev1.SubscribeRawBatch{}, "records")
	RawBatchStartOffset = field(&quirev1.SubscribeRawBatch{}, "start_offset")
	RawBatchNextOffset  = field(&quirev1.SubscribeRawBatch{}, "next_offset")
	RawBatchFencing     = field(&quirev1.SubscribeRawBatch{}, "fencing_epoch")
)

// RawBatch is one SubscribeRawBatch: a partition's stored batches, sent
// whole, with where the stream sends from and the offset after them.
type RawBatch struct {
	Topic       string
	Partition   int32
	Records     []byte
	StartOffset int64
	NextOffset  int64
	// FencingEpoch is written when not 0, as proto writes it.
	FencingEpoch int32
}

// innerSize is the size of the SubscribeRawBatch message (every field
// written, as the broker always sends them; the partition as proto writes
// an int32, sign-extended).
func (r *RawBatch) innerSize() int {
	return protowire.SizeTag(RawBatchTopic) + protowire.SizeBytes(len(r.Topic)) +
		protowire.SizeTag(RawBatchPartition) + protowire.SizeVarint(uint64(int64(r.Partition))) +
		protowire.SizeTag(RawBatchRecords) + protowire.SizeBytes(len(r.Records)) +
		protowire.SizeTag(RawBatchStartOffset) + protowire.SizeVarint(uint64(r.StartOffset)) +
		protowire.SizeTag(RawBatchNextOffset) + protowire.SizeVarint(uint64(r.NextOffset)) +
		r.fencingSize()
}

func (r *RawBatch) fencingSize() int {
	if r.FencingEpoch == 0 {
		return 0
	}
	return protowire.SizeTag(RawBatchFencing) + protowire.SizeVarint(uint64(int64(r.FencingEpoch)))
}

// Size is the size of the SubscribeResponse Append writes.
func (r *RawBatch) Size() int {
	return protowire.SizeTag(SubscribeEventRawBatch) + protowire.SizeBytes(r.innerSize())
}

// Append appends r as a SubscribeResponse (its raw_batch) to b.
func (r *RawBatch) Append(b []byte) []byte {
	b = protowire.AppendTag(b, SubscribeEventRawBatch, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(r.innerSize()))
	b = protowire.AppendTag(b, RawBatchTopic, protowire.BytesType)
	b = protowire.AppendString(b, r.Topic)
	b = protowire.AppendTag(b, RawBatchPartition, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(int64(r.Partition)))
	b = protowire.AppendTag(b, RawBatchRecords, protowire.BytesType)
	b = protowire.AppendBytes(b, r.Records)
	b = protowire.AppendTag(b, RawBatchStartOffset, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(r.StartOffset))
	b = protowire.AppendTag(b, RawBatchNextOffset, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(r.NextOffset))
	if r.FencingEpoch != 0 {
		b = protowire.AppendTag(b, RawBatchFencing, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(int64(r.FencingEpoch)))
	}
	return b
}

// Encoded is a stream message encoded already (RecordsEncoder): the
// server's gRPC codec passes Data on as it is, and gRPC frees its buffers
// once written.
type Encoded struct{ Data mem.BufferSlice }

// CheckFormat refuses a RecordFormat the records form does not know, so a
// client asking for a newer one learns at once instead of getting bytes
// it would misread.
func CheckFormat(f quirev1.RecordFormat) error {
	switch f {
	case quirev1.RecordFormat_RECORD_FORMAT_AUTO, quirev1.RecordFormat_RECORD_FORMAT_BYTES:
		return nil
	}
	return fmt.Errorf("record format %d (want RECORD_FORMAT_AUTO or RECORD_FORMAT_BYTES)", f)
}
