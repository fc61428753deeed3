package storage

import (
	"errors"
	"fmt"
	"io"
	"math"
	"sync/atomic"
	"time"

	"github.com/quirelog/quire/record"
)

const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
)

// segmentName is the file name stem of the segment with base offset base.
func segmentName(base int64) string { return fmt.Sprintf("%020d", base) }

// segment is one .log file and its two indexes.
//
// size is the number of bytes of the log file that hold whole, published
// batches; readers never look past it, so a batch being written is
// invisible until the appender stores the new size. The file may be longer
// after a failed write; recovery cuts it.
type segment struct {
	base int64
	stem string // path without suffix
	log  *lazyFile
	size atomic.Int64

	idx  offsetIndex
	tidx timeIndex
	// recent is where the last batches appended start, guarded by Log.mu
	// as idx is (see recentBatches).
	recent recentBatches

	// Appender state, guarded by Log.appendMu.
	bytesSinceIndex int64
	rollBaseTs      int64 // max timestamp of the first batch, -1 if none
	created         time.Time
	dirty           bool // written since the last fsync
	active          bool // index files preallocated
	// reserved is the end of the disk space reserved for appends
	// (LogConfig.Preallocate), past size; math.MaxInt64 once reserving
	// failed, so that it is not tried again for this segment.
	reserved int64

	// maxTs is the largest timestamp in the segment and offMaxTs the base
	// offset of the first batch holding it; readers use them.
	maxTs    atomic.Int64
	offMaxTs atomic.Int64
	// firstTs mirrors rollBaseTs (the largest timestamp of the first
	// batch, -1 if none) for the cleaner, which reads it without
	// appendMu (max.compaction.lag.ms).
	firstTs atomic.Int64

	indexSuspect atomic.Bool // a lookup found the index inconsistent
	refs         atomic.Int32
	removed      atomic.Bool
}

// newSegmentStruct returns the segment at base in dir, its files to be
// opened through files when first used.
func newSegmentStruct(fsys FS, files *FileCache, dir string, base int64) *segment {
	s := emptySegment(dir, base)
	s.log = files.lazy(fsys, s.stem+logSuffix, false)
	s.idx.file = files.lazy(fsys, s.stem+indexSuffix, true)
	s.tidx.file = files.lazy(fsys, s.stem+timeIndexSuffix, true)
	return s
}

// emptySegment is a segment without files yet.
func emptySegment(dir string, base int64) *segment {
	s := &segment{base: base, stem: join(dir, segmentName(base)), rollBaseTs: -1}
	s.idx.base, s.tidx.base = base, base
	s.maxTs.Store(-1)
	s.offMaxTs.Store(-1)
	s.firstTs.Store(-1)
	s.refs.Store(1)
	return s
}

// createSegment creates empty files for a new active segment.
func createSegment(fsys FS, files *FileCache, dir string, base int64, cfg LogConfig, now time.Time) (*segment, error) {
	s := emptySegment(dir, base)
	s.created = now
	var err error
	if s.log, err = files.create(fsys, s.stem+logSuffix, false); err != nil {
		return nil, err
	}
	if s.idx.file, err = files.create(fsys, s.stem+indexSuffix, true); err != nil {
		s.closeFiles()
		return nil, err
	}
	if s.tidx.file, err = files.create(fsys, s.stem+timeIndexSuffix, true); err != nil {
		s.closeFiles()
		return nil, err
	}
	if err := s.activate(cfg); err != nil {
		s.closeFiles()
		return nil, err
	}
	return s, nil
}

// activate makes s the active segment. Its index files are not
// preallocated (Kafka sizes them to segment.index.bytes for its memory
// maps; here the entries live in memory and are written at flush, roll
// and close): they grow with their entries, so an idle partition holds
// no index blocks it does not use. segment.index.bytes still bounds them
// (indexFull). finish trims them, which also gives back what a file
// preallocated by an earlier version held.
func (s *segment) activate(LogConfig) error {
	s.active = true
	return nil
}

