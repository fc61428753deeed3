package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/record"
)

// Produce hands r to the producer and returns at once; cb (which may be
// nil) is called exactly once when the record is acknowledged, with r's
// Partition and Offset set, or when it failed. Callbacks of one partition
// run in offset order, on a client goroutine: keep them short.
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
	c.prod.mu.Lock()
	defer c.prod.mu.Unlock()
	return c.prod.bufRecs
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
	// fixed when it is first sent and kept by retries.
	numbered bool
	// maybeWritten: an earlier attempt of the batch may have written it
	// (a producer without idempotence retrying an unknown outcome, see
	// RetryUnknownOutcome).
	maybeWritten bool

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

	mu       sync.Mutex // guards the buffer accounting and closed
	bufBytes int64
	bufRecs  int64
	spaceCh  chan struct{} // closed when room is freed
	drainCh  chan struct{} // closed when bufRecs reaches 0
	closed   bool

	flushing atomic.Int32
	corr     atomic.Int64
	clock    wallClock

	idempotent bool             // idempotence on: Idempotent and acks=all
	ident      producerIdentity // its producer id and epoch
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
// sealed ones waiting, and whether one is in flight.
type prodPart struct {
	topic     string
	partition int32

	mu           sync.Mutex
	sink         *sink // the leader's; nil while no leader is known
	queuedOn     *sink // sink whose ready list holds this partition
	cur          *pbatch
	sealed       []*pbatch
	inflight     bool
	sent         *claim // the batches of the last request sent
	backoffUntil time.Time

	// Idempotence: the producer id and epoch the partition numbers its
	// batches under (-1 before the first) and its next sequence; owned by
	// whoever holds the in-flight slot (idempotence.go).
	pid     int64
	pepoch  int16
	nextSeq int32
}

func newProducer(c *Client) *producer {
	p := &producer{c: c, cfg: &c.cfg, topics: map[string]*prodTopic{}, sinks: map[int32]*sink{}}
	p.idempotent = c.cfg.idempotent && c.cfg.acks == AllISRAcks
	p.ident.id = -1
	p.free = make(chan *pbatch, 16)
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
		p.release(int64(size), 1)
		cb(r, err)
		return
	}
	limit := t.batchMax()
	if size+record.HeaderSize > limit {
		p.release(int64(size), 1)
		cb(r, fmt.Errorf("%w: %d bytes, batch max %d (%s)", ErrRecordTooLarge, size, limit, t.limitSource()))
		return
	}
	parts := *t.parts.Load()
	n := int32(len(parts))
	pi := p.cfg.partitioner.Partition(r, n)
	if pi < 0 || pi >= n {
		p.release(int64(size), 1)
		cb(r, fmt.Errorf("%w: %s/%d of %d partitions", ErrNoSuchPartition, r.Topic, pi, n))
		return
	}
	r.Partition = pi
	var now time.Time
	if r.Timestamp.IsZero() {
		now = p.clock.now()
		r.Timestamp = now
	}
	parts[pi].add(p, r, cb, size, now, limit)
}

// reserve takes room for one record in the buffer.
func (p *producer) reserve(ctx context.Context, size int64) error {
	p.mu.Lock()
	for {
		if p.closed {
			p.mu.Unlock()
			return ErrClosed
		}
		if p.bufBytes+size <= p.cfg.maxBufBytes || p.bufRecs == 0 {
			p.bufBytes += size
			p.bufRecs++
			p.mu.Unlock()
			return nil
		}
		if !p.cfg.blockOnFull {
			p.mu.Unlock()
			return ErrBufferFull
		}
		if p.spaceCh == nil {
			p.spaceCh = make(chan struct{})
		}
		ch := p.spaceCh
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-p.c.ctx.Done():
			return ErrClosed
		}
		p.mu.Lock()
	}
}

