package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// HeaderSize is the size of a RecordBatch v2 header, up to the first record.
const HeaderSize = 61

// Magic is the only batch format version this package speaks.
const Magic = 2

// Byte offsets of the header fields.
const (
	offBaseOffset      = 0
	offBatchLength     = 8
	offLeaderEpoch     = 12
	offMagic           = 16
	offCRC             = 17
	offAttributes      = 21
	offLastOffsetDelta = 23
	offBaseTimestamp   = 27
	offMaxTimestamp    = 35
	offProducerID      = 43
	offProducerEpoch   = 51
	offBaseSequence    = 53
	offRecordCount     = 57

	// LengthPrefix is the number of bytes before the part counted by
	// batchLength: baseOffset and batchLength themselves.
	LengthPrefix = 12
)

// Attribute bits.
const (
	codecMask            = 0x07
	AttrLogAppendTime    = 0x08
	AttrTransactional    = 0x10
	AttrControl          = 0x20
	minBatchLength       = HeaderSize - LengthPrefix
	maxSaneBatchLength   = 1<<31 - 1 - LengthPrefix
	noTimestamp          = -1
	defaultProducerID    = -1
	defaultProducerEpoch = -1
	defaultBaseSequence  = -1
)

// Codec is the compression codec of a batch (attribute bits 0-2).
type Codec int8

// Compression codecs, numbered as Kafka numbers them.
const (
	None   Codec = 0
	Gzip   Codec = 1
	Snappy Codec = 2
	LZ4    Codec = 3
	Zstd   Codec = 4
)

func (c Codec) String() string {
	switch c {
	case None:
		return "none"
	case Gzip:
		return "gzip"
	case Snappy:
		return "snappy"
	case LZ4:
		return "lz4"
	case Zstd:
		return "zstd"
	}
	return fmt.Sprintf("codec(%d)", int8(c))
}

// Errors. Every error about a malformed batch satisfies
// errors.Is(err, ErrCorrupt).
var (
	ErrCorrupt     = errors.New("record: corrupt batch")
	ErrBadCRC      = fmt.Errorf("%w: crc mismatch", ErrCorrupt)
	ErrBadMagic    = fmt.Errorf("%w: unknown magic", ErrCorrupt)
	ErrTruncated   = fmt.Errorf("%w: truncated", ErrCorrupt)
	ErrBadLength   = fmt.Errorf("%w: bad batch length", ErrCorrupt)
	ErrRecordCount = fmt.Errorf("%w: record count does not match records", ErrCorrupt)
	ErrBadRecord   = fmt.Errorf("%w: malformed record", ErrCorrupt)
	ErrBadCodec    = fmt.Errorf("%w: unknown compression codec", ErrCorrupt)
	ErrDecompress  = fmt.Errorf("%w: cannot decompress records", ErrCorrupt)
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Header is the decoded fixed part of a batch.
type Header struct {
	BaseOffset           int64
	BatchLength          int32
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	BaseTimestamp        int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	NumRecords           int32
}

// Codec returns the compression codec of the batch.
func (h Header) Codec() Codec { return Codec(h.Attributes & codecMask) }

// LastOffset returns the offset of the last record of the batch.
func (h Header) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// NextOffset returns the offset just after the batch.
func (h Header) NextOffset() int64 { return h.LastOffset() + 1 }

// Size returns the size in bytes of the whole batch.
func (h Header) Size() int { return LengthPrefix + int(h.BatchLength) }

// LogAppendTime reports whether the timestamp-type bit is set: the broker's
// append time (MaxTimestamp) is then the timestamp of every record.
func (h Header) LogAppendTime() bool { return h.Attributes&AttrLogAppendTime != 0 }

// Transactional reports whether the batch is part of a transaction.
func (h Header) Transactional() bool { return h.Attributes&AttrTransactional != 0 }

// Control reports whether the batch holds control records.
func (h Header) Control() bool { return h.Attributes&AttrControl != 0 }

// ParseHeader decodes the header at the start of b. It checks the length
// and magic fields but not the CRC, and b may hold only the header.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, fmt.Errorf("%w: %d header bytes", ErrTruncated, len(b))
	}
	h := Header{
		BaseOffset:           int64(binary.BigEndian.Uint64(b[offBaseOffset:])),
		BatchLength:          int32(binary.BigEndian.Uint32(b[offBatchLength:])),
		PartitionLeaderEpoch: int32(binary.BigEndian.Uint32(b[offLeaderEpoch:])),
		Magic:                int8(b[offMagic]),
		CRC:                  binary.BigEndian.Uint32(b[offCRC:]),
		Attributes:           int16(binary.BigEndian.Uint16(b[offAttributes:])),
		LastOffsetDelta:      int32(binary.BigEndian.Uint32(b[offLastOffsetDelta:])),
		BaseTimestamp:        int64(binary.BigEndian.Uint64(b[offBaseTimestamp:])),
		MaxTimestamp:         int64(binary.BigEndian.Uint64(b[offMaxTimestamp:])),
		ProducerID:           int64(binary.BigEndian.Uint64(b[offProducerID:])),
		ProducerEpoch:        int16(binary.BigEndian.Uint16(b[offProducerEpoch:])),
		BaseSequence:         int32(binary.BigEndian.Uint32(b[offBaseSequence:])),
		NumRecords:           int32(binary.BigEndian.Uint32(b[offRecordCount:])),
	}
	if h.Magic != Magic {
		return h, fmt.Errorf("%w: %d", ErrBadMagic, h.Magic)
	}
	if h.BatchLength < minBatchLength {
		return h, fmt.Errorf("%w: %d", ErrBadLength, h.BatchLength)
	}
	return h, nil
}

