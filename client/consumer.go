package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/record"
)

// Consumer reads assigned partitions from their leaders. Each broker's
// partitions are fetched by one long-polling loop that keeps up to
// FetchBufferedPolls responses ahead of Poll, so the next fetch is in
// flight while the caller handles the current records. It follows leader
// changes by refreshing metadata. Poll must not be called concurrently.
type Consumer struct {
	c      *Client
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	out    chan fetchResult
	wakeCh chan struct{} // wakes the manager
	// resetNone: an offset out of range is reported (and tried again
	// after the retry backoff), not restarted at the client's
	// ConsumeResetOffset.
	resetNone bool
	isolation quirev1.IsolationLevel

	mu       sync.Mutex
	parts    map[topicPartition]*consPart
	fetchers map[int32]*fetcher
}

type topicPartition struct {
	topic     string
	partition int32
}

type partState int8

const (
	stateResolve partState = iota // needs ListOffsets for start
	stateMeta                     // needs a leader
	stateReady                    // fetchable from leader
)

type consPart struct {
	tp      topicPartition
	start   Offset
	state   partState
	offset  int64 // next offset to fetch
	leader  int32
	epoch   int32
	hw      int64
	retryAt time.Time
}

type fetchResult struct {
	tp     topicPartition
	offset int64 // offset fetched from; earlier records are dropped
	epoch  int32
	data   []byte
	// aborted are the aborted transactions data overlaps (read_committed).
	aborted []*quirev1.AbortedTransaction
	err     error
}

// NewConsumer returns a consumer of the given partitions, each read from
// its start Offset: assign maps topic → partition → start. A start it can
// tell is bad, an AtCommitted whose group id ValidateGroupID refuses,
// fails it with ErrInvalidOffset (and the INVALID_GROUP_ID code).
func (c *Client) NewConsumer(assign map[string]map[int32]Offset) (*Consumer, error) {
	return c.newConsumer(assign, c.cfg.resetNone, c.cfg.isolation)
}

// newConsumer is NewConsumer with the policy for an offset out of range
// (reported when resetNone, else restarted at the client's
// ConsumeResetOffset) and the view of transactions it reads at.
func (c *Client) newConsumer(assign map[string]map[int32]Offset, resetNone bool, isolation quirev1.IsolationLevel) (*Consumer, error) {
	if c.ctx.Err() != nil {
		return nil, ErrClosed
	}
	for t, ps := range assign {
		for p, o := range ps {
			if err := o.validate(); err != nil {
				return nil, fmt.Errorf("%w: %s/%d: %w", ErrInvalidOffset, t, p, err)
			}
		}
	}
	k := &Consumer{c: c, out: make(chan fetchResult, c.cfg.fetchBufferedPolls), wakeCh: make(chan struct{}, 1),
		resetNone: resetNone, isolation: isolation, parts: map[topicPartition]*consPart{}, fetchers: map[int32]*fetcher{}}
	k.ctx, k.cancel = context.WithCancel(c.ctx)
	for t, ps := range assign {
		for p, o := range ps {
			k.parts[topicPartition{t, p}] = &consPart{tp: topicPartition{t, p}, start: o, state: stateMeta, offset: -1, leader: -1}
		}
	}
	k.wg.Add(1)
	go k.manage()
	return k, nil
}

// Assign adds (or restarts) a partition at start. A start that NewConsumer
// would refuse (an AtCommitted with a bad group id) is reported once by
// the next Poll, and the partition is not assigned.
func (k *Consumer) Assign(topic string, partition int32, start Offset) {
	tp := topicPartition{topic, partition}
	if err := start.validate(); err != nil {
		k.mu.Lock()
		k.emitLocked(fetchResult{tp: tp, err: fmt.Errorf("%w: %w", ErrInvalidOffset, err)})
		k.mu.Unlock()
		return
	}
	k.mu.Lock()
	k.parts[topicPartition{topic, partition}] = &consPart{tp: topicPartition{topic, partition}, start: start,
		state: stateMeta, offset: -1, leader: -1}
	k.mu.Unlock()
	k.wake()
}

// Close stops fetching. Records already fetched but not polled are dropped.
func (k *Consumer) Close() {
	k.cancel()
	k.wg.Wait()
}

// Poll waits until records are available (or a partition failed) and
// returns them, in offset order within each partition. It returns ctx's
// error when ctx ends first, and ErrClosed after Close.
func (k *Consumer) Poll(ctx context.Context) ([]*Record, error) {
	var out []*Record
	var slab []Record
	err := k.poll(ctx, func(n int) {
		slab = make([]Record, 0, n)
		out = slices.Grow(out, n)
	}, func(r *Record) bool {
		slab = append(slab, *r)
		out = append(out, &slab[len(slab)-1])
		return true
	})
	return out, err
}

