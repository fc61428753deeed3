package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
)

// FileCache bounds how many segment files (.log, .index, .timeindex) the
// logs sharing it hold open. Files are opened when first used and closed
// again when the cache needs room for another, the least recently used
// first (a CLOCK approximation of LRU), so the number of partitions and
// segments on disk is not bounded by the open-file limit. A Manager's logs
// share one cache (Options.Files).
//
// A file in use is pinned: a read, write, fsync or truncate pins it for the
// length of the call, and a pinned file is never closed under its user.
// Pinning an open file is two atomic operations, with no lock shared by
// the logs; the cache's mutex is taken only to open a file (a miss), to
// close one, to evict (fsyncing first a file written since its last
// fsync) and to mark a deleted file.
type FileCache struct {
	capacity int

	mu   sync.Mutex
	ring []*lazyFile // the open files, in no order; guarded by mu
	hand int         // the clock hand: next slot of ring to look at

	opens     atomic.Int64
	evictions atomic.Int64
}

// MinFileCacheCapacity is the smallest capacity a FileCache takes: the
// files of a few segments in use at once.
const MinFileCacheCapacity = 16

// NewFileCache returns a cache keeping at most capacity files open (at
// least MinFileCacheCapacity); capacity <= 0 means
// DefaultFileCacheCapacity(). More may be open for a moment when every
// open file is pinned: a file in use is never closed, nor is an open
// refused because the others are busy.
func NewFileCache(capacity int) *FileCache {
	if capacity <= 0 {
		capacity = DefaultFileCacheCapacity()
	}
	return &FileCache{capacity: max(capacity, MinFileCacheCapacity)}
}

// DefaultFileCacheCapacity is half the process's soft open-file limit
// (RLIMIT_NOFILE), leaving the other half to connections, the metadata
// store and short-lived files (checkpoints, snapshots); 4096 where the
// limit cannot be read.
func DefaultFileCacheCapacity() int {
	n, ok := openFileLimit()
	if !ok {
		return 4096
	}
	return max(int(min(n/2, 1<<30)), MinFileCacheCapacity)
}

// Capacity returns the most files the cache keeps open.
func (c *FileCache) Capacity() int { return c.capacity }

// FileCacheStats are a FileCache's counters.
type FileCacheStats struct {
	Capacity int
	Open     int   // files open now
	Opens    int64 // files opened (created or reopened) since the cache was made
	Evicted  int64 // files closed to make room
}

// Stats returns the cache's counters.
func (c *FileCache) Stats() FileCacheStats {
	c.mu.Lock()
	n := len(c.ring)
	c.mu.Unlock()
	return FileCacheStats{Capacity: c.capacity, Open: n, Opens: c.opens.Load(), Evicted: c.evictions.Load()}
}

// fileOpen is set in lazyFile.state while the file is open; the bits
// below it count the pins.
const fileOpen = int64(1) << 62

// lazyFile is a File opened on demand through a FileCache. Its state
// moves only so: closed (0) to open (fileOpen|pins) under the cache's
// mutex; pinned and unpinned by atomic compare-and-swap or add while
// open; open and unpinned (exactly fileOpen) to closed by a
// compare-and-swap under the cache's mutex. So a compare-and-swap that
// pins an open file wins against eviction or loses to it (and then the
// pinner reopens the file under the mutex), and f, written only under the
// mutex while the file is closed, is stable while pinned.
type lazyFile struct {
	c    *FileCache
	fs   FS
	name string
	// mayCreate: reopening creates the file if it is missing (an index,
	// rebuilt from the log); a missing .log is an error, never an empty
	// segment.
	mayCreate bool

	state   atomic.Int64
	used    atomic.Bool // the CLOCK reference bit, set by pins
	closed  atomic.Bool // Close was called: the last unpin closes the file
	removed atomic.Bool // the file was deleted: it cannot be reopened
	// hasCloseErr says closeErr is set, so that Sync takes the cache's
	// mutex only then.
	hasCloseErr atomic.Bool
	// dirty: written since its last fsync. An evicted file is fsynced
	// before its descriptor closes: once no descriptor is open the
	// kernel may forget a write-back error, which the next fsync (on a
	// new descriptor) would then not report. A truncation, reported
	// when made, leaves no pages to write back.
	dirty atomic.Bool

	// Guarded by c.mu.
	f        File
	slot     int   // index in c.ring while open
	kept     bool  // a pin held from keepOpen until Close
	closeErr error // an eviction's fsync or close error, told by the next Sync or Close
}

// lazy returns the file name, to be opened when first used.
func (c *FileCache) lazy(fsys FS, name string, mayCreate bool) *lazyFile {
	return &lazyFile{c: c, fs: fsys, name: name, mayCreate: mayCreate, slot: -1}
}