// PeekSize returns the total size of the batch starting at b from its
// length field alone; b needs at least LengthPrefix bytes. It returns -1 if
// the length is impossible.
func PeekSize(b []byte) int {
	if len(b) < LengthPrefix {
		return -1
	}
	n := int32(binary.BigEndian.Uint32(b[offBatchLength:]))
	if n < minBatchLength {
		return -1
	}
	return LengthPrefix + int(n)
}

// CRC computes the CRC-32C of a batch as stored in its crc field.
func CRC(batch []byte) uint32 {
	return crc32.Checksum(batch[offAttributes:], castagnoli)
}

// Validate checks that batch is exactly one whole, well formed batch: its
// length, magic and CRC, that lastOffsetDelta is recordCount-1, and that
// the records section holds exactly recordCount records. For an
// uncompressed batch it frames the records by their length prefixes (cheap
// enough for every produce request); a compressed batch is decompressed and
// every record parsed, offset deltas included. Use ValidateDeep to parse
// uncompressed records too.
func Validate(batch []byte) (Header, error) {
	h, err := ParseHeader(batch)
	if err != nil {
		return h, err
	}
	if h.Size() != len(batch) {
		if h.Size() > len(batch) {
			return h, fmt.Errorf("%w: batch needs %d bytes, have %d", ErrTruncated, h.Size(), len(batch))
		}
		return h, fmt.Errorf("%w: batch is %d bytes, buffer %d", ErrBadLength, h.Size(), len(batch))
	}
	if crc := CRC(batch); crc != h.CRC {
		return h, fmt.Errorf("%w: stored %08x, computed %08x", ErrBadCRC, h.CRC, crc)
	}
	if h.NumRecords <= 0 {
		return h, fmt.Errorf("%w: count %d", ErrRecordCount, h.NumRecords)
	}
	if h.LastOffsetDelta != h.NumRecords-1 {
		return h, fmt.Errorf("%w: lastOffsetDelta %d with %d records", ErrRecordCount, h.LastOffsetDelta, h.NumRecords)
	}
	body := batch[HeaderSize:]
	if h.Codec() == None {
		// The produce path: frame the records by their lengths only, a
		// few nanoseconds each; ValidateDeep parses every field.
		return h, checkFraming(body, h.NumRecords)
	}
	dec, err := decompress(h.Codec(), body)
	if err != nil {
		return h, err
	}
	defer putBuf(dec)
	return h, checkRecords(*dec, h.NumRecords)
}

// ValidateDeep is Validate that also parses every field of every record of
// an uncompressed batch (Validate does so only for compressed batches,
// which it must decompress anyway): field lengths within the record,
// offset deltas 0..n-1.
func ValidateDeep(batch []byte) (Header, error) {
	h, err := Validate(batch)
	if err != nil || h.Codec() != None {
		return h, err
	}
	return h, checkRecords(batch[HeaderSize:], h.NumRecords)
}

// minRecordLength is the smallest record body: attributes, timestamp
// delta, offset delta, key length, value length and header count, one
// byte each.
const minRecordLength = 6

// checkFraming checks that body holds exactly n length-prefixed records
// of plausible size. It runs on every produce request and is a chain of
// dependent loads (each record's length says where the next starts), so
// the common case, a non-negative length in one or two varint bytes (up to
// 8191), is decoded from a single 16-bit load with one bounds check.
func checkFraming(body []byte, n int32) error {
	p := 0
	for i := int32(0); i < n; i++ {
		if p+1 < len(body) {
			w := uint(body[p]) | uint(body[p+1])<<8
			var u, size uint
			switch {
			case w&0x80 == 0:
				u, size = w&0x7f, 1
			case w&0x8000 == 0:
				u, size = w&0x7f|(w>>8)<<7, 2
			}
			// An even zigzag value is non-negative; size 0 means a longer
			// varint, left to the general path.
			if size != 0 && u&1 == 0 {
				length := u >> 1
				if length < minRecordLength || length > uint(len(body)-p)-size {
					return fmt.Errorf("%w: record %d: bad length", ErrBadRecord, i)
				}
				p += int(size + length)
				continue
			}
		}
		if p >= len(body) {
			return fmt.Errorf("%w: %d records, header says %d", ErrRecordCount, i, n)
		}
		length, ok := fastVarint(body, &p)
		if !ok || length < minRecordLength || length > int64(len(body)-p) {
			return fmt.Errorf("%w: record %d: bad length", ErrBadRecord, i)
		}
		p += int(length)
	}
	if p != len(body) {
		return fmt.Errorf("%w: %d bytes after %d records", ErrRecordCount, len(body)-p, n)
	}
	return nil
}

