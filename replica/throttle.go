package replica

import (
	"sync"
	"time"
)

// The reassignment throttle (replica.reassignment.throttle.bytes.per.second):
// the replicas this broker is adding by a partition reassignment fetch at
// most that many bytes a second, together. Normal replication is never
// throttled: a replica whose broker is not among its partition's adding
// replicas fetches as usual, in the same calls.
//
// It is a token bucket of one second's worth: a fetch of a throttled
// partition asks for no more than the bucket holds, a partition whose
// bucket is empty is left out of the fetch until it refills, and the
// bytes received are taken from it (a first batch larger than what was
// asked for, which a leader answers whole, leaves it in debt).
type throttle struct {
	mu   sync.Mutex
	rate int64 // bytes a second; 0: unthrottled
	have float64
	at   time.Time
}

// set changes the rate; the bucket starts full.
func (t *throttle) set(rate int64, now time.Time) (changed bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if rate < 0 {
		rate = 0
	}
	if rate == t.rate {
		return false
	}
	t.rate, t.have, t.at = rate, float64(rate), now
	return true
}

// Rate is the current rate, 0 when unthrottled.
func (t *throttle) Rate() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rate
}

func (t *throttle) refillLocked(now time.Time) {
	if el := now.Sub(t.at); el > 0 {
		t.have = min(t.have+el.Seconds()*float64(t.rate), float64(t.rate))
		t.at = now
	}
}

// allowance is how many bytes a throttled fetch may ask for now (at most
// max), or 0 and how long until some are due.
func (t *throttle) allowance(now time.Time, max int32) (int32, time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.rate == 0 {
		return max, 0
	}
	t.refillLocked(now)
	if t.have < 1 {
		need := 1 - t.have
		return 0, time.Duration(need / float64(t.rate) * float64(time.Second))
	}
	return int32(min(t.have, float64(max))), 0
}

// take counts n bytes received by throttled replicas.
func (t *throttle) take(n int, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.rate == 0 || n == 0 {
		return
	}
	t.refillLocked(now)
	t.have -= float64(n)
}

// SetReassignmentThrottle sets replica.reassignment.throttle.bytes.per.second
// on this broker: 0 unthrottled. It applies from the next fetch.
func (rm *Manager) SetReassignmentThrottle(bytesPerSecond int64) {
	if rm.fetchers.throttle.set(bytesPerSecond, time.Now()) {
		rm.logger.Info("reassignment throttle", "bytes_per_second", bytesPerSecond)
	}
}

// ReassignmentThrottle is the rate SetReassignmentThrottle set, 0 when
// unthrottled.
func (rm *Manager) ReassignmentThrottle() int64 { return rm.fetchers.throttle.Rate() }
