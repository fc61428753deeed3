package record

import (
	"errors"
	"fmt"
	"testing"
)

// FuzzDecodeBatch feeds arbitrary bytes to the decoders: they must never
// panic, every error must be a corrupt-batch error, and a batch that
// validates must iterate cleanly.
func FuzzDecodeBatch(f *testing.F) {
	for _, c := range []Codec{None, Gzip, Snappy, LZ4, Zstd} {
		f.Add(buildTest(f, c, 3))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := Validate(data); err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
		} else {
			// A batch that frames cleanly may still hold a bad record:
			// iterating must fail cleanly, never panic.
			_ = ForEachRecord(data, func(*Record) error { return nil })
		}
		h, err := ValidateDeep(data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			_ = ForEachRecord(data, func(*Record) error { return nil })
			_ = SplitBatches(data, func([]byte, Header) error { return nil })
			return
		}
		n := int32(0)
		if err := ForEachRecord(data, func(r *Record) error {
			if r.OffsetDelta != n {
				t.Fatalf("offset delta %d at %d", r.OffsetDelta, n)
			}
			n++
			return nil
		}); err != nil {
			t.Fatalf("valid batch fails to iterate: %v", err)
		}
		if n != h.NumRecords {
			t.Fatalf("%d records, header says %d", n, h.NumRecords)
		}
	})
}

// FuzzCheckRecords: checkRecords, fast path and all, answers as checkRecord
// does record by record, error text included, for any body and count.
func FuzzCheckRecords(f *testing.F) {
	for _, n := range []int{1, 3, 70} {
		f.Add(buildTest(f, None, n)[HeaderSize:], int32(n))
	}
	bl := NewBuilder(None)
	for i := range 70 {
		bl.Append(int64(i*40), nil, make([]byte, 60+i%10), nil)
	}
	f.Add(bl.Build()[HeaderSize:], int32(70))
	bl.Reset()
	for i := range 70 {
		hdrs := []RecordHeader{{Key: "trace", Value: make([]byte, 16)}, {Key: "", Value: nil}, {Key: "ct", Value: make([]byte, i)}}
		bl.Append(int64(i*40), []byte("k"), make([]byte, 60+i%10), hdrs[:1+i%3])
	}
	f.Add(bl.Build()[HeaderSize:], int32(70))
	f.Fuzz(func(t *testing.T, body []byte, n int32) {
		want := checkRecordsSlow(body, n)
		if got := checkRecords(body, n); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("got %v, want %v", got, want)
		}
	})
}
