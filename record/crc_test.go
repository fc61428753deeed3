package record

import (
	"encoding/binary"
	"testing"
)

// TestCRC32CCheckValue: the standard check value of CRC-32C (Castagnoli),
// the CRC of "123456789", and that a CRC taken in two pieces is the CRC of
// the whole, as BuildInto takes it (header, then records).
func TestCRC32CCheckValue(t *testing.T) {
	if got := crc32c(0, []byte("123456789")); got != 0xe3069283 {
		t.Fatalf("crc32c(123456789) = %08x, want e3069283", got)
	}
	p := []byte("the quick brown fox jumps over the lazy dog")
	for cut := range len(p) + 1 {
		if got, want := crc32c(crc32c(0, p[:cut]), p[cut:]), crc32c(0, p); got != want {
			t.Fatalf("cut at %d: %08x, whole %08x", cut, got, want)
		}
	}
}

// TestCRCCoversAttributesToEnd: CRC covers bytes [21, end) of a batch and
// nothing before, so the leader can stamp base offset and epoch in place.
func TestCRCCoversAttributesToEnd(t *testing.T) {
	batch := buildTest(t, None, 10)
	h, err := ParseHeader(batch)
	if err != nil {
		t.Fatal(err)
	}
	if got := CRC(batch); got != h.CRC {
		t.Fatalf("CRC %08x, header says %08x", got, h.CRC)
	}
	binary.BigEndian.PutUint64(batch, 12345)
	binary.BigEndian.PutUint32(batch[12:], 7)
	if got := CRC(batch); got != h.CRC {
		t.Fatalf("CRC %08x after stamping offset and epoch, want %08x", got, h.CRC)
	}
	batch[len(batch)-1] ^= 1
	if got := CRC(batch); got == h.CRC {
		t.Fatal("CRC unchanged by a flipped last byte")
	}
}
