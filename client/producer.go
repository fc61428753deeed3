package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quirelog/quire/record"
)

// Produce hands r to the producer and returns at once; cb (which may be
// nil) is called exactly once when the record is acknowledged, with r's
// Partition and Offset set, or when it failed. Callbacks of one partition
// run in offset order, one at a time, on a client goroutine: keep them
// short.
//
// ctx bounds only the wait inside Produce itself: for the topic's metadata
// the first time a topic is used, and for room when the buffer is full and
// BlockOnBufferFull is on. Once Produce has returned, the record is
// delivered or failed within the delivery timeout.
func (c *Client) Produce(ctx context.Context, r *Record, cb func(*Record, error)) {
	if cb == nil {
		cb = func(*Record, error) {}
	}
	c.prod.produce(ctx, r, cb)
}

// ProduceSync produces the records and waits until all are acknowledged
// or failed; it returns the failures joined.
func (c *Client) ProduceSync(ctx context.Context, rs ...*Record) error {
	var wg sync.WaitGroup
	errs := make([]error, len(rs))
	wg.Add(len(rs))
	for i, r := range rs {
		c.Produce(ctx, r, func(_ *Record, err error) {
			errs[i] = err
			wg.Done()
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Flush sends every buffered record at once, ignoring linger, and waits
// until each has been acknowledged or failed (its callback has returned)
// or ctx ends.
func (c *Client) Flush(ctx context.Context) error { return c.prod.flush(ctx) }

// BufferedRecords returns how many produced records await an answer.
func (c *Client) BufferedRecords() int64 {
	var n int64
	for _, pp := range c.prod.partitions() {
		pp.mu.Lock()
		n += pp.buffered
		pp.mu.Unlock()
	}
	return n
}

type promise struct {
	r  *Record
	cb func(*Record, error)
}

// pbatch is one record batch of one partition on its way.
type pbatch struct {
	b        *record.Builder
	recs     []promise
	bytes    int64
	firstAt  time.Time
	deadline time.Time
	tries    int
	// numbered: the batch carries its producer fields (idempotence.go),
	// fixed when it is first sent and kept by retries; pid and epoch are
	// the ones it carries.
	numbered bool
	pid      int64
	epoch    int16
	// maybeWritten: an earlier attempt of the batch may have written it
	// (sent with no definite answer, retried: a producer without
	// idempotence only with RetryUnknownOutcome).
	maybeWritten bool

	// Once sent (window.go): where it is, the request it went in first
	// (batches sent together are written together or not at all, so they
	// are sent again together), and its outcome.
	state  batchState
	group  int64
	offset int64 // of its first record, once acknowledged (-1: unknown)
	err    error // once failed

	// The batch as sent, built once and reused by retries: its header
	// and its records section (the builder's buffer, see BuildParts).
	built bool
	hdr   []byte
	body  []byte
	held  heldBuffers // body buffers gRPC still holds (codec.go)
}

// build builds the batch the first time it is sent.
func (b *pbatch) build() {
	if !b.built {
		b.hdr, b.body = b.b.BuildParts(b.hdr[:0])
		b.built = true
	}
}

type producer struct {
	c   *Client
	cfg *config

	free chan *pbatch // batches kept for reuse, with their buffers

	// stopped is set by failAll before it empties the partitions: add and
	// retry read it under pp.mu and fail the records themselves, so none
	// lands in a partition after failAll passed it (or in one made later).
	stopped atomic.Bool

	topicsMu sync.RWMutex
	topics   map[string]*prodTopic
	// lastTopic is the topic last produced to, once loaded: a loaded
	// topic stays, so the common case skips the map and its lock.
	lastTopic atomic.Pointer[prodTopic]

	sinksMu sync.Mutex
	sinks   map[int32]*sink

	// The partitions holding records with no leader known, and whether
	// the leader watch over them runs (leaderless.go); parkWake wakes it
	// when one is added.
	parkMu   sync.Mutex
	parked   map[*prodPart]struct{}
	watching bool
	parkWake chan struct{}

	// The buffer: the bytes of records produced and not yet called back
	// (every record counts at least 21), taken with one atomic add per
	// record; mu guards only the channels of those waiting for room or
	// for the buffer to drain, and waiters says whether there are any.
	bufBytes atomic.Int64
	closed   atomic.Bool
	waiters  atomic.Int32
	mu       sync.Mutex
	spaceCh  chan struct{} // closed when room is freed
	drainCh  chan struct{} // closed when bufBytes reaches 0

	flushing atomic.Int32
	corr     atomic.Int64
	clock    wallClock

	idempotent bool // idempotence on: Idempotent and acks=all
	inFlight   int  // requests of a partition in flight at most

	// The most requests, and batches, of one partition seen in flight at
	// once (for tests: export_test.go).
	peakRequests, peakBatches atomic.Int32
	// givenUpSending counts the claims leave gave up while their sink
	// was encoding them (for tests).
	givenUpSending atomic.Int32
	ident          producerIdentity // its producer id and epoch
}

type prodTopic struct {
	name     string
	loaded   chan struct{}
	err      error
	parts    atomic.Pointer[[]*prodPart]
	maxBatch atomic.Int64 // the topic's max.message.bytes; 0: not known
	cfgMax   int          // BatchMaxBytes, or the default without a topic limit
	cfgSet   bool         // BatchMaxBytes was given: it wins
}

// batchMax is the largest batch the producer builds for the topic: the
// BatchMaxBytes set, else the topic's max.message.bytes from metadata,
// else the 1 MiB default.
func (t *prodTopic) batchMax() int {
	if m := t.maxBatch.Load(); m > 0 && !t.cfgSet {
		return int(m)
	}
	return t.cfgMax
}

// limitSource says where batchMax comes from, for errors.
func (t *prodTopic) limitSource() string {
	switch {
	case t.cfgSet:
		return "BatchMaxBytes"
	case t.maxBatch.Load() > 0:
		return "the topic's max.message.bytes"
	}
	return "the default batch size"
}

// prodPart is the producer's state of one partition: the open batch, the
// sealed ones waiting, and the window of batches sent (window.go).
type prodPart struct {
	topic     string
	partition int32

	mu           sync.Mutex
	sink         *sink // the leader's; nil while no leader is known
	parked       bool  // in the leader watch (leaderless.go)
	queuedOn     *sink // sink whose ready list holds this partition
	cur          *pbatch
	sealed       []*pbatch
	backoffUntil time.Time
	// sent holds the partition's shares of the requests sent to its
	// sinks, in the order sent; those settled are dropped as new ones
	// come (window.go: leave).
	sent []*claim

	// The window (window.go): the batches sent and not yet called back,
	// in the order sent, and how many requests carry some of them now.
	flight   []*pbatch
	requests int
	buffered int64 // records added and not yet called back
	// done holds the batches taken off the window whose callbacks have not
	// run yet, in order, and finishing says a goroutine is running them
	// (runCallbacks): a partition's callbacks run one at a time, in order,
	// whichever goroutines settled its batches.
	done      []*pbatch
	finishing bool
	// retrying counts the batches of flight to send again; resending says
	// a round of resends is under way (its groups go one after another,
	// in order); reseq that the partition's batches wait for the
	// producer's next epoch.
	retrying  int
	resending bool
	reseq     bool
	groups    int64 // requests that carried the partition's batches

	// Idempotence: the producer id and epoch the partition numbers its
	// batches under (-1 before the first) and its next sequence, under mu
	// (idempotence.go).
	pid     int64
	pepoch  int16
	nextSeq int32
}

// batchState is where a batch sent is.
type batchState uint8

const (
	batchSent   batchState = iota // in a request, not answered
	batchResend                   // to be sent again
	batchAcked                    // acknowledged, offset set
	batchFailed                   // failed, err set
)

func newProducer(c *Client) *producer {
	p := &producer{c: c, cfg: &c.cfg, topics: map[string]*prodTopic{}, sinks: map[int32]*sink{}}
	p.idempotent = c.cfg.idempotent && c.cfg.acks == AllISRAcks
	p.ident.id = -1
	switch {
	case c.cfg.maxInFlightSet:
		p.inFlight = c.cfg.maxInFlight
	case p.idempotent:
		p.inFlight = maxIdempotentBatches
	default:
		p.inFlight = 1
	}
	p.free = make(chan *pbatch, 16)
	p.parkWake = make(chan struct{}, 1)
	c.meta.onChange(p.onMeta)
	return p
}

func (p *producer) produce(ctx context.Context, r *Record, cb func(*Record, error)) {
	size := r.size()
	if err := p.reserve(ctx, int64(size)); err != nil {
		cb(r, err)
		return
	}
	t, err := p.topic(ctx, r.Topic)
	if err != nil {
		p.release(int64(size))
		cb(r, err)
		return
	}
	limit := t.batchMax()
	if size+record.HeaderSize > limit {
		p.release(int64(size))
		cb(r, fmt.Errorf("%w: %d bytes, batch max %d (%s)", ErrRecordTooLarge, size, limit, t.limitSource()))
		return
	}
	parts := *t.parts.Load()
	n := int32(len(parts))
	pi := p.cfg.partitioner.Partition(r, n)
	if pi < 0 || pi >= n {
		p.release(int64(size))
		cb(r, fmt.Errorf("%w: %s/%d of %d partitions", ErrNoSuchPartition, r.Topic, pi, n))
		return
	}
	r.Partition = pi
	var now time.Time
	if r.Timestamp.IsZero() {
		now = p.now()
		r.Timestamp = now
	}
	parts[pi].add(p, r, cb, size, now, limit)
}

// reserve takes room for one record in the buffer: one atomic add when
// there is room (or the buffer is empty: a record larger than the buffer
// goes alone), else it waits for room or fails.
func (p *producer) reserve(ctx context.Context, size int64) error {
	for {
		if p.closed.Load() {
			return ErrClosed
		}
		if n := p.bufBytes.Add(size); n <= p.cfg.maxBufBytes || n == size {
			return nil
		}
		p.release(size)
		if !p.cfg.blockOnFull {
			return ErrBufferFull
		}
		// Registered as a waiter before looking again, so a release either
		// sees the waiter or is seen here.
		p.mu.Lock()
		p.waiters.Add(1)
		if p.spaceCh == nil {
			p.spaceCh = make(chan struct{})
		}
		ch := p.spaceCh
		n := p.bufBytes.Load()
		p.mu.Unlock()
		if n+size > p.cfg.maxBufBytes && n != 0 && !p.closed.Load() {
			select {
			case <-ch:
			case <-ctx.Done():
				p.waiters.Add(-1)
				return ctx.Err()
			case <-p.c.ctx.Done():
				p.waiters.Add(-1)
				return ErrClosed
			}
		}
		p.waiters.Add(-1)
	}
}

// release gives back buffer room and wakes those waiting for it.
func (p *producer) release(bytes int64) {
	p.bufBytes.Add(-bytes)
	if p.waiters.Load() == 0 {
		return
	}
	p.mu.Lock()
	if p.spaceCh != nil {
		close(p.spaceCh)
		p.spaceCh = nil
	}
	if p.drainCh != nil && p.bufBytes.Load() == 0 {
		close(p.drainCh)
		p.drainCh = nil
	}
	p.mu.Unlock()
}

func (p *producer) flush(ctx context.Context) error {
	p.flushing.Add(1)
	defer p.flushing.Add(-1)
	p.sinksMu.Lock()
	for _, s := range p.sinks {
		s.notify()
	}
	p.sinksMu.Unlock()
	if p.bufBytes.Load() == 0 {
		return nil
	}
	p.mu.Lock()
	p.waiters.Add(1)
	defer p.waiters.Add(-1)
	if p.drainCh == nil {
		p.drainCh = make(chan struct{})
	}
	ch := p.drainCh
	empty := p.bufBytes.Load() == 0
	p.mu.Unlock()
	if empty {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// topic returns the producer state of a topic, loading its metadata the
// first time.
func (p *producer) topic(ctx context.Context, name string) (*prodTopic, error) {
	if t := p.lastTopic.Load(); t != nil && t.name == name {
		return t, nil
	}
	p.topicsMu.RLock()
	t := p.topics[name]
	p.topicsMu.RUnlock()
	if t == nil {
		p.topicsMu.Lock()
		if t = p.topics[name]; t == nil {
			nt := &prodTopic{name: name, loaded: make(chan struct{}), cfgMax: p.cfg.batchMaxBytes, cfgSet: p.cfg.batchMaxSet}
			if !p.c.spawn(func() { p.load(nt) }) {
				p.topicsMu.Unlock()
				return nil, ErrClosed
			}
			t = nt
			p.topics[name] = t
		}
		p.topicsMu.Unlock()
	}
	select {
	case <-t.loaded:
	default:
		select {
		case <-t.loaded:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-p.c.ctx.Done():
			return nil, ErrClosed
		}
	}
	if t.err != nil {
		return nil, t.err
	}
	p.lastTopic.Store(t)
	return t, nil
}

func (p *producer) load(t *prodTopic) {
	ctx, cancel := context.WithTimeout(p.c.ctx, p.cfg.deliveryTimeout)
	defer cancel()
	tm, err := p.c.meta.loadTopic(ctx, t.name, false)
	if err == nil {
		p.syncTopic(t, tm)
	} else {
		t.err = err
		p.topicsMu.Lock()
		delete(p.topics, t.name) // the next Produce tries again
		p.topicsMu.Unlock()
	}
	close(t.loaded)
}

// onMeta re-routes partitions after a metadata refresh.
func (p *producer) onMeta() {
	p.topicsMu.RLock()
	ts := make([]*prodTopic, 0, len(p.topics))
	for _, t := range p.topics {
		ts = append(ts, t)
	}
	p.topicsMu.RUnlock()
	for _, t := range ts {
		if t.parts.Load() == nil {
			continue // still loading; load syncs it
		}
		if tm := p.c.meta.topic(t.name); tm != nil && tm.err == nil && len(tm.partitions) > 0 {
			p.syncTopic(t, tm)
		}
	}
}

func (p *producer) syncTopic(t *prodTopic, tm *topicMeta) {
	t.maxBatch.Store(int64(tm.maxMessageBytes))
	var parts []*prodPart
	if old := t.parts.Load(); old != nil {
		parts = *old
	}
	if len(tm.partitions) > len(parts) {
		grown := make([]*prodPart, len(tm.partitions))
		copy(grown, parts)
		for i := len(parts); i < len(grown); i++ {
			grown[i] = &prodPart{topic: t.name, partition: int32(i), pid: -1}
		}
		parts = grown
		t.parts.Store(&parts)
	}
	for i, pm := range tm.partitions {
		var s *sink
		if b, ok := p.c.meta.broker(pm.leader); ok && pm.leader >= 0 && !b.fenced {
			s = p.sinkFor(b)
		}
		// Without a leader, a partition holding records is parked: the
		// leader watch asks for the metadata again and fails them at
		// their delivery timeout (leaderless.go).
		parts[i].setSink(p, s)
	}
}

// sinkFor returns the sink of broker b, starting it the first time; nil
// once the client is closing (a metadata refresh racing Close).
func (p *producer) sinkFor(b brokerMeta) *sink {
	p.sinksMu.Lock()
	defer p.sinksMu.Unlock()
	s := p.sinks[b.id]
	if s == nil {
		s = newSink(p, b.id, b.addr)
		if !p.c.spawn(s.run) {
			return nil
		}
		p.sinks[b.id] = s
		return s
	}
	s.setAddr(b.addr)
	return s
}

// newBatch returns an empty batch, reusing a finished one's buffers when
// it can. now may be zero (not yet read).
func (p *producer) newBatch(now time.Time) *pbatch {
	if now.IsZero() {
		now = time.Now()
	}
	var b *pbatch
	select {
	case b = <-p.free:
	default:
		b = &pbatch{b: record.NewBuilder(p.cfg.codec)}
	}
	b.firstAt, b.deadline = now, now.Add(p.cfg.deliveryTimeout)
	return b
}

// recycle returns a finished batch for reuse, unless gRPC still holds its
// records buffer (a request written to a stream that then broke, or an
// acks=0 request not yet written): then the garbage collector has it.
func (p *producer) recycle(b *pbatch) {
	clear(b.recs)
	b.recs = b.recs[:0]
	if b.held.n.Load() != 0 {
		return
	}
	b.b.Reset()
	b.bytes, b.tries, b.numbered, b.maybeWritten = 0, 0, false, false
	b.built, b.body = false, nil
	b.state, b.err = batchSent, nil
	select {
	case p.free <- b:
	default:
	}
}

func (pp *prodPart) add(p *producer, r *Record, cb func(*Record, error), size int, now time.Time, limit int) {
	pp.mu.Lock()
	if p.stopped.Load() {
		// Reserved before Close, arriving after failAll: no sink runs.
		pp.mu.Unlock()
		p.release(int64(size))
		r.Offset = -1
		cb(r, ErrClosed)
		return
	}
	b := pp.cur
	sealed := false
	full := 0 // records of the batch just sealed
	if b != nil && b.b.EstimatedSize()+size > limit {
		pp.sealed = append(pp.sealed, b)
		full = len(b.recs)
		b, sealed = nil, true
	}
	if b == nil {
		b = p.newBatch(now)
		pp.cur = b
		if sealed {
			// The partition fills batches: size this one for a full
			// batch at once rather than growing it copy by copy.
			b.b.Grow(min(limit, 1<<20) - record.HeaderSize)
			if cap(b.recs) < full {
				b.recs = make([]promise, 0, full)
			}
		}
	}
	b.b.Append(r.Timestamp.UnixMilli(), r.Key, r.Value, r.Headers)
	b.recs = append(b.recs, promise{r: r, cb: cb})
	b.bytes += int64(size)
	pp.buffered++
	var wake *sink
	park := false
	if s := pp.sink; s == nil {
		// No leader known: the record waits for one (leaderless.go).
		park = pp.parkLocked()
	} else {
		if pp.queuedOn != s {
			pp.queuedOn = s
			s.enqueue(pp)
			wake = s
		} else if sealed || len(b.recs) == 1 && pp.requests == 0 && pp.room(p) {
			// A full batch to send, or a new one while nothing of the
			// partition is in flight (linger permitting): the sink looks
			// again. While requests are in flight, the next goes when one
			// is answered, a batch fills up or its linger ends, so that
			// the window fills with full batches under load.
			wake = s
		}
	}
	pp.mu.Unlock()
	if wake != nil {
		wake.notify()
	}
	if park {
		p.park(pp)
	}
}

// setSink moves the partition to the leader's sink. Requests still
// waiting for the old leader's answers are given up (leave): that leader
// was replaced, and may never answer (paused, or cut off). It runs on the
// metadata goroutine: the callbacks of what it settles run on another.
func (pp *prodPart) setSink(p *producer, s *sink) {
	pp.mu.Lock()
	if pp.sink == s {
		pp.mu.Unlock()
		return
	}
	pp.sink = s
	run := false
	if s != nil {
		run = pp.queueDone(pp.leave(p, s))
	}
	has := pp.hasWork()
	if s != nil && has && pp.queuedOn != s {
		pp.queuedOn = s
		s.enqueue(pp)
	}
	park := pp.parkLocked()
	pp.mu.Unlock()
	if run {
		p.runCallbacksLater(pp)
	}
	if s != nil && has {
		s.notify()
	}
	if park {
		p.park(pp)
	}
}

// take removes the batch to send next, or says when the open batch's
// linger ends (zero time: nothing to send).
func (pp *prodPart) take(now time.Time, linger time.Duration, flushing bool) (*pbatch, time.Time) {
	if len(pp.sealed) > 0 {
		b := pp.sealed[0]
		pp.sealed[0] = nil
		pp.sealed = pp.sealed[1:]
		if len(pp.sealed) == 0 {
			pp.sealed = nil
		}
		return b, time.Time{}
	}
	if pp.cur == nil {
		return nil, time.Time{}
	}
	if linger <= 0 || flushing || now.Sub(pp.cur.firstAt) >= linger {
		b := pp.cur
		pp.cur = nil
		return b, time.Time{}
	}
	return nil, pp.cur.firstAt.Add(linger)
}

// nextSize is the size of the batch take would return next (the open one
// regardless of linger), 0 with none.
func (pp *prodPart) nextSize() int {
	switch {
	case len(pp.sealed) > 0:
		return pp.sealed[0].b.EstimatedSize()
	case pp.cur != nil:
		return pp.cur.b.EstimatedSize()
	}
	return 0
}

// close stops new records (reserve fails); failAll then fails whatever is
// left once the client's goroutines have stopped, including records of
// Produce calls that reserved room before close and reach their partition
// after failAll (add fails them).
func (p *producer) close() {
	p.closed.Store(true)
	p.mu.Lock()
	if p.spaceCh != nil {
		close(p.spaceCh)
		p.spaceCh = nil
	}
	p.mu.Unlock()
}

// partitions returns every partition the producer has state for.
func (p *producer) partitions() []*prodPart {
	p.topicsMu.RLock()
	defer p.topicsMu.RUnlock()
	var parts []*prodPart
	for _, t := range p.topics {
		if ps := t.parts.Load(); ps != nil {
			parts = append(parts, *ps...)
		}
	}
	return parts
}

func (p *producer) failAll(err error) {
	// Set before the walk: an add that takes pp.mu after failAll emptied pp
	// sees it; one before left its record for failAll to find.
	p.stopped.Store(true)
	for _, pp := range p.partitions() {
		pp.mu.Lock()
		// The window first (the oldest records), whatever their state:
		// nothing will answer for them now.
		batches := make([]*pbatch, 0, len(pp.flight)+len(pp.sealed)+1)
		for _, b := range pp.flight {
			if b.state == batchSent || b.state == batchResend {
				b.state, b.err = batchFailed, err
			}
			batches = append(batches, b)
		}
		for _, b := range pp.sealed {
			b.state, b.err = batchFailed, err
			batches = append(batches, b)
		}
		if pp.cur != nil {
			pp.cur.state, pp.cur.err = batchFailed, err
			batches = append(batches, pp.cur)
		}
		pp.flight, pp.sealed, pp.cur, pp.sent = nil, nil, nil, nil
		pp.retrying, pp.requests = 0, 0
		pp.uncount(batches)
		// Batches settled before, whose callbacks were still to run,
		// come first (taken off the count already).
		batches = append(pp.done, batches...)
		pp.done, pp.finishing = nil, false
		pp.mu.Unlock()
		p.finish(pp, batches)
	}
}
