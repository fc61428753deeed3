package record

import (
	"encoding/binary"
	"slices"
)

// Builder builds one batch. The zero value is not usable; use NewBuilder.
// A Builder is not safe for concurrent use.
type Builder struct {
	codec         Codec
	attrs         int16
	producerID    int64
	producerEpoch int16
	baseSequence  int32
	leaderEpoch   int32

	recs    []byte // encoded records, uncompressed
	n       int32
	baseTs  int64
	maxTs   int64
	scratch []byte
}

// NewBuilder returns a Builder for a batch compressed with codec, with no
// producer id (-1/-1/-1).
func NewBuilder(codec Codec) *Builder {
	b := &Builder{codec: codec}
	b.producerID, b.producerEpoch, b.baseSequence = defaultProducerID, defaultProducerEpoch, defaultBaseSequence
	b.leaderEpoch = -1
	b.Reset()
	return b
}

// SetProducerID sets the idempotent producer id (default -1).
func (b *Builder) SetProducerID(id int64) { b.producerID = id }

// SetProducerEpoch sets the producer epoch (default -1).
func (b *Builder) SetProducerEpoch(e int16) { b.producerEpoch = e }

// SetBaseSequence sets the sequence number of the first record (default -1).
func (b *Builder) SetBaseSequence(s int32) { b.baseSequence = s }

// SetProducer sets producer id, epoch and base sequence at once.
func (b *Builder) SetProducer(id int64, epoch int16, baseSequence int32) {
	b.producerID, b.producerEpoch, b.baseSequence = id, epoch, baseSequence
}

// SetTransactional sets or clears the transactional attribute bit.
func (b *Builder) SetTransactional(on bool) {
	if on {
		b.attrs |= AttrTransactional
	} else {
		b.attrs &^= AttrTransactional
	}
}

// Codec returns the builder's compression codec.
func (b *Builder) Codec() Codec { return b.codec }

// Append adds a record with timestamp ts (milliseconds). A nil key or value
// is encoded as null.
func (b *Builder) Append(ts int64, key, value []byte, headers []RecordHeader) {
	if b.n == 0 {
		b.baseTs, b.maxTs = ts, ts
	}
	if ts > b.maxTs {
		b.maxTs = ts
	}
	tsDelta := ts - b.baseTs
	size := 1 + varintLen(tsDelta) + varintLen(int64(b.n)) + bytesLen(key) + bytesLen(value) +
		varintLen(int64(len(headers)))
	for _, h := range headers {
		size += varintLen(int64(len(h.Key))) + len(h.Key) + bytesLen(h.Value)
	}
	// Room for the record, doubling the buffer when it is short: append
	// grows a large slice by about a quarter at a time, so a batch filled
	// from a small buffer (a producer's reused one, when records move on
	// to another partition every batch) was copied several times over.
	if need := size + binary.MaxVarintLen64; cap(b.recs)-len(b.recs) < need {
		b.recs = slices.Grow(b.recs, max(need, cap(b.recs)))
	}
	r := binary.AppendVarint(b.recs, int64(size))
	r = append(r, 0) // attributes
	r = binary.AppendVarint(r, tsDelta)
	r = binary.AppendVarint(r, int64(b.n))
	r = appendBytes(r, key)
	r = appendBytes(r, value)
	r = binary.AppendVarint(r, int64(len(headers)))
	for _, h := range headers {
		r = binary.AppendVarint(r, int64(len(h.Key)))
		r = append(r, h.Key...)
		r = appendBytes(r, h.Value)
	}
	b.recs = r
	b.n++
}

// Len returns the number of records appended since the last Reset.
func (b *Builder) Len() int { return int(b.n) }

// EstimatedSize returns the size of the batch if built now, without
// compression.
func (b *Builder) EstimatedSize() int { return HeaderSize + len(b.recs) }

// Build returns a new batch holding the records appended so far, with base
// offset 0 and its CRC set. The builder keeps its records until Reset.
// A batch with no records is not valid for appending to a log.
func (b *Builder) Build() []byte {
	var out []byte
	if b.codec == None {
		out = make([]byte, HeaderSize, HeaderSize+len(b.recs))
		out = append(out, b.recs...)
	} else {
		var err error
		b.scratch, err = compress(b.scratch[:0], b.codec, b.recs)
		if err != nil {
			// Compressing into memory fails only on a bad codec; fall
			// back to no compression, which is always valid.
			out = make([]byte, HeaderSize, HeaderSize+len(b.recs))
			out = append(out, b.recs...)
			b.fillHeader(out, None)
			return out
		}
		out = make([]byte, HeaderSize, HeaderSize+len(b.scratch))
		out = append(out, b.scratch...)
	}
	b.fillHeader(out, b.codec)
	return out
}

func (b *Builder) fillHeader(out []byte, codec Codec) {
	be := binary.BigEndian
	be.PutUint64(out[offBaseOffset:], 0)
	be.PutUint32(out[offBatchLength:], uint32(len(out)-LengthPrefix))
	be.PutUint32(out[offLeaderEpoch:], uint32(b.leaderEpoch))
	out[offMagic] = Magic
	be.PutUint16(out[offAttributes:], uint16(b.attrs&^codecMask|int16(codec)))
	be.PutUint32(out[offLastOffsetDelta:], uint32(b.n-1))
	baseTs, maxTs := b.baseTs, b.maxTs
	if b.n == 0 {
		baseTs, maxTs = noTimestamp, noTimestamp
	}
	be.PutUint64(out[offBaseTimestamp:], uint64(baseTs))
	be.PutUint64(out[offMaxTimestamp:], uint64(maxTs))
	be.PutUint64(out[offProducerID:], uint64(b.producerID))
	be.PutUint16(out[offProducerEpoch:], uint16(b.producerEpoch))
	be.PutUint32(out[offBaseSequence:], uint32(b.baseSequence))
	be.PutUint32(out[offRecordCount:], uint32(b.n))
	be.PutUint32(out[offCRC:], CRC(out))
}

// Reset empties the builder for a new batch, keeping codec, producer
// fields and buffers.
func (b *Builder) Reset() {
	b.recs = b.recs[:0]
	b.n = 0
	b.baseTs, b.maxTs = noTimestamp, noTimestamp
}
