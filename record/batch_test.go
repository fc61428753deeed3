package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/quirelog/quire/internal/testdepth"
)

func buildTest(t testing.TB, c Codec, n int) []byte {
	t.Helper()
	b := NewBuilder(c)
	for i := 0; i < n; i++ {
		var hdrs []RecordHeader
		if i%3 == 0 {
			hdrs = []RecordHeader{{Key: "h", Value: []byte{byte(i)}}, {Key: "null", Value: nil}}
		}
		var key []byte
		if i%2 == 0 {
			key = []byte(fmt.Sprintf("key-%d", i))
		}
		b.Append(1000+int64(i*7%5), key, bytes.Repeat([]byte{byte(i)}, i%50), hdrs)
	}
	return b.Build()
}

func TestBatchRoundTripCodecs(t *testing.T) {
	for _, c := range []Codec{None, Gzip, Snappy, LZ4, Zstd} {
		t.Run(c.String(), func(t *testing.T) {
			batch := buildTest(t, c, 100)
			h, err := Validate(batch)
			if err != nil {
				t.Fatal(err)
			}
			if h.Codec() != c || h.NumRecords != 100 || h.LastOffsetDelta != 99 || h.Size() != len(batch) {
				t.Fatalf("header %+v", h)
			}
			if h.BaseTimestamp != 1000 || h.MaxTimestamp != 1004 || h.ProducerID != -1 || h.ProducerEpoch != -1 || h.BaseSequence != -1 {
				t.Fatalf("header %+v", h)
			}
			SetBaseOffset(batch, 500)
			SetPartitionLeaderEpoch(batch, 7)
			h, err = Validate(batch)
			if err != nil {
				t.Fatal(err)
			}
			if h.BaseOffset != 500 || h.PartitionLeaderEpoch != 7 || h.LastOffset() != 599 {
				t.Fatalf("header %+v", h)
			}
			i := 0
			err = ForEachRecord(batch, func(r *Record) error {
				if r.Offset != 500+int64(i) || r.Timestamp != 1000+int64(i*7%5) {
					t.Fatalf("record %d: offset %d ts %d", i, r.Offset, r.Timestamp)
				}
				if i%2 == 0 != (r.Key != nil) {
					t.Fatalf("record %d key %q", i, r.Key)
				}
				if !bytes.Equal(r.Value, bytes.Repeat([]byte{byte(i)}, i%50)) {
					t.Fatalf("record %d value %x", i, r.Value)
				}
				if i%3 == 0 && (len(r.Headers) != 2 || r.Headers[0].Key != "h" || r.Headers[1].Value != nil) {
					t.Fatalf("record %d headers %+v", i, r.Headers)
				}
				i++
				return nil
			})
			if err != nil || i != 100 {
				t.Fatalf("err %v after %d records", err, i)
			}
		})
	}
}

// TestBatchLayout checks the framing against the byte layout of Kafka's
// DefaultRecordBatch, field by field.
func TestBatchLayout(t *testing.T) {
	b := NewBuilder(None)
	b.SetProducer(42, 3, 9)
	b.Append(1700000000000, []byte("k"), []byte("v"), nil)
	batch := b.Build()
	want := []byte{
		0, 0, 0, 0, 0, 0, 0, 0, // base offset
		0, 0, 0, 0x3a, // batch length = 61-12+9
		0xff, 0xff, 0xff, 0xff, // leader epoch -1
		2,          // magic
		0, 0, 0, 0, // crc, checked below
		0, 0, // attributes
		0, 0, 0, 0, // last offset delta
		0, 0, 0x01, 0x8b, 0xcf, 0xe5, 0x68, 0x00, // base timestamp
		0, 0, 0x01, 0x8b, 0xcf, 0xe5, 0x68, 0x00, // max timestamp
		0, 0, 0, 0, 0, 0, 0, 42, // producer id
		0, 3, // producer epoch
		0, 0, 0, 9, // base sequence
		0, 0, 0, 1, // record count
		// record: length 8 (zigzag 16), attrs, tsDelta 0, offsetDelta 0,
		// key len 1 (zigzag 2), 'k', value len 1 (2), 'v', headers 0
		16, 0, 0, 0, 2, 'k', 2, 'v', 0,
	}
	crc := crc32.Checksum(want[21:], crc32.MakeTable(crc32.Castagnoli))
	binary.BigEndian.PutUint32(want[17:], crc)
	if !bytes.Equal(batch, want) {
		t.Fatalf("batch\n got %x\nwant %x", batch, want)
	}
	if HeaderSize != 61 {
		t.Fatal("header size")
	}
}

