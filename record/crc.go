package record

import "hash/crc32"

// castagnoli is hash/crc32's CRC-32C table; on amd64 and arm64 hash/crc32
// computes it with the CPU's CRC32 instructions (SSE4.2 and carry-less
// multiply on amd64), so every byte produced, checksummed on the leader and
// again on each follower, costs a fixed small share of the append path.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// crc32c is crc32.Update(crc, castagnoli, p).
func crc32c(crc uint32, p []byte) uint32 {
	return crc32.Update(crc, castagnoli, p)
}
