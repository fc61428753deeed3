package storage

import (
	"errors"
	"fmt"
	"math"

	"github.com/quirelog/quire/record"
)

// Truncate removes every batch at or after offset, for a follower whose
// log diverged from its leader's. Truncation happens at batch boundaries:
// if offset falls inside a batch, that whole batch goes and the log end
// offset becomes its base offset. An offset at or past the log end leaves
// the batches alone but still drops leader epochs that start at the log
// end (an epoch this replica began as leader without appending to it, which
// would otherwise look like a divergence on every fetch, as in Kafka); one
// below the log start empties the log and restarts it at offset (Kafka's
// truncateFullyAndStartAt).
func (l *Log) Truncate(offset int64) error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed {
		return ErrClosed
	}
	if leo := l.leo.Load(); offset >= leo {
		if err := l.epochs.truncateFromEnd(leo); err != nil {
			return l.fail(fmt.Errorf("storage: leader epoch checkpoint: %w", err))
		}
		return nil
	}
	// A background flush finishing after the cut would move the recovery
	// point past the new log end, over offsets appended later and never
	// fsynced: let the pending ones finish first.
	l.flushWG.Wait()
	if offset < l.logStart.Load() {
		return l.truncateFullyLocked(offset)
	}
	if err := l.truncateLocked(offset); err != nil {
		return l.fail(fmt.Errorf("storage: truncate: %w", err))
	}
	return nil
}

// beginTruncation makes the truncation sequence lock odd: reads wait
// from now on, and reads under way will be done again (see ReadAppend).
// The returned func makes it even again, once the truncation has
// published the new log end (or failed); calling it again does nothing.
// Callers hold appendMu.
func (l *Log) beginTruncation() (end func()) {
	done := make(chan struct{})
	l.truncationDone.Store(&done)
	l.truncations.Add(1)
	ended := false
	return func() {
		if !ended {
			ended = true
			l.truncations.Add(1)
			close(done)
		}
	}
}

