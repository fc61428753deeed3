package bufpool

import (
	"testing"

	"google.golang.org/grpc/mem"
)

// Every Get has the length asked for and room for it, whatever buffer the
// pool had; a buffer put back serves the sizes of its class and below.
func TestPoolGetPut(t *testing.T) {
	var p Pool
	for _, n := range []int{0, 1, 255, 256, 257, 4096, 16384, 16385, 1 << 20, 1<<20 + 1, 1 << 24, 1<<24 + 1} {
		b := p.Get(n)
		if len(*b) != n || cap(*b) < n {
			t.Fatalf("Get(%d): len %d cap %d", n, len(*b), cap(*b))
		}
		for i := range *b {
			(*b)[i] = 0xff
		}
		p.Put(b)
		again := p.Get(n)
		if len(*again) != n || cap(*again) < n {
			t.Fatalf("Get(%d) after Put: len %d cap %d", n, len(*again), cap(*again))
		}
		p.Put(again)
	}
	// Buffers not made by the pool, of any capacity, go in the class they
	// can serve in full.
	for _, c := range []int{100, 300, 5000, 1<<20 - 1, 3 << 20} {
		b := make([]byte, 10, c)
		p.Put(&b)
		for _, n := range []int{1, c / 2, c} {
			g := p.Get(n)
			if len(*g) != n || cap(*g) < n {
				t.Fatalf("Get(%d) after a Put of cap %d: len %d cap %d", n, c, len(*g), cap(*g))
			}
		}
	}
}

// BenchmarkPoolFrame is what gRPC does per HTTP/2 data frame it reads: a
// 16 KiB buffer from the pool, filled, given back. gRPC's default pool
// zeroes it on the way out.
func BenchmarkPoolFrame(b *testing.B) {
	src := make([]byte, 16384)
	run := func(b *testing.B, p mem.BufferPool) {
		b.SetBytes(int64(len(src)))
		b.ReportAllocs()
		for b.Loop() {
			buf := p.Get(len(src))
			copy(*buf, src)
			p.Put(buf)
		}
	}
	b.Run("bufpool", func(b *testing.B) { run(b, &Pool{}) })
	b.Run("grpc-default", func(b *testing.B) { run(b, mem.DefaultBufferPool()) })
}
