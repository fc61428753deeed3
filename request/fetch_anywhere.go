package request

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quirelog/quire/replica"
)

// forwardFetchMargin is how long past its wait a leader a fetch was passed
// on to may take to answer before its partitions are answered
// NOT_LEADER_OR_FOLLOWER, so that one leader that does not answer cannot
// hold back the records of the others.
const forwardFetchMargin = 5 * time.Second

// PollAnywhere reads partitions wherever they are led, for a caller that
// authorized the reads (FetchRecordsMulti; Fetch with Route): those led
// here from the log (Poll), the others, with Route, by their leaders
// through the Forwarder, one call per leader, all at once. First every
// broker reads without waiting; if none has a record, all wait up to
// MaxWait at once and the first answer with a record or an error ends the
// others' waits (a call ended so leaves its partitions without records,
// to be read again from the same offsets). MaxBytes is shared among the
// brokers asked, so that their answers together fit one response. A
// partition whose leader cannot be asked is NOT_LEADER_OR_FOLLOWER,
// naming the leader.
func (c *Core) PollAnywhere(ctx context.Context, req *FetchRequest) []FetchResult {
	split := c.splitByLeader(req)
	maxBytes := split.shareBytes(req.MaxBytes)
	results := make([]FetchResult, len(req.Partitions))
	// The goroutines take what they need of req, not req: a caller's
	// request (Fetch's) may stay on its stack.
	parts, pooled, received, isolation := req.Partitions, req.Pooled, req.Received, req.Isolation
	split.poll(ctx, req.MaxWait, func(ctx context.Context, idx []int, wait time.Duration) bool {
		local := &FetchRequest{MaxWait: wait, MinBytes: 1, MaxBytes: maxBytes, Pooled: pooled, Received: received, Isolation: isolation,
			Partitions: make([]FetchPartition, len(idx))}
		for j, i := range idx {
			local.Partitions[j] = parts[i]
		}
		found := false
		for j, r := range c.Poll(ctx, local) {
			results[idx[j]] = r
			found = found || r.Err != nil || len(r.Records) > 0
		}
		return found
	}, func(ctx context.Context, leader int32, idx []int, wait time.Duration) bool {
		return c.forwardFetch(ctx, leader, parts, idx, wait, maxBytes, isolation, results)
	})
	return results
}

// leaderSplit is the partitions of a fetch (by index) split by where
// they are read: here, or passed on to each leader.
type leaderSplit struct {
	local   []int
	remote  map[int32][]int
	leaders []int32 // remote's keys, in order of first appearance
}

// splitByLeader splits req's partitions by leader: those another broker
// leads (with Route), by that broker; the others here, where reading
// them says what is wrong with them, if anything.
func (c *Core) splitByLeader(req *FetchRequest) leaderSplit {
	s := leaderSplit{remote: map[int32][]int{}}
	for i, p := range req.Partitions {
		leader, ok := c.routeTo(req.Route, c.ledElsewhere(p.Topic, p.Partition))
		if !ok {
			s.local = append(s.local, i)
			continue
		}
		if _, seen := s.remote[leader]; !seen {
			s.leaders = append(s.leaders, leader)
		}
		s.remote[leader] = append(s.remote[leader], i)
	}
	return s
}

// ledElsewhere returns the NOT_LEADER error for a partition the metadata
// says another broker leads, else nil.
func (c *Core) ledElsewhere(topic string, p int32) error {
	t, ok := c.cfg.Cluster.Topic(topic)
	if !ok || p < 0 || int(p) >= len(t.Partitions) {
		return nil
	}
	pi := t.Partitions[p]
	if pi.Leader < 0 || pi.Leader == c.cfg.NodeID {
		return nil
	}
	return &replica.NotLeaderError{Topic: topic, Partition: p, Leader: pi.Leader, Epoch: pi.LeaderEpoch}
}

// shareBytes is each broker's part of a fetch's response cap (0: the
// default), so that their answers together still fit under the send
// limit.
func (s leaderSplit) shareBytes(maxBytes int) int {
	if maxBytes <= 0 {
		maxBytes = DefaultFetchMaxBytes
	}
	return max(min(maxBytes, MaxFetchResponseBytes)/(len(s.leaders)+min(len(s.local), 1)), 1)
}

// poll reads the local partitions and asks each leader for its own at
// once, each waiting up to wait; the first to report a record or an
// error ends the others' waits. With other leaders, a first round goes
// without waiting, so that an answer ready on one broker does not end
// another's ready answer in flight.
func (s leaderSplit) poll(ctx context.Context, wait time.Duration,
	local func(ctx context.Context, idx []int, wait time.Duration) bool,
	remote func(ctx context.Context, leader int32, idx []int, wait time.Duration) bool) {
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
		for _, leader := range s.leaders {
			wg.Go(func() {
				if remote(waitCtx, leader, s.remote[leader], wait) {
					found.Store(true)
					endWaits()
				}
			})
		}
		wg.Wait()
		return found.Load()
	}
	if len(s.leaders) == 0 || wait == 0 || !round(0) {
		round(wait)
	}
}

// forwardFetch asks leader for the partitions at idx of parts and fills
// in their results; it reports whether any has batches or an error.
func (c *Core) forwardFetch(ctx context.Context, leader int32, parts []FetchPartition, idx []int, wait time.Duration, maxBytes int, isolation Isolation, results []FetchResult) bool {
	fwd := &FetchRequest{MaxWait: wait, MinBytes: 1, MaxBytes: maxBytes, Partitions: make([]FetchPartition, len(idx)), Isolation: isolation}
	for j, i := range idx {
		fwd.Partitions[j] = parts[i]
	}
	answerAll := func(errFor func(p FetchPartition) error) {
		for _, i := range idx {
			results[i] = FetchResult{FetchPartition: parts[i], HighWatermark: -1, LogEndOffset: -1, LogStartOffset: -1, Err: c.fail(errFor(parts[i]))}
		}
	}
	callCtx, cancel := context.WithTimeout(ctx, wait+forwardFetchMargin)
	defer cancel()
	got, err := c.cfg.Forwarder.Fetch(callCtx, leader, fwd)
	if err == nil && len(got) != len(idx) {
		err = fmt.Errorf("request: the leader %d answered %d partitions for %d", leader, len(got), len(idx))
	}
	switch {
	case errors.Is(err, ErrLeaderUnreachable):
		answerAll(func(p FetchPartition) error { return c.unreachedLeader(p, leader, "cannot be reached", err) })
		return true
	case err != nil && ctx.Err() != nil: // another leader answered first, or the caller left
		answerAll(func(FetchPartition) error { return nil })
		return false
	case err != nil:
		answerAll(func(p FetchPartition) error { return c.unreachedLeader(p, leader, "did not answer", err) })
		return true
	}
	found := false
	for j, i := range idx {
		r := got[j]
		r.FetchPartition, r.Err = parts[i], c.fail(r.Err)
		results[i] = r
		found = found || r.Err != nil || len(r.Records) > 0
	}
	return found
}

// unreachedLeader is the NOT_LEADER_OR_FOLLOWER answer, naming the leader,
// for a partition whose leader could not be asked.
func (c *Core) unreachedLeader(p FetchPartition, leader int32, what string, err error) error {
	if nle := c.ledElsewhere(p.Topic, p.Partition); nle != nil {
		return fmt.Errorf("%w; the leader %s: %v", nle, what, err)
	}
	return fmt.Errorf("%w: %s-%d: the leader %d %s: %v", replica.ErrNotLeader, p.Topic, p.Partition, leader, what, err)
}
