package storage

import (
	"errors"
	"fmt"
	"io"

	"github.com/quirelog/quire/record"
)

// ReadResult is the answer to Read.
type ReadResult struct {
	// Batches holds whole batches, unmodified from disk.
	Batches []byte
	// HighOffset is the offset after the last returned batch (the offset
	// to read next); the requested offset when nothing was returned.
	HighOffset int64
	// LogStartOffset and LogEndOffset as of the read.
	LogStartOffset, LogEndOffset int64
}

// Read returns whole batches, starting with the one that contains offset,
// up to maxBytes, never including a batch with offsets at or after
// maxOffset (a consumer passes the high watermark, replication the log end
// offset). It returns at least one batch when one is available below
// maxOffset, even if larger than maxBytes, so that a large batch cannot
// block a reader. It returns ErrOffsetOutOfRange if offset is below the log
// start or above the log end offset, and nothing if offset is at the log
// end or at maxOffset. Reads stop at the end of a segment.
func (l *Log) Read(offset int64, maxBytes int, maxOffset int64) (ReadResult, error) {
	return l.ReadAppend(nil, offset, maxBytes, maxOffset)
}

// ReadAppend is Read that appends the batches to dst, so that a caller can
// reuse a buffer.
func (l *Log) ReadAppend(dst []byte, offset int64, maxBytes int, maxOffset int64) (ReadResult, error) {
	return untorn(l, func() (ReadResult, error) { return l.readOnce(dst, offset, maxBytes, maxOffset) })
}

// untorn runs read until no truncation overlapped it. A truncation while
// reading may cut or rewrite (by later appends) the bytes being read, past
// the size the read started from: the read could come back short, empty
// below the log end, holding batches not yet published, or holding
// batches being cut. So a read waits for a truncation under way (odd
// count) to publish the new log end, and is done again if one happened
// meanwhile.
func untorn[T any](l *Log, read func() (T, error)) (T, error) {
	for {
		gen := l.truncations.Load()
		if gen&1 != 0 {
			l.waitTruncation()
			continue
		}
		res, err := read()
		if l.truncations.Load() == gen {
			return res, err
		}
	}
}

// waitTruncation waits until the truncation under way has published the
// new log end.
func (l *Log) waitTruncation() {
	if l.readWaitHook != nil {
		l.readWaitHook()
	}
	// The channel was stored before the count turned odd, so this is the
	// running truncation's, or a later one's (closed or not: either way
	// the caller then looks at the count again).
	if done := l.truncationDone.Load(); done != nil {
		<-*done
	}
}

func (l *Log) readOnce(dst []byte, offset int64, maxBytes int, maxOffset int64) (ReadResult, error) {
	if l.closedFlag.Load() {
		return ReadResult{}, ErrClosed
	}
	leo := l.leo.Load()
	start := l.logStart.Load()
	res := ReadResult{Batches: dst, HighOffset: offset, LogStartOffset: start, LogEndOffset: leo}
	if offset < start || offset > leo {
		return res, fmt.Errorf("%w: offset %d, %s", ErrOffsetOutOfRange, offset, ValidOffsets(start, leo))
	}
	maxOffset = min(maxOffset, leo)
	if offset >= maxOffset {
		return res, nil
	}
	seg := l.segmentFor(offset)
	if seg == nil {
		return res, ErrClosed
	}
	for {
		limit := seg.size.Load()
		l.mu.RLock()
		idxOff, idxPos := int64(-1), int64(0)
		if !seg.indexSuspect.Load() {
			idxOff, idxPos = seg.idx.lookup(offset)
		}
		hintOff, hintPos, hinted := seg.recent.lookup(offset)
		l.mu.RUnlock()
		var pos int64
		var h record.Header
		var found bool
		var err error
		if hinted && hintOff > idxOff && hintPos < limit {
			pos, h, found, err = seg.locateFromRecent(offset, hintOff, hintPos, idxOff, idxPos, limit)
		} else {
			pos, h, found, err = seg.locate(offset, idxOff, idxPos, limit)
		}
		if err != nil {
			seg.release()
			return res, l.readErr(seg, err)
		}
		if found {
			if h.LastOffset() >= maxOffset {
				seg.release()
				return res, nil
			}
			out, high, err := readBatches(seg, dst, pos, limit, h, maxBytes, maxOffset)
			seg.release()
			if err != nil {
				return res, l.readErr(seg, err)
			}
			res.Batches, res.HighOffset = out, high
			return res, nil
		}
		// Not in this segment (the offset was in a batch truncated away
		// or sits past its end): try the next one.
		seg.release()
		l.mu.RLock()
		j := l.floorLocked(seg.base)
		if len(l.segs) == 0 || l.segs[j] != seg || j+1 >= len(l.segs) {
			l.mu.RUnlock()
			return res, nil
		}
		seg = l.segs[j+1]
		if !seg.tryAcquire() {
			l.mu.RUnlock()
			return res, ErrClosed
		}
		l.mu.RUnlock()
	}
}

func (l *Log) readErr(seg *segment, err error) error {
	if errors.Is(err, record.ErrCorrupt) {
		return fmt.Errorf("storage: read segment %d: %w", seg.base, corrupt(err))
	}
	return fmt.Errorf("storage: read segment %d: %w", seg.base, err)
}

