package storage

import (
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quirelog/quire/record"
)

// Log compaction (cleanup.policy=compact), as Kafka's log cleaner does it.
//
// A compacted log is split at its clean point: below it, the clean
// section, which a pass has already deduplicated; from it up to the first
// uncleanable offset, the dirty section; above that, the uncleanable part
// (the active segment, segments holding offsets at or above the high
// watermark or records younger than min.compaction.lag.ms), never
// touched. A pass (Log.clean)
//
//  1. maps every key of the dirty section to the offset of its latest
//     record (offsetMap, bounded memory: when it fills, the pass maps a
//     prefix of the dirty section and the rest waits for the next pass);
//  2. rewrites the segments below the end of what it mapped, in groups of
//     consecutive segments whose sizes add up to at most segment.bytes
//     (so small cleaned segments merge), keeping a record unless the map
//     has a later offset for its key, it has no key, or it is a tombstone
//     (null value) below a clean point reached more than
//     delete.retention.ms ago (cleanMark, kept in clean-marks-checkpoint:
//     clean_marks.go). Aborted transactions' records are neither mapped
//     nor kept, committed ones are treated as any other record, and a
//     marker goes a delete horizon after its transaction is found empty
//     (clean_txn.go); nothing at or above the last stable offset is
//     cleanable. A batch keeps its header (offsets, timestamps, attributes, producer
//     fields) and its kept records their offsets and timestamps; a batch
//     left empty is dropped unless it is the last batch of a producer
//     the log still tracks, which stays as an empty batch so that the
//     producer's sequence numbers survive (record.EmptyBatch);
//  3. swaps each group in atomically (clean_swap.go): the new segment is
//     written as <base>.log.cleaned (and .index.cleaned,
//     .timeindex.cleaned, .txnindex.cleaned when the group has aborted
//     transactions) and fsynced, the index files and then the .log
//     renamed to .swap (the commit point: from then on recovery finishes
//     the swap), the old segments' files removed and the .swap files
//     renamed to their final names, under the log's append lock. OpenLog removes *.cleaned files
//     and finishes a swap it finds (removing the segments whose base
//     offsets lie in the .swap segment's offset range, then renaming it).
//
// The new segment takes the base offset of the first segment of its
// group, so segment names, the log start offset and every kept record's
// offset stay as they were; offsets only gain gaps.

// CleanStats describes one clean pass of a log.
type CleanStats struct {
	// FirstDirty is where the dirty section started; MapEnd is the end
	// of the part the offset map covered, the log's new clean point.
	FirstDirty, MapEnd int64
	// Keys is the number of distinct keys mapped; MapBytes the memory of
	// the offset map.
	Keys     int
	MapBytes int64
	// BytesRead counts the bytes of the dirty section (read to build the
	// map) and of the rewritten segments; BytesWritten those of the new
	// segments.
	BytesRead, BytesWritten int64
	// SegmentsIn and SegmentsOut are the segments replaced and written.
	SegmentsIn, SegmentsOut int
	// RecordsRead and RecordsRemoved count records of the rewritten
	// segments.
	RecordsRead, RecordsRemoved int64
	Elapsed                     time.Duration
}

// CleanerStats is a log's cleaning state, for metrics.
type CleanerStats struct {
	// DirtyRatio is the share of the cleanable bytes that is dirty (0
	// when there is nothing cleanable).
	DirtyRatio float64
	// CleanPoint is the first dirty offset.
	CleanPoint int64
	// LastCleanMs is the time of the last completed pass (Unix ms), 0 if
	// none.
	LastCleanMs int64
	// LagMs is how long the oldest dirty record has waited (now minus
	// the first timestamp of the first dirty segment); 0 when nothing is
	// dirty.
	LagMs int64
	// BytesCleaned and BytesWritten are totals over this log's passes.
	BytesCleaned, BytesWritten int64
	// Passes counts completed passes.
	Passes int64
}

// cleanState is a log's cleaner bookkeeping.
type cleanState struct {
	mu sync.Mutex // one pass at a time
	// point is the clean point: offsets below it were deduplicated by a
	// pass (kept in cleaner-offset-checkpoint); -1 unknown (the log
	// start).
	point        atomic.Int64
	lastCleanMs  atomic.Int64
	bytesCleaned atomic.Int64
	bytesWritten atomic.Int64
	passes       atomic.Int64
	// marks records when the clean point reached where (appendMu held):
	// a tombstone below a mark's point was first cleaned no later than
	// its time, from which delete.retention.ms counts. They are kept in
	// clean-marks-checkpoint (clean_marks.go): marksSeq numbers the
	// snapshots taken for it (appendMu held), marksWritten is the last
	// written (fileMu held); marksLoaded says the file was read at open.
	marks        []cleanMark
	marksSeq     int64
	marksLoaded  bool
	fileMu       sync.Mutex
	marksWritten int64
}