// PollFunc is Poll without a Record allocation per record: it calls fn for
// each record, reusing one Record, and returns how many it passed. Key,
// Value and Headers stay valid after fn returns; the Record itself does
// not. It suits high-rate consumers that do not keep records.
func (k *Consumer) PollFunc(ctx context.Context, fn func(r *Record)) (int, error) {
	n := 0
	err := k.poll(ctx, nil, func(r *Record) bool {
		n++
		fn(r)
		return true
	})
	return n, err
}

// poll waits for fetched data and decodes it, calling batch (if not nil)
// with each batch's record count before its records.
func (k *Consumer) poll(ctx context.Context, batch func(n int), fn func(*Record) bool) error {
	var errs []error
	err := k.pollResults(ctx, nil, func(r fetchResult) {
		if err := k.decode(&r, batch, fn); err != nil {
			errs = append(errs, err)
		}
	})
	if err != nil {
		return err
	}
	return errors.Join(errs...)
}

// errStopped: pollResults returned because its stop channel was closed.
var errStopped = errors.New("client: poll stopped")

// pollResults waits until fetched data is available and hands each
// result ready to run, undecoded: one partition's records in offset order
// (or its error). It returns ctx's error when ctx ends first, ErrClosed
// after Close, and errStopped when stop (nil: never) is closed first.
func (k *Consumer) pollResults(ctx context.Context, stop <-chan struct{}, run func(r fetchResult)) error {
	var first fetchResult
	select {
	case first = <-k.out:
	case <-ctx.Done():
		return ctx.Err()
	case <-k.ctx.Done():
		return ErrClosed
	case <-stop:
		return errStopped
	}
	run(first)
	for {
		select {
		case r := <-k.out:
			run(r)
		default:
			return nil
		}
	}
}

// HighWatermark returns the last high watermark seen for a partition, -1
// before the first fetch.
func (k *Consumer) HighWatermark(topic string, partition int32) int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	if p := k.parts[topicPartition{topic, partition}]; p != nil && p.state == stateReady {
		return p.hw
	}
	return -1
}

// decode calls fn with each record of r at or past the offset fetched
// from, reusing one Record, until fn returns false (the rest of r is then
// skipped). An r holding an error returns it, naming the partition.
func (k *Consumer) decode(r *fetchResult, batch func(n int), fn func(*Record) bool) error {
	if r.err != nil {
		return fmt.Errorf("client: consume %s/%d: %w", r.tp.topic, r.tp.partition, r.err)
	}
	var out Record
	out.Topic, out.Partition = r.tp.topic, r.tp.partition
	aborted := newAbortFilter(r.aborted)
	err := record.SplitBatches(r.data, func(b []byte, h record.Header) error {
		if aborted.Skip(&h) || h.NextOffset() <= r.offset {
			return nil
		}
		if batch != nil {
			batch(int(h.NumRecords))
		}
		out.LeaderEpoch = h.PartitionLeaderEpoch
		return record.ForEachRecord(b, func(rec *record.Record) error {
			if rec.Offset < r.offset {
				return nil
			}
			out.Offset, out.Timestamp, out.Key, out.Value, out.Headers = rec.Offset, time.UnixMilli(rec.Timestamp), rec.Key, rec.Value, nil
			if len(rec.Headers) > 0 {
				out.Headers = append([]RecordHeader(nil), rec.Headers...)
			}
			if !fn(&out) {
				return errStopped
			}
			return nil
		})
	})
	if errors.Is(err, errStopped) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("client: consume %s/%d: %w", r.tp.topic, r.tp.partition, err)
	}
	return nil
}

func (k *Consumer) wake() {
	select {
	case k.wakeCh <- struct{}{}:
	default:
	}
}

