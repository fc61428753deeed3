package storage

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
)

// Manager owns a data directory: its identity (meta.properties, see
// DirectoryID), one Log per "<topic>-<partition>" subdirectory, and the
// per-directory checkpoint files recovery-point-offset-checkpoint,
// replication-offset-checkpoint (high watermarks) and
// log-start-offset-checkpoint, plus the clean-shutdown marker.
type Manager struct {
	dir      string
	dirID    string // directory.id from meta.properties
	defaults LogConfig
	opts     Options
	logger   hclog.Logger

	mu     sync.Mutex
	logs   map[TopicPartition]*Log
	closed bool
}

// OpenManager opens the data directory, reading the checkpoints and
// opening every log in it, Options.RecoveryThreads at a time. Without the
// clean-shutdown marker each log is recovered from its checkpointed
// recovery point.
func OpenManager(dataDir string, defaults LogConfig, opts Options) (*Manager, error) {
	if err := defaults.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	m := &Manager{dir: dataDir, defaults: defaults, opts: opts, logger: opts.Logger.Named("storage"),
		logs: map[TopicPartition]*Log{}}
	fsys := opts.FS
	if err := fsys.MkdirAll(dataDir, 0o755); err != nil {
		return nil, fmt.Errorf("storage: create data dir: %w", err)
	}
	dirID, created, idErr := loadOrCreateDirectoryID(fsys, dataDir)
	if idErr != nil {
		return nil, idErr
	}
	m.dirID = dirID
	marker := join(dataDir, CleanShutdownFile)
	_, err := fsys.Stat(marker)
	clean := err == nil
	readCP := func(name string) map[TopicPartition]int64 {
		cp, err := readOffsetCheckpoint(fsys, join(dataDir, name))
		if err != nil {
			m.logger.Warn("ignoring unreadable checkpoint", "file", name, "error", err)
			clean = false // we cannot trust what we know; recover everything
			return map[TopicPartition]int64{}
		}
		return cp
	}
	recovery := readCP(RecoveryPointCheckpointFile)
	starts := readCP(LogStartCheckpointFile)
	hws := readCP(ReplicationCheckpointFile)
	cleanPoints, cerr := readOffsetCheckpoint(fsys, join(dataDir, CleanerCheckpointFile))
	if cerr != nil {
		// Only work is lost: the logs are cleaned from their start again.
		m.logger.Warn("ignoring unreadable checkpoint", "file", CleanerCheckpointFile, "error", cerr)
		cleanPoints = map[TopicPartition]int64{}
	}
	names, err := fsys.List(dataDir)
	if err != nil {
		return nil, fmt.Errorf("storage: list data dir: %w", err)
	}
	fresh := created && !hasLogDirs(names)
	switch {
	case fresh:
		m.logger.Info("creating a new data directory", "dir", dataDir, "directory_id", dirID)
	case created:
		m.logger.Info("new data directory id", "dir", dataDir, "directory_id", dirID)
	}
	if !clean && !fresh {
		m.logger.Info("no clean shutdown marker, recovering logs")
	}
	// Logs open (and recover) on RecoveryThreads goroutines: recovery
	// waits mostly on fsyncs, which a disk serves side by side.
	var dirs []string
	for _, name := range names {
		if _, ok := parseLogDirName(name); ok {
			dirs = append(dirs, name)
		}
	}
	opened := make([]*Log, len(dirs))
	err = forEachParallel(opts.recoveryThreads(), len(dirs), func(i int) error {
		name := dirs[i]
		tp, _ := parseLogDirName(name)
		if st, err := fsys.Stat(join(dataDir, name)); err != nil || !st.IsDir() {
			return nil
		}
		rp := int64(math.MaxInt64)
		if !clean {
			rp = recovery[tp] // 0 if unknown: check everything
		}
		l, err := OpenLog(join(dataDir, name), tp.Topic, tp.Partition, defaults, rp, opts)
		if err != nil {
			return fmt.Errorf("storage: open %s: %w", name, err)
		}
		if s, ok := starts[tp]; ok {
			l.maybeIncrementLogStart(s)
		}
		if hw, ok := hws[tp]; ok {
			l.SetHighWatermark(hw)
		}
		if cp, ok := cleanPoints[tp]; ok {
			l.setCleanPoint(cp)
		}
		opened[i] = l
		return nil
	})
	for _, l := range opened {
		if l != nil {
			m.logs[TopicPartition{l.topic, l.partition}] = l
		}
	}
	if err != nil {
		m.closeLogs()
		return nil, err
	}
	// From now on a crash must be noticed: drop the marker first.
	if clean {
		if err := removeIfExists(fsys, marker); err != nil {
			m.closeLogs()
			return nil, fmt.Errorf("storage: remove clean shutdown marker: %w", err)
		}
		if err := fsys.SyncDir(dataDir); err != nil {
			m.closeLogs()
			return nil, fmt.Errorf("storage: sync data dir: %w", err)
		}
	}
	return m, nil
}

