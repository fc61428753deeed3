package record

import (
	"encoding/binary"
	"fmt"
)

// A compacted log (log compaction, docs/storage.md) rewrites batches
// keeping only some of their records. The rewritten batch keeps its
// header: base offset, last offset delta, timestamps, producer id, epoch
// and base sequence, attributes; only the record count, the length and
// the CRC change. Its records keep their offset and timestamp deltas, so
// every kept record has its original offset and timestamp, and the
// records of a batch are sparse: fewer than lastOffsetDelta+1, their
// offset deltas increasing. A batch left with no records may be kept
// empty (EmptyBatch), as Kafka keeps an idempotent producer's last batch
// so that its sequence numbers survive. Validate accepts both forms;
// ValidateDeep, the check of a producer's bytes, accepts neither.

// checkSparse checks the records of a sparse batch: NumRecords records,
// offset deltas strictly increasing and at most lastOffsetDelta, every
// field within its record, no bytes left over.
func checkSparse(h Header, body []byte) error {
	if h.Codec() != None {
		if h.NumRecords == 0 {
			return fmt.Errorf("%w: a compressed batch without records", ErrRecordCount)
		}
		acquireDecompress()
		defer releaseDecompress()
		dec, err := decompress(h.Codec(), body)
		if err != nil {
			return err
		}
		defer putBuf(dec)
		body = *dec
	}
	var r Record
	prev := int32(-1)
	for i := int32(0); i < h.NumRecords; i++ {
		rest, err := parseRecord(body, &r, false)
		if err != nil {
			return fmt.Errorf("record %d: %w", i, err)
		}
		if r.OffsetDelta <= prev || r.OffsetDelta > h.LastOffsetDelta {
			return fmt.Errorf("%w: record %d has offset delta %d after %d (last %d)", ErrRecordCount, i, r.OffsetDelta, prev, h.LastOffsetDelta)
		}
		prev = r.OffsetDelta
		body = rest
	}
	if len(body) != 0 {
		return fmt.Errorf("%w: %d bytes after %d records", ErrRecordCount, len(body), h.NumRecords)
	}
	return nil
}

// Filter rewrites batches keeping some of their records; it keeps its
// buffers from one batch to the next. The zero value is ready to use; a
// Filter is not safe for concurrent use.
type Filter struct {
	recs    []byte
	scratch []byte
	r       Record
}

// Batch appends to dst the batch (one whole, valid batch) holding only the
// records keep accepts, and returns it with the number kept and the
// number there were. All kept: the batch is appended unchanged. None kept
// (or none there): nothing is appended (see EmptyBatch). keep sees each record with its
// absolute Offset and Timestamp; the *Record is reused.
func (f *Filter) Batch(dst, batch []byte, keep func(r *Record) bool) (out []byte, kept, total int, err error) {
	h, err := ParseHeader(batch)
	if err != nil {
		return dst, 0, 0, err
	}
	if h.Size() > len(batch) {
		return dst, 0, 0, fmt.Errorf("%w: batch needs %d bytes, have %d", ErrTruncated, h.Size(), len(batch))
	}
	batch = batch[:h.Size()]
	body := batch[HeaderSize:]
	var dec *[]byte
	if h.Codec() != None && h.NumRecords > 0 {
		acquireDecompress()
		dec, err = decompress(h.Codec(), body)
		releaseDecompress()
		if err != nil {
			return dst, 0, 0, err
		}
		defer putBuf(dec)
		body = *dec
	}
	f.recs = f.recs[:0]
	r := &f.r
	for i := int32(0); i < h.NumRecords; i++ {
		rest, err := parseRecord(body, r, true)
		if err != nil {
			return dst, 0, 0, fmt.Errorf("record %d: %w", i, err)
		}
		r.Offset = h.BaseOffset + int64(r.OffsetDelta)
		if h.LogAppendTime() {
			r.Timestamp = h.MaxTimestamp
		} else {
			r.Timestamp = h.BaseTimestamp + r.TimestampDelta
		}
		if keep(r) {
			f.recs = append(f.recs, body[:len(body)-len(rest)]...)
			kept++
		}
		body = rest
	}
	total = int(h.NumRecords)
	switch {
	case kept == 0:
		return dst, 0, total, nil
	case kept == total:
		return append(dst, batch...), kept, total, nil
	}
	start := len(dst)
	dst = append(dst, batch[:HeaderSize]...)
	if h.Codec() == None {
		dst = append(dst, f.recs...)
	} else {
		if f.scratch, err = compress(f.scratch[:0], h.Codec(), f.recs); err != nil {
			return dst[:start], 0, total, err
		}
		dst = append(dst, f.scratch...)
	}
	out = dst[start:]
	be := binary.BigEndian
	be.PutUint32(out[offBatchLength:], uint32(len(out)-LengthPrefix))
	be.PutUint32(out[offRecordCount:], uint32(kept))
	be.PutUint32(out[offCRC:], CRC(out))
	return dst, kept, total, nil
}

// EmptyBatch appends to dst a batch with the header of batch and no
// records: same offsets, timestamps, producer fields and attributes, but
// no compression (there is nothing to compress).
func EmptyBatch(dst, batch []byte) []byte {
	start := len(dst)
	dst = append(dst, batch[:HeaderSize]...)
	out := dst[start:]
	be := binary.BigEndian
	attrs := be.Uint16(out[offAttributes:])
	be.PutUint16(out[offAttributes:], attrs&^codecMask)
	be.PutUint32(out[offBatchLength:], uint32(HeaderSize-LengthPrefix))
	be.PutUint32(out[offRecordCount:], 0)
	be.PutUint32(out[offCRC:], CRC(out))
	return dst
}