// create creates (or truncates) the file name and returns it open;
// mayCreate is for its reopening (see lazyFile).
func (c *FileCache) create(fsys FS, name string, mayCreate bool) (*lazyFile, error) {
	lf := c.lazy(fsys, name, mayCreate)
	c.mu.Lock()
	defer c.mu.Unlock()
	f, err := c.openLocked(func() (File, error) { return fsys.Create(name) })
	if err != nil {
		return nil, err
	}
	c.addLocked(lf, f, 0)
	return lf, nil
}

// openLocked makes room for one more file, then opens it. Should the
// process run out of descriptors anyway (the capacity is an estimate of
// what the rest of the process leaves), it closes an eighth of the open
// files and tries once more.
func (c *FileCache) openLocked(open func() (File, error)) (File, error) {
	for len(c.ring) >= c.capacity && c.evictOneLocked() {
	}
	f, err := open()
	if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
		for n := len(c.ring)/8 + 1; n > 0 && c.evictOneLocked(); n-- {
		}
		f, err = open()
	}
	if err == nil {
		c.opens.Add(1)
	}
	return f, err
}

func (c *FileCache) addLocked(lf *lazyFile, f File, pins int64) {
	lf.f = f
	lf.slot = len(c.ring)
	c.ring = append(c.ring, lf)
	lf.used.Store(true)
	lf.state.Store(fileOpen | pins) // publishes f
}

// evictOneLocked closes the first open, unpinned file the clock hand
// finds not used since it last passed; false if every file is pinned.
func (c *FileCache) evictOneLocked() bool {
	for n := 2 * len(c.ring); n > 0 && len(c.ring) > 0; n-- {
		if c.hand >= len(c.ring) {
			c.hand = 0
		}
		lf := c.ring[c.hand]
		if lf.used.Load() {
			lf.used.Store(false)
			c.hand++
			continue
		}
		if lf.state.CompareAndSwap(fileOpen, 0) {
			var err error
			if lf.dirty.Load() && !lf.removed.Load() {
				if err = lf.f.Sync(); err == nil {
					lf.dirty.Store(false)
				}
			}
			if err := errors.Join(err, c.closeLocked(lf)); err != nil && lf.closeErr == nil {
				lf.closeErr = err
				lf.hasCloseErr.Store(true)
			}
			c.evictions.Add(1)
			return true // the hand now points at the file moved into the slot
		}
		c.hand++
	}
	return false
}

// closeLocked closes lf, whose state the caller has just turned from
// fileOpen to 0, and takes it out of the ring.
func (c *FileCache) closeLocked(lf *lazyFile) error {
	err := lf.f.Close()
	lf.f = nil
	last := c.ring[len(c.ring)-1]
	c.ring[lf.slot] = last
	last.slot = lf.slot
	c.ring[len(c.ring)-1] = nil
	c.ring = c.ring[:len(c.ring)-1]
	lf.slot = -1
	return err
}

// errFileGone is returned for a segment file that has been deleted and is
// needed again.
var errFileGone = errors.New("storage: segment file deleted")

// pin returns the open file, opening it if needed; unpin when done.
func (lf *lazyFile) pin() (File, error) {
	for {
		s := lf.state.Load()
		if s&fileOpen == 0 {
			return lf.pinSlow()
		}
		if lf.state.CompareAndSwap(s, s+1) {
			if !lf.used.Load() {
				lf.used.Store(true)
			}
			return lf.f, nil
		}
	}
}

// tryPin pins the file only if it is open.
func (lf *lazyFile) tryPin() (File, bool) {
	for {
		s := lf.state.Load()
		if s&fileOpen == 0 {
			return nil, false
		}
		if lf.state.CompareAndSwap(s, s+1) {
			return lf.f, true
		}
	}
}

func (lf *lazyFile) pinSlow() (File, error) {
	c := lf.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if f, ok := lf.tryPin(); ok {
		lf.used.Store(true)
		return f, nil
	}
	switch {
	case lf.removed.Load():
		return nil, fmt.Errorf("%w: %s", errFileGone, lf.name)
	case lf.closed.Load():
		return nil, fmt.Errorf("%w: %s", ErrClosed, lf.name)
	}
	f, err := c.openLocked(func() (File, error) {
		if !lf.mayCreate {
			if _, err := lf.fs.Stat(lf.name); err != nil {
				return nil, err
			}
		}
		return lf.fs.OpenReadWrite(lf.name)
	})
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: %w", errFileGone, err)
		}
		return nil, fmt.Errorf("storage: reopen segment file: %w", err)
	}
	c.addLocked(lf, f, 1)
	return f, nil
}