// indexFull reports whether adding k more entries could take the index
// files past segment.index.bytes.
func (s *segment) indexFull(cfg LogConfig, k int) bool {
	return s.idx.entries()+k > int(cfg.SegmentIndexBytes)/offsetIndexEntrySize ||
		s.tidx.entries()+k+1 > int(cfg.SegmentIndexBytes)/timeIndexEntrySize
}

// pendingEntry is an index update computed before a write and published
// after it.
type pendingEntry struct {
	offset, pos int64
	ts          int64 // -1: no time index entry
	tsOffset    int64
}

// trackBatch updates the appender state for a batch about to be written at
// pos and returns the index entries it needs, if any.
func (s *segment) trackBatch(h *record.Header, pos int64, interval int32, maxTs, offMaxTs *int64) (pendingEntry, bool) {
	if s.rollBaseTs < 0 && pos == 0 {
		s.setRollBase(h.MaxTimestamp)
	}
	if h.MaxTimestamp > *maxTs {
		*maxTs, *offMaxTs = h.MaxTimestamp, h.BaseOffset
	}
	var e pendingEntry
	add := false
	if s.bytesSinceIndex > int64(interval) {
		e = pendingEntry{offset: h.BaseOffset, pos: pos, ts: -1}
		if lt, _, ok := s.tidx.last(); *maxTs >= 0 && (!ok || *maxTs > lt) {
			e.ts, e.tsOffset = *maxTs, *offMaxTs
		}
		s.bytesSinceIndex = 0
		add = true
	}
	s.bytesSinceIndex += int64(h.Size())
	return e, add
}

func (s *segment) applyEntry(e pendingEntry) {
	s.idx.appendEntry(e.offset, e.pos)
	if e.ts >= 0 {
		s.tidx.maybeAppend(e.ts, e.tsOffset)
	}
}

// readHeader reads the batch header at pos, which must lie below limit.
func (s *segment) readHeader(pos, limit int64, buf *[record.HeaderSize]byte) (record.Header, error) {
	if pos+record.HeaderSize > limit {
		return record.Header{}, fmt.Errorf("%w: header at %d past end %d", record.ErrTruncated, pos, limit)
	}
	if _, err := s.log.ReadAt(buf[:], pos); err != nil {
		if errors.Is(err, io.EOF) {
			return record.Header{}, fmt.Errorf("%w: header at %d: %v", record.ErrTruncated, pos, err)
		}
		return record.Header{}, err
	}
	h, err := record.ParseHeader(buf[:])
	if err != nil {
		return h, err
	}
	if pos+int64(h.Size()) > limit {
		return h, fmt.Errorf("%w: batch at %d needs %d bytes, segment has %d", record.ErrTruncated, pos, h.Size(), limit-pos)
	}
	return h, nil
}

// locate returns the position and header of the first batch in the
// segment whose last offset is >= target, scanning from the offset index.
// found is false if the segment ends first. The index entry is checked
// against the batch it points at; a mismatch marks the index suspect and
// the scan starts over from the beginning of the segment.
func (s *segment) locate(target, idxOff, idxPos, limit int64) (pos int64, h record.Header, found bool, err error) {
	var hb [record.HeaderSize]byte
	pos = idxPos
	if idxOff >= 0 {
		h, err = s.readHeader(pos, limit, &hb)
		switch {
		case err != nil || h.BaseOffset != idxOff:
			s.indexSuspect.Store(true)
			pos = 0
		case h.LastOffset() >= target:
			return pos, h, true, nil
		default:
			pos += int64(h.Size())
		}
	}
	for pos < limit {
		h, err = s.readHeader(pos, limit, &hb)
		if err != nil {
			return pos, h, false, err
		}
		if h.LastOffset() >= target {
			return pos, h, true, nil
		}
		pos += int64(h.Size())
	}
	return pos, h, false, nil
}

