package client

import (
	"sync/atomic"
	"time"
)

// wallClock stamps produced records cheaply. Reading the clock costs 45 ns
// (the monotonic clock) to 200 ns (time.Now) on the 2-vCPU VMs we run on,
// the largest single share of a record's cost at millions of records a
// second. So while the producer is busy, a ticker goroutine reads the
// clock every clockTick and records take that reading: a record's
// timestamp (milliseconds, in its batch) is at most about one tick before
// the time it was produced (more only while the process is starved of
// CPU). The first record stamped while the ticker is stopped reads the
// clock itself and starts it; the ticker stops once the producer's buffer
// has stayed empty for clockIdle. The readings carry the monotonic clock,
// so time.Since of a record's Timestamp is cheap and immune to clock
// steps.
type wallClock struct {
	cur     atomic.Pointer[time.Time]
	ticking atomic.Bool
}

const (
	clockTick = time.Millisecond
	clockIdle = 100 * time.Millisecond
)

// now returns the time to stamp a record with.
func (p *producer) now() time.Time {
	c := &p.clock
	if c.ticking.Load() {
		if t := c.cur.Load(); t != nil {
			return *t
		}
	}
	t := time.Now()
	c.cur.Store(&t)
	if c.ticking.CompareAndSwap(false, true) && !p.c.spawn(p.tick) {
		c.ticking.Store(false) // closing: every record reads the clock
	}
	return t
}

// tick refreshes the clock's reading until the buffer has been empty for
// clockIdle or the client closes.
func (p *producer) tick() {
	c := &p.clock
	defer c.ticking.Store(false)
	t := time.NewTicker(clockTick)
	defer t.Stop()
	var idleSince time.Time
	for {
		select {
		case <-p.c.ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		c.cur.Store(&now)
		switch {
		case p.bufBytes.Load() != 0:
			idleSince = time.Time{}
		case idleSince.IsZero():
			idleSince = now
		case now.Sub(idleSince) >= clockIdle:
			return
		}
	}
}
