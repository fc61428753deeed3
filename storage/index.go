package storage

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

const (
	offsetIndexEntrySize = 8
	timeIndexEntrySize   = 12
)

// offsetIndex is a segment's sparse offset index: entries of
// (relative offset uint32, file position uint32), both big endian, in
// increasing order, one for the first batch after every
// IndexIntervalBytes of log. The entry's offset is the base offset of the
// batch that starts at the position.
//
// The entries live in memory (buf) and reach the file in persist, at
// flush, roll and close; the index of the active segment is rebuilt by
// recovery after a crash, so a lagging file is harmless. The file grows
// with its entries, up to SegmentIndexBytes (nothing is preallocated).
//
// buf is guarded by Log.mu; file and written by Log.appendMu.
type offsetIndex struct {
	base    int64
	buf     []byte
	written int // bytes of buf already in the file
	file    *lazyFile
}

func (x *offsetIndex) entries() int { return len(x.buf) / offsetIndexEntrySize }

func (x *offsetIndex) entry(i int) (offset int64, pos int64) {
	e := x.buf[i*offsetIndexEntrySize:]
	return x.base + int64(binary.BigEndian.Uint32(e)), int64(binary.BigEndian.Uint32(e[4:]))
}

func (x *offsetIndex) appendEntry(offset, pos int64) {
	x.buf = binary.BigEndian.AppendUint32(x.buf, uint32(offset-x.base))
	x.buf = binary.BigEndian.AppendUint32(x.buf, uint32(pos))
}

