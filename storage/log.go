package storage

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/quirelog/quire/record"
)

// Log is the on-disk log of one partition replica: a sequence of segments
// in one directory.
//
// One goroutine at a time mutates the log (appends, truncation, roll,
// retention, flush; serialised by appendMu). Any number of readers run
// concurrently with it: the appender writes a batch into the file first
// and only then publishes the new segment size and log end offset with
// atomic stores, so readers never see a half-written batch, and readers
// take mu only for the moments needed to pick a segment and search its
// index, never for the duration of a write.
type Log struct {
	dir       string
	topic     string
	partition int32
	fs        FS
	logger    hclog.Logger
	opts      Options

	cfg atomic.Pointer[LogConfig]

	appendMu sync.Mutex // serialises all mutations

	mu   sync.RWMutex // guards segs and the in-memory index buffers
	segs []*segment   // ordered by base offset; the last is active

	leo atomic.Int64
	// truncations is a sequence lock around truncations: odd while one
	// is under way, until it has published the new log end, and bumped
	// again after. A read that starts while it is odd waits (on
	// truncationDone), and one that sees it change is redone (see
	// ReadAppend), since bytes it read may have been cut or rewritten.
	truncations atomic.Int64
	// truncationDone is closed when the truncation under way (if any)
	// has published the new log end; set before truncations turns odd.
	truncationDone atomic.Pointer[chan struct{}]
	// readWaitHook, if set (tests), runs when a read waits for a truncation.
	readWaitHook func()
	// testHookBeforeCleanPoint, if set (tests), runs when a clean pass
	// has swapped in its last segment, before it moves the clean point.
	testHookBeforeCleanPoint func()
	logStart                 atomic.Int64
	recoveryPoint            atomic.Int64
	// lastFlush is when the log was last flushed, as the time elapsed
	// from opened (both read from opts.Now): flush.ms is judged by
	// elapsed time, which a step of the wall clock does not move.
	lastFlush atomic.Int64
	opened    time.Time
	// hw is the high watermark the replica layer last set, for the
	// replication checkpoint and retention; -1 until known. Set without
	// any lock but its own, so an HW move takes no lock shared by all
	// partitions.
	hw atomic.Int64

	epochs *epochCache

	// producers is the idempotent producers' state (see producer.go).
	producers *producerState
	// firstUnstable is producers.firstUnstable(), published for readers
	// after each append (see FirstUnstableOffset).
	firstUnstable atomic.Int64
	// aborted is the aborted-transactions index of every segment, by
	// marker offset (see txnindex.go); txnMu is a leaf.
	txnMu   sync.RWMutex
	aborted []AbortedTxn

	// cleaning is the compaction state (see clean.go).
	cleaning cleanState

	// guarded by appendMu
	unflushed int64
	pending   []pendingEntry
	appended  []pendingEntry // where each batch of an append starts (segment.recent)
	failed    error
	closed    bool

	closedFlag atomic.Bool

	// Background fsync of rolled segments (see rollLocked).
	flushMu      sync.Mutex
	flushQueue   []flushJob // guarded by flushMu
	flushRunning bool       // guarded by flushMu
	flushErr     error      // first background fsync error; guarded by flushMu
	flushWG      sync.WaitGroup

	// The failure hook (see OnFailure); failMu is a leaf.
	failMu    sync.Mutex
	onFailure func(error)
	failure   error // the first failure, told to onFailure once it is set
	told      bool
}

// OpenLog opens (creating if needed) the log in dir. Segments holding
// offsets at or after recoveryPoint are scanned and validated batch by
// batch, their indexes rebuilt, and the log is cut at the first bad or
// torn batch; pass math.MaxInt64 after a clean shutdown to skip that (the
// tail of the active segment is still checked), or 0 to check everything.
// Damaged or missing indexes are rebuilt in any case.
func OpenLog(dir string, topic string, partition int32, cfg LogConfig, recoveryPoint int64, opts Options) (*Log, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	l := &Log{
		dir: dir, topic: topic, partition: partition, fs: opts.FS, opts: opts,
		logger: opts.Logger.With("topic", topic, "partition", partition),
	}
	l.hw.Store(-1)
	l.cleaning.point.Store(-1)
	l.cfg.Store(&cfg)
	l.opened = opts.Now()
	if err := l.fs.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("storage: create log dir: %w", err)
	}
	err := l.load(recoveryPoint)
	if err == nil {
		err = l.loadTxnIndexes()
	}
	if err == nil {
		err = l.loadCleanMarks()
	}
	if err == nil {
		err = l.loadProducers()
	}
	if err != nil {
		for _, s := range l.segs {
			_ = s.closeFiles()
		}
		return nil, err
	}
	l.producers.expire(opts.Now().UnixMilli(), cfg.ProducerIDExpirationMs)
	return l, nil
}

