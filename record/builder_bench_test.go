package record

import "testing"

// BenchmarkBuilderFill fills a new builder (no buffer yet, as a producer's
// batch for a partition it had no batch for) with 1 MiB of 100-byte
// records, the client's default batch size: the cost of growing the
// buffer shows beside that of encoding.
func BenchmarkBuilderFill(b *testing.B) {
	v := make([]byte, 100)
	b.SetBytes(1 << 20)
	b.ReportAllocs()
	for b.Loop() {
		bld := NewBuilder(None)
		for bld.EstimatedSize()+130 < 1<<20 {
			bld.Append(1, nil, v, nil)
		}
	}
}