// parseLogDirName splits "<topic>-<partition>".
func parseLogDirName(name string) (TopicPartition, bool) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 {
		return TopicPartition{}, false
	}
	p, err := strconv.ParseInt(name[i+1:], 10, 32)
	if err != nil || p < 0 || strings.HasPrefix(name, ".") {
		return TopicPartition{}, false
	}
	return TopicPartition{Topic: name[:i], Partition: int32(p)}, true
}

func sortTPs(tps []TopicPartition) {
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].Topic != tps[j].Topic {
			return tps[i].Topic < tps[j].Topic
		}
		return tps[i].Partition < tps[j].Partition
	})
}

// Dir returns the data directory.
func (m *Manager) Dir() string { return m.dir }

// DirectoryID returns the data directory's id (directory.id in its
// meta.properties): random, written when the directory was first opened,
// so a wiped directory gets a new one.
func (m *Manager) DirectoryID() string { return m.dirID }

// GetOrCreate returns the log of a partition, creating it with cfg if
// needed. For an existing log, cfg replaces its configuration.
func (m *Manager) GetOrCreate(topic string, partition int32, cfg LogConfig) (*Log, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if topic == "" || strings.ContainsAny(topic, "/\\ \n") || topic == "." || topic == ".." || partition < 0 {
		return nil, fmt.Errorf("storage: bad topic partition %q %d", topic, partition)
	}
	tp := TopicPartition{topic, partition}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	if l, ok := m.logs[tp]; ok {
		l.SetConfig(cfg)
		return l, nil
	}
	l, err := OpenLog(join(m.dir, tp.String()), topic, partition, cfg, math.MaxInt64, m.opts)
	if err != nil {
		return nil, err
	}
	if err := m.opts.FS.SyncDir(m.dir); err != nil {
		_ = l.Close()
		return nil, fmt.Errorf("storage: sync data dir: %w", err)
	}
	m.logs[tp] = l
	return l, nil
}

// Get returns the log of a partition if the manager has it.
func (m *Manager) Get(topic string, partition int32) (*Log, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.logs[TopicPartition{topic, partition}]
	return l, ok
}

// Delete closes and removes a partition's log and forgets its high
// watermark.
func (m *Manager) Delete(topic string, partition int32) error {
	tp := TopicPartition{topic, partition}
	m.mu.Lock()
	l, ok := m.logs[tp]
	delete(m.logs, tp)
	m.mu.Unlock()
	if !ok {
		return nil
	}
	return l.Delete()
}

// Logs returns the open logs ordered by topic and partition.
func (m *Manager) Logs() []*Log {
	m.mu.Lock()
	defer m.mu.Unlock()
	tps := make([]TopicPartition, 0, len(m.logs))
	for tp := range m.logs {
		tps = append(tps, tp)
	}
	sortTPs(tps)
	out := make([]*Log, len(tps))
	for i, tp := range tps {
		out[i] = m.logs[tp]
	}
	return out
}

// snapshot returns the open logs in no order, for the passes over every
// log that need none (a periodic flush check runs every second, and
// ordering tens of thousands of logs cost it more than the check).
func (m *Manager) snapshot() []*Log {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*Log, 0, len(m.logs))
	for _, l := range m.logs {
		out = append(out, l)
	}
	return out
}

// SetHighWatermark records a partition's high watermark (see
// Log.SetHighWatermark, which the replicas call directly); Checkpoint
// persists it. A partition without a log is ignored.
func (m *Manager) SetHighWatermark(topic string, partition int32, hw int64) {
	if l, ok := m.Get(topic, partition); ok {
		l.SetHighWatermark(hw)
	}
}

// HighWatermark returns the last high watermark set or read from the
// replication checkpoint.
func (m *Manager) HighWatermark(topic string, partition int32) (int64, bool) {
	l, ok := m.Get(topic, partition)
	if !ok {
		return 0, false
	}
	return l.HighWatermark()
}

// Checkpoint writes the three checkpoint files atomically. Failing to,
// the data directory is offline: every log in it fails (Log.Fail), so
// that their replicas go out of service as after a failed write, rather
// than go on with checkpoints that no longer move.
func (m *Manager) Checkpoint() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	err := m.checkpointLocked()
	if err != nil && !m.closed {
		for _, l := range m.logs {
			l.Fail(err)
		}
	}
	return err
}

