package record

import (
	"hash/crc32"
	"math/bits"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// minFold is the shortest message worth folding (castagnoliFold,
// crcCheckRecords): below it, setting up the vector registers costs more
// than it saves.
const minFold = 512

// crc32c is crc32.Update(crc, castagnoli, p), on a faster path where the
// CPU has one (crc_amd64.go). Every byte a producer sends is checksummed
// on the leader and again on each follower, so the CRC is a fixed share
// of the append path.
func crc32c(crc uint32, p []byte) uint32 {
	if n := foldablePrefix(len(p)); n > 0 {
		crc = castagnoliFold(crc, p[:n])
		p = p[n:]
	}
	return crc32.Update(crc, castagnoli, p)
}

// foldKeys are the constants that fold 128-bit lanes of the message
// forward over a distance while keeping its CRC-32C: the CRC is linear, so
// a 128-bit lane L at distance d bytes before a later lane can be replaced
// by L·x^(8d) mod P added into that lane. With the bit-reflected operands
// of a carry-less multiply, the low and high 64 bits of L take
// x^(8d+31) and x^(8d-33) mod P, bit-reversed; record's tests check the
// whole fold against hash/crc32 on every length and alignment.
type foldKeys struct {
	by256 [2]uint64 // lane to the same lane of the next 256-byte block
	by64  [2]uint64 // lane to the same lane of the next 64-byte block
	// lanes folds the four lanes of a 64-byte block onto its last: by
	// 48, 32 and 16 bytes, and 0 (the last lane is added as it is).
	lanes [8]uint64
}

var keys = func() foldKeys {
	pair := func(d int) [2]uint64 {
		return [2]uint64{
			uint64(bits.Reverse32(xPowModP(8*d + 31))),
			uint64(bits.Reverse32(xPowModP(8*d - 33))),
		}
	}
	var k foldKeys
	k.by256, k.by64 = pair(256), pair(64)
	for i, d := range []int{48, 32, 16} {
		p := pair(d)
		k.lanes[2*i], k.lanes[2*i+1] = p[0], p[1]
	}
	return k
}()

// xPowModP returns x^e mod the Castagnoli polynomial, not reflected.
func xPowModP(e int) uint32 {
	const p = 0x1EDC6F41 // x^32 is implicit
	r := uint32(1)
	for range e {
		top := r >> 31
		r <<= 1
		r ^= p & -top
	}
	return r
}