func (l *Log) truncateLocked(offset int64) error {
	endTruncation := l.beginTruncation() // before anything is cut
	defer endTruncation()
	cfg := l.Config()
	l.mu.Lock()
	k := l.floorLocked(offset)
	removed := append([]*segment(nil), l.segs[k+1:]...)
	seg := l.segs[k]
	l.mu.Unlock()

	// Find where the batch holding offset starts in seg.
	limit := seg.size.Load()
	l.mu.RLock()
	idxOff, idxPos := seg.idx.lookup(offset)
	l.mu.RUnlock()
	pos, h, found, err := seg.locate(offset, idxOff, idxPos, limit)
	if err != nil {
		return err
	}
	newLeo := seg.base
	if found {
		// offset may lie in a gap a compacted log's cleaner left before
		// the batch: the log then ends at offset.
		newLeo = min(h.BaseOffset, offset)
	} else if pos > 0 {
		newLeo = h.NextOffset() // offset sat in a gap after seg's last batch
	}

	// Publish the shorter log before touching files, so readers stop
	// looking past the cut.
	l.leo.Store(newLeo)
	if newLeo < l.logStart.Load() {
		l.logStart.Store(newLeo)
	}
	if l.cleaning.point.Load() > newLeo {
		l.cleaning.point.Store(newLeo)
	}
	marksCut := l.cleaning.capMarksLocked(newLeo)
	seg.size.Store(pos)
	l.mu.Lock()
	l.segs = l.segs[:k+1]
	seg.idx.truncateToPos(pos)
	seg.recent.truncateToPos(pos)
	seg.tidx.truncateToOffset(newLeo)
	l.mu.Unlock()
	// Readers may go on: they now stop at the cut, and the bytes below it
	// stay as they are while the files are cut.
	endTruncation()

	for _, s := range removed {
		if err := s.removeFiles(l.fs); err != nil {
			return err
		}
		s.release()
	}
	if err := seg.log.Truncate(pos); err != nil {
		return err
	}
	seg.reserved = pos // the cut gave back any reserved space
	// Recompute the appender state of the segment, now active again.
	maxTs, offMaxTs := int64(-1), int64(-1)
	seg.setRollBase(-1)
	if _, err := seg.scanHeaders(0, pos, func(h *record.Header, at int64) {
		if at == 0 {
			seg.setRollBase(h.MaxTimestamp)
		}
		if h.MaxTimestamp > maxTs {
			maxTs, offMaxTs = h.MaxTimestamp, h.BaseOffset
		}
	}); err != nil {
		return err
	}
	seg.maxTs.Store(maxTs)
	seg.offMaxTs.Store(offMaxTs)
	seg.bytesSinceIndex = 0
	seg.dirty = true
	// Rewrite the index files from memory.
	for _, f := range []File{seg.idx.file, seg.tidx.file} {
		if err := f.Truncate(0); err != nil {
			return err
		}
	}
	seg.idx.written, seg.tidx.written = 0, 0
	if err := seg.activate(cfg); err != nil {
		return err
	}
	// The epochs of the batches kept, on disk before the batches are
	// fsynced (see epochCache).
	if err := l.epochs.syncThrough(newLeo); err != nil {
		return err
	}
	if err := seg.sync(); err != nil {
		return err
	}
	if err := l.epochs.truncateFromEnd(newLeo); err != nil {
		return err
	}
	// The producer state goes back with the log: from the newest snapshot
	// at or below the cut plus the batches after it; the aborted
	// transactions whose markers were cut go first.
	if err := l.truncateAborted(seg, newLeo); err != nil {
		return err
	}
	if marksCut {
		// Before anything is appended past the cut: a mark left above
		// it on disk would count new records as cleaned (clean_marks.go).
		if err := l.writeMarks(l.cleaning.snapshotMarksLocked()); err != nil {
			return err
		}
	}
	if err := l.loadProducers(); err != nil {
		return err
	}
	if rp := l.recoveryPoint.Load(); rp > newLeo {
		l.recoveryPoint.Store(newLeo)
	}
	l.logger.Info("truncated log", "log_end_offset", newLeo)
	return nil
}

// TruncateFullyAndStartAt deletes every segment and restarts the log,
// empty, at offset: a follower whose fetch offset fell below the leader's
// log start does this.
func (l *Log) TruncateFullyAndStartAt(offset int64) error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed {
		return ErrClosed
	}
	return l.truncateFullyLocked(offset)
}

func (l *Log) truncateFullyLocked(offset int64) error {
	if offset < 0 {
		return fmt.Errorf("%w: start offset %d", ErrOffsetOutOfRange, offset)
	}
	l.flushWG.Wait() // see Truncate
	endTruncation := l.beginTruncation()
	defer endTruncation()
	l.mu.Lock()
	old := l.segs
	l.segs = nil
	l.mu.Unlock()
	var errs []error
	for _, s := range old {
		errs = append(errs, s.removeFiles(l.fs))
		s.release()
	}
	s, err := createSegment(l.fs, l.opts.Files, l.dir, offset, l.Config(), l.opts.Now())
	if err != nil {
		errs = append(errs, err)
	} else {
		l.mu.Lock()
		l.segs = []*segment{s}
		l.mu.Unlock()
	}
	l.leo.Store(offset)
	l.logStart.Store(offset)
	l.recoveryPoint.Store(offset)
	l.cleaning.point.Store(-1)
	if l.cleaning.capMarksLocked(-1) {
		errs = append(errs, l.writeMarks(l.cleaning.snapshotMarksLocked()))
	}
	endTruncation()
	l.producers = newProducerState(offset)
	l.firstUnstable.Store(math.MaxInt64)
	l.dropAbortedBelow(math.MaxInt64)
	errs = append(errs, l.removeSnapshots(func(int64) bool { return true }))
	errs = append(errs, l.epochs.clear(), l.fs.SyncDir(l.dir))
	if err := errors.Join(errs...); err != nil {
		if s == nil {
			// Without a segment the log cannot serve anything.
			l.closed = true
			l.closedFlag.Store(true)
		}
		return l.fail(fmt.Errorf("storage: truncate fully: %w", err))
	}
	return nil
}

