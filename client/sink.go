package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

// maxRequestBytes caps the record bytes of one produce request (brokers
// take gRPC messages of at least 8 MiB), and maxPartitionRequestBytes the
// bytes of one partition in it: the batches a partition accumulated while
// its previous request was in flight go out together.
const (
	maxRequestBytes          = 6 << 20
	maxPartitionRequestBytes = 4 << 20
)

// sink sends the batches of the partitions one broker leads, many
// partitions per request, pipelined over one ProduceStream; a partition
// has up to MaxInFlightPerPartition requests in flight, in order
// (window.go).
type sink struct {
	p  *producer
	id int32

	mu     sync.Mutex
	addr   string
	ready  []*prodPart
	stream *pstream
	wake   chan struct{}

	suspected time.Time // when checkTimeouts last asked for metadata
}

// pstream is one ProduceStream and the requests awaiting its answers.
type pstream struct {
	st     grpc.BidiStreamingClient[quirev1.ProduceRequest, quirev1.ProduceResponse]
	cancel context.CancelFunc

	mu       sync.Mutex
	inflight map[int64]*inflightReq
	dead     bool
}

type inflightReq struct {
	parts   []*prodPart
	batches [][]*pbatch // per partition, in order
	claims  []*claim    // per partition
	sentAt  time.Time
}

// claim is one partition's share of a request: whoever takes it first
// settles its batches, the answer, the stream's failure, or the
// partition moving to another leader while the request waits
// (prodPart.leave).
//
// Until its request is encoded (phase claimAssembling) the sink's send
// still reads the batches: a partition leaving then only marks the claim
// given up (claimGivenUp), and send settles it once encoded, so that the
// batches are not sent again, failed or freed for reuse under it.
type claim struct {
	sink  *sink
	bs    []*pbatch
	done  atomic.Bool
	phase atomic.Int32
}

// The phases of a claim.
const (
	claimAssembling int32 = iota // taken by drain, its request not encoded yet
	claimEncoded                 // its request encoded: the batches are free to settle
	claimGivenUp                 // given up by leave while assembling: send settles it
)

func (c *claim) take() bool { return c.done.CompareAndSwap(false, true) }

// sendHook, when set (by tests), runs in send before a request is
// encoded.
var sendHook func()

// suspectAfter is how long a request may wait for its answer before the
// client looks at the metadata again: a leader that was paused or cut
// off and replaced never answers, and the partitions it held move to
// their new leaders (setSink) without waiting out the request timeout.
const suspectAfter = time.Second

func newSink(p *producer, id int32, addr string) *sink {
	return &sink{p: p, id: id, addr: addr, wake: make(chan struct{}, 1)}
}

func (s *sink) notify() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// enqueue adds pp to the ready list; the caller holds pp.mu.
func (s *sink) enqueue(pp *prodPart) {
	s.mu.Lock()
	s.ready = append(s.ready, pp)
	s.mu.Unlock()
}

func (s *sink) setAddr(addr string) {
	s.mu.Lock()
	if s.addr == addr {
		s.mu.Unlock()
		return
	}
	s.addr = addr
	ps := s.stream
	s.stream = nil
	s.mu.Unlock()
	if ps != nil {
		s.streamFailed(ps, newError(quirev1.ErrorCode_NETWORK_EXCEPTION, "broker moved to "+addr))
	}
	s.notify()
}