func (m *Manager) checkpointLocked() error {
	rp := map[TopicPartition]int64{}
	ls := map[TopicPartition]int64{}
	hw := map[TopicPartition]int64{}
	cp := map[TopicPartition]int64{}
	for tp, l := range m.logs {
		rp[tp] = l.RecoveryPoint()
		ls[tp] = l.LogStartOffset()
		if p := l.cleaning.point.Load(); p >= 0 {
			cp[tp] = p
		}
		if h, ok := l.HighWatermark(); ok {
			hw[tp] = h
		}
	}
	fsys := m.opts.FS
	if err := writeOffsetCheckpoint(fsys, join(m.dir, RecoveryPointCheckpointFile), rp); err != nil {
		return fmt.Errorf("storage: write checkpoint: %w", err)
	}
	if err := writeOffsetCheckpoint(fsys, join(m.dir, ReplicationCheckpointFile), hw); err != nil {
		return fmt.Errorf("storage: write checkpoint: %w", err)
	}
	if err := writeOffsetCheckpoint(fsys, join(m.dir, LogStartCheckpointFile), ls); err != nil {
		return fmt.Errorf("storage: write checkpoint: %w", err)
	}
	if err := writeOffsetCheckpoint(fsys, join(m.dir, CleanerCheckpointFile), cp); err != nil {
		return fmt.Errorf("storage: write checkpoint: %w", err)
	}
	return nil
}

// RunRetention applies retention to every log, never deleting a segment
// that holds offsets at or above the partition's high watermark (as set by
// SetHighWatermark or read from the replication checkpoint). A partition
// whose high watermark is unknown only loses segments below its log start
// offset.
func (m *Manager) RunRetention() error {
	var errs []error
	for _, l := range m.snapshot() {
		hw, ok := l.HighWatermark()
		if !ok {
			hw = l.LogStartOffset()
		}
		if _, err := l.ApplyRetentionBelow(hw); err != nil && !errors.Is(err, ErrClosed) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ExpireProducers forgets, in every log, the idempotent producers silent
// for producer.id.expiration.ms (see Log.ExpireProducers), and returns how
// many; call it periodically.
func (m *Manager) ExpireProducers() int {
	n := 0
	for _, l := range m.snapshot() {
		n += l.ExpireProducers()
	}
	return n
}

// FlushDirty flushes the logs whose flush.ms has elapsed since their last
// flush; call it periodically.
func (m *Manager) FlushDirty() error {
	now := m.opts.Now()
	var errs []error
	for _, l := range m.snapshot() {
		if l.flushDue(now) {
			if err := l.Flush(); err != nil && !errors.Is(err, ErrClosed) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// closeLogs closes (flushing) every log, RecoveryThreads at a time.
func (m *Manager) closeLogs() []error {
	logs := make([]*Log, 0, len(m.logs))
	for _, l := range m.logs {
		logs = append(logs, l)
	}
	errs := make([]error, len(logs))
	_ = forEachParallel(m.opts.recoveryThreads(), len(logs), func(i int) error {
		errs[i] = logs[i].Close()
		return nil
	})
	return errs
}

// forEachParallel runs fn(0) to fn(n-1) on up to workers goroutines and
// returns the errors; after the first error no new call starts.
func forEachParallel(workers, n int, fn func(i int) error) error {
	var next atomic.Int64
	var failed atomic.Bool
	errs := make([]error, max(min(workers, n), 1))
	var wg sync.WaitGroup
	for w := range min(workers, n) {
		wg.Go(func() {
			for !failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					errs[w] = err
					failed.Store(true)
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Close flushes and closes every log (Options.RecoveryThreads at a time),
// writes the checkpoints and, if all went well, the clean-shutdown marker.
func (m *Manager) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	errs := m.closeLogs()
	for _, l := range m.logs {
		if l.Failed() != nil {
			errs = append(errs, fmt.Errorf("storage: %s failed: %w", l, l.Failed()))
		}
	}
	errs = append(errs, m.checkpointLocked())
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := writeFileAtomic(m.opts.FS, join(m.dir, CleanShutdownFile), nil); err != nil {
		return fmt.Errorf("storage: write clean shutdown marker: %w", err)
	}
	return nil
}

// hasLogDirs reports whether a data directory's listing has a partition
// directory in it.
func hasLogDirs(names []string) bool {
	for _, name := range names {
		if _, ok := parseLogDirName(name); ok {
			return true
		}
	}
	return false
}