// locateFromRecent is locate starting from a recent batch (recentBatches:
// hintOff starting at hintPos) instead of the index entry. A batch that no
// longer starts there was cut by a truncation since the ring was read
// (the read is then done again, see untorn): that says nothing of the
// index, so the search goes on from the index entry, not from the start
// with the index marked suspect.
func (s *segment) locateFromRecent(target, hintOff, hintPos, idxOff, idxPos, limit int64) (int64, record.Header, bool, error) {
	var hb [record.HeaderSize]byte
	h, err := s.readHeader(hintPos, limit, &hb)
	if err != nil || h.BaseOffset != hintOff {
		return s.locate(target, idxOff, idxPos, limit)
	}
	if h.LastOffset() >= target {
		return hintPos, h, true, nil
	}
	// Walk on from the next batch, as locate does past a checked entry.
	return s.locate(target, -1, hintPos+int64(h.Size()), limit)
}

// scanResult is what a scan of a segment found.
type scanResult struct {
	validSize int64 // bytes of whole, valid batches
	next      int64 // offset after the last valid batch, or base
	err       error // why the scan stopped early; nil at a clean end
}

// recover scans the whole segment, validating every batch (length, magic,
// CRC, records), rebuilding both indexes, and stops at the first bad or
// torn batch. onBatch sees every valid batch header.
//
// next is the offset the first batch must have. prevEpoch is the epoch of
// the batch before it (or math.MinInt32) and maxEpoch the newest epoch in
// the leader epoch checkpoint (-1 if unknown: no check).
func (s *segment) recover(cfg LogConfig, next int64, prevEpoch, maxEpoch int32, onBatch func(h *record.Header)) scanResult {
	fileLen, err := fileSize(s.log)
	if err != nil {
		return scanResult{next: s.base, err: err}
	}
	s.idx.buf, s.idx.written = s.idx.buf[:0], 0
	s.recent = recentBatches{}
	s.tidx.buf, s.tidx.written = s.tidx.buf[:0], 0
	s.bytesSinceIndex, s.rollBaseTs = 0, -1
	maxTs, offMaxTs := int64(-1), int64(-1)
	res := scanResult{next: next}
	buf := make([]byte, 0, min(1<<20, fileLen))
	var bufPos int64 // file position of buf[0]
	pos := int64(0)
	for pos < fileLen {
		// Make buf hold [pos, pos+LengthPrefix) at least.
		need := int64(record.LengthPrefix)
		if pos+need > bufPos+int64(len(buf)) || pos < bufPos {
			if buf, err = readChunk(s.log, buf, pos, fileLen, need); err != nil {
				res.err = err
				break
			}
			bufPos = pos
		}
		size := int64(record.PeekSize(buf[pos-bufPos:]))
		if size < record.HeaderSize || pos+size > fileLen {
			res.err = fmt.Errorf("%w: batch at %d has bad length %d (file %d)", record.ErrTruncated, pos, size, fileLen)
			break
		}
		if pos+size > bufPos+int64(len(buf)) {
			if buf, err = readChunk(s.log, buf, pos, fileLen, size); err != nil {
				res.err = err
				break
			}
			bufPos = pos
		}
		batch := buf[pos-bufPos : pos-bufPos+size]
		h, verr := record.Validate(batch)
		if verr != nil {
			res.err = verr
			break
		}
		// Offsets increase (leaders assign them contiguously; the
		// cleaner of a compacted log leaves gaps where it removed whole
		// batches), which catches some damage to the base offset, a
		// field the CRC does not cover.
		if h.BaseOffset < next || h.LastOffset()-s.base > math.MaxInt32 {
			res.err = fmt.Errorf("%w: batch at %d has offset %d, expected %d", record.ErrCorrupt, pos, h.BaseOffset, next)
			break
		}
		// The leader epoch is not covered by the CRC either: it must not
		// go backwards nor past the newest epoch the cache has heard of.
		if h.PartitionLeaderEpoch < prevEpoch || (maxEpoch >= 0 && h.PartitionLeaderEpoch > maxEpoch) {
			res.err = fmt.Errorf("%w: batch at %d has leader epoch %d (previous %d, newest %d)",
				record.ErrCorrupt, pos, h.PartitionLeaderEpoch, prevEpoch, maxEpoch)
			break
		}
		prevEpoch = h.PartitionLeaderEpoch
		if e, ok := s.trackBatch(&h, pos, cfg.IndexIntervalBytes, &maxTs, &offMaxTs); ok {
			s.applyEntry(e)
		}
		if onBatch != nil {
			onBatch(&h)
		}
		next = h.NextOffset()
		res.next = next
		pos += size
		res.validSize = pos
	}
	s.maxTs.Store(maxTs)
	s.offMaxTs.Store(offMaxTs)
	s.firstTs.Store(s.rollBaseTs)
	s.size.Store(res.validSize)
	return res
}