func TestBatchValidateErrors(t *testing.T) {
	good := buildTest(t, None, 10)
	mut := func(f func(b []byte) []byte) []byte {
		b := append([]byte(nil), good...)
		return f(b)
	}
	fixCRC := func(b []byte) []byte { binary.BigEndian.PutUint32(b[17:], CRC(b)); return b }
	cases := []struct {
		name  string
		batch []byte
		want  error
	}{
		{"crc", mut(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), ErrBadCRC},
		{"magic", mut(func(b []byte) []byte { b[16] = 1; return b }), ErrBadMagic},
		{"truncated", good[:len(good)-1], ErrTruncated},
		{"short", good[:30], ErrTruncated},
		{"extra", append(append([]byte(nil), good...), 0), ErrBadLength},
		{"length", mut(func(b []byte) []byte { binary.BigEndian.PutUint32(b[8:], 3); return b }), ErrBadLength},
		{"count", mut(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[57:], 11)
			binary.BigEndian.PutUint32(b[23:], 10)
			return fixCRC(b)
		}), ErrRecordCount},
		{"zero", mut(func(b []byte) []byte { binary.BigEndian.PutUint32(b[57:], 0); return fixCRC(b) }), ErrRecordCount},
		{"delta", mut(func(b []byte) []byte { binary.BigEndian.PutUint32(b[23:], 20); return fixCRC(b) }), ErrRecordCount},
		{"codec", mut(func(b []byte) []byte { b[22] |= 7; return fixCRC(b) }), ErrBadCodec},
		{"gzip-garbage", mut(func(b []byte) []byte { b[22] |= 1; return fixCRC(b) }), ErrDecompress},
	}
	for _, c := range cases {
		_, err := ValidateDeep(c.batch)
		if !errors.Is(err, c.want) || !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
}

func TestBatchSplit(t *testing.T) {
	var buf []byte
	for i := 0; i < 5; i++ {
		buf = append(buf, buildTest(t, Codec(i%5), i+1)...)
	}
	n := 0
	err := SplitBatches(buf, func(b []byte, h Header) error {
		if int(h.NumRecords) != n+1 || len(b) != h.Size() {
			t.Fatalf("batch %d: %+v", n, h)
		}
		n++
		return nil
	})
	if err != nil || n != 5 {
		t.Fatalf("err %v n %d", err, n)
	}
	if err := SplitBatches(buf[:len(buf)-3], func([]byte, Header) error { return nil }); !errors.Is(err, ErrTruncated) {
		t.Fatalf("got %v", err)
	}
}

func TestBatchLogAppendTime(t *testing.T) {
	batch := buildTest(t, Zstd, 5)
	SetLogAppendTime(batch, 99999)
	h, err := Validate(batch)
	if err != nil {
		t.Fatal(err)
	}
	if !h.LogAppendTime() || h.MaxTimestamp != 99999 {
		t.Fatalf("%+v", h)
	}
	_ = ForEachRecord(batch, func(r *Record) error {
		if r.Timestamp != 99999 {
			t.Fatalf("ts %d", r.Timestamp)
		}
		return nil
	})
}

func TestBatchSnappyXerial(t *testing.T) {
	b := NewBuilder(None)
	for i := 0; i < 20; i++ {
		b.Append(int64(i), nil, bytes.Repeat([]byte("abc"), i), nil)
	}
	raw := b.Build()
	recs := raw[HeaderSize:]
	// snappy-java framing: magic, version 1, compatible 1, blocks.
	x := append([]byte(nil), xerialMagic...)
	x = binary.BigEndian.AppendUint32(x, 1)
	x = binary.BigEndian.AppendUint32(x, 1)
	for _, part := range [][]byte{recs[:len(recs)/2], recs[len(recs)/2:]} {
		blk := s2.EncodeSnappy(nil, part)
		x = binary.BigEndian.AppendUint32(x, uint32(len(blk)))
		x = append(x, blk...)
	}
	batch := append(append([]byte(nil), raw[:HeaderSize]...), x...)
	binary.BigEndian.PutUint32(batch[8:], uint32(len(batch)-12))
	binary.BigEndian.PutUint16(batch[21:], uint16(Snappy))
	binary.BigEndian.PutUint32(batch[17:], CRC(batch))
	if _, err := Validate(batch); err != nil {
		t.Fatal(err)
	}
}