// readBatches reads whole batches from pos (where the batch h starts) with
// one read call, then trims to whole batches within maxBytes and below
// maxOffset (keeping at least the first).
func readBatches(seg *segment, dst []byte, pos, limit int64, h record.Header, maxBytes int, maxOffset int64) ([]byte, int64, error) {
	want := max(int64(maxBytes), int64(h.Size()))
	want = min(want, limit-pos)
	start := len(dst)
	dst = growBytes(dst, int(want))
	buf := dst[start:]
	n, err := seg.log.ReadAt(buf, pos)
	if err != nil && !(errors.Is(err, io.EOF) && n >= h.Size()) {
		if errors.Is(err, io.EOF) {
			// Truncated under us; report nothing rather than a torn batch.
			return dst[:start], h.BaseOffset, nil
		}
		return dst[:start], h.BaseOffset, err
	}
	buf = buf[:n]
	used, high := 0, h.BaseOffset
	for used < len(buf) {
		size := record.PeekSize(buf[used:])
		if size < record.HeaderSize || used+size > len(buf) {
			break
		}
		bh, err := record.ParseHeader(buf[used:])
		if err != nil {
			if used == 0 {
				return dst[:start], h.BaseOffset, err
			}
			break
		}
		if bh.LastOffset() >= maxOffset || (used > 0 && used+size > maxBytes) {
			break
		}
		used += size
		high = bh.NextOffset()
	}
	return dst[:start+used], high, nil
}

func growBytes(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b[:len(b)+n]
	}
	nb := make([]byte, len(b)+n)
	copy(nb, b)
	return nb
}

// OffsetForTimestamp returns the first offset at or after the log start
// whose record timestamp is >= ts, with that record's timestamp, as Kafka's
// ListOffsets does. found is false if no record is that recent. The
// special timestamps -2 (earliest) and -1 (latest) return the log start
// and log end offsets.
func (l *Log) OffsetForTimestamp(ts int64) (offset int64, timestamp int64, found bool, err error) {
	type result struct {
		offset, timestamp int64
		found             bool
	}
	r, err := untorn(l, func() (result, error) {
		off, t, ok, err := l.offsetForTimestampOnce(ts)
		return result{off, t, ok}, err
	})
	return r.offset, r.timestamp, r.found, err
}

func (l *Log) offsetForTimestampOnce(ts int64) (offset int64, timestamp int64, found bool, err error) {
	if l.closedFlag.Load() {
		return 0, 0, false, ErrClosed
	}
	switch ts {
	case -2:
		return l.logStart.Load(), -1, true, nil
	case -1:
		return l.leo.Load(), -1, true, nil
	}
	start := l.logStart.Load()
	l.mu.RLock()
	segs := make([]*segment, 0, len(l.segs))
	closed := len(l.segs) == 0
	if !closed {
		for _, s := range l.segs[l.floorLocked(start):] {
			if !s.tryAcquire() {
				closed = true // the log was closed under us
				break
			}
			segs = append(segs, s)
		}
	}
	l.mu.RUnlock()
	defer func() {
		for _, s := range segs {
			s.release()
		}
	}()
	if closed {
		return 0, 0, false, ErrClosed
	}
	for _, s := range segs {
		if s.maxTs.Load() < ts {
			continue
		}
		limit := s.size.Load()
		l.mu.RLock()
		from := s.tidx.lookupBefore(ts)
		idxOff, idxPos := int64(-1), int64(0)
		if !s.indexSuspect.Load() {
			idxOff, idxPos = s.idx.lookup(max(from, start))
		}
		l.mu.RUnlock()
		pos, _, ok, err := s.locate(max(from, start), idxOff, idxPos, limit)
		if err != nil {
			return 0, 0, false, l.readErr(s, err)
		}
		if !ok {
			continue
		}
		var hb [record.HeaderSize]byte
		for pos < limit {
			h, err := s.readHeader(pos, limit, &hb)
			if err != nil {
				return 0, 0, false, l.readErr(s, err)
			}
			if h.MaxTimestamp >= ts && h.LastOffset() >= start {
				off, t, ok, err := firstRecordAtOrAfter(s, pos, h, ts, start)
				if err != nil || ok {
					return off, t, ok, err
				}
			}
			pos += int64(h.Size())
		}
	}
	return 0, 0, false, nil
}

var errStop = errors.New("stop")

// firstRecordAtOrAfter reads the batch at pos and returns its first record
// with timestamp >= ts and offset >= start.
func firstRecordAtOrAfter(s *segment, pos int64, h record.Header, ts, start int64) (int64, int64, bool, error) {
	batch := make([]byte, h.Size())
	if _, err := s.log.ReadAt(batch, pos); err != nil {
		return 0, 0, false, err
	}
	var off, t int64
	found := false
	err := record.ForEachRecord(batch, func(r *record.Record) error {
		if r.Timestamp >= ts && r.Offset >= start {
			off, t, found = r.Offset, r.Timestamp, true
			return errStop
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return 0, 0, false, corrupt(err)
	}
	return off, t, found, nil
}
