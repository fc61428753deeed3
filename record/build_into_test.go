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
