package storage

import (
	"errors"
	"sync/atomic"
	"testing"
)

// syncTrackFS counts fsyncs and the descriptors closed with writes not
// fsynced since.
type syncTrackFS struct {
	OSFS
	syncs, closedDirty atomic.Int64
}

type syncTrackFile struct {
	File
	fs    *syncTrackFS
	dirty bool
}

func (t *syncTrackFS) Create(name string) (File, error) {
	f, err := t.OSFS.Create(name)
	if err != nil {
		return nil, err
	}
	return &syncTrackFile{File: f, fs: t}, nil
}

func (t *syncTrackFS) OpenReadWrite(name string) (File, error) {
	f, err := t.OSFS.OpenReadWrite(name)
	if err != nil {
		return nil, err
	}
	return &syncTrackFile{File: f, fs: t}, nil
}

func (f *syncTrackFile) WriteAt(p []byte, off int64) (int, error) {
	f.dirty = true
	return f.File.WriteAt(p, off)
}

func (f *syncTrackFile) Sync() error {
	f.fs.syncs.Add(1)
	f.dirty = false
	return f.File.Sync()
}

func (f *syncTrackFile) Close() error {
	if f.dirty {
		f.fs.closedDirty.Add(1)
	}
	return f.File.Close()
}

// TestEvictedFileIsSyncedFirst: the cache fsyncs a file written since its
// last fsync before closing it, so that a write-back error is not lost
// with the descriptor (the kernel may forget it once no descriptor is
// open); a file fsynced since its last write is closed without one.
func TestEvictedFileIsSyncedFirst(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tfs := &syncTrackFS{}
	c := NewFileCache(MinFileCacheCapacity)
	written, err := c.create(tfs, join(dir, segmentName(0)+logSuffix), false)
	if err != nil {
		t.Fatal(err)
	}
	clean, err := c.create(tfs, join(dir, segmentName(1)+logSuffix), false)
	if err != nil {
		t.Fatal(err)
	}
	for _, lf := range []*lazyFile{written, clean} {
		if _, err := lf.WriteAt([]byte("data"), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := clean.Sync(); err != nil {
		t.Fatal(err)
	}
	evictAll(c)
	if written.isOpen() || clean.isOpen() {
		t.Fatal("files still open after evicting everything")
	}
	if n := tfs.closedDirty.Load(); n != 0 {
		t.Fatalf("%d descriptors closed with writes not fsynced", n)
	}
	if n := tfs.syncs.Load(); n != 2 {
		t.Fatalf("%d fsyncs, want 2 (the clean file's and the written one's at eviction)", n)
	}
	// Reopened and fsynced, with nothing written since: no fsync is owed.
	if err := written.Sync(); err != nil {
		t.Fatal(err)
	}
	evictAll(c)
	if n := tfs.syncs.Load(); n != 3 {
		t.Fatalf("%d fsyncs, want 3", n)
	}
}

// TestEvictionSyncErrorFailsTheLog: an fsync failing when the cache closes
// a written file is reported by the log's next flush, which fails the log.
func TestEvictionSyncErrorFailsTheLog(t *testing.T) {
	t.Parallel()
	efs := NewErrorFS(OSFS{})
	files := NewFileCache(MinFileCacheCapacity)
	l, err := OpenLog(t.TempDir(), "t", 0, smallConfig(), 0, Options{FS: efs, Files: files})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	mustAppend(t, l, makeBatch(5, 100, 1), 1)
	efs.SetInjector(func(op Op, path string) error {
		if op == OpSync {
			return ErrInjected
		}
		return nil
	})
	evictAll(files)
	efs.SetInjector(nil)
	if err := l.Flush(); !errors.Is(err, ErrLogFailed) || !errors.Is(err, ErrInjected) {
		t.Fatalf("flush after a failed fsync at eviction: %v, want ErrLogFailed with the fsync error", err)
	}
}
