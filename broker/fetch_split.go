package broker

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// A fetch of partitions led by several brokers (FetchRecordsMulti, a
// Subscribe stream's fetchBatches) reads those led here and passes the
// others on to their leaders, all at once.

// leaderSplit is the partitions of a fetch (by index) split by where
// they are read: here, or passed on to the leader at each address.
type leaderSplit struct {
	local  []int
	remote map[string][]int
	addrs  []string // remote's keys, in order of first appearance
}

// splitByLeader splits n partitions, the ith named by at(i), by leader.
func (b *Broker) splitByLeader(ctx context.Context, n int, at func(i int) (string, int32)) leaderSplit {
	s := leaderSplit{remote: map[string][]int{}}
	for i := range n {
		addr, ok := b.routeTo(ctx, b.ledElsewhere(at(i)))
		if !ok {
			s.local = append(s.local, i)
			continue
		}
		if _, seen := s.remote[addr]; !seen {
			s.addrs = append(s.addrs, addr)
		}
		s.remote[addr] = append(s.remote[addr], i)
	}
	return s
}

// shareBytes is each broker's part of a fetch's response cap (0: the
// default), so that their answers together still fit under the send
// limit.
func (s leaderSplit) shareBytes(maxBytes int) int {
	if maxBytes <= 0 {
		maxBytes = defaultFetchMaxBytes
	}
	return max(min(maxBytes, maxFetchResponseBytes)/(len(s.addrs)+min(len(s.local), 1)), 1)
}

// poll reads the local partitions (local) and asks each leader for its
// own (remote) at once, each waiting up to wait; the first to report a
// record or an error ends the others' waits (cancelling a passed-on
// call: whatever that leader had is fetched again next time). With other
// leaders, a first round goes without waiting, so that an answer ready on
// one broker does not end another's ready answer in flight.
func (s leaderSplit) poll(ctx context.Context, wait time.Duration,
	local func(ctx context.Context, idx []int, wait time.Duration) bool,
	remote func(ctx context.Context, addr string, idx []int, wait time.Duration) bool) {
	round := func(wait time.Duration) bool {
		waitCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		endWaits := cancel
		if wait == 0 {
			endWaits = func() {} // every answer is on its way at once
		}
		var wg sync.WaitGroup
		var found atomic.Bool
		if len(s.local) > 0 {
			wg.Go(func() {
				if local(waitCtx, s.local, wait) {
					found.Store(true)
					endWaits()
				}
			})
		}
		for _, addr := range s.addrs {
			wg.Go(func() {
				if remote(waitCtx, addr, s.remote[addr], wait) {
					found.Store(true)
					endWaits()
				}
			})
		}
		wg.Wait()
		return found.Load()
	}
	if len(s.addrs) == 0 || wait == 0 || !round(0) {
		round(wait)
	}
}
