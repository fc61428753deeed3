package record

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

// The records checked alongside the CRC (crcCheckRecords): each shape the
// assembly takes, the places where it must stop, and random records it
// reaches. Every batch ends at a guard page, so a read past its end
// crashes the test.

// record builds one record with the given varint widths (overlong where
// wider than needed): lenSize for its length, then timestamp delta,
// offset delta, key and value lengths; key or value nil is null.
func record(ts, od int64, key, value []byte, lenSize, tsSize, odSize, klSize, vlSize int) []byte {
	r := appendVarintSize([]byte{0}, ts, tsSize)
	r = appendVarintSize(r, od, odSize)
	for _, f := range []struct {
		b    []byte
		size int
	}{{key, klSize}, {value, vlSize}} {
		if f.b == nil {
			r = appendVarintSize(r, -1, f.size)
		} else {
			r = append(appendVarintSize(r, int64(len(f.b)), f.size), f.b...)
		}
	}
	r = append(r, 0) // no headers
	return append(appendVarintSize(nil, int64(len(r)), lenSize), r...)
}

func skipWithoutFold(t *testing.T) {
	if !hasFold {
		t.Skip("this CPU has no 512-bit carry-less multiply")
	}
}

// TestCRCCheckRecordsShapes: records of every key and value size class
// (null, empty, one- and two-byte lengths) and one- or two-byte
// timestamp deltas and field lengths are all taken alongside the CRC, up
// to a last record long enough for the CRC to outlast the others.
func TestCRCCheckRecordsShapes(t *testing.T) {
	skipWithoutFold(t)
	var a alongside
	defer a.guard.release()
	fill := func(n int) []byte { return bytes.Repeat([]byte{0xff}, n) }
	const n = 70 // offset deltas of one and two bytes
	for _, ksz := range []int{-1, 0, 3, 63, 64, 300} {
		for _, vsz := range []int{-1, 0, 3, 63, 64, 300} {
			for _, sizes := range [][3]int{{1, 1, 1}, {2, 1, 1}, {1, 2, 1}, {1, 1, 2}, {2, 2, 2}} {
				ts, kl, vl := sizes[0], sizes[1], sizes[2]
				var key, value []byte
				if ksz >= 0 {
					key = fill(ksz)
				}
				if vsz >= 0 {
					value = fill(vsz)
				}
				if (key == nil && kl == 2) || (value == nil && vl == 2) {
					continue // an overlong null is left to checkRecords
				}
				var body []byte
				for i := range n - 1 {
					body = append(body, record(5, int64(i), key, value, 1, ts, 1, kl, vl)...)
				}
				body = append(body, record(5, n-1, nil, fill(128*n), 2, 1, 1, 1, 2)...)
				b, p, i := a.take(t, body, n)
				if i < n-1 {
					t.Errorf("key %d, value %d, widths %v: %d of %d records taken", ksz, vsz, sizes, i, n)
				}
				if err := checkRecordsFrom(b, p, i, n); err != nil {
					t.Errorf("key %d, value %d, widths %v: %v", ksz, vsz, sizes, err)
				}
			}
		}
	}
}

// TestCRCCheckRecordsStopsAtTheEnd: a short last record right before the
// guard page, and bodies cut anywhere in their last record, which claims
// bytes that are not there.
func TestCRCCheckRecordsStopsAtTheEnd(t *testing.T) {
	skipWithoutFold(t)
	var a alongside
	defer a.guard.release()
	var body []byte
	for i := range 6 {
		body = append(body, record(0, int64(i), nil, make([]byte, 300), 2, 1, 1, 1, 2)...)
	}
	for cut := 1; cut < 40; cut++ {
		b, p, i := a.take(t, body[:len(body)-cut], 6)
		if i > 5 {
			t.Fatalf("cut by %d: took %d records", cut, i)
		}
		if err := checkRecordsFrom(b, p, i, 6); err == nil {
			t.Fatalf("cut by %d: accepted", cut)
		}
	}
	for v := -1; v < 3; v++ {
		var value []byte
		if v >= 0 {
			value = make([]byte, v)
		}
		short := append(bytes.Clone(body[:len(body)-len(record(0, 5, nil, make([]byte, 300), 2, 1, 1, 1, 2))]), record(0, 5, nil, value, 1, 1, 1, 1, 1)...)
		if b, p, i := a.take(t, short, 6); checkRecordsFrom(b, p, i, 6) != nil {
			t.Fatalf("value %d: a short last record refused", v)
		}
	}
}

