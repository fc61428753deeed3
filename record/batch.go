package record

import (
	"encoding/binary"
	"errors"
	"fmt"
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
	codecMask         = 0x07
	AttrLogAppendTime = 0x08
	AttrTransactional = 0x10
	AttrControl       = 0x20
	// AttrDeleteHorizon (Kafka's delete horizon flag, KIP-534): the
	// batch's base timestamp is the time after which a log cleaner may
	// remove it, set by a cleaner on a transaction marker whose
	// transaction has no records left (SetDeleteHorizon).
	AttrDeleteHorizon    = 0x40
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

// DeleteHorizon returns the delete horizon a log cleaner set on the
// batch (Unix ms), if any.
func (h Header) DeleteHorizon() (int64, bool) {
	return h.BaseTimestamp, h.Attributes&AttrDeleteHorizon != 0
}

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
	return crc32c(0, batch[offAttributes:])
}

// Validate checks that batch is exactly one whole, well formed batch: its
// length, magic and CRC, that lastOffsetDelta is recordCount-1, and that
// the records section holds exactly recordCount records. For an
// uncompressed batch it frames the records by their length prefixes only,
// the check for bytes that a validating leader wrote (replication,
// recovery); a compressed batch is decompressed and every record parsed,
// offset deltas included. Bytes from a producer need ValidateDeep.
func Validate(batch []byte) (Header, error) {
	return validate(batch, false)
}

// ValidateDeep is Validate that also parses every field of every record of
// an uncompressed batch, as a Kafka leader does before it acknowledges a
// produce request: attributes, timestamp and offset deltas (0..n-1), key,
// value and header lengths within the record. It is one pass over the
// records after the CRC, framing and parsing together.
func ValidateDeep(batch []byte) (Header, error) {
	return validate(batch, true)
}

func validate(batch []byte, deep bool) (Header, error) {
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
	crc := CRC(batch)
	if crc != h.CRC {
		return h, fmt.Errorf("%w: stored %08x, computed %08x", ErrBadCRC, h.CRC, crc)
	}
	body := batch[HeaderSize:]
	if h.NumRecords <= 0 || h.LastOffsetDelta != h.NumRecords-1 {
		// Not a producer's batch: only a compacted log's (see
		// FilterBatch) may hold fewer records than its offsets, or none.
		if deep || h.NumRecords < 0 || h.LastOffsetDelta < 0 || h.NumRecords > h.LastOffsetDelta {
			if h.NumRecords <= 0 {
				return h, fmt.Errorf("%w: count %d", ErrRecordCount, h.NumRecords)
			}
			return h, fmt.Errorf("%w: lastOffsetDelta %d with %d records", ErrRecordCount, h.LastOffsetDelta, h.NumRecords)
		}
		return h, checkSparse(h, body)
	}
	if h.Codec() == None {
		if deep {
			return h, checkRecords(body, h.NumRecords)
		}
		return h, checkFraming(body, h.NumRecords)
	}
	acquireDecompress()
	defer releaseDecompress()
	dec, err := decompress(h.Codec(), body)
	if err != nil {
		return h, err
	}
	defer putBuf(dec)
	return h, checkRecords(*dec, h.NumRecords)
}

// minRecordLength is the smallest record body: attributes, timestamp
// delta, offset delta, key length, value length and header count, one
// byte each.
const minRecordLength = 6

// checkFraming checks that body holds exactly n length-prefixed records
// of plausible size. It is a chain of dependent loads (each record's
// length says where the next starts), so the common case, a non-negative
// length in one or two varint bytes (up to 8191), is decoded from a single
// 16-bit load with one bounds check.
func checkFraming(body []byte, n int32) error {
	p := 0
	for i := int32(0); i < n; i++ {
		if u, size := varint2(body, p); size != 0 && u&1 == 0 {
			// An even zigzag value is non-negative.
			length := u >> 1
			if length < minRecordLength || length > uint(len(body)-p-size) {
				return fmt.Errorf("%w: record %d: bad length", ErrBadRecord, i)
			}
			p += size + int(length)
			continue
		}
		if p >= len(body) {
			return fmt.Errorf("%w: %d records, header says %d", ErrRecordCount, i, n)
		}
		length, q, ok := readVarint(body, p)
		if !ok || length < minRecordLength || length > int64(len(body)-q) {
			return fmt.Errorf("%w: record %d: bad length", ErrBadRecord, i)
		}
		p = q + int(length)
	}
	if p != len(body) {
		return fmt.Errorf("%w: %d bytes after %d records", ErrRecordCount, len(body)-p, n)
	}
	return nil
}

