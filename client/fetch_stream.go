package client

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

// stream fetches the partitions of req over one FetchStream: the broker
// keeps answering, each partition from past its previous answer, so that
// reading, sending and decoding overlap (several responses in flight,
// bounded by gRPC flow control and FetchBufferedPolls). It returns when
// the stream ends: true to rebuild the request at once (the partitions
// changed, or the broker ended the stream), false after an error (handled
// as a fetch error: the caller backs off). A broker without FetchStream
// turns the fetcher to unary Fetch calls.
func (f *fetcher) stream(req *quirev1.FetchRequest, sent []fetchResult) bool {
	k := f.k
	cc, err := f.connect()
	if err != nil {
		ok, _ := f.handle(sent, nil, err)
		return ok
	}
	ctx, cancel := context.WithCancel(k.ctx)
	defer cancel()
	// Nothing for longer than a fetch may take: the broker is stuck.
	idle := k.c.cfg.requestTimeout + k.c.cfg.fetchMaxWait
	var timedOut atomic.Bool
	timer := time.AfterFunc(idle, func() { timedOut.Store(true); cancel() })
	defer timer.Stop()
	// A change of the partitions this broker should serve ends the stream.
	var changed atomic.Bool
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-f.wake:
				if f.changed(sent) {
					changed.Store(true)
					cancel()
					return
				}
			}
		}
	}()
	st, err := quirev1.NewConsumerClient(cc).FetchStream(ctx, req, fetchCallOpt)
	for err == nil {
		var resp *quirev1.FetchResponse
		if resp, err = st.Recv(); err != nil {
			break
		}
		timer.Reset(idle)
		ok, stale := f.handle(sent, resp, nil)
		if !ok {
			return false
		}
		if stale {
			return true
		}
	}
	switch {
	case k.ctx.Err() != nil:
		return false
	case changed.Load():
		return true
	case timedOut.Load():
		err = newError(quirev1.ErrorCode_REQUEST_TIMED_OUT, "no fetch response in time")
	case errors.Is(err, io.EOF):
		return true // the broker ended it (after a partition error)
	case status.Code(err) == codes.Unimplemented:
		k.c.log.Debug("broker has no FetchStream, using Fetch", "broker", f.id)
		f.unary = true
		return true
	default:
		err = fromStatus(err)
	}
	ok, _ := f.handle(sent, nil, err)
	return ok
}

// changed says whether the partitions this broker should serve now differ
// from those of sent.
func (f *fetcher) changed(sent []fetchResult) bool {
	k := f.k
	k.mu.Lock()
	defer k.mu.Unlock()
	now := time.Now()
	n := 0
	for _, p := range k.parts {
		if p.state != stateReady || p.leader != f.id || now.Before(p.retryAt) {
			continue
		}
		n++
		found := false
		for i := range sent {
			if sent[i].tp == p.tp {
				found = true
				break
			}
		}
		if !found {
			return true
		}
	}
	return n != len(sent)
}
