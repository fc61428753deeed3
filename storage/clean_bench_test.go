package storage

import (
	"fmt"
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quirelog/quire/record"
)

// fillKeyed appends n records of 100-byte values over keys distinct
// keys, 100 records a batch, to a compacted log, and rolls it.
func fillKeyed(b *testing.B, l *Log, rng *rand.Rand, n, keys int) int64 {
	v := make([]byte, 100)
	var bytes int64
	for i := 0; i < n; i += 100 {
		bld := record.NewBuilder(record.None)
		for j := 0; j < 100; j++ {
			rng.Read(v[:8])
			bld.Append(1700000000000, []byte(fmt.Sprintf("key-%09d", rng.Intn(keys))), v, nil)
		}
		batch := bld.Build()
		bytes += int64(len(batch))
		if _, err := l.AppendAsLeader(batch, 0); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.Roll(); err != nil {
		b.Fatal(err)
	}
	l.SetHighWatermark(l.LogEndOffset())
	return bytes
}

func compactBenchConfig() LogConfig {
	cfg := DefaultLogConfig()
	cfg.Compact, cfg.Delete = true, false
	cfg.SegmentBytes = 16 << 20
	cfg.MinCleanableDirtyRatio = 0
	return cfg
}

// BenchmarkLogClean cleans a 64 MiB log of 100-byte records (about
// 570,000 of them) over 100,000 keys in one pass: bytes/s is the
// cleaner's throughput over the log it reads (the dirty section, read to
// map its keys, and every segment rewritten, read again). keys-per-MB
// and map-bytes/key report the offset map.
func BenchmarkLogClean(b *testing.B) {
	const records, keys = 570_000, 100_000
	var size int64
	var st CleanStats
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		l, err := OpenLog(b.TempDir(), "bench", 0, compactBenchConfig(), 0, Options{FS: noSyncFS{}})
		if err != nil {
			b.Fatal(err)
		}
		size = fillKeyed(b, l, rand.New(rand.NewSource(1)), records, keys)
		m := newOffsetMap(128 << 20)
		b.StartTimer()
		st, err = l.clean(m, nil)
		b.StopTimer()
		if err != nil || st.MapEnd != l.LogEndOffset() {
			b.Fatalf("clean: %+v, %v", st, err)
		}
		l.Close()
		b.StartTimer()
	}
	b.SetBytes(size)
	b.ReportMetric(float64(st.MapBytes)/float64(st.Keys), "map-bytes/key")
	b.ReportMetric(float64(st.BytesWritten)/float64(size), "written/read")
}

// BenchmarkOffsetMapPut puts 1,000,000 distinct keys in a map given the
// memory for them (at the load factor): ns/op per key, and the bytes of
// map per key.
func BenchmarkOffsetMapPut(b *testing.B) {
	const n = 1_000_000
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("key-%09d", i))
	}
	mem := int64(n*10/9+1) * offsetMapSlotBytes
	var m *offsetMap
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%n == 0 {
			b.StopTimer()
			m = newOffsetMap(mem)
			b.StartTimer()
		}
		if !m.put(keys[i%n], int64(i)) {
			b.Fatalf("key %d refused", i%n)
		}
	}
	b.ReportMetric(float64(m.memory())/float64(m.used), "map-bytes/key")
}

// BenchmarkLogAppendWhileCleaning appends batches of 100 records of
// 100-byte values to a compacted log, with nothing else running (idle)
// with a cleaner cleaning the same log over and over (cleaning), and with
// that cleaner held to 32 MB/s (log.cleaner.io.max.bytes.per.second,
// cleaning-32MBps), its segments rolling every 4 MiB: the ratios are what
// cleaning costs producers on the same partition.
func BenchmarkLogAppendWhileCleaning(b *testing.B) {
	for _, c := range []struct {
		name string
		rate float64 // 0: no cleaner; -1: no limit
	}{{"idle", 0}, {"cleaning", -1}, {"cleaning-32MBps", 32e6}} {
		cleaning := c.rate != 0
		b.Run(c.name, func(b *testing.B) {
			cfg := compactBenchConfig()
			cfg.SegmentBytes = 4 << 20
			l, err := OpenLog(b.TempDir(), "bench", 0, cfg, 0, Options{FS: noSyncFS{}})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			rng := rand.New(rand.NewSource(1))
			fillKeyed(b, l, rng, 200_000, 50_000)
			var batches [16][]byte
			v := make([]byte, 100)
			for k := range batches {
				bld := record.NewBuilder(record.None)
				for j := 0; j < 100; j++ {
					rng.Read(v[:8])
					bld.Append(1700000000000, []byte(fmt.Sprintf("key-%09d", rng.Intn(50_000))), v, nil)
				}
				batches[k] = bld.Build()
			}
			var stop atomic.Bool
			var passes atomic.Int64
			var wg sync.WaitGroup
			if cleaning {
				wg.Go(func() {
					m := newOffsetMap(64 << 20)
					for !stop.Load() {
						l.SetHighWatermark(l.LogEndOffset())
						var th *throttler
						if c.rate > 0 {
							th = &throttler{rate: c.rate}
						}
						if _, err := l.clean(m, th); err == nil {
							passes.Add(1)
						}
						time.Sleep(time.Millisecond)
					}
				})
			}
			b.SetBytes(int64(len(batches[0])))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := l.AppendAsLeader(batches[i%len(batches)], 0); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			stop.Store(true)
			wg.Wait()
			if cleaning {
				b.ReportMetric(float64(passes.Load()), "clean-passes")
			}
		})
	}
}
