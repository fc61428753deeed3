package storage

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/quirelog/quire/record"
)

// AppendInfo describes an append.
type AppendInfo struct {
	FirstOffset, LastOffset int64
	// MaxTimestamp is the largest record timestamp appended.
	MaxTimestamp int64
	// LogAppendTime is the broker time stamped on LogAppendTime batches, or
	// -1 (this log keeps producer timestamps: CreateTime).
	LogAppendTime int64
	NumRecords    int
	Bytes         int
	// Duplicate reports a leader append of batches an idempotent producer
	// had already written (a retry): nothing was appended, and the offsets
	// and MaxTimestamp are those of the original batches.
	Duplicate bool
}

// batchSet is the result of validating an append.
type batchSet struct {
	info       AppendInfo
	numBatches int
	// producers: some batch carries a producer id.
	producers bool
}

// validate checks every batch of an append before anything is written.
// With deep (a leader append: bytes from a producer) it parses every
// record of an uncompressed batch, as Kafka's leader does, so that a
// record consumers cannot decode is refused (ErrCorruptBatch) rather than
// stored; without it (a follower append: bytes a leader validated) it
// frames the records by their lengths only (see record.ValidateDeep).
func validate(batches []byte, cfg LogConfig, deep bool) (batchSet, error) {
	bs := batchSet{info: AppendInfo{FirstOffset: -1, LastOffset: -1, MaxTimestamp: -1, LogAppendTime: -1, Bytes: len(batches)}}
	if len(batches) == 0 {
		return bs, corrupt(fmt.Errorf("%w: no batches", record.ErrTruncated))
	}
	check := func(b []byte, h record.Header) error {
		if len(b) > int(cfg.MaxMessageBytes) {
			return fmt.Errorf("%w: batch of %d bytes, max.message.bytes %d", ErrRecordTooLarge, len(b), cfg.MaxMessageBytes)
		}
		if bs.numBatches == 0 {
			bs.info.FirstOffset = h.BaseOffset
		}
		bs.info.LastOffset = h.LastOffset()
		bs.info.MaxTimestamp = max(bs.info.MaxTimestamp, h.MaxTimestamp)
		bs.info.NumRecords += int(h.NumRecords)
		bs.numBatches++
		if h.ProducerID >= 0 {
			bs.producers = true
		}
		return nil
	}
	// Direct calls (not through a func value), so that check stays on
	// the stack.
	var err error
	if deep {
		err = record.SplitBatchesDeep(batches, check)
	} else {
		err = record.SplitBatches(batches, check)
	}
	if err != nil {
		if errors.Is(err, ErrRecordTooLarge) {
			return bs, err
		}
		return bs, corrupt(err)
	}
	return bs, nil
}

// checkKeys refuses (ErrNoKey) validated batches of which a record has
// no key: a compacted log keeps records by key, as Kafka's leader
// refuses them for a compacted topic.
func checkKeys(batches []byte) error {
	var bad error
	forEachBatch(batches, func(b []byte) {
		if bad != nil {
			return
		}
		h, _ := record.ParseHeader(b)
		if h.Control() {
			return
		}
		err := record.ForEachRecord(b, func(r *record.Record) error {
			if r.Key == nil {
				return fmt.Errorf("%w: the record at offset delta %d has none", ErrNoKey, r.OffsetDelta)
			}
			return nil
		})
		if err != nil {
			bad = err
		}
	})
	return bad
}

// forEachBatch walks already-validated batches.
func forEachBatch(buf []byte, fn func(b []byte)) {
	for len(buf) > 0 {
		n := record.PeekSize(buf)
		fn(buf[:n])
		buf = buf[n:]
	}
}

func (l *Log) checkWritable() error {
	if l.closed {
		return ErrClosed
	}
	l.adoptFlushErr()
	if l.failed != nil {
		return fmt.Errorf("%w: %w", ErrLogFailed, l.failed)
	}
	return nil
}