func TestBatchNoCopyValues(t *testing.T) {
	batch := buildTest(t, None, 3)
	_ = ForEachRecord(batch, func(r *Record) error {
		if len(r.Value) > 0 {
			p := &r.Value[0]
			if uintptr(unsafePointer(p)) < uintptr(unsafePointer(&batch[0])) ||
				uintptr(unsafePointer(p)) >= uintptr(unsafePointer(&batch[len(batch)-1])) {
				t.Fatal("value was copied")
			}
		}
		return nil
	})
}

func TestBatchValidateFraming(t *testing.T) {
	b := buildTest(t, None, 5)
	// A record whose offset delta is wrong but whose framing is fine:
	// Validate accepts it, ValidateDeep and ForEachRecord do not.
	rec := b[HeaderSize:]
	rec[3] = 8 // first record: length, attrs, tsDelta, offsetDelta -> 4
	binary.BigEndian.PutUint32(b[17:], CRC(b))
	if _, err := Validate(b); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if _, err := ValidateDeep(b); !errors.Is(err, ErrRecordCount) {
		t.Fatalf("ValidateDeep: %v", err)
	}
}

// benchValidateBatch is 1000 records of 100-byte values (~110 KB), the
// shape of a well-batched producer.
func benchValidateBatch() []byte {
	bl := NewBuilder(None)
	v := bytes.Repeat([]byte("x"), 100)
	for i := 0; i < 1000; i++ {
		bl.Append(int64(i), nil, v, nil)
	}
	return bl.Build()
}

func benchValidate(b *testing.B, batch []byte, validate func([]byte) (Header, error)) {
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := validate(batch); err != nil {
			b.Fatal(err)
		}
	}
	h, _ := ParseHeader(batch)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(h.NumRecords), "ns/record")
}

func BenchmarkBatchValidate(b *testing.B) {
	benchValidate(b, benchValidateBatch(), Validate)
}

func BenchmarkBatchValidateDeep(b *testing.B) {
	benchValidate(b, benchValidateBatch(), ValidateDeep)
}

// benchHeadersBatch is benchValidateBatch with two headers on every
// record, short keys and values, as for tracing ids and content types.
func benchHeadersBatch() []byte {
	bl := NewBuilder(None)
	v := bytes.Repeat([]byte("x"), 100)
	hdrs := []RecordHeader{{Key: "trace-id", Value: []byte("4bf92f3577b34da6")}, {Key: "content-type", Value: []byte("json")}}
	for i := 0; i < 1000; i++ {
		bl.Append(int64(i), nil, v, hdrs)
	}
	return bl.Build()
}

func BenchmarkBatchValidateDeepHeaders(b *testing.B) {
	benchValidate(b, benchHeadersBatch(), ValidateDeep)
}

// benchCheckRecords times checkRecords alone (its Go fast path) on the
// records of batch, or
// checkRecordsSlow if slow.
func benchCheckRecords(b *testing.B, batch []byte, slow bool) {
	h, _ := ParseHeader(batch)
	benchValidate(b, batch, func(batch []byte) (Header, error) {
		if slow {
			return h, checkRecordsSlow(batch[HeaderSize:], h.NumRecords)
		}
		return h, checkRecords(batch[HeaderSize:], h.NumRecords)
	})
}

func BenchmarkCheckRecords(b *testing.B) {
	b.Run("plain", func(b *testing.B) { benchCheckRecords(b, benchValidateBatch(), false) })
	b.Run("headers", func(b *testing.B) { benchCheckRecords(b, benchHeadersBatch(), false) })
	b.Run("plain/slow", func(b *testing.B) { benchCheckRecords(b, benchValidateBatch(), true) })
	b.Run("headers/slow", func(b *testing.B) { benchCheckRecords(b, benchHeadersBatch(), true) })
}

// BenchmarkBatchCRC is the floor under both: the CRC-32C of the batch.
func BenchmarkBatchCRC(b *testing.B) {
	batch := benchValidateBatch()
	benchValidate(b, batch, func(batch []byte) (Header, error) { CRC(batch); return Header{}, nil })
}