// varint2 decodes the varint at b[q] if it has one or two bytes and b
// holds two bytes from q, from a single 16-bit load: it returns the
// zigzag-encoded value (even for v >= 0: 2v; odd: -2v-1) and its size, or
// size 0 for the general path (readVarint).
func varint2(b []byte, q int) (u uint, size int) {
	if uint(q)+1 >= uint(len(b)) {
		return 0, 0
	}
	w := uint(b[q]) | uint(b[q+1])<<8
	if w&0x80 == 0 {
		return w & 0x7f, 1
	}
	if w&0x8000 == 0 {
		return w&0x7f | (w>>8)<<7, 2
	}
	return 0, 0
}

// checkRecords checks that body holds exactly n well formed records, as
// parseRecord would decode them, in one pass that frames and parses each
// record, without copying or allocating: the attributes byte, a timestamp
// delta, offset delta i for record i, key and value (null or within the
// record), headers (non-null keys) and no bytes left over.
//
// It runs on every produce request, so the common record takes a fast
// path: length, timestamp delta, key length and value length varints of
// one or two bytes (-8192 to 8191; a null key or value is the single byte
// 0x01), an offset delta of up to three bytes, and 16 bytes of body from
// its start; no headers (a last byte 0), or else a header count of one
// byte and header key and value lengths of one or two bytes, walked after
// the value. Everything up to the key length lies in those 16 bytes, read
// through one window that the compiler knows to be 16 bytes long, so no
// load has a bounds check of its own.
//
// The loop is a chain of dependent loads (each record's length says where
// the next starts), so only the length is decoded on it; every other
// field is checked by a compare that can run alongside the next record:
// the offset delta against the encoding of i, the value length against
// the bytes its record length leaves for it. The varint sizes are
// branches rather than arithmetic: they are predictable in a batch of
// like records, and a predicted branch lets the CPU go on to the next
// field before the bytes that say where it starts have arrived. Any
// record not of that shape, or malformed, goes to checkRecord, which
// parses it in general and says what is wrong; the fast path accepts only
// records that checkRecord accepts (TestCheckRecordsFastPath).
func checkRecords(body []byte, n int32) error {
	var (
		p, q, end int
		i         int32
		h         int  // where the headers' fields start, as walked
		k, c      uint // offset in the window w; header count
		x, y, zi  uint64
		w, r      []byte
		err       error
	)
	for ; i < n; i, zi = i+1, zi+2 {
		// zi is 2i, offset delta i zigzag-encoded. p is never negative;
		// the test tells the compiler so, and w needs no bounds checks.
		if p < 0 || p > len(body)-16 {
			goto slow
		}
		w = body[p : p+16 : p+16]
		x = binary.LittleEndian.Uint64(w)
		// Length: non-negative, the record is body[p+size:end]. It need
		// not be checked against len(body) or minRecordLength: the
		// fields below and the header count at end-1 bound it.
		if x&0x8081 == 0x80 {
			end = p + 2 + int(x>>1&0x3f|x>>2&0x1fc0)
			k, x = 3, x>>24 // past the length and the attributes
		} else if x&0x81 == 0 {
			end = p + 1 + int(x>>1&0x3f)
			k, x = 2, x>>16
		} else {
			goto slow
		}
		// Timestamp delta: any value.
		if x&0x80 == 0 {
			k, x = k+1, x>>8
		} else if x&0x8000 == 0 {
			k, x = k+2, x>>16
		} else {
			goto slow
		}
		// Offset delta: i. Rather than decode it, compare its bytes with
		// those of zi: zi itself in one byte; in two, 0x80|zi&0x7f then
		// zi>>7, which as a little-endian word is zi + zi&^0x7f + 0x80
		// (for a zi that needs three bytes, a word with bit 15 set or
		// wider, so no match); in three, the same with another 7-bit
		// group. Each arm's own bit 7 tests make a shorter zi fail too,
		// except an overlong encoding of it, which checkRecord accepts as
		// well. A wider zi (i >= 1<<20) takes the slow path.
		if x&0x80 == 0 {
			if x&0xff != zi {
				goto slow
			}
			k++
		} else if x&0x8000 == 0 {
			if x&0xffff != zi+zi&^0x7f+0x80 {
				goto slow
			}
			k += 2
		} else {
			if zi >= 1<<21 || x&0xffffff != zi+zi&^0x7f+zi&^0x3fff<<1+0x8080 {
				goto slow
			}
			k += 3
		}
		// k is at most 8 (2+1+2+3 bytes); the test spares the load its
		// bounds check.
		if k > 8 {
			goto slow
		}
		// Key: null (and then the value length is in y too) or a length;
		// q is where the value length starts.
		y = binary.LittleEndian.Uint64(w[k:])
		if y&0xff == 1 {
			q, y = p+int(k)+1, y>>8
		} else {
			if y&0x81 == 0 {
				q = p + int(k) + 1 + int(y>>1&0x3f)
			} else if y&0x8081 == 0x80 {
				q = p + int(k) + 2 + int(y>>1&0x3f|y>>2&0x1fc0)
			} else {
				goto slow
			}
			if q < 0 || q > len(body)-2 { // q < 0: as for p
				goto slow
			}
			y = uint64(binary.LittleEndian.Uint16(body[q:]))
		}
		// Value: null with the header count right after it, or a length
		// of exactly the bytes up to the header count at end-1, compared
		// zigzag-encoded so that a negative length (odd) fails too. That
		// bounds the key and every field before it within the record.
		if y&0x80 == 0 {
			if int(y&0xff) != 2*(end-q-2) && (y&0xff != 1 || end != q+2) {
				goto headers
			}
		} else if y&0x8000 != 0 {
			goto slow
		} else if int(y&0x7f|y>>1&0x3f80) != 2*(end-q-3) {
			goto headers
		}
		// Header count 0, the last byte, within body.
		if uint(end-1) >= uint(len(body)) || body[end-1] != 0 {
			goto slow
		}
		p = end
		continue
	headers:
		// The value does not end at end-1: a record with headers (or
		// a malformed one). Decode the value length (y holds its one or
		// two bytes, at q), then walk the headers from the header count
		// at h, in r, the record up to end: a count of one byte, each
		// header a key length (not null) and a value length (null or
		// not) of one or two bytes and their bytes, ending exactly at
		// end. h only grows, so h == end at the end puts every field,
		// the key and value before them too, within the record. None of
		// this is on the chain from record to record.
		if y&0xff == 1 {
			h = q + 1
		} else if y&0x81 == 0 {
			h = q + 1 + int(y>>1&0x3f)
		} else if y&0x8081 == 0x80 {
			h = q + 2 + int(y>>1&0x3f|y>>2&0x1fc0)
		} else {
			goto slow
		}
		if uint(end) > uint(len(body)) || uint(h) >= uint(end) {
			goto slow
		}
		r = body[:end]
		c = uint(r[h])
		if c&0x81 != 0 { // a header count of one byte, not negative
			goto slow
		}
		h++
		for c >>= 1; c > 0; c-- {
			// Key length: not negative. h < 0 cannot be; the test
			// spares the loads their bounds checks.
			if h < 0 || h > len(r)-2 {
				goto slow
			}
			if u := uint(r[h]); u&0x81 == 0 {
				h += 1 + int(u>>1)
			} else if v := uint(r[h+1]); u&0x81 == 0x80 && v&0x80 == 0 {
				h += 2 + int(u>>1&0x3f|v<<6)
			} else {
				goto slow
			}
			// Value length: null, or not negative. It may be the last
			// byte of the record.
			if uint(h) >= uint(len(r)) {
				goto slow
			}
			if u := uint(r[h]); u == 1 {
				h++
			} else if u&0x81 == 0 {
				h += 1 + int(u>>1)
			} else if h < len(r)-1 && u&0x81 == 0x80 && r[h+1]&0x80 == 0 {
				h += 2 + int(u>>1&0x3f|uint(r[h+1])<<6)
			} else {
				goto slow
			}
		}
		if h != end {
			goto slow
		}
		p = end
		continue
	slow:
		if slowRecordHook != nil {
			slowRecordHook(p)
		}
		if p, err = checkRecord(body, p, i, n); err != nil {
			return err
		}
	}
	if p != len(body) {
		return fmt.Errorf("%w: %d bytes after %d records", ErrRecordCount, len(body)-p, n)
	}
	return nil
}