// cleanMark: the clean point reached point at ms (Unix ms).
type cleanMark struct{ point, ms int64 }

// addMarkLocked records that the clean point is point as of ms (appendMu
// held).
func (c *cleanState) addMarkLocked(point, ms int64) {
	if n := len(c.marks); n > 0 && c.marks[n-1].point >= point {
		return
	}
	c.marks = append(c.marks, cleanMark{point, ms})
	if len(c.marks) > maxCleanMarks {
		// Thin out every other mark but the first and last: a tombstone
		// between two that remain then waits for the later one, longer,
		// never shorter.
		kept := c.marks[:1]
		for i := 2; i < len(c.marks)-1; i += 2 {
			kept = append(kept, c.marks[i])
		}
		c.marks = append(kept, c.marks[len(c.marks)-1])
	}
}

// maxCleanMarks bounds a log's clean marks (passes within
// delete.retention.ms of each other).
const maxCleanMarks = 256

// capMarksLocked lowers the marks to at most end, after a truncation to
// end (appendMu held); end < 0 forgets them all. Marks lowered to the
// same point become the first of them (the offsets below end were
// cleaned by its time). It reports whether a mark changed.
func (c *cleanState) capMarksLocked(end int64) bool {
	if end < 0 {
		changed := len(c.marks) > 0
		c.marks = nil
		return changed
	}
	for i, m := range c.marks {
		if m.point > end {
			c.marks[i].point = end
			c.marks = c.marks[:i+1]
			return true
		}
	}
	return false
}

// deleteHorizonLocked returns the offset below which tombstones were first
// cleaned more than retentionMs before nowMs, and may go (appendMu held).
// It forgets the marks no longer needed.
func (c *cleanState) deleteHorizonLocked(nowMs, retentionMs int64) int64 {
	h, last := int64(-1), -1
	for i, m := range c.marks {
		if nowMs-m.ms > retentionMs {
			h, last = max(h, m.point), i
		}
	}
	if last > 0 {
		c.marks = append(c.marks[:0], c.marks[last:]...)
	}
	return h
}

// errCleanAborted: the log changed under a pass (a truncation, retention,
// a close); the pass left it alone.
var errCleanAborted = errors.New("storage: clean aborted: the log changed under it")

const (
	cleanedSuffix = ".cleaned"
	swapSuffix    = ".swap"
)

// CleanPoint returns the first offset not yet deduplicated by a clean
// pass (the log start when none ran).
func (l *Log) CleanPoint() int64 {
	return max(l.cleaning.point.Load(), l.logStart.Load())
}

// setCleanPoint sets the clean point read from cleaner-offset-checkpoint.
func (l *Log) setCleanPoint(off int64) {
	if off < 0 || off > l.leo.Load() {
		return
	}
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if c := &l.cleaning; c.marksLoaded {
		// Never above the newest mark (see clean_marks.go).
		top := int64(-1)
		if n := len(c.marks); n > 0 {
			top = c.marks[n-1].point
		}
		if off > top {
			l.logger.Info("clean point above the clean marks, lowered", "checkpoint", off, "marks", top)
			off = top
		}
		if off < 0 {
			return
		}
	}
	l.cleaning.point.Store(off)
	// Without a mark as high (no marks file), when it was cleaned is not
	// known: count delete.retention.ms from now, which keeps tombstones
	// longer, never shorter.
	l.cleaning.addMarkLocked(off, l.opts.Now().UnixMilli())
}

// cleanable describes a log's cleanable range at one moment.
type cleanable struct {
	firstDirty       int64
	firstUncleanable int64
	cleanBytes       int64
	dirtyBytes       int64
	firstDirtyTs     int64 // first timestamp of the first dirty segment, -1 if unknown
	n                int   // segments l.segs[:n] lie below firstUncleanable
}

func (c cleanable) ratio() float64 {
	if c.dirtyBytes == 0 {
		return 0
	}
	return float64(c.dirtyBytes) / float64(c.cleanBytes+c.dirtyBytes)
}