// lookup returns the last entry whose offset is <= target, or (-1, 0) if
// there is none: then scan from the start of the segment.
func (x *offsetIndex) lookup(target int64) (offset, pos int64) {
	lo, hi := 0, x.entries() // find first entry > target
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if o, _ := x.entry(m); o <= target {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == 0 {
		return -1, 0
	}
	return x.entry(lo - 1)
}

// truncateToPos drops the entries at or after file position pos.
func (x *offsetIndex) truncateToPos(pos int64) {
	n := x.entries()
	for n > 0 {
		if _, p := x.entry(n - 1); p < pos {
			break
		}
		n--
	}
	x.buf = x.buf[:n*offsetIndexEntrySize]
	x.written = min(x.written, len(x.buf))
}

// check validates loaded entries against the segment: increasing offsets
// and positions, positions inside the log.
func (x *offsetIndex) check(logSize int64) error {
	prevOff, prevPos := int64(-1), int64(0)
	for i := 0; i < x.entries(); i++ {
		off, pos := x.entry(i)
		if off <= prevOff || pos <= prevPos || pos >= logSize {
			return fmt.Errorf("offset index entry %d (%d, %d) out of order or past log size %d", i, off, pos, logSize)
		}
		prevOff, prevPos = off, pos
	}
	return nil
}

// timeIndex is a segment's time index: entries of (timestamp int64,
// relative offset uint32), big endian. An entry (T, O) says that the
// largest timestamp of the batches up to and including the batch with base
// offset O is T, and that batch O is the first to reach it. Timestamps
// strictly increase from entry to entry. Same persistence rules as
// offsetIndex.
type timeIndex struct {
	base    int64
	buf     []byte
	written int
	file    *lazyFile
}

func (x *timeIndex) entries() int { return len(x.buf) / timeIndexEntrySize }

func (x *timeIndex) entry(i int) (ts int64, offset int64) {
	e := x.buf[i*timeIndexEntrySize:]
	return int64(binary.BigEndian.Uint64(e)), x.base + int64(binary.BigEndian.Uint32(e[8:]))
}

func (x *timeIndex) last() (ts int64, offset int64, ok bool) {
	if n := x.entries(); n > 0 {
		ts, offset = x.entry(n - 1)
		return ts, offset, true
	}
	return -1, -1, false
}

func (x *timeIndex) appendEntry(ts, offset int64) {
	x.buf = binary.BigEndian.AppendUint64(x.buf, uint64(ts))
	x.buf = binary.BigEndian.AppendUint32(x.buf, uint32(offset-x.base))
}

// maybeAppend adds (ts, offset) if ts is larger than the last entry's.
func (x *timeIndex) maybeAppend(ts, offset int64) bool {
	if lt, _, ok := x.last(); ok && ts <= lt {
		return false
	}
	if ts < 0 {
		return false
	}
	x.appendEntry(ts, offset)
	return true
}

// lookupBefore returns the offset of the last entry whose timestamp is
// < ts, or -1: all records up to that batch are older than ts.
func (x *timeIndex) lookupBefore(ts int64) int64 {
	lo, hi := 0, x.entries()
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if t, _ := x.entry(m); t < ts {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == 0 {
		return -1
	}
	_, off := x.entry(lo - 1)
	return off
}

func (x *timeIndex) truncateToOffset(next int64) {
	n := x.entries()
	for n > 0 {
		if _, o := x.entry(n - 1); o < next {
			break
		}
		n--
	}
	x.buf = x.buf[:n*timeIndexEntrySize]
	x.written = min(x.written, len(x.buf))
}

func (x *timeIndex) check(maxOffset int64) error {
	prevTs, prevOff := int64(math.MinInt64), int64(-1)
	for i := 0; i < x.entries(); i++ {
		ts, off := x.entry(i)
		if ts <= prevTs || off < prevOff || off > maxOffset || ts < 0 {
			return fmt.Errorf("time index entry %d (%d, %d) out of order", i, ts, off)
		}
		prevTs, prevOff = ts, off
	}
	return nil
}

// loadIndexFile reads an index file, dropping the all-zero entries a
// preallocated file ends with. A size that is not a multiple of the entry
// size is an error.
func loadIndexFile(f File, entrySize int) ([]byte, error) {
	size, err := fileSize(f)
	if err != nil {
		return nil, err
	}
	if size%int64(entrySize) != 0 {
		return nil, fmt.Errorf("index size %d is not a multiple of %d", size, entrySize)
	}
	if size > math.MaxInt32 {
		return nil, fmt.Errorf("index size %d too large", size)
	}
	buf := make([]byte, size)
	if n, err := f.ReadAt(buf, 0); n != len(buf) {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	n := len(buf)
	for n >= entrySize && allZero(buf[n-entrySize:n]) {
		n -= entrySize
	}
	return buf[:n:n], nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// persistIndex writes buf[written:] to f.
func persistIndex(f File, buf []byte, written *int) error {
	if *written >= len(buf) {
		return nil
	}
	if _, err := f.WriteAt(buf[*written:], int64(*written)); err != nil {
		return err
	}
	*written = len(buf)
	return nil
}

// recentBatchesKept is how many of a segment's last batches recentBatches
// remembers.
const recentBatchesKept = 32

// recentBatches remembers where the last batches appended to a segment
// start. A read at the log's end, a caught-up follower's or consumer's
// (the most common read), then finds its batch at once, where the sparse
// index (an entry every index.interval.bytes) left a walk over the
// headers since the last entry: a read call per batch, dozens per fetch
// when batches are small, as a trickle of produces makes them. Entries
// are in offset order, oldest first, in a ring.
type recentBatches struct {
	offsets [recentBatchesKept]int64
	pos     [recentBatchesKept]int64
	next    int // slot of the next entry
	n       int // entries kept
}

func (r *recentBatches) add(offset, pos int64) {
	r.offsets[r.next], r.pos[r.next] = offset, pos
	r.next = (r.next + 1) % recentBatchesKept
	r.n = min(r.n+1, recentBatchesKept)
}

// lookup returns the newest batch kept whose base offset is <= target, or
// ok false when there is none.
func (r *recentBatches) lookup(target int64) (offset, pos int64, ok bool) {
	for k := 1; k <= r.n; k++ {
		i := (r.next - k + recentBatchesKept) % recentBatchesKept
		if r.offsets[i] <= target {
			return r.offsets[i], r.pos[i], true
		}
	}
	return -1, 0, false
}

// truncateToPos drops the batches at or after file position pos.
func (r *recentBatches) truncateToPos(pos int64) {
	for r.n > 0 {
		i := (r.next - 1 + recentBatchesKept) % recentBatchesKept
		if r.pos[i] < pos {
			return
		}
		r.next, r.n = i, r.n-1
	}
}
