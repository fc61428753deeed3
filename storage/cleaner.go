package storage

import (
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
)

// CleanerConfig is the log cleaner's node-wide configuration, named after
// Kafka's broker configs.
type CleanerConfig struct {
	// Enable (log.cleaner.enable): run the cleaner at all.
	Enable bool
	// Threads (log.cleaner.threads): logs cleaned at once.
	Threads int
	// DedupeBufferSize (log.cleaner.dedupe.buffer.size): memory for the
	// offset maps of all threads together; each thread's map grows up to
	// its share. It bounds how many keys one pass deduplicates: about
	// DedupeBufferSize / Threads * 0.9 / 24.
	DedupeBufferSize int64
	// IOMaxBytesPerSecond (log.cleaner.io.max.bytes.per.second): the
	// bytes each thread reads and writes per second, at most; +Inf (or
	// <= 0) for no limit.
	IOMaxBytesPerSecond float64
	// BackoffMs (log.cleaner.backoff.ms): how long a thread sleeps when
	// no log needs cleaning.
	BackoffMs int64
}

// DefaultCleanerConfig returns Kafka's defaults.
func DefaultCleanerConfig() CleanerConfig {
	return CleanerConfig{
		Enable:              true,
		Threads:             1,
		DedupeBufferSize:    128 << 20,
		IOMaxBytesPerSecond: math.Inf(1),
		BackoffMs:           15000,
	}
}

// Cleaner compacts the logs of a Manager whose cleanup.policy includes
// compact (see clean.go), on Threads goroutines: each takes the log with
// the highest dirty ratio above its min.cleanable.dirty.ratio (a log past
// its max.compaction.lag.ms first), cleans it, and looks again; with
// nothing to clean it sleeps BackoffMs, or until Wake. Every replica of a
// partition cleans its own log: leaders and followers alike.
type Cleaner struct {
	m      *Manager
	cfg    CleanerConfig
	logger hclog.Logger

	mu      sync.Mutex
	busy    map[*Log]bool
	started bool
	stopped bool
	stop    chan struct{}
	wake    chan struct{}
	wg      sync.WaitGroup

	passes       atomic.Int64
	bytesRead    atomic.Int64
	bytesWritten atomic.Int64
	failures     atomic.Int64
	maxMapBytes  atomic.Int64
}

// NewCleaner returns a cleaner of m's logs; Start runs it.
func NewCleaner(m *Manager, cfg CleanerConfig, logger hclog.Logger) *Cleaner {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	if cfg.Threads < 1 {
		cfg.Threads = 1
	}
	return &Cleaner{m: m, cfg: cfg, logger: logger.Named("cleaner"), busy: map[*Log]bool{},
		stop: make(chan struct{}), wake: make(chan struct{}, 1)}
}

// Start starts the cleaner's goroutines (none if it is not enabled).
func (c *Cleaner) Start() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started || c.stopped || !c.cfg.Enable {
		return
	}
	c.started = true
	for range c.cfg.Threads {
		c.wg.Go(c.run)
	}
}

// Stop stops the goroutines, interrupting a pass (which leaves its log
// as it was), and waits for them.
func (c *Cleaner) Stop() {
	c.mu.Lock()
	if !c.stopped {
		c.stopped = true
		close(c.stop)
	}
	c.mu.Unlock()
	c.wg.Wait()
}

// Wake makes a sleeping goroutine look for work now.
func (c *Cleaner) Wake() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *Cleaner) mapBytes() int64 {
	return max(c.cfg.DedupeBufferSize/int64(c.cfg.Threads), 16*offsetMapSlotBytes)
}

func (c *Cleaner) run() {
	m := newOffsetMap(c.mapBytes())
	backoff := time.Duration(max(c.cfg.BackoffMs, 1)) * time.Millisecond
	for {
		cleaned, err := c.cleanOne(m)
		if err != nil && !errors.Is(err, errCleanStopped) {
			c.logger.Warn("clean pass failed", "error", err)
		}
		select {
		case <-c.stop:
			return
		default:
		}
		if cleaned {
			continue
		}
		t := time.NewTimer(backoff)
		select {
		case <-c.stop:
			t.Stop()
			return
		case <-c.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// CleanOnce cleans the log that needs it most, if any, and reports
// whether it cleaned one.
func (c *Cleaner) CleanOnce() (bool, error) {
	return c.cleanOne(newOffsetMap(c.mapBytes()))
}

// pick returns the log to clean next, marked busy, or nil.
func (c *Cleaner) pick() *Log {
	var best *Log
	bestRatio, bestDue := -1.0, false
	for _, l := range c.m.Logs() {
		ratio, due, ok := l.cleanPriority()
		if !ok {
			continue
		}
		c.mu.Lock()
		busy := c.busy[l]
		c.mu.Unlock()
		if busy {
			continue
		}
		if (due && !bestDue) || (due == bestDue && ratio > bestRatio) {
			best, bestRatio, bestDue = l, ratio, due
		}
	}
	if best == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.busy[best] {
		return nil
	}
	c.busy[best] = true
	return best
}

func (c *Cleaner) cleanOne(m *offsetMap) (bool, error) {
	l := c.pick()
	if l == nil {
		return false, nil
	}
	defer func() {
		c.mu.Lock()
		delete(c.busy, l)
		c.mu.Unlock()
	}()
	th := &throttler{rate: c.cfg.IOMaxBytesPerSecond, stop: c.stop}
	st, err := l.clean(m, th)
	c.bytesRead.Add(st.BytesRead)
	c.bytesWritten.Add(st.BytesWritten)
	for {
		cur := c.maxMapBytes.Load()
		if st.MapBytes <= cur || c.maxMapBytes.CompareAndSwap(cur, st.MapBytes) {
			break
		}
	}
	switch {
	case err == nil:
		c.passes.Add(1)
		return true, nil
	case errors.Is(err, errCleanAborted), errors.Is(err, ErrClosed):
		return true, nil // the log changed: look again
	case errors.Is(err, errCleanStopped):
		return false, err
	}
	c.failures.Add(1)
	return false, err
}

// CleanerTotals are a Cleaner's counters.
type CleanerTotals struct {
	Passes, Failures        int64
	BytesRead, BytesWritten int64
	// MaxMapBytes is the largest offset map a pass used.
	MaxMapBytes int64
}

// Totals returns the cleaner's counters.
func (c *Cleaner) Totals() CleanerTotals {
	return CleanerTotals{Passes: c.passes.Load(), Failures: c.failures.Load(),
		BytesRead: c.bytesRead.Load(), BytesWritten: c.bytesWritten.Load(), MaxMapBytes: c.maxMapBytes.Load()}
}