// cleanableLocked computes the cleanable range (l.mu held for reading).
// A segment is cleanable when it is not the active one, lies wholly below
// the high watermark and its newest record is older than
// min.compaction.lag.ms.
func (l *Log) cleanableLocked(cfg LogConfig, nowMs int64) cleanable {
	c := cleanable{firstDirty: max(l.cleaning.point.Load(), l.logStart.Load()), firstDirtyTs: -1}
	// Never at or above the last stable offset: an ongoing
	// transaction's outcome is not known yet.
	hw := min(l.hw.Load(), l.firstUnstable.Load())
	n := 0
	for n+1 < len(l.segs) {
		s, next := l.segs[n], l.segs[n+1]
		if next.base > hw {
			break
		}
		if ts := s.maxTs.Load(); ts >= 0 && nowMs-ts < cfg.MinCompactionLagMs {
			break
		}
		n++
	}
	c.n = n
	c.firstUncleanable = l.segs[n].base
	if c.firstDirty >= c.firstUncleanable {
		c.firstDirty = c.firstUncleanable
	}
	for i := 0; i < n; i++ {
		s := l.segs[i]
		if l.segs[i+1].base <= c.firstDirty {
			c.cleanBytes += s.size.Load()
			continue
		}
		if c.dirtyBytes == 0 {
			c.firstDirtyTs = s.firstTs.Load()
		}
		c.dirtyBytes += s.size.Load()
	}
	return c
}

// CleanerStats returns the log's cleaning state as of now.
func (l *Log) CleanerStats() CleanerStats {
	cfg := l.Config()
	nowMs := l.opts.Now().UnixMilli()
	l.mu.RLock()
	var c cleanable
	if len(l.segs) > 0 {
		c = l.cleanableLocked(cfg, nowMs)
	}
	l.mu.RUnlock()
	st := CleanerStats{
		CleanPoint: l.CleanPoint(), LastCleanMs: l.cleaning.lastCleanMs.Load(),
		BytesCleaned: l.cleaning.bytesCleaned.Load(), BytesWritten: l.cleaning.bytesWritten.Load(),
		Passes: l.cleaning.passes.Load(),
	}
	if cfg.Compact {
		st.DirtyRatio = c.ratio()
		if c.dirtyBytes > 0 && c.firstDirtyTs >= 0 {
			st.LagMs = max(nowMs-c.firstDirtyTs, 0)
		}
	}
	return st
}

// cleanPriority says whether the log needs cleaning now and how much:
// due is true when its dirty section holds a record older than
// max.compaction.lag.ms, ratio is its dirty ratio. ok is false when the
// log is not compacted or has nothing to clean above
// min.cleanable.dirty.ratio (or due).
func (l *Log) cleanPriority() (ratio float64, due, ok bool) {
	cfg := l.Config()
	if !cfg.Compact || l.closedFlag.Load() {
		return 0, false, false
	}
	nowMs := l.opts.Now().UnixMilli()
	l.mu.RLock()
	if len(l.segs) == 0 {
		l.mu.RUnlock()
		return 0, false, false
	}
	c := l.cleanableLocked(cfg, nowMs)
	l.mu.RUnlock()
	if c.dirtyBytes == 0 {
		return 0, false, false
	}
	due = c.firstDirtyTs >= 0 && nowMs-c.firstDirtyTs > cfg.MaxCompactionLagMs
	ratio = c.ratio()
	return ratio, due, due || ratio > cfg.MinCleanableDirtyRatio
}

// throttler limits a cleaner's I/O to a rate (log.cleaner.io.max.bytes.per.second).
type throttler struct {
	rate  float64 // bytes per second; <= 0 or +Inf: no limit
	start time.Time
	bytes float64
	stop  <-chan struct{}
	// sleeps counts the waits taken (tests).
	sleeps atomic.Int64
}

// add accounts for n bytes of I/O and waits as long as the rate asks.
// It returns false if stop closed meanwhile.
func (t *throttler) add(n int64) bool {
	if t == nil || t.rate <= 0 || math.IsInf(t.rate, 1) {
		return true
	}
	if t.start.IsZero() {
		t.start = time.Now()
	}
	t.bytes += float64(n)
	ahead := time.Duration(t.bytes/t.rate*float64(time.Second)) - time.Since(t.start)
	if ahead < time.Millisecond {
		return true
	}
	t.sleeps.Add(1)
	tm := time.NewTimer(ahead)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-t.stop:
		return false
	}
}

// errCleanStopped: the cleaner is stopping.
var errCleanStopped = errors.New("storage: cleaner stopped")

