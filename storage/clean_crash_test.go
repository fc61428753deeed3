package storage

import (
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quirelog/quire/record"
)

// writeCompactedTemplate writes a compacted log with several segments of
// overwritten keys and tombstones into dir and returns its model.
func writeCompactedTemplate(t *testing.T, dir string, cfg LogConfig, clock *fakeClock) *compactModel {
	t.Helper()
	l, err := OpenLog(dir, "t", 0, cfg, 0, Options{FS: noSyncFS{}, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	m := &compactModel{byKey: map[string][]int{}, cfg: cfg}
	rng := rand.New(rand.NewSource(3))
	seq := int32(0)
	for i := 0; i < 40; i++ {
		b := record.NewBuilder(record.Codec(i % 3))
		var recs []cRec
		for j := 0; j < 1+rng.Intn(3); j++ {
			r := cRec{key: []byte(fmt.Sprintf("k%d", rng.Intn(15))), ts: clock.t.UnixMilli()}
			if rng.Intn(5) != 0 {
				r.value = []byte(fmt.Sprintf("value-%d-%d", i, j))
			}
			b.Append(r.ts, r.key, r.value, nil)
			recs = append(recs, r)
		}
		if i%10 == 0 {
			b.SetProducer(5, 0, seq)
			seq += int32(len(recs))
		}
		info := mustAppend(t, l, b.Build(), 0)
		for j := range recs {
			recs[j].offset = info.FirstOffset + int64(j)
			m.add(recs[j])
		}
		clock.t = clock.t.Add(10 * time.Millisecond)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return m
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	if err := os.MkdirAll(to, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		src, err := os.Open(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		dst, err := os.Create(filepath.Join(to, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(dst, src); err != nil {
			t.Fatal(err)
		}
		src.Close()
		dst.Close()
	}
}

// countingInjector fails the n-th operation that changes something on
// disk (counting from 1; reads, stats and listings are not counted: a
// crash at one is a crash before the next write) and, with crash set,
// every operation after it: the process died there.
type countingInjector struct {
	mu    sync.Mutex
	n     int
	count int
	crash bool
}

func (c *countingInjector) inject(op Op, path string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n > 0 && c.crash && c.count >= c.n {
		return ErrInjected // crashed
	}
	switch op {
	case OpRead, OpStat, OpList, OpOpen, OpClose:
		return nil
	}
	c.count++
	if c.n > 0 && c.count == c.n {
		return ErrInjected
	}
	return nil
}

// TestLogCleanCrashAtEveryStep fails a clean pass at each of its
// filesystem operations in turn, as a crash (that operation, torn if a
// write, and every later one fail) and as a lone I/O error, and checks
// that the log, reopened (and, after a lone error, before reopening
// too), is readable, meets the compaction guarantees, has no clean
// leftovers and takes appends and cleans again.
func TestLogCleanCrashAtEveryStep(t *testing.T) {
	t.Parallel()
	cfg := compactConfig()
	cfg.SegmentBytes = 1200
	cfg.MinCompactionLagMs = 0
	template := t.TempDir()
	clock := &fakeClock{t: time.UnixMilli(5_000_000)}
	model := writeCompactedTemplate(t, template, cfg, clock)
	clock.t = clock.t.Add(time.Hour) // tombstones past delete.retention.ms too

	// A clean without faults: how many operations it takes, and where
	// its clean point ends.
	ref := t.TempDir()
	copyDir(t, template, ref)
	inj := &countingInjector{}
	efs := NewErrorFS(noSyncFS{})
	efs.SetInjector(inj.inject)
	l, err := OpenLog(ref, "t", 0, cfg, 0, Options{FS: efs, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	l.SetHighWatermark(l.LogEndOffset())
	inj.mu.Lock()
	inj.count = 0
	inj.mu.Unlock()
	st, err := l.clean(newOffsetMap(1<<20), nil)
	if err != nil || st.SegmentsIn < 3 || st.SegmentsOut < 1 {
		t.Fatalf("reference clean: %+v, %v", st, err)
	}
	ops := inj.count
	t.Logf("a clean pass takes %d filesystem operations that change the disk", ops)
	model.cleanedTo = st.MapEnd
	nowMs := clock.t.UnixMilli()
	model.check(t, l, nowMs, nowMs, "reference")
	l.Close()

	for _, crash := range []bool{true, false} {
		for n := 1; n <= ops; n++ {
			what := fmt.Sprintf("crash=%v at operation %d of %d", crash, n, ops)
			dir := filepath.Join(t.TempDir(), "t-0")
			copyDir(t, template, dir)
			inj := &countingInjector{crash: crash}
			efs := NewErrorFS(noSyncFS{})
			efs.Torn = true
			efs.SetInjector(inj.inject)
			l, err := OpenLog(dir, "t", 0, cfg, 0, Options{FS: efs, Now: clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			l.SetHighWatermark(l.LogEndOffset())
			inj.mu.Lock()
			inj.count, inj.n = 0, n
			inj.mu.Unlock()
			// (Past the swap of the last group, what fails is the
			// closing of replaced files, which the pass does not need.)
			_, _ = l.clean(newOffsetMap(1<<20), nil)
			if !crash {
				inj.mu.Lock()
				inj.n = 0
				inj.mu.Unlock()
				model.check(t, l, nowMs, nowMs, what+", before reopening")
				_ = l.Close()
			}
			// Crashed: the log is abandoned as it is on disk.
			l2, err := OpenLog(dir, "t", 0, cfg, 0, Options{FS: noSyncFS{}, Now: clock.Now})
			if err != nil {
				t.Fatalf("%s: reopen: %v", what, err)
			}
			model.check(t, l2, nowMs, nowMs, what+", reopened")
			ents, _ := os.ReadDir(dir)
			for _, e := range ents {
				if strings.HasSuffix(e.Name(), cleanedSuffix) || strings.HasSuffix(e.Name(), swapSuffix) {
					t.Fatalf("%s: %s left after reopening", what, e.Name())
				}
			}
			b := record.NewBuilder(record.None)
			b.Append(nowMs, []byte("k1"), []byte("after"), nil)
			mustAppend(t, l2, b.Build(), 0)
			if err := l2.Roll(); err != nil {
				t.Fatal(err)
			}
			l2.SetHighWatermark(l2.LogEndOffset())
			if _, err := l2.clean(newOffsetMap(1<<20), nil); err != nil {
				t.Fatalf("%s: clean after reopening: %v", what, err)
			}
			recs, _ := readLogRecords(t, l2)
			if last := recs[len(recs)-1]; string(last.value) != "after" {
				t.Fatalf("%s: last record %v", what, last)
			}
			for _, r := range recs {
				if string(r.key) == "k1" && string(r.value) != "after" {
					t.Fatalf("%s: %v survived a clean after k1 was rewritten", what, r)
				}
			}
			if err := l2.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}