// AppendAsLeader validates batches (one or more whole batches, every
// record parsed: see record.ValidateDeep), assigns
// them offsets from the log end offset by writing each base offset into
// the caller's buffer, stamps leaderEpoch into each, and appends them. It
// is all or nothing: a bad batch (ErrCorruptBatch) or one larger than
// MaxMessageBytes (ErrRecordTooLarge) leaves the log and the buffer
// unchanged.
//
// Batches with a producer id (idempotent producers) must follow their
// producer's state (see producer.go): an older producer epoch gets
// ErrInvalidProducerEpoch, a sequence gap or a new epoch not starting at
// sequence 0 ErrOutOfOrderSequence, a sequence other than 0 from a
// producer without state ErrUnknownProducerID. A retry of batches already
// in the log (matching one of the producer's latest ProducerWindow batches)
// appends nothing and returns the original offsets with Duplicate set; an
// append mixing such batches with new ones gets ErrDuplicateSequence.
// Batches without a producer id (-1) are not checked.
//
// Validation reads only the caller's buffer, so it runs before the append
// lock is taken: concurrent appenders to one log validate in parallel and
// hold the lock only to assign offsets and write.
func (l *Log) AppendAsLeader(batches []byte, leaderEpoch int32) (AppendInfo, error) {
	cfg := l.Config()
	bs, err := validate(batches, cfg, true)
	if err != nil {
		return bs.info, err
	}
	if cfg.Compact {
		if err := checkKeys(batches); err != nil {
			return bs.info, err
		}
	}
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.checkWritable(); err != nil {
		return AppendInfo{}, err
	}
	if latest, ok := l.epochs.latest(); ok && leaderEpoch < latest {
		return bs.info, fmt.Errorf("%w: epoch %d, log has %d", ErrStaleEpoch, leaderEpoch, latest)
	}
	if bs.producers {
		chk, err := l.producers.check(batches, bs.numBatches)
		if err != nil {
			return AppendInfo{FirstOffset: -1, LastOffset: -1, MaxTimestamp: -1, LogAppendTime: -1}, err
		}
		if chk.duplicates > 0 {
			return AppendInfo{FirstOffset: chk.dupFirst, LastOffset: chk.dupLast, MaxTimestamp: chk.dupMaxTimestamp,
				LogAppendTime: -1, NumRecords: chk.dupRecords, Duplicate: true}, nil
		}
	}
	off := l.leo.Load()
	bs.info.FirstOffset = off
	forEachBatch(batches, func(b []byte) {
		record.SetBaseOffset(b, off)
		record.SetPartitionLeaderEpoch(b, leaderEpoch)
		h, _ := record.ParseHeader(b)
		off = h.NextOffset()
	})
	bs.info.LastOffset = off - 1
	if err := l.appendLocked(batches, bs, cfg); err != nil {
		return AppendInfo{}, err
	}
	return bs.info, nil
}

// AppendAsFollower appends batches copied from the leader, keeping their
// offsets and epochs. It checks each batch's CRC and record framing, not
// every record's fields: the leader parsed them when it took them. The
// batches must start at or after the log end offset and follow one
// another: ErrOffsetOverlap for offsets the log already has. A gap is
// allowed only in a compacted log (cleanup.policy with compact), whose
// leader's cleaner removes whole batches; elsewhere it is ErrOffsetGap, a
// sign of corruption. The check applies to what is appended now, by the
// log's config now: a log switched from compact to delete may keep gaps
// from before in its history, and a follower that copies that part after
// the switch (a new replica, one far behind) is refused there until the
// gaps go with retention or the topic is compacted again.
func (l *Log) AppendAsFollower(batches []byte) (AppendInfo, error) {
	cfg := l.Config()
	cfg.MaxMessageBytes = math.MaxInt32 // the leader has checked; its config may differ
	bs, err := validate(batches, cfg, false)
	if err != nil {
		return bs.info, err
	}
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.checkWritable(); err != nil {
		return AppendInfo{}, err
	}
	expect := l.leo.Load()
	var gapErr error
	forEachBatch(batches, func(b []byte) {
		h, _ := record.ParseHeader(b)
		switch {
		case gapErr != nil:
		case h.BaseOffset < expect:
			gapErr = fmt.Errorf("%w: batch at %d, expected %d", ErrOffsetOverlap, h.BaseOffset, expect)
		case h.BaseOffset > expect && !cfg.Compact:
			gapErr = fmt.Errorf("%w: batch at %d, expected %d in a log that is not compacted", ErrOffsetGap, h.BaseOffset, expect)
		}
		expect = h.NextOffset()
	})
	if gapErr != nil {
		return bs.info, gapErr
	}
	if err := l.appendLocked(batches, bs, cfg); err != nil {
		return AppendInfo{}, err
	}
	return bs.info, nil
}

