package record

import (
	"encoding/binary"
	"errors"
	"math"
	"runtime"
	"testing"
)

// A batch claiming 2^31-1 records (or 2^31, negative as an int32), its
// CRC good, is refused by every check and walk without anything sized by
// the claim: under 1 MiB a check (a compressed one's decompression buffer
// is 64 KiB), where a record slot apiece would be gigabytes.
func TestBatchClaimingTooManyRecordsAllocatesLittle(t *testing.T) {
	for _, codec := range []Codec{None, Gzip, Zstd} {
		b := NewBuilder(codec)
		b.Append(1, []byte("k"), []byte("v"), nil)
		for _, claim := range []int32{math.MaxInt32, math.MinInt32} {
			batch := b.Build()
			binary.BigEndian.PutUint32(batch[offLastOffsetDelta:], uint32(claim-1))
			binary.BigEndian.PutUint32(batch[offRecordCount:], uint32(claim))
			binary.BigEndian.PutUint32(batch[offCRC:], CRC(batch))
			if _, err := Validate(batch); err == nil {
				t.Fatalf("%v batch claiming %d records passed Validate", codec, claim)
			}
			if _, err := ValidateDeep(batch); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%v batch claiming %d records: ValidateDeep %v, want ErrCorrupt", codec, claim, err)
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			const runs = 20
			for range runs {
				_, _ = ValidateDeep(batch)
				_ = ForEachRecord(batch, func(*Record) error { return nil })
			}
			runtime.ReadMemStats(&after)
			if per := (after.TotalAlloc - before.TotalAlloc) / runs; per > 1<<20 {
				t.Fatalf("%v batch claiming %d records: %d bytes allocated a check", codec, claim, per)
			}
		}
	}
}
