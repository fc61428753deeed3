package storage

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/quirelog/quire/record"
)

// hookFS runs onOpen before opening name for reading and writing.
type hookFS struct {
	OSFS
	name   string
	onOpen func()
}

func (h *hookFS) OpenReadWrite(name string) (File, error) {
	if name == h.name && h.onOpen != nil {
		fn := h.onOpen
		h.onOpen = nil
		fn()
	}
	return h.OSFS.OpenReadWrite(name)
}

// waitDoneOrBlocked waits until done is closed or a goroutine is parked
// on a mutex inside a function named fn.
func waitDoneOrBlocked(t *testing.T, done <-chan struct{}, fn string) {
	t.Helper()
	buf := make([]byte, 1<<20)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		select {
		case <-done:
			return
		default:
		}
		n := runtime.Stack(buf, true)
		for _, g := range strings.Split(string(buf[:n]), "\n\n") {
			if strings.Contains(g, fn) && strings.Contains(g, "sync.(*Mutex).Lock") {
				return
			}
		}
		runtime.Gosched()
	}
	t.Fatalf("%s neither finished nor blocked", fn)
}

// TestRemovedSegmentFileIsNotRecreatedByAReopen: a segment deleted while
// one of its evicted files is being reopened (the background flush of a
// rolled segment syncing it) must not leave that file recreated, empty,
// after the deletion: the reopen happens wholly before the file is marked
// removed (and the unlink then takes it) or not at all.
func TestRemovedSegmentFileIsNotRecreatedByAReopen(t *testing.T) {
	t.Parallel()
	for _, suffix := range []string{logSuffix, indexSuffix} {
		t.Run(suffix, func(t *testing.T) {
			dir := t.TempDir()
			files := NewFileCache(MinFileCacheCapacity)
			h := &hookFS{name: join(dir, segmentName(0)+suffix)}
			s, err := createSegment(h, files, dir, 0, smallConfig(), time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.log.WriteAt([]byte("data"), 0); err != nil {
				t.Fatal(err)
			}
			evictAll(files)
			removed := make(chan struct{})
			var removeErr error
			// The deletion runs while the reopen is between its check of
			// the removed mark and the open itself.
			h.onOpen = func() {
				go func() {
					defer close(removed)
					removeErr = s.removeFiles(h)
				}()
				waitDoneOrBlocked(t, removed, "removeFiles")
			}
			f := s.log
			if suffix == indexSuffix {
				f = s.idx.file
			}
			if err := f.Sync(); err != nil && !errors.Is(err, errFileGone) {
				t.Fatalf("sync: %v", err)
			}
			<-removed
			if removeErr != nil {
				t.Fatal(removeErr)
			}
			s.release()
			for _, sfx := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
				if _, err := os.Stat(s.stem + sfx); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("%s of the deleted segment: %v, want it gone", sfx, err)
				}
			}
		})
	}
}

// TestDeletedLogStaysReadableForItsReaders: a reader still on a segment of
// a log being deleted (its partition removed) reads on through a
// descriptor kept from before the unlink, even if the cache had closed the
// file, as it did when every segment held its descriptors; the descriptor
// goes with the reader's reference.
func TestDeletedLogStaysReadableForItsReaders(t *testing.T) {
	t.Parallel()
	files := NewFileCache(MinFileCacheCapacity)
	dir := join(t.TempDir(), "t-0")
	l, err := OpenLog(dir, "t", 0, smallConfig(), 0, Options{FS: noSyncFS{}, Files: files})
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, makeBatch(5, 100, 1), 1)
	seg := l.segmentFor(0)
	want := make([]byte, record.HeaderSize)
	if _, err := seg.log.ReadAt(want, 0); err != nil {
		t.Fatal(err)
	}
	evictAll(files)
	if err := l.Delete(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("deleted log's directory: %v", err)
	}
	evictAll(files)
	got := make([]byte, record.HeaderSize)
	if _, err := seg.log.ReadAt(got, 0); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read of the deleted log by its reader: %v", err)
	}
	seg.release()
	if seg.log.isOpen() {
		t.Fatal("the kept descriptor outlived the last reference")
	}
	if st := files.Stats(); st.Open != 0 {
		t.Fatalf("%d files open after the log was deleted and its reader done", st.Open)
	}
}

// TestSyncOfFileRemovedMeanwhileIsNoError: a segment deleted while the
// background fsync of its evicted files is deciding to reopen one has
// nothing left to sync; the fsync must not fail (and fail the log) with
// errFileGone.
func TestSyncOfFileRemovedMeanwhileIsNoError(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := NewFileCache(MinFileCacheCapacity)
	lf, err := c.create(OSFS{}, join(dir, segmentName(0)+timeIndexSuffix), true)
	if err != nil {
		t.Fatal(err)
	}
	evictAll(c)
	c.mu.Lock()
	done := make(chan struct{})
	var syncErr error
	go func() {
		defer close(done)
		syncErr = lf.Sync()
	}()
	// Sync has seen the file neither open nor removed and waits for the
	// mutex to reopen it; the deletion marks it meanwhile.
	waitDoneOrBlocked(t, done, "(*lazyFile).Sync")
	lf.removed.Store(true) // markRemoved, whose mutex this test holds
	c.mu.Unlock()
	<-done
	if syncErr != nil {
		t.Fatalf("sync of a file deleted meanwhile: %v", syncErr)
	}
	if _, err := os.Stat(join(dir, segmentName(0)+timeIndexSuffix)); err != nil {
		t.Fatalf("the file itself: %v", err) // not unlinked here; only marked
	}
}