// setRollBase sets the largest timestamp of the segment's first batch.
func (s *segment) setRollBase(ts int64) {
	s.rollBaseTs = ts
	s.firstTs.Store(ts)
}

// readChunk reads at least need bytes (up to cap(buf) or more) at pos.
func readChunk(f File, buf []byte, pos, fileLen, need int64) ([]byte, error) {
	n := max(int64(cap(buf)), need)
	n = min(n, fileLen-pos)
	if int64(cap(buf)) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := f.ReadAt(buf, pos); err != nil && !(errors.Is(err, io.EOF)) {
		return buf[:0], err
	}
	return buf, nil
}

// scanHeaders walks the batch headers from pos to limit without checking
// CRCs, as a cheap pass over data below the recovery point.
func (s *segment) scanHeaders(pos, limit int64, fn func(h *record.Header, pos int64)) (int64, error) {
	var hb [record.HeaderSize]byte
	for pos < limit {
		h, err := s.readHeader(pos, limit, &hb)
		if err != nil {
			return pos, err
		}
		fn(&h, pos)
		pos += int64(h.Size())
	}
	return pos, nil
}

// persistIndexes writes pending index entries to the files.
func (s *segment) persistIndexes() error {
	if err := persistIndex(s.idx.file, s.idx.buf, &s.idx.written); err != nil {
		return err
	}
	return persistIndex(s.tidx.file, s.tidx.buf, &s.tidx.written)
}

// sync fsyncs the log and index files if the segment is dirty.
func (s *segment) sync() error {
	if err := s.persistIndexes(); err != nil {
		return err
	}
	if !s.dirty {
		return nil
	}
	if err := s.syncFiles(); err != nil {
		return err
	}
	s.dirty = false
	return nil
}

// finalTimeEntry adds a last time index entry for the segment's largest
// timestamp, as Kafka does when a segment stops being active. Callers hold
// Log.mu for writing.
func (s *segment) finalTimeEntry() {
	if ts := s.maxTs.Load(); ts >= 0 {
		s.tidx.maybeAppend(ts, s.offMaxTs.Load())
	}
}

// deactivate ends the segment's time as the active one: index files
// trimmed to their entries, everything fsynced. Call finalTimeEntry first.
func (s *segment) deactivate() error {
	if err := s.finish(); err != nil {
		return err
	}
	return s.sync()
}

// The disk space an active segment reserves at a time grows with the
// segment: an eighth of its data, from minReserve to maxReserve. A busy
// partition makes one fallocate call per dozens of appends; a quiet one
// holds little it does not use.
const (
	minReserve = 64 << 10
	maxReserve = 16 << 20
)