// DeleteRecordsBefore moves the log start offset up to offset (Kafka's
// DeleteRecords) and deletes the segments wholly below it. Reads below
// the new start get ErrOffsetOutOfRange. The caller (the partition leader)
// keeps offset at or below the high watermark.
func (l *Log) DeleteRecordsBefore(offset int64) error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed {
		return ErrClosed
	}
	if offset > l.leo.Load() {
		return fmt.Errorf("%w: delete before %d, log end %d", ErrOffsetOutOfRange, offset, l.leo.Load())
	}
	if offset <= l.logStart.Load() {
		return nil
	}
	if fu := l.firstUnstable.Load(); offset > fu {
		return fmt.Errorf("%w: delete before %d, the oldest open transaction starts at %d", ErrOpenTransaction, offset, fu)
	}
	l.logStart.Store(offset)
	if err := l.epochs.truncateFromStart(offset); err != nil {
		return l.fail(fmt.Errorf("storage: leader epoch checkpoint: %w", err))
	}
	_, err := l.deleteSegmentsLocked(func(s, next *segment) bool { return next.base <= offset })
	return err
}

// maybeIncrementLogStart raises the log start offset (from the
// checkpoint at startup) without deleting anything.
func (l *Log) maybeIncrementLogStart(offset int64) {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if offset > l.logStart.Load() && offset <= l.leo.Load() {
		l.logStart.Store(offset)
		if err := l.epochs.truncateFromStart(offset); err != nil {
			_ = l.fail(fmt.Errorf("storage: leader epoch checkpoint: %w", err))
		}
	}
}

// ApplyRetention deletes the oldest segments while they are past
// retention.ms (judged by their largest timestamp) or the log is larger
// than retention.bytes, or they lie wholly below the log start offset.
// The active segment is never deleted. It does not know the high
// watermark: a replica should use ApplyRetentionBelow (Manager.RunRetention
// does).
func (l *Log) ApplyRetention() (deletedSegments int, err error) {
	return l.ApplyRetentionBelow(math.MaxInt64)
}

// ApplyRetentionBelow is ApplyRetention that never deletes a segment
// holding an offset at or above hw (the high watermark): records not yet
// replicated to every in-sync replica, or not yet visible to consumers,
// are kept whatever their age or the log's size, as Kafka does.
func (l *Log) ApplyRetentionBelow(hw int64) (deletedSegments int, err error) {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed {
		return 0, ErrClosed
	}
	cfg := l.Config()
	now := l.opts.Now().UnixMilli()
	diff := int64(-1)
	if cfg.RetentionBytes >= 0 {
		diff = l.Size() - cfg.RetentionBytes
	}
	start := l.logStart.Load()
	// An open transaction is kept whole: its marker is still to come, and
	// read_committed consumers have yet to read it.
	hw = min(hw, l.firstUnstable.Load())
	return l.deleteSegmentsLocked(func(s, next *segment) bool {
		if next.base <= start {
			return true
		}
		if next.base > hw {
			return false // s holds offsets at or above the high watermark
		}
		if !cfg.Delete {
			return false // compact only: no time or size retention
		}
		if cfg.RetentionMs >= 0 && now-s.largestTimestamp() > cfg.RetentionMs {
			return true
		}
		if diff >= 0 && diff-s.size.Load() >= 0 {
			diff -= s.size.Load()
			return true
		}
		return false
	})
}

