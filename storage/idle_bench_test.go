//go:build unix

package storage

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// BenchmarkIdlePartitions measures what an idle partition costs a node:
// QUIRE_BENCH_PARTITIONS (2,000 by default) partitions are created with
// the default log config, each written one small batch and flushed, as a
// partition that is hosted but hardly used. It reports, per partition,
// the heap the manager holds (runtime.MemStats, after a GC), the disk
// blocks its files hold (st_blocks, as du counts them, not their sizes)
// and the goroutines the process runs beyond those it ran before. Run it
// once:
//
//	go test ./storage -run XXX -bench IdlePartitions -benchtime 1x
func BenchmarkIdlePartitions(b *testing.B) {
	n := 2000
	if s := os.Getenv("QUIRE_BENCH_PARTITIONS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			b.Fatal(err)
		}
	}
	cfg := DefaultLogConfig()
	batch := makeBatch(10, 100, time.Now().UnixMilli())
	var heap, disk, goroutines float64
	for b.Loop() {
		b.StopTimer()
		dir := b.TempDir()
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		g0 := runtime.NumGoroutine()
		b.StartTimer()
		m, err := OpenManager(dir, cfg, Options{FS: noSyncFS{}})
		if err != nil {
			b.Fatal(err)
		}
		for p := 0; p < n; p++ {
			l, err := m.GetOrCreate("idle", int32(p), cfg)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := l.AppendAsLeader(bytes.Clone(batch), 1); err != nil {
				b.Fatal(err)
			}
			if err := l.Flush(); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		heap = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n) / 1024
		goroutines = float64(runtime.NumGoroutine()-g0) / float64(n)
		disk = float64(diskBlocks(b, dir)) / float64(n) / 1024
		if err := m.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(heap, "heap-KiB/partition")
	b.ReportMetric(disk, "disk-KiB/partition")
	b.ReportMetric(goroutines, "goroutines/partition")
}

// diskBlocks is the bytes of disk the files under dir hold (st_blocks *
// 512, what du counts).
func diskBlocks(b *testing.B, dir string) int64 {
	var total int64
	err := filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok && !info.IsDir() {
			total += st.Blocks * 512
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return total
}

// BenchmarkIdleTick times, over a manager of QUIRE_BENCH_PARTITIONS
// (5,000 by default) idle partitions on an in-memory filesystem, one
// pass of each periodic task a broker runs over every partition: the
// flush check (every second by default), the checkpoint write (every
// minute), retention (every five minutes) and producer expiry. What an
// idle node spends is each pass's CPU time over its interval.
//
//	go test ./storage -run XXX -bench IdleTick -benchtime 20x
func BenchmarkIdleTick(b *testing.B) {
	n := 5000
	if s := os.Getenv("QUIRE_BENCH_PARTITIONS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			b.Fatal(err)
		}
	}
	cfg := DefaultLogConfig()
	fsys := newMemFS()
	m, err := OpenManager("/data", cfg, Options{FS: fsys})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	for p := 0; p < n; p++ {
		if _, err := m.GetOrCreate("idle", int32(p), cfg); err != nil {
			b.Fatal(err)
		}
	}
	for _, task := range []struct {
		name string
		fn   func() error
	}{
		{"flush", m.FlushDirty},
		{"checkpoint", m.Checkpoint},
		{"retention", m.RunRetention},
		{"expire", func() error { m.ExpireProducers(); return nil }},
	} {
		b.Run(task.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := task.fn(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAppendSpread compares appends spread over many partitions
// (QUIRE_BENCH_PARTITIONS, 5,000 by default, one after the other) with
// the same appends into one partition, alternating the two batch by batch
// so that both see the same machine. Batches are 100 records of 100
// bytes (about 11 KB); every partition has taken one before the timing
// starts. It reports each side's time per append and
// spread-vs-one, the spread side's throughput over the single log's.
//
//	go test ./storage -run XXX -bench AppendSpread -benchtime 20000x
func BenchmarkAppendSpread(b *testing.B) {
	n := 5000
	if s := os.Getenv("QUIRE_BENCH_PARTITIONS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			b.Fatal(err)
		}
	}
	cfg := DefaultLogConfig()
	m, err := OpenManager(b.TempDir(), cfg, Options{FS: noSyncFS{}})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	logs := make([]*Log, n)
	for p := range logs {
		if logs[p], err = m.GetOrCreate("spread", int32(p), cfg); err != nil {
			b.Fatal(err)
		}
	}
	one, err := m.GetOrCreate("one", 0, cfg)
	if err != nil {
		b.Fatal(err)
	}
	batch := makeBatch(100, 100, time.Now().UnixMilli())
	// Each partition first takes one append, as its leader would have
	// written its epoch's start (AssignEpochStart) before any produce.
	for _, l := range append(logs, one) {
		if _, err := l.AppendAsLeader(batch, 1); err != nil {
			b.Fatal(err)
		}
	}
	var tOne, tSpread time.Duration
	i := 0
	b.SetBytes(int64(len(batch)))
	for b.Loop() {
		start := time.Now()
		if _, err := one.AppendAsLeader(batch, 1); err != nil {
			b.Fatal(err)
		}
		mid := time.Now()
		if _, err := logs[i%n].AppendAsLeader(batch, 1); err != nil {
			b.Fatal(err)
		}
		tSpread += time.Since(mid)
		tOne += mid.Sub(start)
		i++
	}
	b.ReportMetric(float64(tOne.Nanoseconds())/float64(i), "one-ns/append")
	b.ReportMetric(float64(tSpread.Nanoseconds())/float64(i), "spread-ns/append")
	b.ReportMetric(float64(tOne)/float64(tSpread), "spread-vs-one")
}