// reserve makes sure the disk blocks for the log file up to end are
// allocated, reserving more (within segment.bytes) past it. It is an
// optimisation only: if the filesystem cannot, the write goes ahead and
// allocates as it goes (and says so if the disk is full).
func (s *segment) reserve(end int64, cfg LogConfig) {
	if end <= s.reserved {
		return
	}
	from := s.size.Load()
	ahead := min(max(from/8, minReserve), maxReserve)
	to := max(end, min(end+ahead, cfg.SegmentBytes))
	if err := s.log.withFile(func(f File) error { return reserveSpace(f, from, to-from) }); err != nil {
		s.reserved = math.MaxInt64
		return
	}
	s.reserved = to
}

// finish writes the pending index entries and trims the preallocated
// index files to them, and the log file to its data (giving back the
// space reserved past it), without fsyncing anything.
func (s *segment) finish() error {
	if err := s.persistIndexes(); err != nil {
		return err
	}
	if size := s.size.Load(); s.reserved > size && s.reserved != math.MaxInt64 {
		if err := s.log.Truncate(size); err != nil {
			return err
		}
		s.reserved = size
	}
	if s.active {
		if err := s.idx.file.Truncate(int64(len(s.idx.buf))); err != nil {
			return err
		}
		if err := s.tidx.file.Truncate(int64(len(s.tidx.buf))); err != nil {
			return err
		}
		s.active = false
		s.dirty = true
	}
	return nil
}

// syncFiles fsyncs the three files; the background flush of a rolled
// segment calls it without appendMu, so it touches no appender state.
func (s *segment) syncFiles() error {
	if err := s.log.Sync(); err != nil {
		return err
	}
	if err := s.idx.file.Sync(); err != nil {
		return err
	}
	return s.tidx.file.Sync()
}

func (s *segment) closeFiles() error {
	var errs []error
	for _, f := range []*lazyFile{s.log, s.idx.file, s.tidx.file} {
		if f != nil {
			errs = append(errs, f.Close())
		}
	}
	return errors.Join(errs...)
}

// acquire takes a reference on a segment known to be live (the appender
// holds appendMu).
func (s *segment) acquire() { s.refs.Add(1) }

// tryAcquire takes a reader reference unless the last one is gone (the log
// was closed: the files are closed or about to be). Callers hold Log.mu.
func (s *segment) tryAcquire() bool {
	for {
		n := s.refs.Load()
		if n <= 0 {
			return false
		}
		if s.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// release drops a reference and closes the files with the last one.
func (s *segment) release() {
	if s.refs.Add(-1) == 0 {
		_ = s.closeFiles()
	}
}

// removeFiles deletes the segment's files; open readers keep reading
// through their descriptors. Callers have taken the segment out of the
// log's list, so no reader takes a new reference; the .log of one that
// still holds one is kept open (out of the file cache's reach) until the
// last reference goes.
func (s *segment) removeFiles(fsys FS) error {
	s.markRemoved(1)
	return errors.Join(
		removeIfExists(fsys, s.stem+logSuffix),
		removeIfExists(fsys, s.stem+indexSuffix),
		removeIfExists(fsys, s.stem+timeIndexSuffix),
		removeIfExists(fsys, s.stem+txnIndexSuffix))
}

// markRemoved marks the segment's files as being deleted, so that none is
// reopened (or recreated) once unlinked; if readers beyond the own
// references the caller holds are still on the segment, its .log is kept
// open for them first.
func (s *segment) markRemoved(own int32) {
	s.removed.Store(true)
	if s.refs.Load() > own {
		// Should it fail (no descriptor left), those readers get
		// errFileGone: they were reading records being deleted.
		_ = s.log.keepOpen()
	}
	for _, f := range []*lazyFile{s.log, s.idx.file, s.tidx.file} {
		f.markRemoved()
	}
}

// largestTimestamp is the segment's newest record time for retention,
// falling back to the file's modification time, as Kafka does.
func (s *segment) largestTimestamp() int64 {
	if ts := s.maxTs.Load(); ts >= 0 {
		return ts
	}
	if st, err := s.log.Stat(); err == nil {
		return st.ModTime().UnixMilli()
	}
	return -1
}
