package storage

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
)

// epochEntry says leader epoch Epoch began at StartOffset.
type epochEntry struct {
	Epoch       int32
	StartOffset int64
}

// epochCache is the leader epoch cache (Kafka's LeaderEpochFileCache),
// persisted in leader-epoch-checkpoint as "0\n<count>\n<epoch> <offset>\n…".
//
// When the checkpoint must be durable. The cache is used after a crash for
// three things: the answers to OffsetsForLeaderEpoch (a follower's
// divergence check and the truncation it leads to), the refusal of
// appends at an older epoch, and recovery's check that no batch carries
// an epoch newer than the checkpoint's newest (the header field the CRC
// does not cover). What it needs is that every epoch of a batch the log
// still holds is in the cache with that epoch's first offset. Recovery
// rebuilds that for the batches it scans (those past the recovery point)
// from the batches themselves; for the batches below the recovery point
// it trusts the checkpoint. So the checkpoint need only be durable before
// the recovery point passes the start of an entry it holds, and that is
// what the log does with an entry assigned with persistLazy (a new
// leader's epoch, at election): the cache changes in memory only; the
// file is written, without fsync, before the first batch of the epoch is
// (writeStale, so that after a kill -9, which keeps the page cache, no
// batch has an epoch the file lacks), and fsynced by the flush, the roll's
// background flush or the close that would move the recovery point past
// the entry's start offset (syncThrough), before it moves.
//
// If the entry is not in the file read back after a crash (it had no
// batch yet, or a power loss took the write), the checkpoint is an older
// one, which knows every epoch up to the recovery point. Two cases:
//   - The new epoch has no batch in the log: its entry (E, L) was the
//     latest, at the log end L, backed by no record. Recovery cuts the
//     cache back to the log end, dropping such an entry whether or not
//     the write survived, so the restarted replica has the same cache
//     either way: as leader it records its next epoch at L (assign drops
//     entries at or past its offset), as follower its divergence checks
//     truncate it to the same offset as with (E, L) (an epoch below E
//     ends at L, the log end, with or without it).
//   - The log holds batches of E past the recovery point: recovery finds
//     an epoch newer than the checkpoint's and cuts the log at E's first
//     batch, as it cuts a damaged tail, leaving the case above. Those
//     records were never fsynced (replication is their durability, as
//     for any unflushed tail a power loss takes); with flush.messages=1
//     the flush before the append returns fsyncs the checkpoint first, so
//     no acknowledged record of E is lost.
//
// A follower's append of a batch of a new epoch adds its entry the same
// way, before the batch is written, and the same holds: past the
// recovery point the batch's epoch is in the file on disk; short of it, a
// power loss that takes the write makes recovery cut the log at the batch
// (an unflushed tail, fetched again from the leader). Truncations still
// fsync: they are rare and not on the append path.
type epochCache struct {
	fsys FS
	path string

	mu      sync.RWMutex
	entries []epochEntry
	// unsyncedFrom is the smallest start offset of an entry not fsynced
	// since the checkpoint was last fsynced (MaxInt64: none).
	unsyncedFrom int64
	// stale says the entries changed since the file was last written.
	stale atomic.Bool
	// last is the latest entry's epoch, -1 with none, set as entries
	// changes (setLastLocked): a follower's every fetch asks it of every
	// partition it fetches.
	last atomic.Int32
}

func (c *epochCache) setLastLocked() {
	if n := len(c.entries); n > 0 {
		c.last.Store(c.entries[n-1].Epoch)
	} else {
		c.last.Store(-1)
	}
}

func loadEpochCache(fsys FS, path string) (*epochCache, error) {
	c := &epochCache{fsys: fsys, path: path, unsyncedFrom: math.MaxInt64}
	c.last.Store(-1)
	defer c.setLastLocked() // no one else has c yet
	data, err := readWholeFile(fsys, path)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, err
	}
	rows, err := parseCheckpoint(data, 2)
	if err != nil {
		return c, err
	}
	for _, r := range rows {
		e, err1 := strconv.ParseInt(r[0], 10, 32)
		o, err2 := strconv.ParseInt(r[1], 10, 64)
		if err1 != nil || err2 != nil || e < 0 || o < 0 {
			return c, fmt.Errorf("%w: %v", ErrBadCheckpoint, r)
		}
		if n := len(c.entries); n > 0 && (int32(e) <= c.entries[n-1].Epoch || o < c.entries[n-1].StartOffset) {
			return c, fmt.Errorf("%w: epochs out of order", ErrBadCheckpoint)
		}
		c.entries = append(c.entries, epochEntry{int32(e), o})
	}
	return c, nil
}

// persistMode says how assign writes the checkpoint.
type persistMode int

const (
	// persistNone changes the cache only (recovery, which writes once at
	// its end).
	persistNone persistMode = iota
	// persistLazy leaves the file for writeStale to write (no fsync)
	// before a batch of the epoch is written and syncThrough to fsync
	// before the recovery point passes the entry (see epochCache).
	persistLazy
)

