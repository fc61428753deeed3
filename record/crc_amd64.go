//go:build !purego

package record

import (
	"hash/crc32"

	"golang.org/x/sys/cpu"
)

// hasFold reports whether castagnoliFold can use 512-bit carry-less
// multiplies (VPCLMULQDQ), about twice the throughput of the SSE4.2 CRC32
// instruction that hash/crc32 uses.
var hasFold = cpu.X86.HasAVX512F && cpu.X86.HasAVX512VPCLMULQDQ

// foldablePrefix is how many leading bytes of an n-byte message
// castagnoliFold takes: a multiple of 64, or 0.
func foldablePrefix(n int) int {
	if !hasFold || n < minFold {
		return 0
	}
	return n &^ 63
}

func castagnoliFold(crc uint32, p []byte) uint32 {
	return castagnoliAVX512(crc, p, &keys)
}

// castagnoliAVX512 is crc32.Update(crc, castagnoli, p) for len(p) a
// multiple of 64 and at least 256.
//
//go:noescape
func castagnoliAVX512(crc uint32, p []byte, k *foldKeys) uint32

// crcCheckRecords returns the CRC of an uncompressed batch (as CRC) and
// checks its records alongside, as checkRecords' fast path, up to the
// first record not of that shape: body[:p] holds i well formed records,
// and checkRecordsFrom goes on from there. It needs a foldable prefix from
// offAttributes (foldablePrefix(len(batch)-offAttributes) > 0).
func crcCheckRecords(batch []byte, n int32) (crc uint32, p int, i int32) {
	region := batch[offAttributes:]
	m := foldablePrefix(len(region))
	crc, p, ii := castagnoliCheckAVX512(region[:m], batch[HeaderSize:], int(n), &keys)
	return crc32.Update(crc, castagnoli, region[m:]), p, int32(ii)
}

//go:noescape
func castagnoliCheckAVX512(region, body []byte, n int, k *foldKeys) (crc uint32, p, i int)
