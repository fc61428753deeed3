//go:build !amd64 || purego

package record

const hasFold = false

func foldablePrefix(int) int { return 0 }

func castagnoliFold(crc uint32, _ []byte) uint32 { return crc }

// crcCheckRecords is the CRC alone here: it checks no records.
func crcCheckRecords(batch []byte, _ int32) (uint32, int, int32) { return CRC(batch), 0, 0 }