// TestCRCCheckRecordsThreeByteOffsetDelta: the assembly stops at record
// 8192, the first whose offset delta takes three bytes, and never reads
// one as two: record 8192 here, 0x80 0x80 0x01 read as two bytes, would
// leave a whole record behind it.
func TestCRCCheckRecordsThreeByteOffsetDelta(t *testing.T) {
	skipWithoutFold(t)
	var a alongside
	defer a.guard.release()
	var good []byte
	for i := range 8192 {
		good = append(good, record(0, int64(i), nil, make([]byte, 130), 2, 1, 1, 1, 2)...)
	}
	body := append(bytes.Clone(good), record(0, 8192, nil, make([]byte, 130), 2, 1, 3, 1, 2)...)
	if _, _, i := a.take(t, body, 8193); i != 8192 {
		t.Fatalf("took %d records, want 8192", i)
	}
	bad := append(bytes.Clone(good), 14, 0, 0, 0x80, 0x80, 0x01, 0x01, 0x00)
	for i := 8193; i < 8200; i++ {
		bad = append(bad, record(0, int64(i), nil, make([]byte, 130), 2, 1, 3, 1, 2)...)
	}
	b, p, i := a.take(t, bad, 8200)
	if got, want := checkRecordsFrom(b, p, i, 8200), checkRecordsSlow(bad, 8200); want == nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// TestCRCCheckRecordsCandidates: a random or mutated record after a few
// records the assembly takes (so that it reaches the candidate at either
// parity of i): what it takes is well formed (alongside checks), and the
// answer is the general parser's.
func TestCRCCheckRecordsCandidates(t *testing.T) {
	skipWithoutFold(t)
	var a alongside
	defer a.guard.release()
	rng := rand.New(rand.NewPCG(7, 8))
	pick := func() byte {
		switch rng.IntN(8) {
		case 0:
			return 0
		case 1:
			return 1
		case 2:
			return 0x80 | byte(rng.IntN(4))
		case 3:
			return byte(rng.IntN(256))
		case 4:
			return byte(2 * rng.IntN(20))
		case 5:
			return 0x81
		default:
			return byte(rng.IntN(16))
		}
	}
	taken := 0
	const tries = 40000
	for range tries {
		pad := 2 + rng.IntN(2)
		var body []byte
		for i := range pad {
			body = append(body, record(0, int64(i), nil, make([]byte, 260), 2, 1, 1, 1, 2)...)
		}
		var c []byte
		if rng.IntN(2) == 0 {
			var key, value []byte
			if rng.IntN(3) > 0 {
				key = make([]byte, rng.IntN(70))
			}
			if rng.IntN(3) > 0 {
				value = make([]byte, rng.IntN(70))
			}
			c = record(int64(rng.IntN(200)-100), int64(pad), key, value, 1+rng.IntN(2), 1+rng.IntN(2), 1+rng.IntN(2), 1+rng.IntN(2), 1+rng.IntN(2))
			for range 1 + rng.IntN(3) {
				pos := rng.IntN(min(len(c), 20))
				switch rng.IntN(4) {
				case 0:
					c[pos] = pick()
				case 1:
					c[pos] ^= 0x80
				case 2:
					c[pos]++
				default:
					c[pos]--
				}
			}
		} else {
			c = make([]byte, 6+rng.IntN(20))
			for k := range c {
				c[k] = pick()
			}
			c[0], c[3] = byte(2*rng.IntN(30)), byte(2*pad)
		}
		body = append(body, c...)
		n := int32(pad + 1)
		if rng.IntN(2) == 0 {
			for i := range 3 {
				body = append(body, record(0, int64(pad+1+i), nil, make([]byte, 200), 2, 1, 1, 1, 2)...)
			}
			n += 3
		}
		b, p, i := a.take(t, body, n)
		if got, want := checkRecordsFrom(b, p, i, n), checkRecordsSlow(body, n); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("record %x after %d: got %v, want %v", c, pad, got, want)
		}
		if i > int32(pad) {
			taken++
		}
	}
	if taken < tries/20 {
		t.Fatalf("the assembly took the candidate in only %d of %d tries", taken, tries)
	}
}

