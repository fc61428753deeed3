package service

import (
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/internal/wire"
	"github.com/quirelog/quire/record"
	"github.com/quirelog/quire/request"
)

// The decoded forms of records (ProduceRecords, FetchRecords,
// FetchRecordsMulti). A key or value is stored as exactly the bytes sent in
// whichever field of its pair carried them; a pair left unset is a Kafka
// null (length -1), set to "" it is empty. On the way out the request's
// RecordFormat picks the field: AUTO gives valid UTF-8 as text, BYTES
// always gives bytes.

// recordKey returns the key a plain record carries: nil for null.
func recordKey(r *quirev1.ProduceRecord) []byte {
	switch k := r.KeyData.(type) {
	case *quirev1.ProduceRecord_Key:
		return nonNull([]byte(k.Key))
	case *quirev1.ProduceRecord_KeyBytes:
		return nonNull(k.KeyBytes)
	}
	return nil
}

// recordValue returns the value a plain record carries: nil for null (a
// tombstone).
func recordValue(r *quirev1.ProduceRecord) []byte {
	switch v := r.ValueData.(type) {
	case *quirev1.ProduceRecord_Value:
		return nonNull([]byte(v.Value))
	case *quirev1.ProduceRecord_ValueBytes:
		return nonNull(v.ValueBytes)
	}
	return nil
}

// nonNull keeps a set but empty field empty rather than null: the record
// builder writes a nil slice as length -1.
func nonNull(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

func recordHeaders(hs []*quirev1.RecordHeader) []record.RecordHeader {
	if len(hs) == 0 {
		return nil
	}
	out := make([]record.RecordHeader, len(hs))
	for i, h := range hs {
		out[i] = record.RecordHeader{Key: h.Key, Value: h.Value}
	}
	return out
}

// checkRecordFormat rejects a RecordFormat this broker does not know, so a
// client asking for one gets an error rather than a form it did not ask for.
func checkRecordFormat(f quirev1.RecordFormat) error {
	if err := wire.CheckFormat(f); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	return nil
}

// recordAlloc hands out the messages and byte copies of decoded records
// from slabs sized per batch, a few allocations per batch rather than
// several per record. What it hands out never moves: a slab that is full
// is replaced, not grown.
type recordAlloc struct {
	nRecs, nBytes int // the size of the next slabs
	recs          []quirev1.ConsumedRecord
	keys          []quirev1.ConsumedRecord_KeyBytes
	values        []quirev1.ConsumedRecord_ValueBytes
	buf           []byte
}

// reserve sizes the next slabs for a batch of n records in size bytes.
func (a *recordAlloc) reserve(n, size int) { a.nRecs, a.nBytes = max(n, 1), max(size, 1) }

func (a *recordAlloc) record() *quirev1.ConsumedRecord {
	if len(a.recs) == cap(a.recs) {
		a.recs = make([]quirev1.ConsumedRecord, 0, max(a.nRecs, 1))
	}
	a.recs = a.recs[:len(a.recs)+1]
	return &a.recs[len(a.recs)-1]
}

func (a *recordAlloc) keyBytes(b []byte) *quirev1.ConsumedRecord_KeyBytes {
	if len(a.keys) == cap(a.keys) {
		a.keys = make([]quirev1.ConsumedRecord_KeyBytes, 0, max(a.nRecs, 1))
	}
	a.keys = append(a.keys, quirev1.ConsumedRecord_KeyBytes{KeyBytes: a.copy(b)})
	return &a.keys[len(a.keys)-1]
}

func (a *recordAlloc) valueBytes(b []byte) *quirev1.ConsumedRecord_ValueBytes {
	if len(a.values) == cap(a.values) {
		a.values = make([]quirev1.ConsumedRecord_ValueBytes, 0, max(a.nRecs, 1))
	}
	a.values = append(a.values, quirev1.ConsumedRecord_ValueBytes{ValueBytes: a.copy(b)})
	return &a.values[len(a.values)-1]
}

// copy returns a copy of b, never nil (an empty value is not a missing
// one), capped so that appending to it cannot reach its neighbours.
func (a *recordAlloc) copy(b []byte) []byte {
	if a.buf == nil || cap(a.buf)-len(a.buf) < len(b) {
		a.buf = make([]byte, 0, max(a.nBytes, len(b), 1))
	}
	off := len(a.buf)
	a.buf = append(a.buf, b...)
	return a.buf[off:len(a.buf):len(a.buf)]
}

func (a *recordAlloc) consumedRecord(topic string, p, epoch int32, r *record.Record, format quirev1.RecordFormat) *quirev1.ConsumedRecord {
	out := a.record()
	out.Topic, out.Partition, out.Offset, out.TimestampMs, out.LeaderEpoch = topic, p, r.Offset, r.Timestamp, epoch
	asText := format == quirev1.RecordFormat_RECORD_FORMAT_AUTO
	if r.Key != nil {
		if asText && utf8.Valid(r.Key) {
			out.KeyData = &quirev1.ConsumedRecord_Key{Key: string(r.Key)}
		} else {
			out.KeyData = a.keyBytes(r.Key)
		}
	}
	if r.Value != nil {
		if asText && utf8.Valid(r.Value) {
			out.ValueData = &quirev1.ConsumedRecord_Value{Value: string(r.Value)}
		} else {
			out.ValueData = a.valueBytes(r.Value)
		}
	}
	for _, h := range r.Headers {
		out.Headers = append(out.Headers, &quirev1.RecordHeader{Key: h.Key, Value: append([]byte(nil), h.Value...)})
	}
	return out
}

// decodedPartition is one partition's records decoded from a fetch.
type decodedPartition struct {
	records []*quirev1.ConsumedRecord
	next    int64 // the offset to fetch next
}

// decodeFetched decodes the records at or after r.Offset in r's
// batches, at most maxRecords of them. next passes control batches and,
// when every record read was returned or skipped, the last batch read.
func decodeFetched(r fetchResult, maxRecords int, format quirev1.RecordFormat) (decodedPartition, error) {
	out := decodedPartition{next: r.Offset}
	errFull := errors.New("full")
	var alloc recordAlloc
	// Markers are never records for an application; a read_committed
	// fetch's aborted transactions are dropped too.
	aborted := request.NewAbortFilter(r.Aborted)
	err := record.WalkRead(r.Records, func(batch []byte, h record.Header) error {
		if aborted.Skip(&h) {
			out.next = max(out.next, h.NextOffset())
			return nil
		}
		n := min(int(h.NumRecords), maxRecords-len(out.records))
		alloc.reserve(n, len(batch)*max(n, 1)/max(int(h.NumRecords), 1))
		out.records = slices.Grow(out.records, max(n, 0))
		return record.ForEachRecord(batch, func(rec *record.Record) error {
			if rec.Offset < r.Offset {
				return nil
			}
			if len(out.records) >= maxRecords {
				return errFull
			}
			out.records = append(out.records, alloc.consumedRecord(r.Topic, r.Partition, h.PartitionLeaderEpoch, rec, format))
			out.next = rec.Offset + 1
			return nil
		})
	})
	if err != nil && !errors.Is(err, errFull) {
		return decodedPartition{}, fmt.Errorf("%s-%d: %w", r.Topic, r.Partition, err)
	}
	if !errors.Is(err, errFull) && len(r.Records) > 0 {
		out.next = max(out.next, record.NextAfterRead(r.Records))
	}
	return out, nil
}