// slowRecordHook, if set (tests), runs when checkRecords leaves the record
// at body[p:] to checkRecord.
var slowRecordHook func(p int)

// checkRecord checks record i of n, at body[p:], field by field in
// general (checkRecords' slow path), and returns where the next record
// starts.
func checkRecord(body []byte, p int, i, n int32) (int, error) {
	if p >= len(body) {
		return p, fmt.Errorf("%w: %d records, header says %d", ErrRecordCount, i, n)
	}
	length, q, ok := readVarint(body, p)
	if !ok || length < minRecordLength || length > int64(len(body)-q) {
		return p, fmt.Errorf("%w: record %d: bad length", ErrBadRecord, i)
	}
	end := q + int(length)
	rec := body[:end]
	q++ // attributes
	if _, q, ok = readVarint(rec, q); !ok {
		return p, fmt.Errorf("%w: record %d: bad timestamp delta", ErrBadRecord, i)
	}
	od, q, ok := readVarint(rec, q)
	if !ok || od != int64(i) {
		return p, fmt.Errorf("%w: record %d has offset delta %d", ErrRecordCount, i, od)
	}
	for f := 0; f < 2; f++ { // key, value
		var l int64
		l, q, ok = readVarint(rec, q)
		if !ok || l < -1 || l > int64(end-q) {
			return p, fmt.Errorf("%w: record %d: bad field length", ErrBadRecord, i)
		}
		q += int(max(l, 0))
	}
	hc, q, ok := readVarint(rec, q)
	if !ok || hc < 0 || hc > int64(end-q) {
		return p, fmt.Errorf("%w: record %d: bad header count", ErrBadRecord, i)
	}
	for j := int64(0); j < hc; j++ {
		for f := 0; f < 2; f++ { // key (not null), value
			var l int64
			l, q, ok = readVarint(rec, q)
			if !ok || l < -1 || (f == 0 && l < 0) || l > int64(end-q) {
				return p, fmt.Errorf("%w: record %d: bad header", ErrBadRecord, i)
			}
			q += int(max(l, 0))
		}
	}
	if q != end {
		return p, fmt.Errorf("%w: record %d: %d bytes left in record", ErrBadRecord, i, end-q)
	}
	return end, nil
}