// persistLocked writes the checkpoint, fsynced (clearing unsyncedFrom) or
// not.
func (c *epochCache) persistLocked(sync bool) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d\n%d\n", checkpointVersion, len(c.entries))
	for _, e := range c.entries {
		fmt.Fprintf(&b, "%d %d\n", e.Epoch, e.StartOffset)
	}
	if !sync {
		if err := writeFileReplace(c.fsys, c.path, b.Bytes()); err != nil {
			return err
		}
		c.stale.Store(false)
		return nil
	}
	if err := writeFileAtomic(c.fsys, c.path, b.Bytes()); err != nil {
		return err
	}
	c.stale.Store(false)
	c.unsyncedFrom = math.MaxInt64
	return nil
}

// writeStale writes the file, without fsync, if the entries changed since
// it was last written: the log calls it before it writes a batch, so that
// no batch on disk, fsynced or not, carries an epoch newer than the
// file's (recovery cuts the log at such a batch).
func (c *epochCache) writeStale() error {
	if !c.stale.Load() {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.stale.Load() {
		return nil
	}
	return c.persistLocked(false)
}

// syncThrough fsyncs the checkpoint if an entry written without fsync
// starts below upTo. The log calls it before it moves the recovery point
// to upTo: the batches below the recovery point are not scanned again
// after a crash, so their epochs must be in the checkpoint on disk. An
// entry at or past upTo (a new leader's epoch at the log end, no record
// of it flushed) may still be lost: see epochCache.
func (c *epochCache) syncThrough(upTo int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.unsyncedFrom >= upTo {
		return nil
	}
	return c.persistLocked(true)
}

func (c *epochCache) latest() (int32, bool) {
	e := c.last.Load()
	return e, e >= 0
}

// markUnsyncedFrom counts the entries starting at or past from as written
// without fsync: a checkpoint just read may be one written so before a
// kill -9, and only the entries below the recovery point are known to be
// on disk.
func (c *epochCache) markUnsyncedFrom(from int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.entries {
		if e.StartOffset >= from {
			c.unsyncedFrom = min(c.unsyncedFrom, e.StartOffset)
			return
		}
	}
}

// assign records that epoch starts at offset, if epoch is newer than the
// latest; entries at or after offset are dropped first. It reports whether
// the cache changed. With persistLazy the change is left for writeStale
// to write and syncThrough to fsync; with persistNone the caller writes.
func (c *epochCache) assign(epoch int32, offset int64, mode persistMode) bool {
	if epoch < 0 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(c.entries); n > 0 && c.entries[n-1].Epoch >= epoch {
		return false
	}
	for len(c.entries) > 0 && c.entries[len(c.entries)-1].StartOffset >= offset {
		c.entries = c.entries[:len(c.entries)-1]
	}
	c.entries = append(c.entries, epochEntry{epoch, offset})
	c.setLastLocked()
	if mode == persistLazy {
		c.unsyncedFrom = min(c.unsyncedFrom, offset)
		c.stale.Store(true)
	}
	return true
}

// truncateFromEnd drops entries starting at or after end (the new LEO).
func (c *epochCache) truncateFromEnd(end int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.entries)
	for n > 0 && c.entries[n-1].StartOffset >= end {
		n--
	}
	if n == len(c.entries) {
		return nil
	}
	c.entries = c.entries[:n]
	c.setLastLocked()
	return c.persistLocked(true)
}

// truncateFromStart drops entries wholly below start (the new log start
// offset), moving the one that covers start up to it.
func (c *epochCache) truncateFromStart(start int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := 0
	for i+1 < len(c.entries) && c.entries[i+1].StartOffset <= start {
		i++
	}
	if len(c.entries) == 0 || (i == 0 && c.entries[0].StartOffset >= start) {
		return nil
	}
	c.entries = append(c.entries[:0], c.entries[i:]...)
	if c.entries[0].StartOffset < start {
		c.entries[0].StartOffset = start
	}
	c.setLastLocked()
	return c.persistLocked(true)
}

func (c *epochCache) clear() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries = nil
	c.setLastLocked()
	return c.persistLocked(true)
}

func (c *epochCache) persist() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.persistLocked(true)
}

// endOffsetFor answers OffsetsForLeaderEpoch (KIP-101/279): the largest
// epoch <= requested and the offset where the next epoch starts, or leo
// for the latest epoch; (-1, -1) if requested is unknown or newer than
// every epoch.
func (c *epochCache) endOffsetFor(requested int32, leo int64) (int32, int64) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	n := len(c.entries)
	if requested < 0 || n == 0 {
		return -1, -1
	}
	if c.entries[n-1].Epoch == requested {
		return requested, leo
	}
	hi := -1 // first entry with epoch > requested
	for i, e := range c.entries {
		if e.Epoch > requested {
			hi = i
			break
		}
	}
	if hi < 0 {
		return -1, -1
	}
	if hi == 0 {
		return requested, c.entries[0].StartOffset
	}
	return c.entries[hi-1].Epoch, c.entries[hi].StartOffset
}