// segmentReader reads a segment's batches in order, a chunk at a time.
type segmentReader struct {
	s     *segment
	limit int64
	pos   int64
	buf   []byte
	spare []byte // the buffer before buf, reused
	off   int    // start of the unread part of buf
}

// next returns the next whole batch, or io.EOF at the segment's end.
func (r *segmentReader) next(th *throttler) ([]byte, record.Header, error) {
	for {
		rest := r.buf[r.off:]
		if size := record.PeekSize(rest); size >= record.HeaderSize && size <= len(rest) {
			h, err := record.ParseHeader(rest)
			if err != nil {
				return nil, h, err
			}
			r.off += size
			return rest[:size], h, nil
		}
		if r.pos >= r.limit {
			if len(rest) > 0 {
				return nil, record.Header{}, fmt.Errorf("%w: %d bytes at the end of segment %d", record.ErrTruncated, len(rest), r.s.base)
			}
			return nil, record.Header{}, io.EOF
		}
		// Keep the partial batch, read more after it.
		need := 1 << 20
		if size := record.PeekSize(rest); size > need {
			need = size
		}
		n := int(min(int64(need), r.limit-r.pos))
		nb := r.spare[:0]
		if cap(nb) < len(rest)+n {
			nb = make([]byte, 0, len(rest)+n)
		}
		nb = nb[:len(rest)]
		copy(nb, rest)
		m, err := r.s.log.ReadAt(nb[len(rest):len(rest)+n], r.pos)
		if m < n {
			if err == nil {
				err = io.ErrUnexpectedEOF
			}
			return nil, record.Header{}, fmt.Errorf("storage: read segment %d: %w", r.s.base, err)
		}
		r.spare = r.buf
		r.buf, r.off = nb[:len(rest)+n], 0
		r.pos += int64(n)
		if !th.add(int64(n)) {
			return nil, record.Header{}, errCleanStopped
		}
	}
}