// readVarint decodes the zigzag varint at b[q:] and returns it with the
// position after it. Like binary.Varint it refuses a varint that runs off
// b or overflows 64 bits. A varint of one or two bytes with a second byte
// in b (the lengths and deltas of most records) is decoded from the two
// bytes at once, without the loop (TestReadVarint).
func readVarint(b []byte, q int) (int64, int, bool) {
	if q >= 0 && q < len(b)-1 {
		w := uint64(b[q]) | uint64(b[q+1])<<8
		if w&0x80 == 0 {
			u := w & 0x7f
			return int64(u>>1) ^ -int64(u&1), q + 1, true
		}
		if w&0x8000 == 0 {
			u := w&0x7f | (w>>8)<<7
			return int64(u>>1) ^ -int64(u&1), q + 2, true
		}
	}
	var u uint64
	for s := uint(0); s < 64; s += 7 {
		if q >= len(b) {
			return 0, q, false
		}
		c := b[q]
		q++
		if c < 0x80 {
			if s == 63 && c > 1 {
				return 0, q, false
			}
			u |= uint64(c) << s
			return int64(u>>1) ^ -int64(u&1), q, true
		}
		u |= uint64(c&0x7f) << s
	}
	return 0, q, false
}

// WalkRead calls fn for each whole batch in buf, as read from a log
// (whose batches were validated on the way in, so they are not again); a
// batch cut short at the end of buf, where a read stopped at its limit,
// is left out.
func WalkRead(buf []byte, fn func(batch []byte, h Header) error) error {
	for len(buf) >= HeaderSize {
		h, err := ParseHeader(buf)
		if err != nil {
			return err
		}
		if h.Size() > len(buf) {
			break
		}
		if err := fn(buf[:h.Size()], h); err != nil {
			return err
		}
		buf = buf[h.Size():]
	}
	return nil
}

// NextAfterRead returns the offset after the last whole batch in buf, a
// read from a log (see WalkRead); -1 when there is none.
func NextAfterRead(buf []byte) int64 {
	next := int64(-1)
	_ = WalkRead(buf, func(_ []byte, h Header) error {
		next = h.NextOffset()
		return nil
	})
	return next
}

// SplitBatches walks buf, a sequence of whole batches, validates each (see
// Validate) and calls fn with it. It stops at the first error.
func SplitBatches(buf []byte, fn func(batch []byte, h Header) error) error {
	return splitBatches(buf, false, fn)
}

// SplitBatchesDeep is SplitBatches with ValidateDeep: for batches from a
// producer.
func SplitBatchesDeep(buf []byte, fn func(batch []byte, h Header) error) error {
	return splitBatches(buf, true, fn)
}

func splitBatches(buf []byte, deep bool, fn func(batch []byte, h Header) error) error {
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
		h, err := validate(buf[:size:size], deep)
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

// SetDeleteHorizon sets the delete horizon flag and ms as the batch's
// base timestamp, and recomputes the CRC, as Kafka's log cleaner does on
// a transaction marker it will remove after ms. The records' timestamps
// count from the base timestamp: only a batch whose records' times do
// not matter (a control batch) should carry one.
func SetDeleteHorizon(batch []byte, ms int64) {
	attrs := binary.BigEndian.Uint16(batch[offAttributes:])
	binary.BigEndian.PutUint16(batch[offAttributes:], attrs|AttrDeleteHorizon)
	binary.BigEndian.PutUint64(batch[offBaseTimestamp:], uint64(ms))
	binary.BigEndian.PutUint32(batch[offCRC:], CRC(batch))
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
