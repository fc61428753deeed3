package record

import (
	"hash/crc32"
	"math/rand"
	"testing"
)

// TestCRC32C checks crc32c against hash/crc32 over every length up to a
// few folds' worth, at every alignment within a cache line, from several
// starting CRCs: each length exercises a different split between the
// 256-byte, 64-byte and byte-wise paths.
func TestCRC32C(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	buf := make([]byte, 4096+64)
	r.Read(buf)
	for _, init := range []uint32{0, 0xffffffff, r.Uint32()} {
		for n := 0; n <= 2048; n++ {
			off := n % 64
			p := buf[off : off+n]
			if got, want := crc32c(init, p), crc32.Update(init, castagnoli, p); got != want {
				t.Fatalf("init %08x, %d bytes at %d: %08x, hash/crc32 %08x", init, n, off, got, want)
			}
		}
	}
	for range 200 {
		n, off := r.Intn(len(buf)-64), r.Intn(64)
		p, init := buf[off:off+n], r.Uint32()
		if got, want := crc32c(init, p), crc32.Update(init, castagnoli, p); got != want {
			t.Fatalf("init %08x, %d bytes at %d: %08x, hash/crc32 %08x", init, n, off, got, want)
		}
	}
}

// TestCastagnoliFold calls the fold directly, on the shortest input it
// takes and on inputs that leave 0 to 3 64-byte blocks after the 256-byte
// loop, so that a machine without it fails loudly rather than passing by
// falling back.
func TestCastagnoliFold(t *testing.T) {
	skipWithoutFold(t)
	r := rand.New(rand.NewSource(2))
	for _, n := range []int{256, 320, 384, 448, 512, 1024, 1088, 110_000 &^ 63} {
		p := make([]byte, n)
		r.Read(p)
		init := r.Uint32()
		if got, want := castagnoliFold(init, p), crc32.Update(init, castagnoli, p); got != want {
			t.Fatalf("%d bytes: %08x, hash/crc32 %08x", n, got, want)
		}
	}
}

func TestFoldKeysMatchKnownConstants(t *testing.T) {
	// The widely published keys for folding CRC-32C by 64 bytes: a check
	// of xPowModP and the exponents that does not go through the fold.
	if keys.by64 != [2]uint64{0x740eef02, 0x9e4addf8} {
		t.Fatalf("by64 keys %#x", keys.by64)
	}
}

func FuzzCRC32C(f *testing.F) {
	f.Add(uint32(0), make([]byte, 600))
	f.Add(uint32(0xdeadbeef), []byte("123456789"))
	f.Fuzz(func(t *testing.T, init uint32, p []byte) {
		if got, want := crc32c(init, p), crc32.Update(init, castagnoli, p); got != want {
			t.Fatalf("init %08x, %d bytes: %08x, hash/crc32 %08x", init, len(p), got, want)
		}
	})
}