// manage finds leaders and start offsets, and starts fetchers.
func (k *Consumer) manage() {
	defer k.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next := k.step()
		if !next.IsZero() {
			timer.Reset(time.Until(next))
		}
		select {
		case <-k.ctx.Done():
			return
		case <-k.wakeCh:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// step does one round of the manager's work and says when to run again.
func (k *Consumer) step() time.Time {
	now := time.Now()
	backoff := k.c.cfg.retryBackoff
	var next time.Time
	k.mu.Lock()
	var metaTopics []string
	resolve := map[int32][]*consPart{}
	for _, p := range k.parts {
		if now.Before(p.retryAt) {
			next = earliest(next, p.retryAt)
			continue
		}
		switch p.state {
		case stateMeta:
			metaTopics = append(metaTopics, p.tp.topic)
		case stateResolve:
			resolve[p.leader] = append(resolve[p.leader], p)
		}
	}
	k.mu.Unlock()

	if len(metaTopics) > 0 {
		ctx, cancel := context.WithTimeout(k.ctx, k.c.cfg.requestTimeout)
		err := k.c.meta.refresh(ctx, dedup(metaTopics), false)
		cancel()
		k.mu.Lock()
		for _, p := range k.parts {
			if p.state != stateMeta {
				continue
			}
			leader, epoch, perr := k.leaderOf(p.tp)
			if err != nil {
				perr = err
			}
			if perr != nil {
				p.retryAt = now.Add(backoff)
				next = earliest(next, p.retryAt)
				if !retriable(perr) && ErrorCode(perr) != quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION {
					k.emitLocked(fetchResult{tp: p.tp, err: perr})
				}
				continue
			}
			p.leader, p.epoch = leader, epoch
			if p.offset < 0 {
				p.state = stateResolve
				resolve[leader] = append(resolve[leader], p)
			} else {
				p.state = stateReady
			}
		}
		k.mu.Unlock()
	}
	for leader, ps := range resolve {
		if leader < 0 {
			continue
		}
		k.resolve(leader, ps)
	}
	k.mu.Lock()
	now = time.Now()
	for _, p := range k.parts {
		if p.retryAt.After(now) {
			next = earliest(next, p.retryAt)
		}
		if p.state == stateReady {
			k.fetcherLocked(p.leader).notify()
		} else if !p.retryAt.After(now) {
			next = earliest(next, now.Add(backoff))
		}
	}
	k.mu.Unlock()
	return next
}

// emitLocked hands an error to Poll without blocking the manager.
func (k *Consumer) emitLocked(r fetchResult) {
	select {
	case k.out <- r:
	default:
	}
}

func (k *Consumer) leaderOf(tp topicPartition) (int32, int32, error) {
	tm := k.c.meta.topic(tp.topic)
	if tm == nil {
		return -1, -1, newError(quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, "unknown topic "+tp.topic)
	}
	if tm.err != nil {
		return -1, -1, tm.err
	}
	// Just after a metadata refresh: a partition outside the count is a
	// request that cannot succeed, as the broker would answer it.
	if tp.partition < 0 || int(tp.partition) >= len(tm.partitions) {
		return -1, -1, newError(quirev1.ErrorCode_INVALID_REQUEST, fmt.Sprintf("%s has no partition %d (it has %d)", tp.topic, tp.partition, len(tm.partitions)))
	}
	pm := tm.partitions[tp.partition]
	if _, ok := k.c.meta.broker(pm.leader); !ok || pm.leader < 0 {
		return -1, -1, newError(quirev1.ErrorCode_LEADER_NOT_AVAILABLE, "no leader")
	}
	return pm.leader, pm.leaderEpoch, nil
}

// resolve turns the start positions of partitions led by leader into
// offsets: a group's committed offset with FetchOffsets, the others with
// ListOffsets.
func (k *Consumer) resolve(leader int32, ps []*consPart) {
	k.resolveCommitted(ps)
	k.mu.Lock()
	req := &quirev1.ListOffsetsRequest{}
	for _, p := range ps {
		if p.state != stateResolve || p.start.kind == offsetCommitted {
			continue // failed to read the group's offset: retried later
		}
		ts := int64(-2)
		switch p.start.kind {
		case offsetEnd:
			ts = -1
		case offsetTime:
			ts = p.start.at
		case offsetExact:
			p.offset, p.state = p.start.at, stateReady
			continue
		}
		req.Partitions = append(req.Partitions, &quirev1.ListOffsetsPartition{Topic: p.tp.topic, Partition: p.tp.partition, TimestampMs: ts})
	}
	k.mu.Unlock()
	if len(req.Partitions) == 0 {
		return
	}
	results, err := k.c.listOffsets(k.ctx, leader, req)
	k.mu.Lock()
	defer k.mu.Unlock()
	retryAt := time.Now().Add(k.c.cfg.retryBackoff)
	var again []*quirev1.ListOffsetsPartition
	for _, r := range results {
		p := k.parts[topicPartition{r.GetTopic(), r.GetPartition()}]
		if p == nil || p.state != stateResolve {
			continue
		}
		if perr := fromProto(r.GetError()); perr != nil {
			k.partFailedLocked(p, perr, retryAt)
			continue
		}
		if r.GetOffset() < 0 && p.start.kind == offsetTime {
			// No record at or after the timestamp: start at the end.
			again = append(again, &quirev1.ListOffsetsPartition{Topic: p.tp.topic, Partition: p.tp.partition, TimestampMs: -1})
			continue
		}
		p.offset, p.state = r.GetOffset(), stateReady
	}
	if err != nil {
		for _, p := range ps {
			// A start still AtCommitted was not in the request: reading
			// the group's offset failed, and resolveCommitted has
			// reported that already.
			if p.state == stateResolve && p.start.kind != offsetCommitted {
				k.partFailedLocked(p, err, retryAt)
			}
		}
	}
	if len(again) > 0 {
		for _, a := range again {
			if p := k.parts[topicPartition{a.GetTopic(), a.GetPartition()}]; p != nil {
				p.start = AtEnd()
			}
		}
		k.wake()
	}
}

// resolveCommitted replaces AtCommitted starts of ps by the group's
// committed offset (At), or by the fallback where the group committed
// none.
func (k *Consumer) resolveCommitted(ps []*consPart) {
	k.mu.Lock()
	byGroup := map[string][]TopicPartition{}
	for _, p := range ps {
		if p.state == stateResolve && p.start.kind == offsetCommitted {
			byGroup[p.start.group] = append(byGroup[p.start.group], TopicPartition{p.tp.topic, p.tp.partition})
		}
	}
	k.mu.Unlock()
	for group, tps := range byGroup {
		offsets, err := k.c.FetchOffsets(k.ctx, group, tps...)
		committed := make(map[topicPartition]int64, len(offsets))
		for _, o := range offsets {
			committed[topicPartition{o.Topic, o.Partition}] = o.Offset
		}
		k.mu.Lock()
		retryAt := time.Now().Add(k.c.cfg.retryBackoff)
		for _, tp := range tps {
			p := k.parts[topicPartition{tp.Topic, tp.Partition}]
			if p == nil || p.state != stateResolve || p.start.kind != offsetCommitted || p.start.group != group {
				continue // reassigned meanwhile
			}
			if err != nil {
				k.partFailedLocked(p, err, retryAt)
				continue
			}
			if o, ok := committed[p.tp]; ok && o >= 0 {
				p.start = At(o)
			} else if p.start.fallback.kind == offsetNone {
				// Asked again after the backoff: the group may commit.
				k.partFailedLocked(p, fmt.Errorf("%w: group %s, %s-%d (the reset is none)", ErrNoCommittedOffset, group, p.tp.topic, p.tp.partition), retryAt)
			} else {
				p.start = *p.start.fallback
			}
		}
		k.mu.Unlock()
	}
}

// partFailedLocked reacts to a partition error: leadership errors send it
// back for metadata, others are reported and retried after a backoff.
func (k *Consumer) partFailedLocked(p *consPart, err error, retryAt time.Time) {
	p.retryAt = retryAt
	switch {
	case ErrorCode(err) == quirev1.ErrorCode_OFFSET_OUT_OF_RANGE && !k.resetNone:
		k.c.log.Debug("offset out of range, resetting", "topic", p.tp.topic, "partition", p.tp.partition,
			"offset", p.offset, "reset", k.c.cfg.resetOffset)
		p.start, p.offset, p.state = k.c.cfg.resetOffset, -1, stateResolve
		p.retryAt = time.Time{}
	case needsMetadata(err):
		p.state = stateMeta
	case retriable(err):
	default:
		k.emitLocked(fetchResult{tp: p.tp, err: err})
	}
	k.wake()
}

func (c *Client) listOffsets(ctx context.Context, leader int32, req *quirev1.ListOffsetsRequest) ([]*quirev1.ListOffsetsResult, error) {
	b, ok := c.meta.broker(leader)
	if !ok {
		return nil, newError(quirev1.ErrorCode_LEADER_NOT_AVAILABLE, fmt.Sprintf("broker %d unknown", leader))
	}
	cc, err := c.conn(b.addr)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.requestTimeout)
	defer cancel()
	resp, err := quirev1.NewConsumerClient(cc).ListOffsets(ctx, req)
	if err != nil {
		return nil, fromStatus(err)
	}
	return resp.GetPartitions(), nil
}

// groupIsolation is the view of transactions a group consumer reads at:
// read_committed unless the client was given ReadUncommitted, since a
// group's committed offsets are what an exactly-once pipeline's
// transactions commit with their output.
func (c *Client) groupIsolation() quirev1.IsolationLevel {
	if c.cfg.isolationSet {
		return c.cfg.isolation
	}
	return quirev1.IsolationLevel_READ_COMMITTED
}
