package storage

import (
	"bytes"
	"errors"
	"io/fs"
	"math"
	"math/rand"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quirelog/quire/record"
)

// evictAll closes every open, unpinned file of the cache.
func evictAll(c *FileCache) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.evictOneLocked() {
	}
}

func TestFileCacheNeverEvictsAPinnedFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := NewFileCache(MinFileCacheCapacity)
	var files []*lazyFile
	for i := 0; i < 3*MinFileCacheCapacity; i++ {
		lf, err := c.create(OSFS{}, join(dir, segmentName(int64(i))+logSuffix), false)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := lf.WriteAt([]byte{byte(i)}, 0); err != nil {
			t.Fatal(err)
		}
		files = append(files, lf)
		if st := c.Stats(); st.Open > c.Capacity() {
			t.Fatalf("%d files open, capacity %d", st.Open, c.Capacity())
		}
	}
	pinned := files[0]
	f, err := pinned.pin()
	if err != nil {
		t.Fatal(err)
	}
	// Every other file is used again: the pinned one must stay open
	// through all the evictions that takes.
	buf := make([]byte, 1)
	for round := 0; round < 3; round++ {
		for i, lf := range files[1:] {
			if _, err := lf.ReadAt(buf, 0); err != nil || buf[0] != byte(i+1) {
				t.Fatalf("file %d: read %v, %v", i+1, buf, err)
			}
		}
	}
	if !pinned.isOpen() {
		t.Fatal("a pinned file was closed")
	}
	if _, err := f.ReadAt(buf, 0); err != nil || buf[0] != 0 {
		t.Fatalf("read through the pinned descriptor: %v, %v", buf, err)
	}
	pinned.unpin()
	st := c.Stats()
	if st.Evicted == 0 || st.Open > c.Capacity() {
		t.Fatalf("stats %+v: want evictions and at most %d open", st, c.Capacity())
	}
	for _, lf := range files {
		if err := lf.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if st := c.Stats(); st.Open != 0 {
		t.Fatalf("%d files open after closing them all", st.Open)
	}
}

func TestLazyFileIsNotRecreatedOnceGone(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := NewFileCache(0)
	name := join(dir, segmentName(0)+logSuffix)
	if err := os.WriteFile(name, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	lf := c.lazy(OSFS{}, name, false)
	if err := os.Remove(name); err != nil {
		t.Fatal(err)
	}
	if _, err := lf.ReadAt(make([]byte, 1), 0); !errors.Is(err, errFileGone) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("read of a vanished file: %v, want errFileGone", err)
	}
	if _, err := os.Stat(name); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the vanished file was recreated: %v", err)
	}
}

// TestDeletedSegmentStaysReadableForItsReaders: a segment deleted (here by
// DeleteRecordsBefore) while a reader holds it, its .log evicted from the
// cache, is still read through a descriptor kept from before the unlink,
// and that descriptor goes with the reader's reference.
func TestDeletedSegmentStaysReadableForItsReaders(t *testing.T) {
	t.Parallel()
	files := NewFileCache(MinFileCacheCapacity)
	l, err := OpenLog(t.TempDir(), "t", 0, smallConfig(), 0, Options{FS: noSyncFS{}, Files: files})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for l.NumSegments() < 3 {
		mustAppend(t, l, makeBatch(5, 100, 1), 1)
	}
	// The rolled segments' background fsync pins their files too: done
	// first, so the reader's reference is the last one.
	l.flushWG.Wait()
	seg := l.segmentFor(0)
	want := make([]byte, record.HeaderSize)
	if _, err := seg.log.ReadAt(want, 0); err != nil {
		t.Fatal(err)
	}
	evictAll(files)
	if seg.log.isOpen() {
		t.Fatal("segment file still open after evicting everything")
	}
	l.mu.RLock()
	second := l.segs[1].base
	l.mu.RUnlock()
	if err := l.DeleteRecordsBefore(second); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(seg.stem + logSuffix); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("deleted segment's file: %v", err)
	}
	evictAll(files)
	got := make([]byte, record.HeaderSize)
	if _, err := seg.log.ReadAt(got, 0); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read of the deleted segment by its reader: %v", err)
	}
	if _, err := seg.idx.file.ReadAt(got[:1], 0); !errors.Is(err, errFileGone) {
		t.Fatalf("reopening a deleted index: %v, want errFileGone", err)
	}
	seg.release()
	if seg.log.isOpen() {
		t.Fatal("the kept descriptor outlived the last reference")
	}
}