// parseSegmentName returns the base offset of a "<20 digits>.log" name.
func parseSegmentName(name, suffix string) (int64, bool) {
	stem, ok := strings.CutSuffix(name, suffix)
	if !ok || len(stem) != 20 {
		return 0, false
	}
	base, err := strconv.ParseInt(stem, 10, 64)
	return base, err == nil && base >= 0
}

func (l *Log) load(recoveryPoint int64) error {
	names, err := l.fs.List(l.dir)
	if err != nil {
		return fmt.Errorf("storage: list %s: %w", l.dir, err)
	}
	// A clean pass's leftovers, or its swap to finish (see clean.go).
	if names, err = l.completeSwaps(names); err != nil {
		return err
	}
	logs := map[int64]bool{}
	var bases []int64
	for _, n := range names {
		if base, ok := parseSegmentName(n, logSuffix); ok {
			logs[base] = true
			bases = append(bases, base)
		}
	}
	for _, n := range names {
		stray := strings.HasSuffix(n, ".tmp")
		for _, suf := range []string{indexSuffix, timeIndexSuffix, txnIndexSuffix} {
			if base, ok := parseSegmentName(n, suf); ok && !logs[base] {
				stray = true
			}
		}
		if stray {
			if err := removeIfExists(l.fs, join(l.dir, n)); err != nil {
				return fmt.Errorf("storage: remove stray file: %w", err)
			}
		}
	}

	epochs, eerr := loadEpochCache(l.fs, join(l.dir, LeaderEpochCheckpointFile))
	l.epochs = epochs
	if eerr != nil {
		l.logger.Warn("leader epoch checkpoint unreadable, rebuilding from the log", "error", eerr)
		epochs.entries = nil
		epochs.setLastLocked()
		recoveryPoint = 0
	}

	cfg := l.Config()
	if len(bases) == 0 {
		s, err := createSegment(l.fs, l.opts.Files, l.dir, 0, cfg, l.opts.Now())
		if err != nil {
			return fmt.Errorf("storage: create segment: %w", err)
		}
		l.segs = []*segment{s}
		l.leo.Store(0)
		l.recoveryPoint.Store(0)
		return nil
	}
	// The files are opened as they are read, through the file cache,
	// which closes the least recently used when it needs room: a node
	// opening more segments than it may hold open does not run out.
	for _, base := range bases {
		s := newSegmentStruct(l.fs, l.opts.Files, l.dir, base)
		s.created = l.opts.Now()
		l.segs = append(l.segs, s)
	}

	// The first segment to recover is the one holding the recovery point.
	k := len(l.segs)
	if recoveryPoint < math.MaxInt64 {
		k = 0
		for i, s := range l.segs {
			if s.base <= recoveryPoint {
				k = i
			}
		}
	}
	recovered := false
	next := l.segs[0].base // offset after the last good batch so far
	maxEpoch := int32(-1)
	if e, ok := l.epochs.latest(); ok && eerr == nil {
		maxEpoch = e
	}
	prevEpoch := int32(math.MinInt32)
	// What recovery changed: an epoch the checkpoint did not have, bytes
	// or segments cut. A log it found whole needs no write.
	epochsChanged, cut := eerr != nil, false
	onBatch := func(h *record.Header) {
		prevEpoch = h.PartitionLeaderEpoch
		if l.epochs.assign(h.PartitionLeaderEpoch, h.BaseOffset, persistNone) {
			epochsChanged = true
		}
	}
	for i := 0; i < len(l.segs); i++ {
		s := l.segs[i]
		last := i == len(l.segs)-1
		nextBase := int64(math.MaxInt64)
		if !last {
			nextBase = l.segs[i+1].base
		}
		if s.base < next {
			l.logger.Warn("segment overlaps the previous one, dropping it and what follows", "base", s.base)
			if err := l.dropFrom(i); err != nil {
				return err
			}
			cut = true
			break
		}
		if i < k {
			n, lerr := l.loadSegment(s, nextBase, last)
			if lerr == nil {
				next = n
				prevEpoch = int32(math.MinInt32) // unknown: no ordering check across
				continue
			}
			l.logger.Warn("segment index or tail damaged, recovering segment", "base", s.base, "error", lerr)
		}
		recovered = true
		_ = s.idx.file.Truncate(0)
		_ = s.tidx.file.Truncate(0)
		res := s.recover(cfg, max(next, s.base), prevEpoch, maxEpoch, onBatch)
		if res.err != nil && !errors.Is(res.err, record.ErrCorrupt) {
			return fmt.Errorf("storage: recover segment %d: %w", s.base, res.err)
		}
		next = res.next
		fileLen, err := fileSize(s.log)
		if err != nil {
			return err
		}
		if res.validSize < fileLen {
			l.logger.Warn("truncating damaged log tail", "segment", s.base, "valid_bytes", res.validSize,
				"file_bytes", fileLen, "reason", res.err)
			if err := s.log.Truncate(res.validSize); err != nil {
				return fmt.Errorf("storage: truncate damaged segment: %w", err)
			}
			s.dirty = true
			cut = true
			if err := l.dropFrom(i + 1); err != nil {
				return err
			}
		}
		if i < len(l.segs)-1 {
			// Its bytes may never have been fsynced (a crash before the
			// roll's background flush): fsync them before anything lets
			// the recovery point past them.
			s.finalTimeEntry()
			s.dirty = true
			if err := s.deactivate(); err != nil {
				return fmt.Errorf("storage: write recovered index: %w", err)
			}
		}
	}
	active := l.segs[len(l.segs)-1]
	if active.size.Load() == 0 {
		next = active.base
	} else {
		next = max(next, active.base)
	}
	if err := active.activate(cfg); err != nil {
		return fmt.Errorf("storage: preallocate index: %w", err)
	}
	l.leo.Store(next)
	l.logStart.Store(l.segs[0].base)
	if err := l.epochs.truncateFromEnd(next); err != nil {
		return fmt.Errorf("storage: leader epoch checkpoint: %w", err)
	}
	if err := l.epochs.truncateFromStart(l.segs[0].base); err != nil {
		return fmt.Errorf("storage: leader epoch checkpoint: %w", err)
	}
	// The checkpoint read may be one a new leader wrote without fsync
	// before a kill -9 (the page cache kept it): its entries from the
	// recovery point on are not known to be on disk, and an fsync must
	// precede a recovery point moving past them (see epochCache).
	l.epochs.markUnsyncedFrom(min(recoveryPoint, next))
	switch {
	case recovered && (cut || epochsChanged):
		var err error
		if epochsChanged {
			err = l.epochs.persist()
		} else {
			err = l.epochs.syncThrough(next)
		}
		if err != nil {
			return fmt.Errorf("storage: leader epoch checkpoint: %w", err)
		}
		active.dirty = true
		if err := active.sync(); err != nil {
			return fmt.Errorf("storage: sync recovered segment: %w", err)
		}
		l.recoveryPoint.Store(next)
		l.logger.Info("recovered log", "log_end_offset", next, "segments", len(l.segs))
	case recovered:
		// Every batch past the recovery point checked out and the epoch
		// checkpoint knew them all: nothing to write. The recovery point
		// stays where the last fsync put it (a crash before the next
		// flush checks the same batches again); the next flush fsyncs
		// the tail and moves it.
		active.dirty = true
		l.recoveryPoint.Store(min(recoveryPoint, next))
	default:
		l.recoveryPoint.Store(min(recoveryPoint, next))
	}
	return nil
}