// deleteSegmentsLocked deletes leading non-active segments while pred
// holds, then moves the log start offset up to the first remaining one.
func (l *Log) deleteSegmentsLocked(pred func(s, next *segment) bool) (int, error) {
	l.mu.RLock()
	n := 0
	for n+1 < len(l.segs) && pred(l.segs[n], l.segs[n+1]) {
		n++
	}
	l.mu.RUnlock()
	if n == 0 {
		return 0, nil
	}
	l.mu.Lock()
	gone := append([]*segment(nil), l.segs[:n]...)
	l.segs = append(l.segs[:0:0], l.segs[n:]...)
	first := l.segs[0].base
	l.mu.Unlock()
	if first > l.logStart.Load() {
		l.logStart.Store(first)
		if err := l.epochs.truncateFromStart(first); err != nil {
			return n, l.fail(fmt.Errorf("storage: leader epoch checkpoint: %w", err))
		}
	}
	var errs []error
	for _, s := range gone {
		errs = append(errs, s.removeFiles(l.fs))
		s.release()
		l.logger.Debug("deleted segment", "base", s.base)
	}
	l.dropAbortedBelow(first)
	// The snapshots of the deleted segments go with them; the one at the
	// first remaining segment's base holds what they told of producers.
	errs = append(errs, l.removeSnapshots(func(off int64) bool { return off < first }))
	if err := errors.Join(errs...); err != nil {
		return n, fmt.Errorf("storage: delete segments: %w", err)
	}
	return n, nil
}

// Close flushes the log (unless it failed), trims the active segment's
// indexes and closes the files. A failed log cuts any partial write off
// the end of its active segment instead.
func (l *Log) Close() error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed {
		return nil
	}
	// Wait for the background fsyncs of rolled segments; one that failed
	// makes this a failed log.
	l.flushWG.Wait()
	l.adoptFlushErr()
	var errs []error
	if len(l.segs) > 0 && l.failed == nil {
		if err := l.writeSnapshot(true); err != nil {
			l.logger.Warn("cannot write producer state snapshot", "offset", l.leo.Load(), "error", err)
		}
	}
	if len(l.segs) > 0 {
		active := l.activeSegment()
		if l.failed != nil {
			errs = append(errs, active.log.Truncate(active.size.Load()))
		}
		l.mu.Lock()
		active.finalTimeEntry()
		l.mu.Unlock()
		// The epochs of every batch on disk are fsynced before the
		// batches are (deactivate fsyncs the segment) and before the
		// recovery point passes them (see epochCache): a power loss
		// between the two fsyncs would otherwise leave fsynced records
		// of an epoch the checkpoint on disk lacks, which recovery cuts.
		var epochErr error
		if l.failed == nil {
			epochErr = l.epochs.syncThrough(l.leo.Load())
		}
		if err := active.deactivate(); err != nil {
			errs = append(errs, err)
		} else if l.failed == nil {
			if epochErr != nil {
				errs = append(errs, fmt.Errorf("leader epoch checkpoint: %w", epochErr))
			} else {
				l.advanceRecoveryPoint(l.leo.Load())
			}
		}
	}
	l.closed = true
	l.closedFlag.Store(true)
	l.mu.Lock()
	segs := l.segs
	l.mu.Unlock()
	for _, s := range segs {
		if s.indexSuspect.Load() {
			// Make the next open rebuild the index a reader found wrong.
			errs = append(errs, removeIfExists(l.fs, s.stem+indexSuffix), removeIfExists(l.fs, s.stem+timeIndexSuffix))
		}
		s.release()
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("storage: close %s: %w", l, err)
	}
	return nil
}

// Delete closes the log and removes its directory. Readers still on a
// segment read on through its .log kept open.
func (l *Log) Delete() error {
	cerr := l.Close()
	l.mu.RLock()
	segs := l.segs
	l.mu.RUnlock()
	for _, s := range segs {
		s.markRemoved(0) // Close released the log's own references
	}
	if err := l.fs.RemoveAll(l.dir); err != nil {
		return fmt.Errorf("storage: delete %s: %w", l, err)
	}
	_ = cerr // the files are gone; a close error no longer matters
	return nil
}

// Failed returns the I/O error that made the log refuse appends, or nil.
func (l *Log) Failed() error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.adoptFlushErr()
	return l.failed
}
