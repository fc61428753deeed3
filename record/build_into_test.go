package record

import (
	"bytes"
	"testing"
)

func TestBuildPartsMatchesBuild(t *testing.T) {
	for _, codec := range []Codec{None, Gzip, Snappy, LZ4, Zstd} {
		for _, n := range []int{0, 1, 7, 500} {
			b := NewBuilder(codec)
			b.SetProducer(42, 3, 17)
			for i := 0; i < n; i++ {
				b.Append(int64(1000+i), []byte{byte(i)}, bytes.Repeat([]byte{byte(i)}, i%50), []RecordHeader{{Key: "h", Value: []byte{1}}})
			}
			want := b.Build()
			prefix := []byte("prefix")
			hdr, body := b.BuildParts(prefix)
			if !bytes.Equal(hdr[:len(prefix)], prefix) || len(hdr) != len(prefix)+HeaderSize {
				t.Fatalf("%v/%d: header %d bytes after the prefix, want %d", codec, n, len(hdr)-len(prefix), HeaderSize)
			}
			got := append(append([]byte(nil), hdr[len(prefix):]...), body...)
			if !bytes.Equal(got, want) {
				t.Fatalf("%v/%d: BuildParts differs from Build", codec, n)
			}
			if n > 0 {
				if _, err := ValidateDeep(got); err != nil {
					t.Fatalf("%v/%d: %v", codec, n, err)
				}
			}
		}
	}
}

// A batch whose producer fields are rewritten in place is the batch built
// with them, CRC included.
func TestBuildPartsSetProducer(t *testing.T) {
	for _, codec := range []Codec{None, Zstd} {
		b := NewBuilder(codec)
		for i := 0; i < 5; i++ {
			b.Append(int64(1000+i), nil, []byte("value"), nil)
		}
		hdr, body := b.BuildParts(nil)
		SetProducerParts(hdr, body, 9, 2, 1<<30)
		got := append(append([]byte(nil), hdr...), body...)
		b.SetProducer(9, 2, 1<<30)
		if want := b.Build(); !bytes.Equal(got, want) {
			t.Fatalf("%v: rewritten batch differs from the one built with the fields", codec)
		}
		h, err := ValidateDeep(got)
		if err != nil || h.ProducerID != 9 || h.ProducerEpoch != 2 || h.BaseSequence != 1<<30 {
			t.Fatalf("%v: %+v %v", codec, h, err)
		}
	}
}
