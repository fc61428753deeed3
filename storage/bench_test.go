package storage

import (
	"bytes"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/quirelog/quire/record"
)

// benchBatch is a batch of 1000 records of 100-byte values (~110 KB), the
// shape of a well-batched producer.
func benchBatch() []byte {
	b := record.NewBuilder(record.None)
	v := bytes.Repeat([]byte("0123456789"), 10)
	for i := 0; i < 1000; i++ {
		b.Append(1700000000000+int64(i), nil, v, nil)
	}
	return b.Build()
}

// resetEvery bounds the disk space a benchmark uses; both the log and the
// plain-file baseline start over (timer stopped) after this many bytes.
const resetEvery = 512 << 20

func BenchmarkLogAppend(b *testing.B) {
	batch := benchBatch()
	cfg := DefaultLogConfig()
	l, err := OpenLog(b.TempDir(), "bench", 0, cfg, 0, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	written := 0
	for b.Loop() {
		if _, err := l.AppendAsLeader(batch, 1); err != nil {
			b.Fatal(err)
		}
		if written += len(batch); written >= resetEvery {
			b.StopTimer()
			if err := l.TruncateFullyAndStartAt(l.LogEndOffset()); err != nil {
				b.Fatal(err)
			}
			written = 0
			b.StartTimer()
		}
	}
}

// BenchmarkPlainFileWrite is the baseline for BenchmarkLogAppend: the same
// bytes written with one write call each to a plain file.
func BenchmarkPlainFileWrite(b *testing.B) {
	batch := benchBatch()
	f, err := os.Create(filepath.Join(b.TempDir(), "plain"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	var pos int64
	for b.Loop() {
		if _, err := f.WriteAt(batch, pos); err != nil {
			b.Fatal(err)
		}
		if pos += int64(len(batch)); pos >= resetEvery {
			b.StopTimer()
			if err := f.Truncate(0); err != nil {
				b.Fatal(err)
			}
			pos = 0
			b.StartTimer()
		}
	}
}

// benchLog fills a log with about size bytes of bench batches.
func benchLog(b *testing.B, size int) (*Log, int64) {
	batch := benchBatch()
	cfg := DefaultLogConfig()
	cfg.SegmentBytes = 64 << 20
	l, err := OpenLog(b.TempDir(), "bench", 0, cfg, 0, Options{})
	if err != nil {
		b.Fatal(err)
	}
	for w := 0; w < size; w += len(batch) {
		if _, err := l.AppendAsLeader(batch, 1); err != nil {
			b.Fatal(err)
		}
	}
	return l, int64(len(batch))
}

func BenchmarkLogReadSequential(b *testing.B) {
	l, _ := benchLog(b, 256<<20)
	defer l.Close()
	b.ReportAllocs()
	b.ResetTimer()
	var total int64
	off := int64(0)
	buf := make([]byte, 0, 1<<20)
	for b.Loop() {
		res, err := l.ReadAppend(buf[:0], off, 1<<20, math.MaxInt64)
		if err != nil {
			b.Fatal(err)
		}
		total += int64(len(res.Batches))
		off = res.HighOffset
		if off >= l.LogEndOffset() {
			off = 0
		}
	}
	b.SetBytes(total / int64(b.N))
}

func BenchmarkLogReadRandom(b *testing.B) {
	l, _ := benchLog(b, 256<<20)
	defer l.Close()
	leo := l.LogEndOffset()
	rng := rand.New(rand.NewSource(1))
	b.ReportAllocs()
	b.ResetTimer()
	var total int64
	buf := make([]byte, 0, 1<<20)
	for b.Loop() {
		res, err := l.ReadAppend(buf[:0], rng.Int63n(leo), 1<<20, math.MaxInt64)
		if err != nil {
			b.Fatal(err)
		}
		total += int64(len(res.Batches))
	}
	b.SetBytes(total / int64(b.N))
}
