package raftgrpc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	pb "github.com/quirelog/quire/api/internalv1"
)

// errPipelineClosed fails futures still in flight when a pipeline closes.
var errPipelineClosed = errors.New("raftgrpc: pipeline closed")

// appendFuture is one pipelined AppendEntries awaiting its answer.
type appendFuture struct {
	start time.Time
	req   *raft.AppendEntriesRequest
	resp  *raft.AppendEntriesResponse
	done  chan struct{}
	err   error
}

func (f *appendFuture) respond(err error) {
	f.err = err
	close(f.done)
}

// Error implements raft.Future; it blocks until the answer arrives.
func (f *appendFuture) Error() error {
	<-f.done
	return f.err
}

func (f *appendFuture) Start() time.Time                      { return f.start }
func (f *appendFuture) Request() *raft.AppendEntriesRequest   { return f.req }
func (f *appendFuture) Response() *raft.AppendEntriesResponse { return f.resp }

// pipeline sends AppendEntries on one bidirectional stream and pairs the
// in-order answers with the requests it sent.
type pipeline struct {
	target   raft.ServerAddress
	stream   pb.RaftTransport_AppendEntriesPipelineClient
	cancel   context.CancelFunc
	sendMu   sync.Mutex
	inflight chan *appendFuture
	doneCh   chan raft.AppendFuture
	stopCh   chan struct{}
	once     sync.Once
	recvDone chan struct{}
}

// AppendEntriesPipeline implements raft.Transport.
func (t *Transport) AppendEntriesPipeline(_ raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	c, err := t.client(target)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(t.baseCtx)
	stream, err := c.AppendEntriesPipeline(ctx)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("raftgrpc: open pipeline to %s: %w", target, err)
	}
	p := &pipeline{
		target:   target,
		stream:   stream,
		cancel:   cancel,
		inflight: make(chan *appendFuture, t.maxInFlight),
		doneCh:   make(chan raft.AppendFuture, t.maxInFlight),
		stopCh:   make(chan struct{}),
		recvDone: make(chan struct{}),
	}
	go p.recvLoop()
	return p, nil
}

// AppendEntries implements raft.AppendPipeline.
func (p *pipeline) AppendEntries(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	f := &appendFuture{start: time.Now(), req: args, resp: resp, done: make(chan struct{})}
	// Queue before sending so the receiver always finds the request that
	// an answer belongs to.
	select {
	case p.inflight <- f:
	case <-p.stopCh:
		return nil, errPipelineClosed
	}
	p.sendMu.Lock()
	err := p.stream.Send(encAppendReq(args))
	p.sendMu.Unlock()
	if err != nil {
		// The receiver fails the queued future when the stream breaks.
		p.Close()
		return nil, fmt.Errorf("raftgrpc: pipeline send to %s: %w", p.target, err)
	}
	return f, nil
}

// Consumer implements raft.AppendPipeline.
func (p *pipeline) Consumer() <-chan raft.AppendFuture { return p.doneCh }

// Close implements raft.AppendPipeline.
func (p *pipeline) Close() error {
	p.once.Do(func() {
		close(p.stopCh)
		p.sendMu.Lock()
		_ = p.stream.CloseSend()
		p.sendMu.Unlock()
		p.cancel()
	})
	<-p.recvDone
	return nil
}

func (p *pipeline) recvLoop() {
	defer close(p.recvDone)
	for {
		out, err := p.stream.Recv()
		if err != nil {
			p.failInflight(fmt.Errorf("raftgrpc: pipeline to %s: %w", p.target, err))
			return
		}
		var f *appendFuture
		select {
		case f = <-p.inflight:
		default:
			p.failInflight(fmt.Errorf("raftgrpc: pipeline to %s: answer without request", p.target))
			return
		}
		if out.Error != "" {
			f.respond(fmt.Errorf("raftgrpc: pipeline to %s: remote: %s", p.target, out.Error))
		} else {
			decAppendResp(out, f.resp)
			f.respond(nil)
		}
		select {
		case p.doneCh <- f:
		case <-p.stopCh:
			p.failInflight(errPipelineClosed)
			return
		}
	}
}

// failInflight fails every queued future; raft sees Success=false and stops
// using this pipeline.
func (p *pipeline) failInflight(err error) {
	p.once.Do(func() {
		close(p.stopCh)
		p.cancel()
	})
	for {
		select {
		case f := <-p.inflight:
			f.respond(err)
			select {
			case p.doneCh <- f:
			default:
			}
		default:
			return
		}
	}
}