// TestDecompressLimitExact: the decompressed-size limit holds to the byte
// whatever capacity the pooled buffer starts with. It used to be checked
// only when the buffer happened to be full, so the same batch could pass
// or fail depending on which buffer the pool handed out.
func TestDecompressLimitExact(t *testing.T) {
	old := maxDecompressed
	maxDecompressed = 100 << 10
	defer func() { maxDecompressed = old }()
	for _, c := range []Codec{Gzip, LZ4} {
		for _, size := range []int{maxDecompressed, maxDecompressed + 1} {
			src, err := compress(nil, c, make([]byte, size))
			if err != nil {
				t.Fatal(err)
			}
			for _, capacity := range []int{0, 1000, 64 << 10, maxDecompressed - 10, 1 << 20} {
				out, err := decompressTo(make([]byte, 0, capacity), c, src)
				if size <= maxDecompressed && (err != nil || len(out) != size) {
					t.Fatalf("%v %d bytes, cap %d: %v (%d bytes)", c, size, capacity, err, len(out))
				}
				if size > maxDecompressed && !errors.Is(err, ErrDecompress) {
					t.Fatalf("%v %d bytes, cap %d: want ErrDecompress, got %v", c, size, capacity, err)
				}
			}
		}
	}
}

// TestValidateFramingSizes: record lengths of one, two and three varint
// bytes (the framing check has a fast path for the first two), and a
// record count off by one either way.
func TestValidateFramingSizes(t *testing.T) {
	for _, size := range []int{0, 50, 57, 58, 200, 8180, 8200, 70000} {
		bl := NewBuilder(None)
		for i := 0; i < 5; i++ {
			bl.Append(int64(i), nil, bytes.Repeat([]byte("x"), size+i), nil)
		}
		b := bl.Build()
		if _, err := Validate(b); err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		for _, delta := range []int32{-1, 1} {
			c := bytes.Clone(b)
			binary.BigEndian.PutUint32(c[offRecordCount:], uint32(5+delta))
			binary.BigEndian.PutUint32(c[offLastOffsetDelta:], uint32(4+delta))
			binary.BigEndian.PutUint32(c[offCRC:], CRC(c))
			if _, err := Validate(c); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("size %d, count %+d: got %v", size, delta, err)
			}
		}
		for _, first := range []byte{0x00, 0x01, 0x0b, 0x7e, 0x7f, 0x80, 0xff} {
			c := bytes.Clone(b)
			c[HeaderSize] = first
			binary.BigEndian.PutUint32(c[offCRC:], CRC(c))
			if _, err := Validate(c); err == nil && first != b[HeaderSize] {
				t.Fatalf("size %d: first length byte %#x accepted", size, first)
			}
		}
	}
}

// TestValidateDeepMatchesDecoding: ValidateDeep accepts a batch exactly
// when every record decodes (ForEachRecord) with offset deltas 0..n-1.
// Random bytes of batches of many shapes (record varints of one to three
// bytes, keys, null values, headers, records past offset delta 64 and
// 8192) are changed and the CRC fixed, so that both its fast path and its
// general path meet good and bad records.
func TestValidateDeepMatchesDecoding(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	shape := func(n, valueSize int, keys, headers bool) []byte {
		bl := NewBuilder(None)
		for i := 0; i < n; i++ {
			var key, value []byte
			if keys {
				key = []byte(fmt.Sprintf("k%d", i))
			}
			if valueSize >= 0 {
				value = bytes.Repeat([]byte{'v'}, valueSize+i%3)
			}
			var hdrs []RecordHeader
			if headers && i%2 == 0 {
				hdrs = []RecordHeader{{Key: "h", Value: []byte("x")}, {Key: "", Value: nil}}
			}
			bl.Append(int64(i*i), key, value, hdrs)
		}
		return bl.Build()
	}
	batches := [][]byte{
		shape(3, 1, true, false), shape(100, 100, false, false), shape(70, 0, true, true),
		shape(5, -1, false, false), shape(5, 8200, true, false), shape(9000, 1, false, false),
		buildTest(t, None, 50),
	}
	decodes := func(b []byte) bool {
		i := int32(0)
		err := ForEachRecord(b, func(r *Record) error {
			if r.OffsetDelta != i {
				return ErrRecordCount
			}
			i++
			return nil
		})
		return err == nil
	}
	for bi, good := range batches {
		if _, err := ValidateDeep(good); err != nil {
			t.Fatalf("batch %d: %v", bi, err)
		}
		body := len(good) - HeaderSize
		rounds := 3000
		if body > 100000 {
			rounds = 100
		}
		for r := 0; r < rounds; r++ {
			b := bytes.Clone(good)
			for k := 0; k <= rng.IntN(3); k++ {
				// Mostly the first bytes of records, where the fields are.
				pos := HeaderSize + rng.IntN(min(body, 64))
				if rng.IntN(2) == 0 {
					pos = HeaderSize + rng.IntN(body)
				}
				mutate(rng, b, pos)
			}
			binary.BigEndian.PutUint32(b[offCRC:], CRC(b))
			_, err := ValidateDeep(b)
			if err != nil && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("batch %d: error %v is not ErrCorrupt", bi, err)
			}
			if want := decodes(b); (err == nil) != want {
				t.Fatalf("batch %d round %d: ValidateDeep says %v, decoding ok %v", bi, r, err, want)
			}
		}
	}
}