// TestFileCacheConcurrentReadsAndAppends runs appenders, readers and
// DeleteRecordsBefore across more segment files than the cache holds, so
// files are evicted and reopened under readers and writers throughout
// (go test -race), and then checks every record.
func TestFileCacheConcurrentReadsAndAppends(t *testing.T) {
	t.Parallel()
	files := NewFileCache(MinFileCacheCapacity)
	m, err := OpenManager(t.TempDir(), smallConfig(), Options{FS: noSyncFS{}, Files: files})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	const parts = 12
	logs := make([]*Log, parts)
	for p := range logs {
		if logs[p], err = m.GetOrCreate("t", int32(p), smallConfig()); err != nil {
			t.Fatal(err)
		}
		for logs[p].NumSegments() < 3 {
			mustAppend(t, logs[p], makeBatch(5, 100, 1), 1)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func(seed int64) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(seed))
			for i := 0; i < 300; i++ {
				l := logs[rng.Intn(parts)]
				if _, err := l.AppendAsLeader(makeBatch(5, 100, 1), 1); err != nil {
					errs <- err
					return
				}
				if i%50 == 49 {
					start := l.LogStartOffset() + (l.LogEndOffset()-l.LogStartOffset())/4
					if err := l.DeleteRecordsBefore(start); err != nil {
						errs <- err
						return
					}
				}
			}
		}(int64(w))
	}
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func(seed int64) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(seed))
			for i := 0; i < 400; i++ {
				l := logs[rng.Intn(parts)]
				start, end := l.LogStartOffset(), l.LogEndOffset()
				off := start + rng.Int63n(end-start)
				res, err := l.Read(off, 1<<12, math.MaxInt64)
				if errors.Is(err, ErrOffsetOutOfRange) {
					continue // the start moved meanwhile
				}
				if err != nil {
					errs <- err
					return
				}
				err = record.SplitBatches(res.Batches, func(b []byte, h record.Header) error {
					_, err := record.Validate(b)
					return err
				})
				if err != nil || len(res.Batches) == 0 {
					errs <- errors.Join(err, errors.New("empty read below the log end"))
					return
				}
			}
		}(int64(100 + r))
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, l := range logs {
		readAll(t, l)
	}
	st := files.Stats()
	if st.Evicted == 0 || st.Open > st.Capacity {
		t.Fatalf("cache stats %+v: want evictions and at most the capacity open", st)
	}
}

// TestLogCountsNoOpenFilesWhenIdle: once the cache needs the room, an idle
// log holds no descriptor, and it serves reads and appends again after,
// opening only the files they touch.
func TestLogCountsNoOpenFilesWhenIdle(t *testing.T) {
	t.Parallel()
	files := NewFileCache(MinFileCacheCapacity)
	l, err := OpenLog(t.TempDir(), "t", 0, smallConfig(), 0, Options{FS: noSyncFS{}, Files: files})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for l.NumSegments() < 3 {
		mustAppend(t, l, makeBatch(5, 100, time.Now().UnixMilli()), 1)
	}
	l.flushWG.Wait()
	evictAll(files)
	if st := files.Stats(); st.Open != 0 {
		t.Fatalf("%d files open for an idle log", st.Open)
	}
	// What a partition in use costs: an append opens the active
	// segment's .log alone (its indexes are written at flush, roll and
	// close); a read of an older segment its .log.
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	l.flushWG.Wait()
	evictAll(files)
	mustAppend(t, l, makeBatch(5, 100, time.Now().UnixMilli()), 1)
	if st := files.Stats(); st.Open != 1 {
		t.Fatalf("%d files open after an append, want 1 (the .log)", st.Open)
	}
	if _, err := l.Read(0, 1, math.MaxInt64); err != nil {
		t.Fatal(err)
	}
	if st := files.Stats(); st.Open != 2 {
		t.Fatalf("%d files open after a read of the first segment, want 2", st.Open)
	}
	before := readAll(t, l)
	mustAppend(t, l, makeBatch(5, 100, time.Now().UnixMilli()), 1)
	if after := readAll(t, l); len(after) != len(before)+1 {
		t.Fatalf("%d batches after an append to %d", len(after), len(before))
	}
}