// alongside runs crcCheckRecords on a batch around body that ends at a
// guard page (reading past it crashes). It fails the test if the CRC
// differs from CRC's, or if what it took is not i well formed records in
// body[:p]; it returns the batch's copy of body and where it stopped.
type alongside struct{ guard guardedBuf }

func (a *alongside) take(t testing.TB, body []byte, n int32) ([]byte, int, int32) {
	t.Helper()
	if len(a.guard.b) < HeaderSize+len(body) {
		a.guard.release()
		a.guard = newGuarded(t, max(HeaderSize+len(body), 1<<20))
	}
	batch := a.guard.b[len(a.guard.b)-HeaderSize-len(body):]
	clear(batch[:HeaderSize])
	copy(batch[HeaderSize:], body)
	body = batch[HeaderSize:]
	crc, p, i := crcCheckRecords(batch, n)
	if want := CRC(batch); crc != want {
		t.Fatalf("CRC %08x alongside the records, %08x alone", crc, want)
	}
	if i < 0 || i > max(n, 0) || p < 0 || p > len(body) {
		t.Fatalf("stopped at record %d, byte %d, of %d records in %d bytes", i, p, n, len(body))
	}
	if err := checkRecordsSlow(body[:p], i); err != nil {
		t.Fatalf("the %d records it took, in %d bytes: %v", i, p, err)
	}
	return body, p, i
}

// fusedCheck returns a check of body as validate makes it on a producer's
// batch: crcCheckRecords (the CRC with records checked alongside, see
// alongside), then checkRecordsFrom where it stopped.
func fusedCheck(tb testing.TB) func(t testing.TB, body []byte, n int32) error {
	a := new(alongside)
	tb.Cleanup(func() { a.guard.release() })
	return func(t testing.TB, body []byte, n int32) error {
		t.Helper()
		if foldablePrefix(HeaderSize+len(body)-offAttributes) == 0 {
			return checkRecords(body, n)
		}
		body, p, i := a.take(t, body, n)
		return checkRecordsFrom(body, p, i, n)
	}
}

// TestCRCCheckRecordsTakesCommonRecords: on a batch of the usual shape,
// the records are checked alongside the CRC until the CRC is done, not
// left to checkRecords.
func TestCRCCheckRecordsTakesCommonRecords(t *testing.T) {
	skipWithoutFold(t)
	batch := benchValidateBatch()
	h, _ := ParseHeader(batch)
	crc, p, i := crcCheckRecords(batch, h.NumRecords)
	if crc != h.CRC {
		t.Fatalf("CRC %08x, batch says %08x", crc, h.CRC)
	}
	// Half a 256-byte step per record: the CRC is done when about
	// len/128 records are checked.
	if want := int32(len(batch)/128) - 4; i < want || i > h.NumRecords {
		t.Fatalf("%d of %d records checked alongside the CRC, want at least %d", i, h.NumRecords, want)
	}
	if err := checkRecordsSlow(batch[HeaderSize:HeaderSize+p], i); err != nil {
		t.Fatal(err)
	}
}

// TestCRCCheckRecordsThenFraming: Validate (framing only, for bytes a
// leader has checked) answers the same whether the records before p were
// checked alongside the CRC or not.
func TestCRCCheckRecordsThenFraming(t *testing.T) {
	skipWithoutFold(t)
	rng := rand.New(rand.NewPCG(5, 6))
	for r := 0; r < 2000; r++ {
		n := 1 + rng.IntN(200)
		body := randomRecords(rng, nil, n, 9000, []float64{0, 0.001, 0.01, 0.1}[r%4])
		batch := append(make([]byte, HeaderSize), body...)
		if len(batch)-offAttributes < minFold {
			continue
		}
		for _, m := range []int32{int32(n), int32(n) + 1, int32(n) - 1} {
			_, p, i := crcCheckRecords(batch, m)
			got, want := checkFramingFrom(body, p, i, m), checkFramingFrom(body, 0, 0, m)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("%d records claimed, %d bytes: %v after %d records alongside the CRC, %v without", m, len(body), got, i, want)
			}
		}
	}
}