// checkRecords walks n records in body, checking their framing and offset
// deltas, without copying or allocating. It is the hot part of validating
// a produce request, so varints are decoded inline with a one-byte fast
// path.
func checkRecords(body []byte, n int32) error {
	p := 0
	for i := int32(0); i < n; i++ {
		length, ok := fastVarint(body, &p)
		if !ok || length < 1 || length > int64(len(body)-p) {
			if p >= len(body) {
				return fmt.Errorf("%w: %d records, header says %d", ErrRecordCount, i, n)
			}
			return fmt.Errorf("%w: record %d: bad length", ErrBadRecord, i)
		}
		end := p + int(length)
		rec := body[:end]
		q := p + 1                             // attributes
		if _, ok := fastVarint(rec, &q); !ok { // timestamp delta
			return fmt.Errorf("%w: record %d: bad timestamp delta", ErrBadRecord, i)
		}
		if od, ok := fastVarint(rec, &q); !ok || od != int64(i) {
			return fmt.Errorf("%w: record %d has offset delta %d", ErrRecordCount, i, od)
		}
		for f := 0; f < 2; f++ { // key, value
			l, ok := fastVarint(rec, &q)
			if !ok || l < -1 || l > int64(end-q) {
				return fmt.Errorf("%w: record %d: bad field length", ErrBadRecord, i)
			}
			if l > 0 {
				q += int(l)
			}
		}
		hc, ok := fastVarint(rec, &q)
		if !ok || hc < 0 || hc > int64(end-q) {
			return fmt.Errorf("%w: record %d: bad header count", ErrBadRecord, i)
		}
		for j := int64(0); j < hc; j++ {
			for f := 0; f < 2; f++ {
				l, ok := fastVarint(rec, &q)
				if !ok || l < -1 || (f == 0 && l < 0) || l > int64(end-q) {
					return fmt.Errorf("%w: record %d: bad header", ErrBadRecord, i)
				}
				if l > 0 {
					q += int(l)
				}
			}
		}
		if q != end {
			return fmt.Errorf("%w: record %d: %d bytes left in record", ErrBadRecord, i, end-q)
		}
		p = end
	}
	if p != len(body) {
		return fmt.Errorf("%w: %d bytes after %d records", ErrRecordCount, len(body)-p, n)
	}
	return nil
}

// fastVarint decodes the zigzag varint at b[*p] and advances *p.
func fastVarint(b []byte, p *int) (int64, bool) {
	i := *p
	var u uint64
	for s := uint(0); s < 64; s += 7 {
		if i >= len(b) {
			return 0, false
		}
		c := b[i]
		i++
		if c < 0x80 {
			u |= uint64(c) << s
			*p = i
			return int64(u>>1) ^ -int64(u&1), true
		}
		u |= uint64(c&0x7f) << s
	}
	return 0, false
}

// SplitBatches walks buf, a sequence of whole batches, validates each (see
// Validate) and calls fn with it. It stops at the first error.
func SplitBatches(buf []byte, fn func(batch []byte, h Header) error) error {
	for len(buf) > 0 {
		size := PeekSize(buf)
		if size < 0 {
			if len(buf) < LengthPrefix {
				return fmt.Errorf("%w: %d trailing bytes", ErrTruncated, len(buf))
			}
			return ErrBadLength
		}
		if size > len(buf) {
			return fmt.Errorf("%w: batch needs %d bytes, have %d", ErrTruncated, size, len(buf))
		}
		h, err := Validate(buf[:size:size])
		if err != nil {
			return err
		}
		if err := fn(buf[:size:size], h); err != nil {
			return err
		}
		buf = buf[size:]
	}
	return nil
}

// SetBaseOffset writes the base offset into the header. The field is outside
// the CRC.
func SetBaseOffset(batch []byte, off int64) {
	binary.BigEndian.PutUint64(batch[offBaseOffset:], uint64(off))
}

// SetPartitionLeaderEpoch writes the leader epoch into the header. The field
// is outside the CRC.
func SetPartitionLeaderEpoch(batch []byte, e int32) {
	binary.BigEndian.PutUint32(batch[offLeaderEpoch:], uint32(e))
}

// SetLogAppendTime marks the batch as LogAppendTime with ts as the time of
// every record (maxTimestamp), and recomputes the CRC, as a Kafka broker
// does for topics with message.timestamp.type=LogAppendTime.
func SetLogAppendTime(batch []byte, ts int64) {
	attrs := binary.BigEndian.Uint16(batch[offAttributes:])
	binary.BigEndian.PutUint16(batch[offAttributes:], attrs|AttrLogAppendTime)
	binary.BigEndian.PutUint64(batch[offMaxTimestamp:], uint64(ts))
	binary.BigEndian.PutUint32(batch[offCRC:], CRC(batch))
}
