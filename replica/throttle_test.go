package replica

import (
	"testing"
	"time"
)

// The bucket with a clock given: what a throttled fetch may ask for, and
// how long one waits once the bucket is spent.
func TestThrottleBucket(t *testing.T) {
	var th throttle
	now := time.Unix(1000, 0)
	if got, wait := th.allowance(now, 1<<20); got != 1<<20 || wait != 0 {
		t.Fatalf("unthrottled: %d %v", got, wait)
	}
	th.take(1<<30, now) // counts nothing while unthrottled
	if !th.set(1000, now) || th.set(1000, now) {
		t.Fatal("set reports a change only when the rate changes")
	}
	if got, _ := th.allowance(now, 1<<20); got != 1000 {
		t.Fatalf("a full bucket allows %d, want 1000", got)
	}
	if got, _ := th.allowance(now, 300); got != 300 {
		t.Fatalf("the partition limit caps it: %d", got)
	}
	// A first batch larger than asked for leaves the bucket in debt.
	th.take(3000, now)
	got, wait := th.allowance(now, 1<<20)
	if got != 0 || wait != 2001*time.Millisecond {
		t.Fatalf("in debt of 2000 bytes at 1000 B/s: allowance %d, wait %v", got, wait)
	}
	now = now.Add(wait)
	if got, _ := th.allowance(now, 1<<20); got != 1 {
		t.Fatalf("after the wait: %d", got)
	}
	// Never more than a second's worth.
	now = now.Add(time.Hour)
	if got, _ := th.allowance(now, 1<<20); got != 1000 {
		t.Fatalf("after an hour: %d", got)
	}
	th.set(0, now)
	if got, _ := th.allowance(now, 5000); got != 5000 {
		t.Fatalf("unthrottled again: %d", got)
	}
}