// dropFrom deletes segments i.. (after a damaged one) during load.
func (l *Log) dropFrom(i int) error {
	for _, s := range l.segs[i:] {
		_ = s.closeFiles()
		if err := s.removeFiles(l.fs); err != nil {
			return fmt.Errorf("storage: remove segment: %w", err)
		}
	}
	l.segs = l.segs[:i]
	return nil
}

// loadSegment loads a segment's indexes without validating its batches. It
// returns the offset after its last batch as far as it knows (exact for the
// last segment, whose tail it scans). An error means: recover the segment.
func (l *Log) loadSegment(s *segment, nextBase int64, last bool) (int64, error) {
	logSize, err := fileSize(s.log)
	if err != nil {
		return 0, err
	}
	if s.idx.buf, err = loadIndexFile(s.idx.file, offsetIndexEntrySize); err != nil {
		return 0, err
	}
	if err := s.idx.check(logSize); err != nil {
		return 0, err
	}
	if s.tidx.buf, err = loadIndexFile(s.tidx.file, timeIndexEntrySize); err != nil {
		return 0, err
	}
	if err := s.tidx.check(nextBase - 1); err != nil {
		return 0, err
	}
	s.idx.written, s.tidx.written = len(s.idx.buf), len(s.tidx.buf)
	s.size.Store(logSize)
	if logSize == 0 {
		return s.base, nil
	}
	// Check the last index entry against the log and scan from it to the
	// end for the last segment (which needs an exact end offset) or when
	// there is no time index to take the largest timestamp from.
	idxOff, pos := int64(-1), int64(0)
	if n := s.idx.entries(); n > 0 {
		idxOff, pos = s.idx.entry(n - 1)
	}
	var hb [record.HeaderSize]byte
	first, err := s.readHeader(0, logSize, &hb)
	if err != nil {
		return 0, err
	}
	if first.BaseOffset < s.base {
		return 0, fmt.Errorf("first batch offset %d below segment base %d", first.BaseOffset, s.base)
	}
	s.setRollBase(first.MaxTimestamp)
	if idxOff >= 0 {
		h, err := s.readHeader(pos, logSize, &hb)
		if err != nil || h.BaseOffset != idxOff {
			return 0, fmt.Errorf("last index entry (%d, %d) does not match the log", idxOff, pos)
		}
	}
	maxTs, offMaxTs, ok := s.tidx.last()
	if !last && ok {
		s.maxTs.Store(maxTs)
		s.offMaxTs.Store(offMaxTs)
		return nextBase, nil
	}
	if !ok || !last {
		pos = 0 // no time index: scan it all for the largest timestamp
	}
	next := first.BaseOffset
	end, err := s.scanHeaders(pos, logSize, func(h *record.Header, at int64) {
		if h.MaxTimestamp > maxTs {
			maxTs, offMaxTs = h.MaxTimestamp, h.BaseOffset
		}
		next = h.NextOffset()
	})
	if err != nil {
		return 0, err
	}
	if end != logSize {
		return 0, fmt.Errorf("log ends at %d, last batch at %d", logSize, end)
	}
	if n := s.idx.entries(); n > 0 {
		_, p := s.idx.entry(n - 1)
		s.bytesSinceIndex = logSize - p
	} else {
		s.bytesSinceIndex = logSize
	}
	s.maxTs.Store(maxTs)
	s.offMaxTs.Store(offMaxTs)
	if !last {
		return nextBase, nil
	}
	return next, nil
}