// clean runs one pass over the log with the offset map m (emptied
// first). It returns errCleanAborted (nothing changed) when the log
// changed under it in a way that conflicts.
func (l *Log) clean(m *offsetMap, th *throttler) (CleanStats, error) {
	l.cleaning.mu.Lock()
	defer l.cleaning.mu.Unlock()
	began := time.Now()
	var st CleanStats
	cfg := l.Config()
	if !cfg.Compact {
		return st, nil
	}
	nowMs := l.opts.Now().UnixMilli()

	// The segments below the first uncleanable offset, with references
	// so their files stay readable whatever happens to the log.
	l.mu.RLock()
	if l.closedFlag.Load() || len(l.segs) == 0 {
		l.mu.RUnlock()
		return st, ErrClosed
	}
	gen := l.truncations.Load()
	c := l.cleanableLocked(cfg, nowMs)
	segs := make([]*segment, 0, c.n)
	for _, s := range l.segs[:c.n] {
		if !s.tryAcquire() {
			break
		}
		segs = append(segs, s)
	}
	l.mu.RUnlock()
	defer func() {
		for _, s := range segs {
			s.release()
		}
	}()
	if len(segs) < c.n || gen&1 != 0 {
		return st, errCleanAborted
	}
	st.FirstDirty, st.MapEnd = c.firstDirty, c.firstDirty
	if c.firstDirty >= c.firstUncleanable || len(segs) == 0 {
		return st, nil
	}

	// 1. Map the dirty section. The aborted transactions: every one
	// with a batch below the first uncleanable offset has ended, so it
	// is in the index (see clean_txn.go).
	m.reset()
	txns := newTxnClean(l.abortedIn(math.MinInt64, math.MaxInt64))
	mapEnd, read, err := l.buildOffsetMap(m, segs, c.firstDirty, c.firstUncleanable, txns, th)
	st.BytesRead += read
	if err != nil {
		return st, l.cleanErr(err)
	}
	st.MapEnd, st.Keys, st.MapBytes = mapEnd, m.used, m.memory()
	if mapEnd <= c.firstDirty {
		return st, fmt.Errorf("storage: clean %s: the offset map holds no key of the batch at %d (log.cleaner.dedupe.buffer.size too small)", l, c.firstDirty)
	}

	// The idempotent producers' last batches, kept even when emptied.
	l.appendMu.Lock()
	horizon := l.cleaning.deleteHorizonLocked(nowMs, cfg.DeleteRetentionMs)
	lastBatch := make(map[int64]int64, len(l.producers.producers))
	for id, e := range l.producers.producers {
		if last := e.lastOffset(); last >= 0 {
			lastBatch[id] = last
		}
	}
	l.appendMu.Unlock()

	// 2, 3. Rewrite and swap in the segments below mapEnd, group by group.
	k := 0
	for k < len(segs) && segs[k].base < mapEnd {
		k++
	}
	l.mu.RLock() // the index buffers groupSegments sizes
	groups := groupSegments(segs[:k], cfg)
	l.mu.RUnlock()
	at := 0
	for _, g := range groups {
		// The group's offsets end where the segment after it begins.
		at += len(g)
		end := c.firstUncleanable
		if at < len(segs) {
			end = segs[at].base
		}
		gs, err := l.cleanGroup(g, groupCtx{m: m, mapEnd: mapEnd, horizon: horizon, nowMs: nowMs, end: end,
			cfg: cfg, lastBatch: lastBatch, txns: txns, gen: gen, th: th})
		st.BytesRead += gs.BytesRead
		st.BytesWritten += gs.BytesWritten
		st.RecordsRead += gs.RecordsRead
		st.RecordsRemoved += gs.RecordsRemoved
		st.SegmentsIn += len(g)
		st.SegmentsOut++
		if err != nil {
			return st, l.cleanErr(err)
		}
	}
	if l.testHookBeforeCleanPoint != nil {
		l.testHookBeforeCleanPoint()
	}
	// A truncation since the pass began may have cut the log below
	// mapEnd: raising the clean point over offsets appended since would
	// count them as cleaned, their keys never mapped.
	l.appendMu.Lock()
	if l.truncations.Load() != gen {
		l.appendMu.Unlock()
		return st, errCleanAborted
	}
	if l.cleaning.point.Load() < mapEnd {
		l.cleaning.point.Store(mapEnd)
	}
	l.cleaning.addMarkLocked(mapEnd, l.opts.Now().UnixMilli())
	marks, seq := l.cleaning.snapshotMarksLocked()
	l.appendMu.Unlock()
	if err := l.writeMarks(marks, seq); err != nil {
		// The pass stands; after a restart its tombstones wait longer.
		l.logger.Warn("clean marks not saved", "error", err)
	}
	st.Elapsed = time.Since(began)
	l.cleaning.lastCleanMs.Store(l.opts.Now().UnixMilli())
	l.cleaning.bytesCleaned.Add(st.BytesRead)
	l.cleaning.bytesWritten.Add(st.BytesWritten)
	l.cleaning.passes.Add(1)
	l.logger.Debug("cleaned log", "first_dirty", st.FirstDirty, "map_end", st.MapEnd, "keys", st.Keys,
		"segments_in", st.SegmentsIn, "segments_out", st.SegmentsOut, "records_removed", st.RecordsRemoved,
		"bytes_read", st.BytesRead, "bytes_written", st.BytesWritten)
	return st, nil
}

// cleanErr is err, or ErrClosed when the log was closed (or deleted)
// under the pass: its files were closed or removed, which is no failure.
func (l *Log) cleanErr(err error) error {
	if l.closedFlag.Load() && !errors.Is(err, errCleanStopped) {
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	return err
}

// buildOffsetMap puts the keys of the records in [from, to) of segs into
// m and returns the offset up to which it mapped everything: to, or the
// offset of the first record whose key did not fit.
func (l *Log) buildOffsetMap(m *offsetMap, segs []*segment, from, to int64, txns *txnClean, th *throttler) (int64, int64, error) {
	var read int64
	full := int64(-1)
	for i, s := range segs {
		if i+1 < len(segs) && segs[i+1].base <= from {
			continue
		}
		if s.base >= to {
			break
		}
		r := segmentReader{s: s, limit: s.size.Load()}
		for full < 0 {
			batch, h, err := r.next(th)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return 0, read, err
			}
			read += int64(len(batch))
			if h.LastOffset() < from || h.Control() || txns.aborted(&h) {
				// An aborted transaction's record must not hide a
				// committed one: its keys are not mapped.
				continue
			}
			if h.BaseOffset >= to {
				break
			}
			err = record.ForEachRecord(batch, func(rec *record.Record) error {
				if rec.Offset < from || rec.Offset >= to || rec.Key == nil {
					return nil
				}
				if !m.put(rec.Key, rec.Offset) {
					full = rec.Offset
					return errStop
				}
				return nil
			})
			if err != nil && !errors.Is(err, errStop) {
				return 0, read, fmt.Errorf("storage: read segment %d: %w", s.base, corrupt(err))
			}
		}
		if full >= 0 {
			return full, read, nil
		}
	}
	return to, read, nil
}
