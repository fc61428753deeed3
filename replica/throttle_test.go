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

// The fetch a follower builds: a replica it is adding asks for what the
// throttle allows and is left out while the bucket is in debt; the
// partition it follows as usual, in the same fetch, never is.
func TestThrottleFetchLeavesOutOnlyAddingReplicas(t *testing.T) {
	fc := FetchConfig{MaxWait: 5 * time.Second, Backoff: time.Hour, PartitionMax: 1 << 20}
	rm := newManagerPeers(t, 2, openStorage(t), nil, nil, noNetwork{}, fc)
	// No leader in the image: no fetcher of the manager's own runs, and
	// the test builds the fetches of one it does not start.
	moving := Assignment{Partition: 0, Leader: -1, LeaderEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1}, Adding: []int32{2}}
	normal := Assignment{Partition: 1, Leader: -1, LeaderEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}
	f := &fetcher{m: rm.fetchers, leader: 1, parts: map[*Partition]*followed{}, wake: make(chan struct{}, 1), stop: make(chan struct{})}
	for _, a := range []Assignment{moving, normal} {
		if err := rm.apply("t", a.Partition, a); err != nil {
			t.Fatal(err)
		}
		p, _ := rm.Partition("t", a.Partition)
		f.set(p, 1)
	}
	limits := func(now time.Time) (map[int32]int32, int32) {
		req, _, _ := f.request(now)
		out := map[int32]int32{}
		for _, p := range req.Partitions {
			out[p.Partition] = p.PartitionMaxBytes
		}
		return out, req.MaxWaitMs
	}
	now := time.Now()
	if got, _ := limits(now); got[0] != 1<<20 || got[1] != 1<<20 {
		t.Fatalf("unthrottled: %v", got)
	}
	rm.SetReassignmentThrottle(1000)
	if rm.ReassignmentThrottle() != 1000 {
		t.Fatalf("throttle %d", rm.ReassignmentThrottle())
	}
	if got, _ := limits(now); got[0] != 1000 || got[1] != 1<<20 {
		t.Fatalf("throttled, bucket full: %v", got)
	}
	rm.fetchers.throttle.take(1500, now) // half a second in debt
	got, wait := limits(now)
	if _, ok := got[0]; ok || got[1] != 1<<20 {
		t.Fatalf("throttled, in debt: %v", got)
	}
	if wait != 501 {
		t.Fatalf("the long poll waits %d ms; the adding replica is due in 501 (501 bytes at 1000 B/s)", wait)
	}
	rm.SetReassignmentThrottle(0)
	if got, _ := limits(now); got[0] != 1<<20 || got[1] != 1<<20 {
		t.Fatalf("unthrottled again: %v", got)
	}
}