// Topic returns the log's topic.
func (l *Log) Topic() string { return l.topic }

// Partition returns the log's partition.
func (l *Log) Partition() int32 { return l.partition }

// Dir returns the log's directory.
func (l *Log) Dir() string { return l.dir }

// Config returns the log's configuration.
func (l *Log) Config() LogConfig { return *l.cfg.Load() }

// SetConfig replaces the configuration; it applies to the next append,
// roll, flush or retention pass. An invalid config is ignored with a
// warning; use LogConfig.Validate first.
func (l *Log) SetConfig(cfg LogConfig) {
	if err := cfg.Validate(); err != nil {
		l.logger.Warn("ignoring invalid log config", "error", err)
		return
	}
	l.cfg.Store(&cfg)
}

// LogEndOffset returns the offset the next appended record will get.
func (l *Log) LogEndOffset() int64 { return l.leo.Load() }

// LogStartOffset returns the first readable offset.
func (l *Log) LogStartOffset() int64 { return l.logStart.Load() }

// SetHighWatermark records the partition's high watermark (the replica
// layer's, which it alone moves); Manager.Checkpoint writes it to the
// replication checkpoint and retention never deletes at or above it.
// Negative values are ignored.
func (l *Log) SetHighWatermark(hw int64) {
	if hw >= 0 {
		l.hw.Store(hw)
	}
}

