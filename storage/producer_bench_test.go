package storage

import (
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/quirelog/quire/record"
)

// idempotentBatch is benchBatch from an idempotent producer; next gives it
// the following sequence (and a new CRC), as the producer would.
type idempotentBatch struct {
	batch []byte
	seq   int32
}

func newIdempotentBatch() *idempotentBatch {
	b := benchBatch()
	binary.BigEndian.PutUint64(b[43:], 4711) // producer id
	binary.BigEndian.PutUint16(b[51:], 0)    // producer epoch
	ib := &idempotentBatch{batch: b}
	ib.setSeq(0)
	return ib
}

func (ib *idempotentBatch) setSeq(seq int32) {
	ib.seq = seq
	binary.BigEndian.PutUint32(ib.batch[53:], uint32(seq))
	binary.BigEndian.PutUint32(ib.batch[17:], record.CRC(ib.batch))
}

func (ib *idempotentBatch) next() {
	h, _ := record.ParseHeader(ib.batch)
	ib.setSeq(incrementSequence(ib.seq, h.LastOffsetDelta+1))
}

// BenchmarkLogAppendIdempotentVsPlain measures the leader append of
// batches with a producer id (sequence checks and producer state) against
// the same batches without one, alternating the two logs batch by batch
// as BenchmarkLogAppendVsPlainFile does, and reports their ratio (the
// goal is >= 0.95). Giving each batch its next sequence and CRC (the
// producer's work) is outside the measured time. On disk the shared
// machine's I/O makes the ratio swing either way from run to run; with the
// segment writes discarded (cpu) only the work of the append itself is
// measured: validation, the sequence check, offsets and bookkeeping.
func BenchmarkLogAppendIdempotentVsPlain(b *testing.B) {
	b.Run("disk", func(b *testing.B) {
		benchIdempotentVsPlain(b, newBenchAppender(b), newBenchAppender(b))
	})
	b.Run("cpu", func(b *testing.B) {
		opts := Options{FS: discardLogsFS{newMemFS()}}
		benchIdempotentVsPlain(b, newBenchAppenderOn(b, opts, resetEvery), newBenchAppenderOn(b, opts, resetEvery))
	})
}

// discardLogsFS is an in-memory filesystem whose .log files drop what is
// written to them.
type discardLogsFS struct{ *memFS }

type discardFile struct{ File }

func (discardFile) WriteAt(p []byte, _ int64) (int, error) { return len(p), nil }

func (d discardLogsFS) Create(name string) (File, error) {
	f, err := d.memFS.Create(name)
	if err == nil && strings.HasSuffix(name, logSuffix) {
		f = discardFile{f}
	}
	return f, err
}

func benchIdempotentVsPlain(b *testing.B, plain, idem *benchAppender) {
	ib := newIdempotentBatch()
	idem.batch = ib.batch
	b.SetBytes(int64(len(plain.batch) + len(idem.batch)))
	var idemNs, plainNs time.Duration
	n := 0
	for b.Loop() {
		if n&1 == 0 {
			t0 := time.Now()
			idem.append()
			t1 := time.Now()
			plain.append()
			plainNs += time.Since(t1)
			idemNs += t1.Sub(t0)
		} else {
			t0 := time.Now()
			plain.append()
			t1 := time.Now()
			idem.append()
			idemNs += time.Since(t1)
			plainNs += t1.Sub(t0)
		}
		n++
		ib.next()
		if plain.full() || idem.full() {
			b.StopTimer()
			plain.reset()
			// A full truncation forgets the producer: it starts over.
			idem.reset()
			ib.setSeq(0)
			b.StartTimer()
		}
	}
	mbps := func(d time.Duration) float64 { return float64(n*len(plain.batch)) / d.Seconds() / 1e6 }
	b.ReportMetric(mbps(idemNs), "idempotent-MB/s")
	b.ReportMetric(mbps(plainNs), "plain-MB/s")
	b.ReportMetric(float64(plainNs)/float64(idemNs), "idempotent-vs-plain")
}

// BenchmarkProducerStateCheck is the sequence check of one batch against
// a producer's state.
func BenchmarkProducerStateCheck(b *testing.B) {
	ps := newProducerState(0)
	ib := newIdempotentBatch()
	for i := 0; i < ProducerWindow; i++ {
		h, _ := record.ParseHeader(ib.batch)
		ps.update(&h, nil)
		ib.next()
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ps.check(ib.batch, 1); err != nil {
			b.Fatal(err)
		}
	}
}