// appendLocked writes validated, offset-assigned batches: roll if needed,
// update the epoch cache, one write, then publish.
func (l *Log) appendLocked(batches []byte, bs batchSet, cfg LogConfig) error {
	seg := l.activeSegment()
	if err := l.checkEpochs(batches); err != nil {
		return err
	}
	first, _ := record.ParseHeader(batches)
	if l.shouldRoll(seg, cfg, len(batches), bs) || bs.info.LastOffset-seg.base > math.MaxInt32 {
		// A new segment at the first batch's base offset: after a gap
		// (a follower of a compacted log) the log end may lie 2^31 or
		// more below it, beyond the reach of relative offsets.
		if err := l.rollAtLocked(first.BaseOffset); err != nil {
			return l.fail(fmt.Errorf("storage: roll: %w", err))
		}
		seg = l.activeSegment()
	}
	// Epoch cache first, as Kafka does, so that a crash never leaves
	// batches of an epoch the cache has not heard of. A batch of an epoch
	// new to the log (a follower's copy of a new leader's first batch)
	// enters the cache as a new leader's epoch does at election: the file
	// is written before the batch, without fsync, and fsynced before the
	// recovery point passes it (see epochCache), so the append does not
	// wait on an fsync while holding the append lock.
	forEachBatch(batches, func(b []byte) {
		h, _ := record.ParseHeader(b)
		l.epochs.assign(h.PartitionLeaderEpoch, h.BaseOffset, persistLazy)
	})
	// Written before the batches: a new leader's epoch, in memory since
	// its election (see AssignEpochStart), or one just added.
	if epochErr := l.epochs.writeStale(); epochErr != nil {
		return l.fail(fmt.Errorf("storage: leader epoch checkpoint: %w", epochErr))
	}

	pos := seg.size.Load()
	maxTs, offMaxTs := seg.maxTs.Load(), seg.offMaxTs.Load()
	l.pending = l.pending[:0]
	l.appended = l.appended[:0]
	at := pos
	forEachBatch(batches, func(b []byte) {
		h, _ := record.ParseHeader(b)
		if e, ok := seg.trackBatch(&h, at, cfg.IndexIntervalBytes, &maxTs, &offMaxTs); ok {
			l.pending = append(l.pending, e)
		}
		l.appended = append(l.appended, pendingEntry{offset: h.BaseOffset, pos: at})
		at += int64(len(b))
	})
	if cfg.Preallocate {
		seg.reserve(pos+int64(len(batches)), cfg)
	}
	if _, err := seg.log.WriteAt(batches, pos); err != nil {
		// The file may now hold part of the batches past size; readers
		// never look there, and reopening cuts it.
		return l.fail(fmt.Errorf("storage: write segment %d: %w", seg.base, err))
	}
	seg.dirty = true
	seg.size.Store(pos + int64(len(batches)))
	seg.maxTs.Store(maxTs)
	seg.offMaxTs.Store(offMaxTs)
	l.leo.Store(bs.info.LastOffset + 1)
	if bs.producers {
		if err := l.updateProducers(batches, bs.numBatches); err != nil {
			return l.fail(fmt.Errorf("storage: aborted transaction index: %w", err))
		}
	}
	l.mu.Lock()
	for _, e := range l.pending {
		seg.applyEntry(e)
	}
	for _, e := range l.appended[max(0, len(l.appended)-recentBatchesKept):] {
		seg.recent.add(e.offset, e.pos)
	}
	l.mu.Unlock()
	l.unflushed += int64(bs.info.NumRecords)
	if cfg.flushMessagesOn() && l.unflushed >= cfg.FlushMessages {
		if err := l.flushLocked(); err != nil {
			return err
		}
	}
	return nil
}

// checkEpochs refuses batches whose leader epoch is older than the
// newest in the log or than an earlier batch of the same append: epochs
// never go backwards in a log, and recovery relies on it.
func (l *Log) checkEpochs(batches []byte) error {
	latest, ok := l.epochs.latest()
	if !ok {
		latest = math.MinInt32
	}
	var stale error
	forEachBatch(batches, func(b []byte) {
		h, _ := record.ParseHeader(b)
		if h.PartitionLeaderEpoch < latest && stale == nil {
			stale = fmt.Errorf("%w: epoch %d, log has %d", ErrStaleEpoch, h.PartitionLeaderEpoch, latest)
		}
		latest = max(latest, h.PartitionLeaderEpoch)
	})
	return stale
}

// fail marks the log failed: no more appends until it is reopened.
// Callers hold appendMu.
func (l *Log) fail(err error) error {
	if l.failed == nil {
		l.failed = err
		l.logger.Error("log failed, refusing appends until reopened", "error", err)
	}
	l.tellFailure(err)
	return fmt.Errorf("%w: %w", ErrLogFailed, err)
}

// Fail marks the log failed with err (an I/O error found outside the log,
// such as one writing its data directory's checkpoints): as after a
// failed write, it refuses appends until reopened and tells OnFailure.
func (l *Log) Fail(err error) {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	_ = l.fail(err)
}