func (s *sink) run() {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	ctx := s.p.c.ctx
	for {
		next, more := s.drain(time.Now())
		if more {
			select {
			case <-ctx.Done():
				return
			default:
				continue
			}
		}
		if t := s.checkTimeouts(); !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
		if !next.IsZero() {
			timer.Reset(time.Until(next))
		}
		select {
		case <-ctx.Done():
			s.mu.Lock()
			ps := s.stream
			s.stream = nil
			s.mu.Unlock()
			if ps != nil {
				s.streamFailed(ps, ErrClosed)
			}
			return
		case <-s.wake:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// drain sends one request with batches from every partition that has
// some to send. It returns when to look again (zero: when woken) and
// whether batches were left out because the request was full or a
// partition may send another request at once.
func (s *sink) drain(now time.Time) (next time.Time, more bool) {
	s.mu.Lock()
	list := s.ready
	s.ready = nil
	addr := s.addr
	s.mu.Unlock()
	if len(list) == 0 {
		return time.Time{}, false
	}
	// The producer id and epoch to number new batches with, asked for
	// first when there is none yet or a partition asked for the next
	// epoch; batches are numbered as they are taken, under pp.mu, so that
	// the order of a partition's sequences is the order of its requests.
	var id int64
	var epoch int16
	var identErr error
	if s.p.idempotent {
		id, epoch, identErr = s.p.ident.current(s.p.c.ctx, s.p.c, addr)
	}
	flushing := s.p.flushing.Load() > 0
	keep := list[:0]
	var ir *inflightReq
	reqBytes := 0
	for _, pp := range list {
		pp.mu.Lock()
		switch {
		case pp.queuedOn != s:
			// moved to another sink
		case reqBytes >= maxRequestBytes:
			keep = append(keep, pp)
			more = true
		case now.Before(pp.backoffUntil):
			keep = append(keep, pp)
			next = earliest(next, pp.backoffUntil)
		default:
			bs, wait, skipped, again := pp.next(s.p, now, flushing, reqBytes, identErr == nil, id, epoch)
			switch {
			case len(bs) > 0:
				keep = append(keep, pp)
				if ir == nil {
					ir = &inflightReq{}
				}
				cl := &claim{sink: s, bs: bs}
				pp.noteSent(cl)
				ir.parts = append(ir.parts, pp)
				ir.batches = append(ir.batches, bs)
				ir.claims = append(ir.claims, cl)
				for _, b := range bs {
					reqBytes += b.b.EstimatedSize()
				}
				more = more || again || skipped
			case skipped:
				keep = append(keep, pp)
				more = true
			case !wait.IsZero():
				keep = append(keep, pp)
				next = earliest(next, wait)
			case pp.hasWork():
				keep = append(keep, pp) // waits for an answer
			default:
				pp.queuedOn = nil
			}
		}
		pp.mu.Unlock()
	}
	s.mu.Lock()
	s.ready = append(keep, s.ready...)
	s.mu.Unlock()
	if ir != nil {
		if identErr != nil {
			s.failReq(ir, identErr, false)
		} else {
			s.send(ir)
		}
	}
	return next, more
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}

// send builds the request and writes it to the stream.
func (s *sink) send(ir *inflightReq) {
	cfg := s.p.cfg
	acks := int32(cfg.acks)
	for _, bs := range ir.batches {
		for _, b := range bs {
			b.build()
		}
	}
	ps, err := s.openStream()
	if err != nil {
		s.failReq(ir, err, false)
		return
	}
	if h := sendHook; h != nil {
		h()
	}
	corr := s.p.corr.Add(1)
	// Encoded before anything else may settle the request (registered for
	// its answer and its stream's failure only then).
	req := encodeProduce(&acks, int32(cfg.requestTimeout/time.Millisecond), corr, ir)
	s.encoded(ir)
	ir.sentAt = time.Now()
	if cfg.acks != NoAck {
		ps.mu.Lock()
		if ps.dead {
			ps.mu.Unlock()
			s.failReq(ir, newError(quirev1.ErrorCode_NETWORK_EXCEPTION, "stream closed"), false)
			return
		}
		ps.inflight[corr] = ir
		ps.mu.Unlock()
	}
	if err := ps.st.SendMsg(req); err != nil {
		// Not sent: the stream had ended. Unless Recv already took it
		// with the rest of the stream's requests (as maybe sent), it
		// is retried as not written.
		ps.mu.Lock()
		_, mine := ps.inflight[corr]
		delete(ps.inflight, corr)
		ps.mu.Unlock()
		if mine || cfg.acks == NoAck {
			s.failReq(ir, streamErr(err), false)
		}
		s.streamFailed(ps, streamErr(err))
		return
	}
	if cfg.acks == NoAck {
		for i, bs := range ir.batches {
			if ir.claims[i].take() {
				s.p.settle(ir.parts[i], bs, -1, nil, false)
			}
		}
	}
}

// encoded moves the claims of ir past claimAssembling once its request
// is encoded, and settles those given up meanwhile (leave) as the others
// leave settles: unanswered, since the request goes out anyway.
func (s *sink) encoded(ir *inflightReq) {
	for i, cl := range ir.claims {
		if !cl.phase.CompareAndSwap(claimAssembling, claimEncoded) && cl.take() {
			s.p.settle(ir.parts[i], ir.batches[i], -1, errMoved(), true)
		}
	}
}

// errMoved is the error of a request given up because its partition moved
// to another leader (leave).
func errMoved() error {
	return newError(quirev1.ErrorCode_NOT_LEADER_OR_FOLLOWER,
		"the partition moved to another leader while a request to the old one waited")
}

func (s *sink) openStream() (*pstream, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stream != nil {
		return s.stream, nil
	}
	cc, err := s.p.c.conn(s.addr)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(s.p.c.ctx)
	st, err := quirev1.NewProducerClient(cc).ProduceStream(ctx, produceCallOpt)
	if err != nil {
		cancel()
		return nil, fromStatus(err)
	}
	ps := &pstream{st: st, cancel: cancel, inflight: map[int64]*inflightReq{}}
	if !s.p.c.spawn(func() { s.recv(ps) }) {
		cancel()
		return nil, ErrClosed
	}
	s.stream = ps
	return ps, nil
}

func (s *sink) recv(ps *pstream) {
	for {
		resp, err := ps.st.Recv()
		if err != nil {
			s.streamFailed(ps, streamErr(err))
			return
		}
		ps.mu.Lock()
		ir := ps.inflight[resp.GetCorrelationId()]
		delete(ps.inflight, resp.GetCorrelationId())
		ps.mu.Unlock()
		if ir == nil {
			s.p.c.log.Warn("produce response for unknown correlation id", "broker", s.id, "id", resp.GetCorrelationId())
			continue
		}
		s.handle(ir, resp)
	}
}

// handle matches per-partition results to the batches sent.
func (s *sink) handle(ir *inflightReq, resp *quirev1.ProduceResponse) {
	res := resp.GetPartitions()
	for i, pp := range ir.parts {
		var pr *quirev1.PartitionProduceResult
		if i < len(res) && res[i].GetTopic() == pp.topic && res[i].GetPartition() == pp.partition {
			pr = res[i]
		} else {
			for _, r := range res {
				if r.GetTopic() == pp.topic && r.GetPartition() == pp.partition {
					pr = r
					break
				}
			}
		}
		b := ir.batches[i]
		if !ir.claims[i].take() {
			continue // given up meanwhile: the partition moved to another leader
		}
		switch {
		case pr == nil:
			s.p.settle(pp, b, -1, fmt.Errorf("client: broker %d did not answer for %s/%d", s.id, pp.topic, pp.partition), false)
		case pr.GetError() != nil && pr.GetError().GetCode() != quirev1.ErrorCode_NONE:
			s.p.settle(pp, b, -1, fromProto(pr.GetError()), false)
		default:
			s.p.settle(pp, b, pr.GetBaseOffset(), nil, false)
		}
	}
}

// failReq settles every batch of a request that got no answer with err
// (those whose claim is still there); sent: the request may have reached
// the broker.
func (s *sink) failReq(ir *inflightReq, err error, sent bool) {
	for i, pp := range ir.parts {
		if ir.claims[i].take() {
			s.p.settle(pp, ir.batches[i], -1, err, sent)
		}
	}
}

// streamErr converts a ProduceStream failure. io.EOF is a stream the
// broker ended (Recv) or that broke under a send (SendMsg leaves the
// status to Recv): retriable, like a broken connection, not a failure of
// the records.
func streamErr(err error) error {
	if errors.Is(err, io.EOF) {
		return newError(quirev1.ErrorCode_NETWORK_EXCEPTION, "produce stream ended")
	}
	return fromStatus(err)
}

// streamFailed closes a broken stream and retries what it had in flight.
func (s *sink) streamFailed(ps *pstream, err error) {
	ps.mu.Lock()
	if ps.dead {
		ps.mu.Unlock()
		return
	}
	ps.dead = true
	pending := ps.inflight
	ps.inflight = nil
	ps.mu.Unlock()
	ps.cancel()
	s.mu.Lock()
	if s.stream == ps {
		s.stream = nil
	}
	s.mu.Unlock()
	if err == nil || err == context.Canceled {
		err = newError(quirev1.ErrorCode_NETWORK_EXCEPTION, "produce stream closed")
	}
	if len(pending) > 0 {
		s.p.c.log.Debug("produce stream failed", "broker", s.id, "in_flight", len(pending), "error", err)
	}
	for _, ir := range pending {
		s.failReq(ir, err, true)
	}
	s.p.c.meta.triggerRefresh()
}

// checkTimeouts breaks the stream when a request waited past the request
// timeout, asks for the metadata again when one waited suspectAfter (at
// most once per suspectAfter), and returns when to check again.
func (s *sink) checkTimeouts() time.Time {
	s.mu.Lock()
	ps := s.stream
	s.mu.Unlock()
	if ps == nil {
		return time.Time{}
	}
	limit := s.p.cfg.requestTimeout + 5*time.Second
	var oldest time.Time
	ps.mu.Lock()
	for _, ir := range ps.inflight {
		oldest = earliest(oldest, ir.sentAt)
	}
	ps.mu.Unlock()
	if oldest.IsZero() {
		return time.Time{}
	}
	if time.Since(oldest) > limit {
		s.streamFailed(ps, newError(quirev1.ErrorCode_REQUEST_TIMED_OUT, "no produce response in time"))
		return time.Time{}
	}
	next := oldest.Add(limit)
	if now := time.Now(); now.Sub(oldest) >= suspectAfter {
		if now.Sub(s.suspected) >= suspectAfter {
			s.suspected = now
			s.p.c.meta.triggerRefresh()
		}
		next = earliest(next, s.suspected.Add(suspectAfter))
	} else {
		next = earliest(next, oldest.Add(suspectAfter))
	}
	return next
}
