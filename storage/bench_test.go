package storage

import (
	"bytes"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

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
// plain-file baseline start over (timer stopped) after this many bytes, in
// the same way: their files are deleted and created afresh, so both always
// append to a new, growing file (never rewrite pages already in the page
// cache), and neither preallocates.
const resetEvery = 512 << 20

// benchAppender is the log side of the append benchmarks.
type benchAppender struct {
	b       *testing.B
	l       *Log
	batch   []byte
	written int
	limit   int // reset after this many bytes
}

func newBenchAppender(b *testing.B) *benchAppender {
	return newBenchAppenderOn(b, Options{}, resetEvery)
}

// newBenchAppenderOn is newBenchAppender with the log's options (an
// in-memory filesystem) and the bytes after which it starts over.
func newBenchAppenderOn(b *testing.B, opts Options, limit int) *benchAppender {
	l, err := OpenLog(b.TempDir(), "bench", 0, DefaultLogConfig(), 0, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	return &benchAppender{b: b, l: l, batch: benchBatch(), limit: limit}
}

func (a *benchAppender) append() {
	if _, err := a.l.AppendAsLeader(a.batch, 1); err != nil {
		a.b.Fatal(err)
	}
	a.written += len(a.batch)
}

func (a *benchAppender) full() bool { return a.written >= a.limit }

func (a *benchAppender) reset() {
	if err := a.l.TruncateFullyAndStartAt(a.l.LogEndOffset()); err != nil {
		a.b.Fatal(err)
	}
	a.written = 0
}

// plainWriter is the baseline: the same bytes appended with one write call
// each to a plain file.
type plainWriter struct {
	b     *testing.B
	name  string
	f     *os.File
	batch []byte
	pos   int64
}

func newPlainWriter(b *testing.B) *plainWriter {
	w := &plainWriter{b: b, name: filepath.Join(b.TempDir(), "plain"), batch: benchBatch()}
	w.create()
	b.Cleanup(func() { w.f.Close() })
	return w
}

func (w *plainWriter) create() {
	f, err := os.Create(w.name)
	if err != nil {
		w.b.Fatal(err)
	}
	w.f, w.pos = f, 0
}

func (w *plainWriter) write() {
	if _, err := w.f.WriteAt(w.batch, w.pos); err != nil {
		w.b.Fatal(err)
	}
	w.pos += int64(len(w.batch))
}

func (w *plainWriter) full() bool { return w.pos >= resetEvery }

func (w *plainWriter) reset() {
	if err := w.f.Close(); err != nil {
		w.b.Fatal(err)
	}
	if err := os.Remove(w.name); err != nil {
		w.b.Fatal(err)
	}
	w.create()
}

func BenchmarkLogAppend(b *testing.B) {
	a := newBenchAppender(b)
	b.SetBytes(int64(len(a.batch)))
	b.ReportAllocs()
	for b.Loop() {
		a.append()
		if a.full() {
			b.StopTimer()
			a.reset()
			b.StartTimer()
		}
	}
}

// BenchmarkPlainFileWrite is the baseline for BenchmarkLogAppend: the same
// bytes written with one write call each to a plain file. Run on their own,
// the two see different background load on a shared machine; compare them
// with BenchmarkLogAppendVsPlainFile.
func BenchmarkPlainFileWrite(b *testing.B) {
	w := newPlainWriter(b)
	b.SetBytes(int64(len(w.batch)))
	b.ReportAllocs()
	for b.Loop() {
		w.write()
		if w.full() {
			b.StopTimer()
			w.reset()
			b.StartTimer()
		}
	}
}

// BenchmarkLogAppendVsPlainFile measures the log append against the
// plain-file baseline in one loop, alternating the two (and which goes
// first) batch by batch, so that noise from the rest of the machine hits
// both alike. It reports each side's throughput and their ratio,
// log-vs-plain (the target is >= 0.8). One op is one batch on each side.
func BenchmarkLogAppendVsPlainFile(b *testing.B) {
	a := newBenchAppender(b)
	w := newPlainWriter(b)
	b.SetBytes(int64(len(a.batch) + len(w.batch)))
	var logNs, plainNs time.Duration
	n := 0
	for b.Loop() {
		if n&1 == 0 {
			t0 := time.Now()
			a.append()
			t1 := time.Now()
			w.write()
			plainNs += time.Since(t1)
			logNs += t1.Sub(t0)
		} else {
			t0 := time.Now()
			w.write()
			t1 := time.Now()
			a.append()
			logNs += time.Since(t1)
			plainNs += t1.Sub(t0)
		}
		n++
		if a.full() || w.full() {
			b.StopTimer()
			a.reset()
			w.reset()
			b.StartTimer()
		}
	}
	mbps := func(d time.Duration) float64 { return float64(n*len(a.batch)) / d.Seconds() / 1e6 }
	b.ReportMetric(mbps(logNs), "log-MB/s")
	b.ReportMetric(mbps(plainNs), "plain-MB/s")
	b.ReportMetric(float64(plainNs)/float64(logNs), "log-vs-plain")
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

// BenchmarkFollowerAppendNewEpoch is a follower's copy of the first batch
// of a new leader's epoch (a failover of every partition it follows), on
// the real file system: the epoch's entry reaches the checkpoint with the
// append. A log takes 16 epochs, then a new one starts, so that the
// checkpoint stays as short as a real one.
func BenchmarkFollowerAppendNewEpoch(b *testing.B) {
	const epochs = 16
	dir := b.TempDir()
	var l *Log
	batch := makeBatch(10, 100, 0)
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		if n%epochs == 0 {
			b.StopTimer()
			if l != nil {
				if err := l.Close(); err != nil {
					b.Fatal(err)
				}
			}
			var err error
			if l, err = OpenLog(filepath.Join(dir, strconv.Itoa(n)), "bench", 0, DefaultLogConfig(), 0, Options{}); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		i := n % epochs
		record.SetBaseOffset(batch, int64(10*i))
		record.SetPartitionLeaderEpoch(batch, int32(i))
		if _, err := l.AppendAsFollower(batch); err != nil {
			b.Fatal(err)
		}
		n++
	}
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
}