// TestDecompressionsAtOnceBounded: no more batches are decompressed at once
// than there are slots; the next one waits for a slot.
func TestDecompressionsAtOnceBounded(t *testing.T) {
	batch := func() []byte {
		b := NewBuilder(Zstd)
		b.Append(1, nil, bytes.Repeat([]byte{0}, 1<<20), nil)
		return b.Build()
	}()
	waited := make(chan struct{}, 1)
	decompressWaitHook = func() { waited <- struct{}{} }
	defer func() { decompressWaitHook = nil }()
	n := cap(decompressSlots)
	for range n { // hold every slot, as n decompressions under way would
		acquireDecompress()
	}
	done := make(chan error, 1)
	go func() {
		_, err := ValidateDeep(batch)
		done <- err
	}()
	select {
	case <-waited:
	case err := <-done:
		t.Fatalf("a decompression ran with all %d slots taken (%v)", n, err)
	}
	releaseDecompress()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for range n - 1 {
		releaseDecompress()
	}
	if len(decompressSlots) != 0 {
		t.Fatalf("%d slots still held", len(decompressSlots))
	}
}

// TestForEachRecordNestedDecompression: a callback may decode other
// compressed batches (a consumer handler reading another partition): the
// decompression slot is not held across the callback, so nesting deeper
// than the slots does not deadlock.
func TestForEachRecordNestedDecompression(t *testing.T) {
	b := NewBuilder(Gzip)
	b.Append(1, nil, []byte("v"), nil)
	batch := b.Build()
	depth := cap(decompressSlots) + 2
	var walk func(level int) error
	walk = func(level int) error {
		return ForEachRecord(batch, func(*Record) error {
			if level < depth {
				return walk(level + 1)
			}
			return nil
		})
	}
	if err := walk(1); err != nil {
		t.Fatal(err)
	}
	if len(decompressSlots) != 0 {
		t.Fatalf("%d slots still held", len(decompressSlots))
	}
}

// checkRecordsSlow is checkRecords without its fast path: checkRecord for
// every record. checkRecords must give the same answer, error text and
// all, for any body.
func checkRecordsSlow(body []byte, n int32) error {
	p := 0
	for i := int32(0); i < n; i++ {
		var err error
		if p, err = checkRecord(body, p, i, n); err != nil {
			return err
		}
	}
	if p != len(body) {
		return fmt.Errorf("%w: %d bytes after %d records", ErrRecordCount, len(body)-p, n)
	}
	return nil
}

// TestReadVarint: readVarint decodes as binary.Varint does, in its one-
// and two-byte fast path (every pair of bytes, and each byte alone at the
// end of b) and in general (random bytes, the continuation bit set
// often, at every position).
func TestReadVarint(t *testing.T) {
	check := func(b []byte, q int) {
		t.Helper()
		v, next, ok := readVarint(b, q)
		wv, n := binary.Varint(b[q:])
		if ok != (n > 0) || ok && (v != wv || next != q+n) {
			t.Fatalf("% x at %d: got %d, %d, %v; binary.Varint %d, %d", b, q, v, next, ok, wv, n)
		}
	}
	for w := 0; w < 1<<16; w++ {
		b := []byte{byte(w), byte(w >> 8), 0x80}
		check(b, 0)
		check(b[:2], 0)
		check(b[:1], 0)
		check(b[1:2], 0)
		check(b, 1)
	}
	rng := rand.New(rand.NewPCG(7, 8))
	b := make([]byte, 16)
	for r := testdepth.Rounds(200000, 20000); r > 0; r-- {
		b = b[:1+rng.IntN(16)]
		for j := range b {
			b[j] = byte(rng.IntN(256)) | byte(rng.IntN(2))<<7
		}
		for q := range b {
			check(b, q)
		}
	}
}