func (lf *lazyFile) unpin() {
	if lf.state.Add(-1) == fileOpen && lf.closed.Load() {
		lf.closeIdle()
	}
}

// closeIdle closes the file after Close if no one has it pinned.
func (lf *lazyFile) closeIdle() error {
	c := lf.c
	c.mu.Lock()
	defer c.mu.Unlock()
	var err error
	if lf.state.CompareAndSwap(fileOpen, 0) {
		err = c.closeLocked(lf)
	}
	return errors.Join(err, lf.takeCloseErrLocked())
}

func (lf *lazyFile) takeCloseErrLocked() error {
	err := lf.closeErr
	lf.closeErr = nil
	lf.hasCloseErr.Store(false)
	return err
}

// Close closes the file for good (the segment is gone or its log closed).
// A pin still held (which the segments' reference counts rule out) keeps
// it open until released.
func (lf *lazyFile) Close() error {
	c := lf.c
	c.mu.Lock()
	if lf.closed.Swap(true) {
		c.mu.Unlock()
		return nil
	}
	kept := lf.kept
	lf.kept = false
	c.mu.Unlock()
	if kept {
		lf.state.Add(-1)
	}
	return lf.closeIdle()
}

// keepOpen opens the file if needed and keeps it open until Close, out of
// the cache's reach: a segment being deleted while readers still hold it
// keeps its .log readable through the descriptor, as it was before the
// file was unlinked.
//
// A Close (the last reference going) may race it: the pin is kept only if
// Close, which drops it, has not run yet.
func (lf *lazyFile) keepOpen() error {
	if _, err := lf.pin(); err != nil {
		return err
	}
	lf.c.mu.Lock()
	drop := lf.kept || lf.closed.Load()
	if !drop {
		lf.kept = true
	}
	lf.c.mu.Unlock()
	if drop {
		lf.unpin()
	}
	return nil
}

// markRemoved records that the file is being deleted: it is not reopened.
// Call it before the unlink. It takes the cache's mutex, under which a
// reopen checks the mark and opens the file, so a reopen already past the
// check finishes first (the unlink then takes the file it opened) and none
// after it can recreate the file, or open another made since at the same
// name.
func (lf *lazyFile) markRemoved() {
	lf.c.mu.Lock()
	lf.removed.Store(true)
	lf.c.mu.Unlock()
}

// isOpen reports whether the file holds a descriptor now (tests).
func (lf *lazyFile) isOpen() bool { return lf.state.Load()&fileOpen != 0 }

func (lf *lazyFile) ReadAt(p []byte, off int64) (int, error) {
	f, err := lf.pin()
	if err != nil {
		return 0, err
	}
	n, err := f.ReadAt(p, off)
	lf.unpin()
	return n, err
}

func (lf *lazyFile) WriteAt(p []byte, off int64) (int, error) {
	f, err := lf.pin()
	if err != nil {
		return 0, err
	}
	n, err := f.WriteAt(p, off)
	lf.dirty.Store(true)
	lf.unpin()
	return n, err
}

// Sync fsyncs the file, reopening it if needed: dirty pages written
// through a descriptor since closed are the file's (and the cache fsynced
// them before closing it). An error fsyncing or closing an evicted
// descriptor is reported here too. A deleted file that is not open has
// nothing left worth syncing.
func (lf *lazyFile) Sync() error {
	if lf.hasCloseErr.Load() {
		lf.c.mu.Lock()
		err := lf.takeCloseErrLocked()
		lf.c.mu.Unlock()
		if err != nil {
			return err
		}
	}
	f, ok := lf.tryPin()
	if !ok {
		if lf.removed.Load() {
			return nil
		}
		var err error
		if f, err = lf.pin(); err != nil {
			if errors.Is(err, errFileGone) && lf.removed.Load() {
				return nil // deleted since the check above
			}
			return err
		}
	}
	// Cleared first: a write racing the fsync marks the file again.
	lf.dirty.Store(false)
	err := f.Sync()
	if err != nil {
		lf.dirty.Store(true)
	}
	lf.unpin()
	return err
}

func (lf *lazyFile) Truncate(size int64) error {
	f, err := lf.pin()
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	lf.unpin()
	return err
}

func (lf *lazyFile) Stat() (os.FileInfo, error) {
	f, err := lf.pin()
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	lf.unpin()
	return st, err
}

// withFile runs fn with the file pinned, for calls on the descriptor
// itself (reserveSpace).
func (lf *lazyFile) withFile(fn func(File) error) error {
	f, err := lf.pin()
	if err != nil {
		return err
	}
	defer lf.unpin()
	return fn(f)
}

var _ File = (*lazyFile)(nil)
