package storage

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
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
type epochCache struct {
	fsys FS
	path string

	mu      sync.RWMutex
	entries []epochEntry
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
	c := &epochCache{fsys: fsys, path: path}
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

func (c *epochCache) persistLocked() error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d\n%d\n", checkpointVersion, len(c.entries))
	for _, e := range c.entries {
		fmt.Fprintf(&b, "%d %d\n", e.Epoch, e.StartOffset)
	}
	return writeFileAtomic(c.fsys, c.path, b.Bytes())
}

func (c *epochCache) latest() (int32, bool) {
	e := c.last.Load()
	return e, e >= 0
}

// assign records that epoch starts at offset, if epoch is newer than the
// latest; entries at or after offset are dropped first. It reports whether
// the cache changed; persist says whether to write the file.
func (c *epochCache) assign(epoch int32, offset int64, persist bool) (bool, error) {
	if epoch < 0 {
		return false, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(c.entries); n > 0 && c.entries[n-1].Epoch >= epoch {
		return false, nil
	}
	for len(c.entries) > 0 && c.entries[len(c.entries)-1].StartOffset >= offset {
		c.entries = c.entries[:len(c.entries)-1]
	}
	c.entries = append(c.entries, epochEntry{epoch, offset})
	c.setLastLocked()
	if !persist {
		return true, nil
	}
	return true, c.persistLocked()
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
	return c.persistLocked()
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
	return c.persistLocked()
}

func (c *epochCache) clear() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries = nil
	c.setLastLocked()
	return c.persistLocked()
}

func (c *epochCache) persist() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.persistLocked()
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