// appendVarintSize appends v zigzag-encoded in at least size bytes: an
// overlong varint if v needs fewer, which readVarint accepts.
func appendVarintSize(b []byte, v int64, size int) []byte {
	u := uint64(v<<1) ^ uint64(v>>63)
	for n := 1; u >= 0x80 || n < size; n++ {
		b = append(b, byte(u)|0x80)
		u >>= 7
	}
	return append(b, byte(u))
}

// randomRecords appends n records of random shape to body, each field
// well formed except with probability bad: varints of one to three bytes
// and sometimes overlong, null and non-null keys and values of lengths
// around the varint size steps (up to maxLen), headers, wrong offset
// deltas, negative or wrong lengths.
func randomRecords(rng *rand.Rand, body []byte, n, maxLen int, bad float64) []byte {
	varint := func(b []byte, v int64) []byte {
		size := 1
		if rng.IntN(10) == 0 {
			size = 1 + rng.IntN(3)
		}
		return appendVarintSize(b, v, size)
	}
	length := func() int64 {
		switch r := rng.IntN(50); {
		case r < 8:
			return -1
		case r < 16:
			return int64(rng.IntN(4))
		case r < 24:
			return int64(min(60+rng.IntN(10), maxLen))
		case r < 25:
			return int64(min(8185+rng.IntN(10), maxLen))
		}
		return int64(rng.IntN(min(300, maxLen)))
	}
	field := func(b []byte, l int64) []byte {
		data := bytes.Repeat([]byte{'x'}, int(max(l, 0)))
		if rng.Float64() < bad {
			// -l-1 is l with the zigzag sign bit set: the same size
			// and, but for that bit, the same bytes.
			l = []int64{-2, -3, 1 << 20, l + 1, -l - 1}[rng.IntN(5)]
		}
		return append(varint(b, l), data...)
	}
	var rec []byte
	for i := 0; i < n; i++ {
		rec = append(rec[:0], byte(rng.IntN(256)))
		ts := []int64{0, int64(rng.IntN(64)), int64(rng.IntN(8192)), rng.Int64N(1 << 40), -int64(rng.IntN(100))}[rng.IntN(5)]
		rec = varint(rec, ts)
		od := int64(i)
		if rng.Float64() < bad {
			od += int64(rng.IntN(3)) - 1
		}
		rec = varint(rec, od)
		rec = field(rec, length())
		rec = field(rec, length())
		hc := 0
		switch rng.IntN(8) {
		case 0:
			hc = 1 + rng.IntN(2)
		case 1:
			hc = 1 + rng.IntN(6)
		}
		nhc := int64(hc)
		if rng.Float64() < bad {
			nhc = []int64{-1, nhc - 1, nhc + 1, 64}[rng.IntN(4)]
		}
		rec = varint(rec, nhc)
		for range hc {
			l := length()
			if l < 0 && rng.Float64() >= bad {
				l = 0 // a null header key is malformed
			}
			rec = field(rec, l)
			rec = field(rec, length())
		}
		l := int64(len(rec))
		if rng.Float64() < bad {
			l += int64(rng.IntN(5)) - 2
		}
		body = varint(body, l)
		body = append(body, rec...)
	}
	return body
}

// TestCheckRecordsFastPath: checkRecords, fast path and all, answers as
// checkRecord does record by record, on random records (every fast-path
// arm, well formed or not, and shapes it leaves to checkRecord), on
// changed bytes of built batches, and on wrong record counts.
func TestCheckRecordsFastPath(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	checks := []struct {
		name  string
		check func([]byte, int32) error
	}{{"checkRecords", checkRecords}}
	same := func(what string, body []byte, n int32) bool {
		t.Helper()
		want := checkRecordsSlow(body, n)
		for _, c := range checks {
			if got := c.check(body, n); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s: %s: %d records, %d bytes: got %v, want %v", what, c.name, n, len(body), got, want)
				return false
			}
		}
		return true
	}
	accepted, rounds := 0, testdepth.Rounds(3000, 600)
	for r := 0; r < rounds; r++ {
		n, maxLen := 1+rng.IntN(200), 9000
		if r%100 == 0 {
			n, maxLen = 8192+rng.IntN(200), 10 // three-byte offset deltas
		}
		bad := []float64{0, 0.001, 0.01, 0.1}[r%4]
		body := randomRecords(rng, nil, n, maxLen, bad)
		if checkRecordsSlow(body, int32(n)) == nil {
			accepted++
		}
		if !same("random", body, int32(n)) {
			return
		}
		for _, dn := range []int32{-1, 1} {
			same("count", body, int32(n)+dn)
		}
		if len(body) > 0 {
			same("truncated", body[:rng.IntN(len(body))], int32(n))
		}
	}
	if accepted < rounds/6 {
		t.Fatalf("only %d of %d random bodies well formed", accepted, rounds)
	}

	for _, batch := range [][]byte{benchValidateBatch(), benchHeadersBatch(), buildTest(t, None, 300)} {
		good := batch[HeaderSize:]
		n := int32(binary.BigEndian.Uint32(batch[offRecordCount:]))
		for r := 0; r < rounds; r++ {
			b := bytes.Clone(good)
			for k := 0; k <= rng.IntN(3); k++ {
				pos := rng.IntN(len(b))
				mutate(rng, b, pos)
			}
			if !same("changed", b, n) {
				return
			}
		}
	}
}

