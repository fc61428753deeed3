// Package clock is the wall clock a node reads: the time it stamps on
// records it builds and on offset commits, and judges retention, producer
// expiry and offsets expiry by.
//
// Go's time.Now carries two readings: the wall clock, which a clock step
// (settimeofday, an NTP step, a VM restored from a snapshot) moves, and a
// monotonic one, which nothing moves. Unix, UnixMilli, formatting and
// comparisons with a time that has no monotonic reading (one rebuilt from
// a timestamp: time.UnixMilli) go by the wall clock; the elapsed time
// between two readings of time.Now (Sub, Since, Until, Before, After,
// timers) goes by the monotonic one. Jumped steps the wall clock alone,
// the way a real step does, so that what a node does when its clock
// jumps can be tested in one process of a cluster without touching the
// machine's clock, which every process shares (and which Go reads
// through the vDSO, out of an LD_PRELOAD library's reach).
package clock

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"
)

// Clock tells the time.
type Clock interface {
	Now() time.Time
}

// System is the machine's clock.
type System struct{}

// Now is time.Now.
func (System) Now() time.Time { return time.Now() }

// Jumped is the machine's clock with its wall reading moved by an offset
// that Set changes at any moment: a clock step. Its readings keep their
// monotonic reading unmoved, so the time elapsed between two of them is
// the time that passed, whatever the steps between them, as it is with
// time.Now on a machine whose clock is stepped. The zero value is the
// machine's clock.
type Jumped struct {
	offset atomic.Int64
}

// Now is time.Now with the wall reading moved by the offset.
func (j *Jumped) Now() time.Time { return stepWall(time.Now(), time.Duration(j.offset.Load())) }

// Set steps the clock: from now on its wall reading is d away from the
// machine's.
func (j *Jumped) Set(d time.Duration) { j.offset.Store(int64(d)) }

// Offset is how far the wall reading is from the machine's.
func (j *Jumped) Offset() time.Duration { return time.Duration(j.offset.Load()) }

// Load sets the offset from the file at path, which holds a duration as
// time.ParseDuration reads it ("90m", "-2h30m", "0s"); a missing or empty
// file is offset 0. It reports whether the offset changed; on a file it
// cannot read or parse the offset stays as it was.
func (j *Jumped) Load(path string) (changed bool, err error) {
	b, err := os.ReadFile(path)
	var d time.Duration
	switch s := strings.TrimSpace(string(b)); {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return false, fmt.Errorf("clock: %w", err)
	case s == "":
	default:
		if d, err = time.ParseDuration(s); err != nil {
			return false, fmt.Errorf("clock: offset file %s: %w", path, err)
		}
	}
	return j.offset.Swap(int64(d)) != int64(d), nil
}

// timeLayout is time.Time's representation: with its top bit set, wall
// holds the wall clock's seconds since 1885 and nanoseconds, and ext the
// monotonic reading (see the time package's time.go).
type timeLayout struct {
	wall uint64
	ext  int64
	loc  *time.Location
}

const hasMonotonic = 1 << 63

// canStep reports whether keepMonotonic's reading of time.Time's layout
// holds for this Go: a stepped reading is as far from the original as the
// step by its wall clock and not at all by its monotonic one.
var canStep = func() bool {
	if unsafe.Sizeof(time.Time{}) != unsafe.Sizeof(timeLayout{}) {
		return false
	}
	t := time.Now()
	u := keepMonotonic(t.Add(time.Hour), t)
	return u.Sub(t) == 0 && u.Round(0).Sub(t.Round(0)) == time.Hour && u.Unix()-t.Unix() == 3600
}()

// stepWall moves t's wall reading by d and keeps its monotonic reading.
// Should time.Time's layout ever change (canStep false), the monotonic
// reading is dropped instead: the step is still seen by the wall clock,
// and by elapsed times too.
func stepWall(t time.Time, d time.Duration) time.Time {
	if d == 0 {
		return t
	}
	if !canStep {
		return t.Round(0).Add(d)
	}
	return keepMonotonic(t.Add(d), t)
}

// keepMonotonic returns u (t moved by Add, which moves both readings)
// with t's monotonic reading.
func keepMonotonic(u, t time.Time) time.Time {
	tl := (*timeLayout)(unsafe.Pointer(&t))
	ul := (*timeLayout)(unsafe.Pointer(&u))
	// Add drops the monotonic reading when the wall clock leaves the range
	// the packed form holds (years 1885 to 2157): nothing to put back.
	if tl.wall&ul.wall&hasMonotonic != 0 {
		ul.ext = tl.ext
	}
	return u
}
