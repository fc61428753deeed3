package client

// The consumer's fetch loops: one per broker, long-polling it for every
// ready partition it leads.

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/record"
)

// fetcherLocked returns the fetch loop of a broker, starting it if needed.
func (k *Consumer) fetcherLocked(id int32) *fetcher {
	f := k.fetchers[id]
	if f == nil {
		f = &fetcher{k: k, id: id, wake: make(chan struct{}, 1)}
		k.fetchers[id] = f
		k.wg.Add(1)
		go f.run()
	}
	return f
}

// fetcher long-polls one broker for every ready partition it leads.
type fetcher struct {
	k    *Consumer
	id   int32
	wake chan struct{}
	cc   *grpc.ClientConn
	addr string
	// unary: the broker has no FetchStream (fetch_stream.go), so each
	// fetch is a Fetch call.
	unary bool
}

func (f *fetcher) notify() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

func (f *fetcher) run() {
	defer f.k.wg.Done()
	k := f.k
	for {
		req, sent := f.build()
		if req == nil {
			select {
			case <-k.ctx.Done():
				return
			case <-f.wake:
				continue
			}
		}
		var ok bool
		if f.unary {
			resp, err := f.fetch(req)
			if k.ctx.Err() != nil {
				return
			}
			ok, _ = f.handle(sent, resp, err)
		} else {
			ok = f.stream(req, sent)
			if k.ctx.Err() != nil {
				return
			}
		}
		if !ok {
			if k.c.sleepCtx(k.ctx, k.c.cfg.retryBackoff) != nil {
				return
			}
		}
	}
}

func (f *fetcher) build() (*quirev1.FetchRequest, []fetchResult) {
	k := f.k
	cfg := &k.c.cfg
	k.mu.Lock()
	defer k.mu.Unlock()
	now := time.Now()
	var parts []*quirev1.FetchPartition
	var sent []fetchResult
	for _, p := range k.parts {
		if p.state != stateReady || p.leader != f.id || now.Before(p.retryAt) {
			continue
		}
		parts = append(parts, &quirev1.FetchPartition{Topic: p.tp.topic, Partition: p.tp.partition,
			Offset: p.offset, MaxBytes: cfg.fetchPartMaxBytes,
			OptionalCurrentLeaderEpoch: &quirev1.FetchPartition_CurrentLeaderEpoch{CurrentLeaderEpoch: p.epoch}})
		sent = append(sent, fetchResult{tp: p.tp, offset: p.offset, epoch: p.epoch})
	}
	if len(parts) == 0 {
		return nil, nil
	}
	return &quirev1.FetchRequest{MaxWaitMs: int32(cfg.fetchMaxWait / time.Millisecond), MinBytes: cfg.fetchMinBytes,
		MaxBytes: cfg.fetchMaxBytes, Partitions: parts, IsolationLevel: k.isolation}, sent
}

// connect returns the connection to the broker.
func (f *fetcher) connect() (*grpc.ClientConn, error) {
	k := f.k
	b, ok := k.c.meta.broker(f.id)
	if !ok {
		return nil, newError(quirev1.ErrorCode_BROKER_NOT_AVAILABLE, fmt.Sprintf("broker %d unknown", f.id))
	}
	if f.cc == nil || f.addr != b.addr {
		cc, err := k.c.conn(b.addr)
		if err != nil {
			return nil, err
		}
		f.cc, f.addr = cc, b.addr
	}
	return f.cc, nil
}

func (f *fetcher) fetch(req *quirev1.FetchRequest) (*quirev1.FetchResponse, error) {
	k := f.k
	if _, err := f.connect(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(k.ctx, k.c.cfg.requestTimeout+k.c.cfg.fetchMaxWait)
	defer cancel()
	resp, err := quirev1.NewConsumerClient(f.cc).Fetch(ctx, req, fetchCallOpt)
	return resp, fromStatus(err)
}

// handle applies a fetch response: it advances offsets past the batches
// received, hands them to Poll, and routes errors. It reports whether the
// fetch made progress without error, and whether a partition of sent was
// skipped as reassigned or moved meanwhile (stale). It moves the offsets
// of sent on past the batches received.
func (f *fetcher) handle(sent []fetchResult, resp *quirev1.FetchResponse, err error) (ok, stale bool) {
	k := f.k
	retryAt := time.Now().Add(k.c.cfg.retryBackoff)
	if err != nil {
		k.mu.Lock()
		for _, s := range sent {
			if p := k.parts[s.tp]; p != nil && p.state == stateReady && p.leader == f.id {
				k.partFailedLocked(p, err, retryAt)
			}
		}
		k.mu.Unlock()
		if needsMetadata(err) {
			k.c.meta.triggerRefresh()
		}
		return false, false
	}
	ok = true
	for _, r := range resp.GetPartitions() {
		tp := topicPartition{r.GetTopic(), r.GetPartition()}
		var s *fetchResult
		for i := range sent {
			if sent[i].tp == tp {
				s = &sent[i]
				break
			}
		}
		if s == nil {
			continue
		}
		k.mu.Lock()
		p := k.parts[tp]
		if p == nil || p.state != stateReady || p.offset != s.offset || p.leader != f.id {
			k.mu.Unlock() // reassigned or moved meanwhile
			stale = true
			continue
		}
		if perr := fromProto(r.GetError()); perr != nil {
			ok = false
			k.partFailedLocked(p, perr, retryAt)
			k.mu.Unlock()
			continue
		}
		p.hw = r.GetHighWatermark()
		data := r.GetRecords()
		next, perr := nextOffset(data, p.offset)
		if perr != nil {
			ok = false
			p.retryAt = retryAt
			k.mu.Unlock()
			f.emit(fetchResult{tp: tp, err: perr})
			continue
		}
		p.offset = next
		k.mu.Unlock()
		if len(data) > 0 {
			s.data, s.aborted = data, r.GetAbortedTransactions()
			emitted := f.emit(*s)
			s.data, s.aborted = nil, nil
			if !emitted {
				return false, stale
			}
		}
		s.offset = next
	}
	return ok, stale
}

func (f *fetcher) emit(r fetchResult) bool {
	select {
	case f.k.out <- r:
		return true
	case <-f.k.ctx.Done():
		return false
	}
}

// nextOffset walks the batch headers of data and returns the offset after
// the last one (from when there is none).
func nextOffset(data []byte, from int64) (int64, error) {
	next := from
	for len(data) > 0 {
		size := record.PeekSize(data)
		if size < record.HeaderSize || size > len(data) {
			return from, fmt.Errorf("%w: batch of %d bytes in %d", record.ErrTruncated, size, len(data))
		}
		h, err := record.ParseHeader(data)
		if err != nil {
			return from, err
		}
		if n := h.NextOffset(); n > next {
			next = n
		}
		data = data[size:]
	}
	return next, nil
}
