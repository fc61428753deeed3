package record

import (
	"encoding/binary"
	"fmt"
	"math"
)

// RecordHeader is one header of a record. A nil Value is a null value.
type RecordHeader struct {
	Key   string
	Value []byte
}

// Record is one decoded record. Key and Value alias the batch (or, for a
// compressed batch, the decompressed buffer): they are not copied. A nil Key
// or Value is null.
type Record struct {
	Attributes     int8
	TimestampDelta int64
	OffsetDelta    int32
	Key, Value     []byte
	Headers        []RecordHeader

	// Offset and Timestamp are absolute: base offset plus delta, and base
	// timestamp plus delta (or the batch's max timestamp for LogAppendTime
	// batches).
	Offset    int64
	Timestamp int64
}

// ForEachRecord decodes the records of one whole batch and calls fn for
// each. The *Record is reused between calls; copy what you keep. For an
// uncompressed batch Key and Value point into batch; for a compressed batch
// they point into a fresh decompressed buffer, valid after fn returns.
// The CRC is not checked here; use Validate for bytes from outside.
func ForEachRecord(batch []byte, fn func(r *Record) error) error {
	h, err := ParseHeader(batch)
	if err != nil {
		return err
	}
	if h.Size() > len(batch) {
		return fmt.Errorf("%w: batch needs %d bytes, have %d", ErrTruncated, h.Size(), len(batch))
	}
	body := batch[HeaderSize:h.Size()]
	if h.Codec() != None {
		// The slot covers the decompression only, not fn: a callback may
		// decode other batches, or take its time.
		acquireDecompress()
		dec, err := decompress(h.Codec(), body)
		releaseDecompress()
		if err != nil {
			return err
		}
		// The records alias the buffer, so it is not returned to the pool.
		body = *dec
	}
	if h.NumRecords < 0 {
		return fmt.Errorf("%w: count %d", ErrRecordCount, h.NumRecords)
	}
	var r Record
	for i := int32(0); i < h.NumRecords; i++ {
		rest, err := parseRecord(body, &r, true)
		if err != nil {
			return fmt.Errorf("record %d: %w", i, err)
		}
		body = rest
		r.Offset = h.BaseOffset + int64(r.OffsetDelta)
		if h.LogAppendTime() {
			r.Timestamp = h.MaxTimestamp
		} else {
			r.Timestamp = h.BaseTimestamp + r.TimestampDelta
		}
		if err := fn(&r); err != nil {
			return err
		}
	}
	if len(body) != 0 {
		return fmt.Errorf("%w: %d bytes after %d records", ErrRecordCount, len(body), h.NumRecords)
	}
	return nil
}

// parseRecord decodes the record at the start of b into r and returns the
// bytes after it. With headers false the headers are checked but not kept.
func parseRecord(b []byte, r *Record, headers bool) ([]byte, error) {
	length, n := binary.Varint(b)
	if n <= 0 || length < 0 || length > int64(len(b)-n) {
		return nil, fmt.Errorf("%w: bad length", ErrBadRecord)
	}
	rest := b[n+int(length):]
	p := b[n : n+int(length)]
	if len(p) < 1 {
		return nil, fmt.Errorf("%w: empty record", ErrBadRecord)
	}
	r.Attributes = int8(p[0])
	p = p[1:]
	ts, n := binary.Varint(p)
	if n <= 0 {
		return nil, fmt.Errorf("%w: bad timestamp delta", ErrBadRecord)
	}
	r.TimestampDelta = ts
	p = p[n:]
	od, n := binary.Varint(p)
	if n <= 0 || od < 0 || od > math.MaxInt32 {
		return nil, fmt.Errorf("%w: bad offset delta", ErrBadRecord)
	}
	r.OffsetDelta = int32(od)
	p = p[n:]
	var err error
	if r.Key, p, err = readBytes(p); err != nil {
		return nil, err
	}
	if r.Value, p, err = readBytes(p); err != nil {
		return nil, err
	}
	hc, n := binary.Varint(p)
	if n <= 0 || hc < 0 || hc > int64(len(p)) {
		return nil, fmt.Errorf("%w: bad header count", ErrBadRecord)
	}
	p = p[n:]
	r.Headers = r.Headers[:0]
	for i := int64(0); i < hc; i++ {
		var k, v []byte
		if k, p, err = readBytes(p); err != nil {
			return nil, err
		}
		if k == nil {
			return nil, fmt.Errorf("%w: null header key", ErrBadRecord)
		}
		if v, p, err = readBytes(p); err != nil {
			return nil, err
		}
		if headers {
			r.Headers = append(r.Headers, RecordHeader{Key: string(k), Value: v})
		}
	}
	if len(p) != 0 {
		return nil, fmt.Errorf("%w: %d bytes left in record", ErrBadRecord, len(p))
	}
	return rest, nil
}

// readBytes reads a varint length (-1 = null) and that many bytes.
func readBytes(p []byte) (v, rest []byte, err error) {
	l, n := binary.Varint(p)
	if n <= 0 || l < -1 || l > int64(len(p)-n) {
		return nil, nil, fmt.Errorf("%w: bad field length", ErrBadRecord)
	}
	p = p[n:]
	if l < 0 {
		return nil, p, nil
	}
	return p[:l:l], p[l:], nil
}

// varintLen returns the size of v as a zigzag varint.
func varintLen(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}

func bytesLen(b []byte) int {
	if b == nil {
		return varintLen(-1)
	}
	return varintLen(int64(len(b))) + len(b)
}

func appendBytes(dst, b []byte) []byte {
	if b == nil {
		return binary.AppendVarint(dst, -1)
	}
	dst = binary.AppendVarint(dst, int64(len(b)))
	return append(dst, b...)
}
