package storage

import (
	"bytes"
	"math"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// BenchmarkOpenManager times opening a data directory of many partitions
// (QUIRE_BENCH_PARTITIONS, 5,000 by default), each with two segments of a
// few batches, after a clean shutdown and after an unclean one (every log
// then recovers from its checkpointed recovery point), and reports the
// heap the open manager holds, the process's resident memory and the
// files it holds open, and the CPU time (user and system) the open took,
// which a machine busy with other work changes less than the wall time.
// QUIRE_BENCH_RECOVERY_THREADS sets
// Options.RecoveryThreads (default 2). Run it once:
//
//	go test ./storage -run XXX -bench OpenManager -benchtime 1x
func BenchmarkOpenManager(b *testing.B) {
	n := 5000
	if s := os.Getenv("QUIRE_BENCH_PARTITIONS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			b.Fatal(err)
		}
	}
	threads := 0
	if s := os.Getenv("QUIRE_BENCH_RECOVERY_THREADS"); s != "" {
		var err error
		if threads, err = strconv.Atoi(s); err != nil {
			b.Fatal(err)
		}
	}
	dir := b.TempDir()
	cfg := DefaultLogConfig()
	cfg.SegmentBytes = 8 << 10
	cfg.Preallocate = false
	m, err := OpenManager(dir, cfg, Options{FS: noSyncFS{}})
	if err != nil {
		b.Fatal(err)
	}
	batch := makeBatch(20, 100, time.Now().UnixMilli())
	for p := 0; p < n; p++ {
		l, err := m.GetOrCreate("bench", int32(p), cfg)
		if err != nil {
			b.Fatal(err)
		}
		for l.NumSegments() < 2 {
			if _, err := l.AppendAsLeader(bytes.Clone(batch), 1); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := m.Checkpoint(); err != nil {
		b.Fatal(err)
	}
	if err := m.Close(); err != nil {
		b.Fatal(err)
	}
	for _, clean := range []bool{true, false} {
		name := "clean"
		if !clean {
			name = "unclean"
		}
		b.Run(name, func(b *testing.B) {
			var heap, rss, open, cpu float64
			for b.Loop() {
				b.StopTimer()
				if !clean {
					if err := os.Remove(join(dir, CleanShutdownFile)); err != nil {
						b.Fatal(err)
					}
				}
				runtime.GC()
				var before runtime.MemStats
				runtime.ReadMemStats(&before)
				cpu0 := processCPU()
				b.StartTimer()
				m, err := OpenManager(dir, cfg, Options{RecoveryThreads: threads})
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				cpu = (processCPU() - cpu0).Seconds() * 1000
				if len(m.Logs()) != n {
					b.Fatalf("%d logs, want %d", len(m.Logs()), n)
				}
				runtime.GC()
				var after runtime.MemStats
				runtime.ReadMemStats(&after)
				heap = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / (1 << 20)
				rss = residentMiB()
				open = float64(openDescriptors())
				if err := m.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(heap, "heap-MiB")
			b.ReportMetric(rss, "rss-MiB")
			b.ReportMetric(open, "open-fds")
			b.ReportMetric(cpu, "cpu-ms")
		})
	}
}

// residentMiB is the process's resident set (Linux), or NaN.
func residentMiB() float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return math.NaN()
	}
	for _, line := range bytes.Split(data, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("VmRSS:")); ok {
			kb, err := strconv.Atoi(string(bytes.TrimSuffix(bytes.TrimSpace(v), []byte(" kB"))))
			if err == nil {
				return float64(kb) / 1024
			}
		}
	}
	return math.NaN()
}

// openDescriptors counts the process's open file descriptors (Linux), or
// -1.
func openDescriptors() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

// processCPU is the user and system time the process has used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