// HighWatermark returns the last high watermark set (or read from the
// replication checkpoint when the log was opened), if any.
func (l *Log) HighWatermark() (int64, bool) {
	hw := l.hw.Load()
	return hw, hw >= 0
}

// RecoveryPoint returns the offset below which everything is fsynced.
func (l *Log) RecoveryPoint() int64 { return l.recoveryPoint.Load() }

// LatestEpoch returns the newest leader epoch in the log, if any.
func (l *Log) LatestEpoch() (int32, bool) { return l.epochs.latest() }

// AssignEpochStart records that leader epoch starts at the log end offset,
// as a new leader does before it appends anything (Kafka's
// maybeAssignEpochStartOffset), so that its followers' divergence checks
// see the epoch even while it has no batches. An epoch not newer than the
// latest is ignored.
//
// It changes the cache in memory only: a node given thousands of new
// epochs at once (a restart) would otherwise write the leader epoch
// checkpoint and wait on two fsyncs for each before its partitions take
// writes. The epoch reaches the file (no fsync) before its first batch is
// written, and the disk before the recovery point passes its start; until
// then a crash that loses it loses nothing the cache needs (the argument
// is at epochCache).
func (l *Log) AssignEpochStart(epoch int32) error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.checkWritable(); err != nil {
		return err
	}
	l.epochs.assign(epoch, l.leo.Load(), persistLazy)
	return nil
}

// WriteEpochCheckpoint writes the leader epoch checkpoint, without fsync,
// if it lacks an epoch AssignEpochStart recorded in memory. The epoch's
// first append would do it, under the append lock; a node given thousands
// of epochs at once does it for them in the background instead, so that
// their first appends, one partition after another in a produce request,
// find it done.
func (l *Log) WriteEpochCheckpoint() error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if !l.epochs.stale.Load() {
		return nil
	}
	if err := l.checkWritable(); err != nil {
		return err
	}
	if err := l.epochs.writeStale(); err != nil {
		return l.fail(fmt.Errorf("storage: leader epoch checkpoint: %w", err))
	}
	return nil
}

// EndOffsetForEpoch answers a follower's OffsetsForLeaderEpoch request
// (KIP-279): the largest epoch <= epoch that this log knows and the offset
// where it ends (the start of the next epoch, or the log end offset for
// the latest); (-1, -1) if the epoch is unknown.
func (l *Log) EndOffsetForEpoch(epoch int32) (epochOut int32, endOffset int64) {
	return l.epochs.endOffsetFor(epoch, l.leo.Load())
}

// Size returns the total bytes of the log's segments.
func (l *Log) Size() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var n int64
	for _, s := range l.segs {
		n += s.size.Load()
	}
	return n
}

// NumSegments returns the number of segments.
func (l *Log) NumSegments() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.segs)
}

// segmentFor returns, with a reference taken, the segment that holds
// offset (the last one with base <= offset), or nil if the log has been
// closed meanwhile.
func (l *Log) segmentFor(offset int64) *segment {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if len(l.segs) == 0 {
		return nil
	}
	s := l.segs[l.floorLocked(offset)]
	if !s.tryAcquire() {
		return nil
	}
	return s
}

// floorLocked returns the index of the last segment with base <= offset,
// or 0.
func (l *Log) floorLocked(offset int64) int {
	lo, hi := 0, len(l.segs)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if l.segs[m].base <= offset {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return max(lo-1, 0)
}

func (l *Log) String() string {
	return fmt.Sprintf("log(%s-%d %s)", l.topic, l.partition, filepath.Base(l.dir))
}