// BenchmarkLazyFileReadAt times a 1-byte read through the file cache (an
// open file: the pin is a compare-and-swap) against the same read on the
// descriptor itself, alternating the two.
func BenchmarkLazyFileReadAt(b *testing.B) {
	c := NewFileCache(0)
	lf, err := c.create(OSFS{}, join(b.TempDir(), segmentName(0)+logSuffix), false)
	if err != nil {
		b.Fatal(err)
	}
	defer lf.Close()
	if _, err := lf.WriteAt([]byte{1}, 0); err != nil {
		b.Fatal(err)
	}
	raw := lf.f
	buf := make([]byte, 1)
	var lazyNs, rawNs time.Duration
	for b.Loop() {
		t0 := time.Now()
		if _, err := lf.ReadAt(buf, 0); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := raw.ReadAt(buf, 0); err != nil {
			b.Fatal(err)
		}
		lazyNs += t1.Sub(t0)
		rawNs += time.Since(t1)
	}
	b.ReportMetric(float64(lazyNs.Nanoseconds())/float64(b.N), "cached-ns/read")
	b.ReportMetric(float64(rawNs.Nanoseconds())/float64(b.N), "raw-ns/read")
}

// BenchmarkLazyFilePin times pinning and unpinning an open file from
// parallel goroutines, each on its own file (the cost a read or append
// adds; the goroutines share no lock).
func BenchmarkLazyFilePin(b *testing.B) {
	c := NewFileCache(0)
	dir := b.TempDir()
	var mu sync.Mutex
	next := 0
	b.RunParallel(func(pb *testing.PB) {
		mu.Lock()
		next++
		lf, err := c.create(OSFS{}, join(dir, segmentName(int64(next))+logSuffix), false)
		mu.Unlock()
		if err != nil {
			b.Error(err)
			return
		}
		defer lf.Close()
		for pb.Next() {
			if _, err := lf.pin(); err != nil {
				b.Error(err)
				return
			}
			lf.unpin()
		}
	})
}

// TestEvictionCloseErrorFailsTheLog: an error closing an evicted segment
// file (where a network filesystem reports a failed write-back) is not
// dropped: the next fsync of the file returns it, and the log fails.
func TestEvictionCloseErrorFailsTheLog(t *testing.T) {
	t.Parallel()
	efs := NewErrorFS(noSyncFS{})
	files := NewFileCache(MinFileCacheCapacity)
	l, err := OpenLog(t.TempDir(), "t", 0, smallConfig(), 0, Options{FS: efs, Files: files})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	mustAppend(t, l, makeBatch(5, 100, 1), 1)
	efs.SetInjector(func(op Op, path string) error {
		if op == OpClose && strings.HasSuffix(path, logSuffix) {
			return ErrInjected
		}
		return nil
	})
	evictAll(files)
	efs.SetInjector(nil)
	if err := l.Flush(); !errors.Is(err, ErrLogFailed) || !errors.Is(err, ErrInjected) {
		t.Fatalf("flush after a failed close: %v, want ErrLogFailed with the close error", err)
	}
	if _, err := l.AppendAsLeader(makeBatch(1, 10, 1), 1); !errors.Is(err, ErrLogFailed) {
		t.Fatalf("append to a failed log: %v", err)
	}
}

// TestOpenManagerFailureClosesEveryLog: a log that cannot be opened fails
// OpenManager, naming it, and the logs opened beside it (on the other
// recovery threads) are closed again, leaving no file open.
func TestOpenManagerFailureClosesEveryLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m, err := OpenManager(dir, smallConfig(), Options{FS: noSyncFS{}})
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 20; p++ {
		l, err := m.GetOrCreate("t", p, smallConfig())
		if err != nil {
			t.Fatal(err)
		}
		mustAppend(t, l, makeBatch(5, 100, 1), 1)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	efs := NewErrorFS(noSyncFS{})
	efs.SetInjector(func(op Op, path string) error {
		if op == OpList && strings.HasSuffix(path, "t-13") {
			return ErrInjected
		}
		return nil
	})
	files := NewFileCache(MinFileCacheCapacity)
	if _, err := OpenManager(dir, smallConfig(), Options{FS: efs, Files: files, RecoveryThreads: 4}); !errors.Is(err, ErrInjected) ||
		!strings.Contains(err.Error(), "t-13") {
		t.Fatalf("open with an unreadable log: %v, want the injected error naming t-13", err)
	}
	if st := files.Stats(); st.Open != 0 {
		t.Fatalf("%d files left open after a failed open", st.Open)
	}
}
