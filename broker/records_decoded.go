package broker

import (
	"errors"
	"fmt"
	"unicode/utf8"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/record"
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
	switch f {
	case quirev1.RecordFormat_RECORD_FORMAT_AUTO, quirev1.RecordFormat_RECORD_FORMAT_BYTES:
		return nil
	}
	return fmt.Errorf("%w: record format %d (want RECORD_FORMAT_AUTO or RECORD_FORMAT_BYTES)", ErrInvalidRequest, f)
}

func consumedRecord(topic string, p, epoch int32, r *record.Record, format quirev1.RecordFormat) *quirev1.ConsumedRecord {
	out := &quirev1.ConsumedRecord{Topic: topic, Partition: p, Offset: r.Offset, TimestampMs: r.Timestamp, LeaderEpoch: epoch}
	asText := format == quirev1.RecordFormat_RECORD_FORMAT_AUTO
	if r.Key != nil {
		if asText && utf8.Valid(r.Key) {
			out.KeyData = &quirev1.ConsumedRecord_Key{Key: string(r.Key)}
		} else {
			out.KeyData = &quirev1.ConsumedRecord_KeyBytes{KeyBytes: append([]byte{}, r.Key...)}
		}
	}
	if r.Value != nil {
		if asText && utf8.Valid(r.Value) {
			out.ValueData = &quirev1.ConsumedRecord_Value{Value: string(r.Value)}
		} else {
			out.ValueData = &quirev1.ConsumedRecord_ValueBytes{ValueBytes: append([]byte{}, r.Value...)}
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

// decodeFetched decodes the records at or after r.spec.offset in r's
// batches, at most maxRecords of them. next passes control batches and,
// when every record read was returned or skipped, the last batch read.
func decodeFetched(r fetchResult, maxRecords int, format quirev1.RecordFormat) (decodedPartition, error) {
	s := r.spec
	out := decodedPartition{next: s.offset}
	errFull := errors.New("full")
	err := walkBatches(r.batches, func(batch []byte, h record.Header) error {
		if h.Control() {
			out.next = max(out.next, h.NextOffset())
			return nil
		}
		return record.ForEachRecord(batch, func(rec *record.Record) error {
			if rec.Offset < s.offset {
				return nil
			}
			if len(out.records) >= maxRecords {
				return errFull
			}
			out.records = append(out.records, consumedRecord(s.topic, s.partition, h.PartitionLeaderEpoch, rec, format))
			out.next = rec.Offset + 1
			return nil
		})
	})
	if err != nil && !errors.Is(err, errFull) {
		return decodedPartition{}, fmt.Errorf("%s-%d: %w", s.topic, s.partition, err)
	}
	if !errors.Is(err, errFull) && len(r.batches) > 0 {
		out.next = max(out.next, lastBatchNext(r.batches))
	}
	return out, nil
}