// OnFailure sets fn to be told, once, the error the log fails with,
// wherever the failure is found: an append, a flush (the periodic one and
// the background fsync of a rolled segment alike), a leader epoch or
// log start checkpoint, a truncation, Fail. fn is called by whoever found
// the failure, which may hold the log's own locks: it must not block nor
// call the log, only hand the failure on (the replica starts a goroutine
// it tracks, so nothing outlives the replica manager's Stop). Set after
// the log has failed, fn is told at once. The owner of the log (the
// replica) takes the partition out of service then, whether or not
// anything is appended again.
func (l *Log) OnFailure(fn func(error)) {
	l.failMu.Lock()
	l.onFailure = fn
	tell := l.failure != nil && !l.told && fn != nil
	if tell {
		l.told = true
	}
	failure := l.failure
	l.failMu.Unlock()
	if tell {
		fn(failure)
	}
}

// tellFailure tells the failure hook of err, once; the first failure is
// kept for a hook set later.
func (l *Log) tellFailure(err error) {
	l.failMu.Lock()
	if l.failure == nil {
		l.failure = fmt.Errorf("%w: %w", ErrLogFailed, err)
	}
	fn, failure := l.onFailure, l.failure
	tell := fn != nil && !l.told
	if tell {
		l.told = true
	}
	l.failMu.Unlock()
	if tell {
		fn(failure)
	}
}

func (l *Log) activeSegment() *segment {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.segs[len(l.segs)-1]
}

// shouldRoll: segment.bytes, segment.ms (measured, as Kafka does, from
// the largest timestamp of the segment's first batch, or its creation time
// without one), a full index, or relative offsets that would overflow.
func (l *Log) shouldRoll(seg *segment, cfg LogConfig, size int, bs batchSet) bool {
	cur := seg.size.Load()
	if cur == 0 {
		return false
	}
	if cur+int64(size) > cfg.SegmentBytes {
		return true
	}
	rollMs := cfg.SegmentMs
	if cfg.Compact {
		// The active segment is never cleaned: roll it in time for its
		// records to be cleaned within max.compaction.lag.ms.
		rollMs = min(rollMs, cfg.MaxCompactionLagMs)
	}
	if seg.rollBaseTs >= 0 {
		if bs.info.MaxTimestamp-seg.rollBaseTs > rollMs {
			return true
		}
	} else if l.opts.Now().Sub(seg.created).Milliseconds() > rollMs {
		return true
	}
	if seg.indexFull(cfg, bs.numBatches) {
		return true
	}
	return bs.info.LastOffset-seg.base > math.MaxInt32
}

// Roll closes the active segment (trimming its indexes) and starts a new
// one at the log end offset; the old segment is fsynced in the background
// and the recovery point moves to the new segment's base once that is
// done. It does nothing if the active segment is empty.
func (l *Log) Roll() error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.checkWritable(); err != nil {
		return err
	}
	if err := l.rollLocked(); err != nil {
		return l.fail(fmt.Errorf("storage: roll: %w", err))
	}
	return nil
}

// rollLocked starts a new active segment. As Kafka does, the old one is
// not fsynced here, holding up appends, but by a background flush
// (scheduleFlush) that advances the recovery point only once the old
// segment's files and the directory entry of the new one are durable.
func (l *Log) rollLocked() error {
	if l.activeSegment().size.Load() == 0 {
		return nil
	}
	return l.rollAtLocked(l.leo.Load())
}

// rollAtLocked starts a new active segment at leo, at or above the log
// end offset (above it: the first offset of a batch after a gap, which
// may lie too far above an empty active segment's base for its relative
// offsets: that segment then stays behind, empty, as a cleaned one may).
func (l *Log) rollAtLocked(leo int64) error {
	old := l.activeSegment()
	if old.size.Load() == 0 && old.base >= leo {
		return nil
	}
	l.mu.Lock()
	old.finalTimeEntry()
	l.mu.Unlock()
	// Trim the indexes to their entries (writes, no fsync).
	if err := old.finish(); err != nil {
		return err
	}
	s, err := createSegment(l.fs, l.opts.Files, l.dir, leo, l.Config(), l.opts.Now())
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.segs = append(l.segs, s)
	l.mu.Unlock()
	// The producer state as of the new segment's base, so that a restart
	// or a truncation replays at most the segments after it.
	if err := l.writeSnapshot(false); err != nil {
		l.logger.Warn("cannot write producer state snapshot", "offset", leo, "error", err)
	}
	l.scheduleFlush(old, leo)
	l.logger.Debug("rolled segment", "base", leo)
	return nil
}