func (p *producer) release(bytes, recs int64) {
	p.mu.Lock()
	p.bufBytes -= bytes
	p.bufRecs -= recs
	if p.spaceCh != nil {
		close(p.spaceCh)
		p.spaceCh = nil
	}
	if p.bufRecs == 0 && p.drainCh != nil {
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
	p.mu.Lock()
	if p.bufRecs == 0 {
		p.mu.Unlock()
		return nil
	}
	if p.drainCh == nil {
		p.drainCh = make(chan struct{})
	}
	ch := p.drainCh
	p.mu.Unlock()
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
	leaderless := false
	now := time.Now()
	for i, pm := range tm.partitions {
		var s *sink
		if b, ok := p.c.meta.broker(pm.leader); ok && pm.leader >= 0 && !b.fenced {
			s = p.sinkFor(b)
		}
		if s == nil {
			leaderless = leaderless || parts[i].expire(p, now)
		}
		parts[i].setSink(p, s)
	}
	if leaderless {
		p.c.meta.triggerRefresh()
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
		p.release(int64(size), 1)
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
	var wake *sink
	if s := pp.sink; s != nil {
		if pp.queuedOn != s {
			pp.queuedOn = s
			s.enqueue(pp)
			wake = s
		} else if sealed {
			wake = s
		}
	}
	pp.mu.Unlock()
	if wake != nil {
		wake.notify()
	}
}

// setSink moves the partition to the leader's sink. A request still
// waiting for the old leader's answer is given up: that leader was
// replaced, and may never answer (paused, or cut off). Its batches are
// retried at the new leader as unanswered (retry: safe with idempotence,
// an unknown outcome without).
func (pp *prodPart) setSink(p *producer, s *sink) {
	pp.mu.Lock()
	if pp.sink == s {
		pp.mu.Unlock()
		return
	}
	pp.sink = s
	var moved *claim
	if s != nil && pp.inflight && pp.sent != nil && pp.sent.sink != s {
		moved = pp.sent
	}
	has := pp.cur != nil || len(pp.sealed) > 0 || moved != nil
	if s != nil && has && pp.queuedOn != s {
		pp.queuedOn = s
		s.enqueue(pp)
	}
	pp.mu.Unlock()
	if moved != nil && moved.take() {
		p.retry(pp, moved.bs, newError(quirev1.ErrorCode_NOT_LEADER_OR_FOLLOWER,
			"the partition moved to another leader while a request to the old one waited"), true)
	}
	if s != nil && has {
		s.notify()
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

// nextNumbered reports whether the batch take would return next was
// numbered (sent) before.
func (pp *prodPart) nextNumbered() bool {
	switch {
	case len(pp.sealed) > 0:
		return pp.sealed[0].numbered
	case pp.cur != nil:
		return pp.cur.numbered
	}
	return false
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

// expire fails the batches of a leaderless partition whose delivery
// timeout passed; it reports whether the partition still holds records.
func (pp *prodPart) expire(p *producer, now time.Time) bool {
	pp.mu.Lock()
	var dead []*pbatch
	for len(pp.sealed) > 0 && !pp.inflight && now.After(pp.sealed[0].deadline) {
		dead = append(dead, pp.sealed[0])
		pp.sealed = pp.sealed[1:]
	}
	if len(pp.sealed) == 0 && pp.cur != nil && !pp.inflight && now.After(pp.cur.deadline) {
		dead = append(dead, pp.cur)
		pp.cur = nil
	}
	has := pp.cur != nil || len(pp.sealed) > 0
	pp.mu.Unlock()
	if len(dead) > 0 {
		err := fmt.Errorf("client: %s/%d: delivery timeout with no leader: %w", pp.topic, pp.partition, context.DeadlineExceeded)
		if dead[0].numbered || dead[0].maybeWritten {
			// Sent before: it may be in the log.
			err = fmt.Errorf("%w: %w", ErrUnknownOutcome, err)
		}
		p.fail(pp, dead, err, false)
	}
	return has
}

// complete runs the callbacks of acknowledged batches (sent together,
// in order, the first record at baseOffset; -1 when unknown with acks=0),
// then lets the partition send again.
func (p *producer) complete(pp *prodPart, bs []*pbatch, baseOffset int64) {
	off := baseOffset
	for _, b := range bs {
		for i := range b.recs {
			pr := &b.recs[i]
			pr.r.Offset = -1
			if baseOffset >= 0 {
				pr.r.Offset = off
				off++
			}
			pr.cb(pr.r, nil)
		}
	}
	p.done(pp, bs, true)
}

// fail runs the callbacks of failed batches with err.
func (p *producer) fail(pp *prodPart, bs []*pbatch, err error, wasInflight bool) {
	for _, b := range bs {
		for i := range b.recs {
			pr := &b.recs[i]
			pr.r.Offset = -1
			pr.cb(pr.r, err)
		}
	}
	p.done(pp, bs, wasInflight)
}

func (p *producer) done(pp *prodPart, bs []*pbatch, wasInflight bool) {
	var wake *sink
	if wasInflight {
		pp.mu.Lock()
		pp.inflight = false
		wake = pp.sink
		pp.mu.Unlock()
	}
	var n, bytes int64
	for _, b := range bs {
		n += int64(len(b.recs))
		bytes += b.bytes
		p.recycle(b)
	}
	p.release(bytes, n)
	if wake != nil {
		wake.notify()
	}
}

// retry puts in-flight batches back at the head of their partition after a
// retriable error, or fails them when they cannot be retried in time.
// unanswered: the attempt was sent and got no answer (a broken or timed
// out stream), so it may have been written.
func (p *producer) retry(pp *prodPart, bs []*pbatch, err error, unanswered bool) {
	if needsMetadata(err) {
		p.c.meta.triggerRefresh()
	}
	now := time.Now()
	backoff := p.cfg.retryBackoff
	again := retriable(err)
	if p.idempotent && resequences(err) {
		// Not written: they go again under the next epoch.
		p.unnumber(pp, bs)
		again = true
	}
	ambiguous := unanswered || outcomeUnknown(err)
	if p.c.ctx.Err() != nil {
		p.fail(pp, bs, ErrClosed, true)
		return
	}
	if !p.idempotent && ambiguous && again && !p.cfg.retryUnknown {
		// Maybe written, and a retry would not be recognised: the
		// application decides (RetryUnknownOutcome).
		p.fail(pp, bs, fmt.Errorf("%w: %s/%d: %w", ErrUnknownOutcome, pp.topic, pp.partition, err), true)
		return
	}
	if !again {
		if ambiguous || bs[0].maybeWritten {
			err = fmt.Errorf("%w: %s/%d: %w", ErrUnknownOutcome, pp.topic, pp.partition, err)
		}
		p.fail(pp, bs, err, true)
		return
	}
	// Each batch goes by its own delivery deadline: the oldest ones may be
	// out of time while records produced since still have theirs. (A
	// partition's batches are in order, and so are their deadlines.)
	expired := 0
	for expired < len(bs) && now.Add(backoff).After(bs[expired].deadline) {
		expired++
	}
	if expired > 0 && (p.idempotent && bs[0].numbered || ambiguous || bs[0].maybeWritten) {
		// Sent and unanswered: it may be in the log. It is not sent again
		// (the later batches of an idempotent producer keep their
		// sequences: a broker without it refuses them as out of order,
		// and they go under a new epoch).
		err = fmt.Errorf("%w: %s/%d: delivery timeout: %w", ErrUnknownOutcome, pp.topic, pp.partition, err)
	}
	if ambiguous && !p.idempotent {
		for _, b := range bs[expired:] {
			b.maybeWritten = true
		}
	}
	if expired == len(bs) {
		p.fail(pp, bs, err, true)
		return
	}
	if expired > 0 {
		p.fail(pp, bs[:expired], err, false)
		bs = bs[expired:]
	}
	bs[0].tries++
	p.c.log.Debug("retrying batches", "topic", pp.topic, "partition", pp.partition, "batches", len(bs),
		"try", bs[0].tries, "error", err)
	pp.mu.Lock()
	if p.stopped.Load() {
		pp.mu.Unlock()
		p.fail(pp, bs, ErrClosed, true)
		return
	}
	pp.sealed = append(append(make([]*pbatch, 0, len(bs)+len(pp.sealed)), bs...), pp.sealed...)
	pp.inflight = false
	pp.backoffUntil = now.Add(backoff)
	s := pp.sink
	if s != nil && pp.queuedOn != s {
		pp.queuedOn = s
		s.enqueue(pp)
	}
	pp.mu.Unlock()
	if s != nil {
		s.notify()
	}
}

// close stops new records (reserve fails); failAll then fails whatever is
// left once the client's goroutines have stopped, including records of
// Produce calls that reserved room before close and reach their partition
// after failAll (add fails them).
func (p *producer) close() {
	p.mu.Lock()
	p.closed = true
	if p.spaceCh != nil {
		close(p.spaceCh)
		p.spaceCh = nil
	}
	p.mu.Unlock()
}

func (p *producer) failAll(err error) {
	// Set before the walk: an add that takes pp.mu after failAll emptied pp
	// sees it; one before left its record for failAll to find.
	p.stopped.Store(true)
	p.topicsMu.RLock()
	var parts []*prodPart
	for _, t := range p.topics {
		if ps := t.parts.Load(); ps != nil {
			parts = append(parts, *ps...)
		}
	}
	p.topicsMu.RUnlock()
	for _, pp := range parts {
		pp.mu.Lock()
		batches := pp.sealed
		if pp.cur != nil {
			batches = append(batches, pp.cur)
		}
		pp.sealed, pp.cur = nil, nil
		pp.mu.Unlock()
		if len(batches) > 0 {
			p.fail(pp, batches, err, false)
		}
	}
}
