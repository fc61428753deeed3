package record

import (
	"bytes"
	"errors"
	"testing"
)

type kept struct {
	offset, ts int64
	key, value []byte
	headers    int
}

func records(t testing.TB, batch []byte) []kept {
	t.Helper()
	var out []kept
	if err := ForEachRecord(batch, func(r *Record) error {
		out = append(out, kept{r.Offset, r.Timestamp, append([]byte(nil), r.Key...), append([]byte(nil), r.Value...), len(r.Headers)})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// A filtered batch keeps its header (offsets, timestamps, producer
// fields, codec) and its kept records byte for byte: their offsets,
// timestamps, keys, values and headers; Validate takes it, ValidateDeep
// (a producer's batch) does not. All kept: the batch itself; none: nothing,
// and EmptyBatch makes a valid batch of the header alone.
func TestFilterBatch(t *testing.T) {
	t.Parallel()
	for _, c := range []Codec{None, Gzip, Snappy, LZ4, Zstd} {
		b := NewBuilder(c)
		b.SetProducer(7, 1, 40)
		for i := 0; i < 6; i++ {
			b.Append(1000+int64(i*3), []byte{'k', byte('0' + i)}, []byte{byte(i)}, []RecordHeader{{Key: "h", Value: []byte{byte(i)}}})
		}
		batch := b.Build()
		SetBaseOffset(batch, 100)
		h, _ := ParseHeader(batch)
		all := records(t, batch)
		var f Filter
		out, n, total, err := f.Batch(nil, batch, func(r *Record) bool { return r.Offset%2 == 1 })
		if err != nil || n != 3 || total != 6 {
			t.Fatalf("%v: kept %d of %d: %v", c, n, total, err)
		}
		nh, err := Validate(out)
		if err != nil {
			t.Fatalf("%v: the filtered batch does not validate: %v", c, err)
		}
		if _, err := ValidateDeep(out); !errors.Is(err, ErrRecordCount) {
			t.Fatalf("%v: ValidateDeep took a sparse batch: %v", c, err)
		}
		if nh.BaseOffset != 100 || nh.LastOffsetDelta != 5 || nh.NumRecords != 3 || nh.Codec() != c ||
			nh.BaseTimestamp != h.BaseTimestamp || nh.MaxTimestamp != h.MaxTimestamp ||
			nh.ProducerID != 7 || nh.ProducerEpoch != 1 || nh.BaseSequence != 40 {
			t.Fatalf("%v: header %+v, was %+v", c, nh, h)
		}
		got := records(t, out)
		for i, r := range got {
			w := all[2*i+1]
			if r.offset != w.offset || r.ts != w.ts || !bytes.Equal(r.key, w.key) || !bytes.Equal(r.value, w.value) || r.headers != 1 {
				t.Fatalf("%v: record %d %+v, want %+v", c, i, r, w)
			}
		}
		if out, n, _, _ := f.Batch(nil, batch, func(*Record) bool { return true }); n != 6 || !bytes.Equal(out, batch) {
			t.Fatalf("%v: all kept, but the batch changed", c)
		}
		if out, n, _, _ := f.Batch(nil, batch, func(*Record) bool { return false }); n != 0 || len(out) != 0 {
			t.Fatalf("%v: none kept, %d bytes appended", c, len(out))
		}
		empty := EmptyBatch(nil, batch)
		eh, err := Validate(empty)
		if err != nil || eh.NumRecords != 0 || eh.LastOffsetDelta != 5 || eh.ProducerID != 7 || eh.Codec() != None || len(empty) != HeaderSize {
			t.Fatalf("%v: empty batch %+v: %v", c, eh, err)
		}
		if len(records(t, empty)) != 0 {
			t.Fatalf("%v: the empty batch has records", c)
		}
	}
}

// FuzzFilterBatch: any batch Validate takes can be filtered (every other
// record kept) into a batch Validate takes again, holding exactly those
// records; no input panics.
func FuzzFilterBatch(f *testing.F) {
	for _, c := range []Codec{None, Gzip, Snappy, LZ4, Zstd} {
		f.Add(buildTest(f, c, 5))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var fl Filter
		i := 0
		out, n, _, err := fl.Batch(nil, data, func(*Record) bool { i++; return i%2 == 1 })
		if _, verr := Validate(data); verr != nil || err != nil || n == 0 {
			return
		}
		h, err := Validate(out)
		if err != nil {
			t.Fatalf("filtered batch invalid: %v", err)
		}
		if int(h.NumRecords) != n {
			t.Fatalf("%d records kept, header says %d", n, h.NumRecords)
		}
		if _, err := Validate(EmptyBatch(nil, data)); err != nil {
			t.Fatalf("empty batch invalid: %v", err)
		}
	})
}