// flushJob is a background fsync of a rolled segment: once its files and
// the log directory are synced, everything below upTo is durable (the jobs
// run in roll order, so every earlier segment is too).
type flushJob struct {
	seg  *segment
	upTo int64
}

// scheduleFlush queues a background fsync of seg (which holds offsets
// below upTo and is no longer written to). Callers hold appendMu.
func (l *Log) scheduleFlush(seg *segment, upTo int64) {
	seg.acquire() // the files stay open until the job is done
	seg.dirty = false
	l.flushWG.Add(1)
	l.flushMu.Lock()
	l.flushQueue = append(l.flushQueue, flushJob{seg, upTo})
	start := !l.flushRunning
	l.flushRunning = true
	l.flushMu.Unlock()
	if start {
		go l.runFlushes()
	}
}

// runFlushes runs the queued background flushes in order, then exits.
func (l *Log) runFlushes() {
	for {
		l.flushMu.Lock()
		if len(l.flushQueue) == 0 {
			l.flushRunning = false
			l.flushMu.Unlock()
			return
		}
		job := l.flushQueue[0]
		l.flushQueue = l.flushQueue[1:]
		failed := l.flushErr != nil
		l.flushMu.Unlock()

		var err error
		if !failed {
			// The epochs of the batches it covers on disk before the
			// recovery point passes them (see epochCache).
			err = errors.Join(l.epochs.syncThrough(job.upTo), job.seg.syncFiles(), l.fs.SyncDir(l.dir))
		}
		job.seg.release()
		l.flushMu.Lock()
		first := err != nil && l.flushErr == nil
		if first {
			l.flushErr = fmt.Errorf("storage: fsync rolled segment %d: %w", job.seg.base, err)
		}
		ok := l.flushErr == nil
		flushErr := l.flushErr
		l.flushMu.Unlock()
		if first {
			// The log adopts the error at its next append or flush; its
			// owner hears of it now (a leader with nothing more to append
			// must not go on serving).
			l.tellFailure(flushErr)
		}
		if ok {
			l.advanceRecoveryPoint(job.upTo)
		}
		l.flushWG.Done()
	}
}

// waitFlushes waits for the background flushes queued so far and makes a
// failed one fail the log. Callers hold appendMu (so no job is added
// meanwhile).
func (l *Log) waitFlushes() error {
	l.flushWG.Wait()
	l.adoptFlushErr()
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	return l.flushErr
}

// adoptFlushErr fails the log if a background flush failed. Callers hold
// appendMu.
func (l *Log) adoptFlushErr() {
	l.flushMu.Lock()
	err := l.flushErr
	l.flushMu.Unlock()
	if err != nil && l.failed == nil {
		_ = l.fail(err)
	}
}

func (l *Log) advanceRecoveryPoint(off int64) {
	for {
		cur := l.recoveryPoint.Load()
		if off <= cur || l.recoveryPoint.CompareAndSwap(cur, off) {
			return
		}
	}
}

// Flush fsyncs the log up to the log end offset (writing pending index
// entries first) and advances the recovery point.
func (l *Log) Flush() error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed {
		return ErrClosed
	}
	return l.flushLocked()
}

func (l *Log) flushLocked() error {
	leo := l.leo.Load()
	seg := l.activeSegment()
	start := time.Now()
	defer func() { l.opts.flushLatency.Observe(time.Since(start)) }()
	// The epochs of the batches below leo on disk before the recovery
	// point passes them (see epochCache).
	if err := l.epochs.syncThrough(leo); err != nil {
		return l.fail(fmt.Errorf("storage: leader epoch checkpoint: %w", err))
	}
	if err := seg.sync(); err != nil {
		return l.fail(fmt.Errorf("storage: flush: %w", err))
	}
	// The recovery point may only pass the rolled segments once their
	// background fsyncs are done.
	if err := l.waitFlushes(); err != nil {
		return fmt.Errorf("%w: %w", ErrLogFailed, err)
	}
	l.unflushed = 0
	l.lastFlush.Store(int64(l.opts.Now().Sub(l.opened)))
	l.advanceRecoveryPoint(leo)
	return nil
}

// flushDue reports whether flush.ms says the log should be flushed now:
// that long has elapsed since its last flush.
func (l *Log) flushDue(now time.Time) bool {
	cfg := l.Config()
	if !cfg.flushMsOn() || l.leo.Load() <= l.recoveryPoint.Load() {
		return false
	}
	return (now.Sub(l.opened) - time.Duration(l.lastFlush.Load())).Milliseconds() >= cfg.FlushMs
}