// TestCheckRecordsWideOffsetDelta: past record 1<<20 the offset delta
// needs four bytes, which the fast path leaves to checkRecord; a record
// whose first three offset-delta bytes match the three-byte encoding the
// fast path compares against must not be taken as one.
func TestCheckRecordsWideOffsetDelta(t *testing.T) {
	if testing.Short() {
		t.Skip("a million records")
	}
	const n = 1<<20 + 3
	var body, rec []byte
	for i := 0; i < n; i++ {
		rec = append(rec[:0], 0, 0) // attributes, timestamp delta
		rec = binary.AppendVarint(rec, int64(i))
		rec = append(rec, 1, 1, 0) // null key and value, no headers
		body = binary.AppendVarint(body, int64(len(rec)))
		body = append(body, rec...)
	}
	if err := checkRecords(body, n); err != nil {
		t.Fatal(err)
	}
	// Record 1<<20 with a key and value of length 0 and one byte short:
	// length 8, offset delta 0x80 0x80 0x80 0x01, then 0x00 0x00. Read
	// with a three-byte offset delta it would be a whole record (null
	// key, empty value, no headers); it has no header count.
	p := 0
	for i := 0; i < 1<<20; i++ {
		p += 1 + int(body[p]>>1)
	}
	if !bytes.Equal(body[p:p+10], []byte{18, 0, 0, 0x80, 0x80, 0x80, 0x01, 1, 1, 0}) {
		t.Fatalf("record 1<<20 is %x", body[p:p+10])
	}
	bad := append(bytes.Clone(body[:p]), 16, 0, 0, 0x80, 0x80, 0x80, 0x01, 0, 0)
	bad = append(bad, body[p+10:]...)
	got, want := checkRecords(bad, n), checkRecordsSlow(bad, n)
	if got == nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// TestCheckRecordsFastPathTaken: the shapes the fast path is for take it,
// all but records that start within 16 bytes of the end: lengths of one
// and two bytes, null and non-null keys and values, timestamp deltas of
// one and two bytes, offset deltas of one, two and three.
func TestCheckRecordsFastPathTaken(t *testing.T) {
	var body []byte
	slowRecordHook = func(p int) {
		if p <= len(body)-16 {
			t.Errorf("record at %d of %d bytes took the slow path: %x", p, len(body), body[p:p+16])
		}
	}
	defer func() { slowRecordHook = nil }()
	for _, n := range []int{1, 3, 100, 9000} {
		for _, keySize := range []int{-1, 0, 5, 63, 64, 200} {
			for _, valueSize := range []int{-1, 0, 10, 63, 64, 1000} {
				if n > 100 && (keySize > 64 || valueSize > 64) {
					continue
				}
				bl := NewBuilder(None)
				for i := range n {
					var key, value []byte
					if keySize >= 0 {
						key = make([]byte, keySize)
					}
					if valueSize >= 0 {
						value = make([]byte, valueSize)
					}
					bl.Append(int64(i*i%8000), key, value, nil)
				}
				body = bl.Build()[HeaderSize:]
				if err := checkRecords(body, int32(n)); err != nil {
					t.Fatalf("%d records, key %d, value %d: %v", n, keySize, valueSize, err)
				}
				if t.Failed() {
					t.Fatalf("%d records, key %d, value %d", n, keySize, valueSize)
				}
			}
		}
	}
	// Headers: a count of one byte, key lengths (not null) and value
	// lengths (null or not) of one and two bytes, the last header's
	// value the last byte of the record or not, after each shape of
	// record value.
	for _, n := range []int{1, 3, 100, 9000} {
		for _, hc := range []int{1, 2, 5, 63} {
			for _, hkSize := range []int{0, 1, 63, 64, 300} {
				for _, hvSize := range []int{-1, 0, 7, 63, 64, 1000} {
					for _, valueSize := range []int{-1, 0, 100, 64} {
						if (n > 100 || hc > 5) && (hkSize > 64 || hvSize > 64 || valueSize != 100) ||
							n > 100 && hc > 2 { // three-byte offset deltas with two headers are enough
							continue
						}
						bl := NewBuilder(None)
						hdrs := make([]RecordHeader, hc)
						for j := range hdrs {
							// With more than two headers, every
							// other one has an empty or null value.
							hdrs[j].Key = string(make([]byte, hkSize))
							if hvSize >= 0 {
								hdrs[j].Value = make([]byte, hvSize)
							}
							switch {
							case hc > 2 && j%4 == 1:
								hdrs[j].Value = []byte{}
							case hc > 2 && j%4 == 3:
								hdrs[j].Value = nil
							}
						}
						var value []byte
						if valueSize >= 0 {
							value = make([]byte, valueSize)
						}
						for i := range n {
							bl.Append(int64(i*i%8000), []byte("k"), value, hdrs)
						}
						body = bl.Build()[HeaderSize:]
						if err := checkRecords(body, int32(n)); err != nil {
							t.Fatalf("%d records, %d headers (key %d, value %d), value %d: %v", n, hc, hkSize, hvSize, valueSize, err)
						}
						if t.Failed() {
							t.Fatalf("%d records, %d headers (key %d, value %d), value %d", n, hc, hkSize, hvSize, valueSize)
						}
					}
				}
			}
		}
	}
}

// TestCheckRecordsHeaderLengthLimits: records with a header at the
// limits of the fast path. A length of three varint bytes, 0x80 0x80 0x00
// (an overlong 0), that a two-byte decode ignoring the second byte's
// continuation bit would read as 8192, in each length field, the record
// laid out to be whole if read that way: it is not, and checkRecords must
// say so as checkRecord does (such a record is over 8191 bytes, so its
// own length needs three bytes too). And well formed records of 8191
// bytes (the most a two-byte length holds) and 8192, most of it a header
// value: both accepted, the first by the fast path.
func TestCheckRecordsHeaderLengthLimits(t *testing.T) {
	misread := append([]byte{0x80, 0x80}, make([]byte, 8192)...)
	short := []byte{2, 'x'} // length 1
	record := func(key, value, hkey, hvalue []byte) []byte {
		rec := []byte{0, 0, 0} // attributes, timestamp delta, offset delta 0
		rec = append(rec, key...)
		rec = append(rec, value...)
		rec = append(rec, 2) // one header
		rec = append(rec, hkey...)
		rec = append(rec, hvalue...)
		return append(binary.AppendVarint(nil, int64(len(rec))), rec...)
	}
	// The record's length is 10 bytes besides the header value's.
	long := func(n int) []byte {
		return append(binary.AppendVarint(nil, int64(n)), make([]byte, n)...)
	}
	for f, c := range []struct {
		body     []byte
		ok, fast bool
	}{
		{body: record(misread, short, short, short)},
		{body: record(short, misread, short, short)},
		{body: record(short, short, misread, short)},
		{body: record(short, short, short, misread)},
		{body: record(short, short, short, []byte{0x80, 0x80})}, // ends in the varint
		{body: record(short, short, short, long(8191-10-2)), ok: true, fast: true},
		{body: record(short, short, short, long(8192-10-2)), ok: true},
	} {
		slow := false
		slowRecordHook = func(p int) { slow = slow || p == 0 }
		// Record 1, after it: null key and value, no headers.
		body := append(c.body, 12, 0, 0, 2, 1, 1, 0)
		want := checkRecordsSlow(body, 2)
		if (want == nil) != c.ok {
			t.Fatalf("case %d: checkRecord says %v", f, want)
		}
		if got := checkRecords(body, 2); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("case %d: got %v, want %v", f, got, want)
		}
		if c.fast && slow {
			t.Errorf("case %d: record 0 took the slow path", f)
		}
		slowRecordHook = nil
	}
}

// mutate changes b[pos] at random: any byte, its varint continuation bit
// flipped, or one more.
func mutate(rng *rand.Rand, b []byte, pos int) {
	switch rng.IntN(3) {
	case 0:
		b[pos] = byte(rng.IntN(256))
	case 1:
		b[pos] ^= 0x80
	default:
		b[pos]++
	}
}
