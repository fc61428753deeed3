// Package raftgrpc implements hashicorp/raft's Transport over gRPC, so the
// metadata quorum shares the node's single gRPC port with everything else.
//
// Each raft RPC is one gRPC method of service quire.internal.v1.RaftTransport
// (proto/quire/internal/v1/raft.proto): AppendEntries, RequestVote,
// RequestPreVote and TimeoutNow are unary; pipelined AppendEntries run over
// one bidirectional stream per pipeline, answered in order; InstallSnapshot
// is a client stream whose first message carries the request and whose
// messages carry the snapshot in chunks. Heartbeats (AppendEntries with no
// entries and no log position) take raft's fast path when a heartbeat
// handler is set. Client connections are dialled lazily, one per peer, and
// reused.
//
// The caller owns the *grpc.Server: New, then Register on it, then Serve.
// The server's MaxRecvMsgSize (4 MiB by default) bounds one AppendEntries
// batch; snapshots are chunked and not bounded by it.
package raftgrpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/quirelog/quire/api/internalv1"
)

// ErrTransportShutdown is returned by calls made after Close.
var ErrTransportShutdown = errors.New("raftgrpc: transport shutdown")

const (
	defaultTimeout     = 10 * time.Second
	defaultMaxInFlight = 128
	snapshotChunkSize  = 256 << 10
	// timeoutScale: an InstallSnapshot gets timeout * (size / timeoutScale),
	// as raft's NetworkTransport does.
	timeoutScale = 256 << 10
)

// Option configures a Transport.
type Option func(*Transport)

// WithDialOptions replaces the dial options used for peers (the default is
// plaintext: grpc insecure credentials).
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(t *Transport) { t.dialOpts = opts }
}

// WithTimeout sets the deadline of one RPC (default 10s); InstallSnapshot
// scales it by the snapshot size.
func WithTimeout(d time.Duration) Option {
	return func(t *Transport) { t.timeout = d }
}

// WithLogger sets the logger (default: a null logger).
func WithLogger(l hclog.Logger) Option {
	return func(t *Transport) { t.logger = l }
}

// WithMaxInFlight bounds the pipelined AppendEntries awaiting an answer
// (default 128).
func WithMaxInFlight(n int) Option {
	return func(t *Transport) { t.maxInFlight = n }
}

// Transport is a raft.Transport over gRPC. It also implements
// raft.WithClose and raft.WithPreVote.
type Transport struct {
	local       raft.ServerAddress
	consumer    chan raft.RPC
	dialOpts    []grpc.DialOption
	timeout     time.Duration
	maxInFlight int
	logger      hclog.Logger

	// hbMu guards hbFn and hbClosed. A heartbeat runs raft's handler on
	// the gRPC goroutine, outside raft's own goroutines, so Shutdown does
	// not wait for it: it holds hbMu's read lock for the whole call, and
	// Close takes the write lock, so that once Close returns no handler
	// runs and the caller may close raft's stores.
	hbMu     sync.RWMutex
	hbFn     func(raft.RPC)
	hbClosed bool

	mu         sync.Mutex
	conns      map[raft.ServerAddress]*grpc.ClientConn
	closed     bool
	shutdownCh chan struct{}
	baseCtx    context.Context
	baseCancel context.CancelFunc
}

var (
	_ raft.Transport   = (*Transport)(nil)
	_ raft.WithClose   = (*Transport)(nil)
	_ raft.WithPreVote = (*Transport)(nil)
)

// New returns a transport that tells peers it lives at localAddr (the
// node's advertised gRPC address).
func New(localAddr raft.ServerAddress, opts ...Option) *Transport {
	t := &Transport{
		local:       localAddr,
		consumer:    make(chan raft.RPC),
		dialOpts:    []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())},
		timeout:     defaultTimeout,
		maxInFlight: defaultMaxInFlight,
		logger:      hclog.NewNullLogger(),
		conns:       make(map[raft.ServerAddress]*grpc.ClientConn),
		shutdownCh:  make(chan struct{}),
	}
	t.baseCtx, t.baseCancel = context.WithCancel(context.Background())
	for _, o := range opts {
		o(t)
	}
	if t.maxInFlight < 1 {
		t.maxInFlight = 1
	}
	return t
}

// Register installs the RaftTransport service on s.
func (t *Transport) Register(s *grpc.Server) {
	pb.RegisterRaftTransportServer(s, &server{t: t})
}

// Consumer implements raft.Transport.
func (t *Transport) Consumer() <-chan raft.RPC { return t.consumer }

// LocalAddr implements raft.Transport.
func (t *Transport) LocalAddr() raft.ServerAddress { return t.local }

// SetHeartbeatHandler implements raft.Transport.
func (t *Transport) SetHeartbeatHandler(cb func(rpc raft.RPC)) {
	t.hbMu.Lock()
	t.hbFn = cb
	t.hbMu.Unlock()
}

// heartbeat runs rpc through the heartbeat handler, if one is set and
// the transport is open, and says whether it did.
func (t *Transport) heartbeat(rpc raft.RPC) (handled bool, err error) {
	t.hbMu.RLock()
	defer t.hbMu.RUnlock()
	if t.hbClosed {
		return false, ErrTransportShutdown
	}
	if t.hbFn == nil {
		return false, nil
	}
	t.hbFn(rpc)
	return true, nil
}

// EncodePeer implements raft.Transport.
func (t *Transport) EncodePeer(_ raft.ServerID, addr raft.ServerAddress) []byte { return []byte(addr) }

// DecodePeer implements raft.Transport.
func (t *Transport) DecodePeer(b []byte) raft.ServerAddress { return raft.ServerAddress(b) }

// Close implements raft.WithClose: it fails pending and future calls and
// closes every peer connection. It does not stop the caller's grpc.Server.
// It returns after any heartbeat being handled is done, and no handler
// runs after it.
func (t *Transport) Close() error {
	t.hbMu.Lock()
	t.hbClosed = true
	t.hbFn = nil
	t.hbMu.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	t.closed = true
	close(t.shutdownCh)
	t.baseCancel()
	var first error
	for addr, cc := range t.conns {
		if err := cc.Close(); err != nil && first == nil {
			first = fmt.Errorf("raftgrpc: close connection to %s: %w", addr, err)
		}
		delete(t.conns, addr)
	}
	return first
}

// client returns the RaftTransport client for target, dialling it once.
func (t *Transport) client(target raft.ServerAddress) (pb.RaftTransportClient, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, ErrTransportShutdown
	}
	cc, ok := t.conns[target]
	if !ok {
		var err error
		cc, err = grpc.NewClient(string(target), t.dialOpts...)
		if err != nil {
			return nil, fmt.Errorf("raftgrpc: dial %s: %w", target, err)
		}
		t.conns[target] = cc
	}
	return pb.NewRaftTransportClient(cc), nil
}

// callCtx bounds one outgoing call by d and by Close.
func (t *Transport) callCtx(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(t.baseCtx, d)
}

// AppendEntries implements raft.Transport.
func (t *Transport) AppendEntries(_ raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	c, err := t.client(target)
	if err != nil {
		return err
	}
	ctx, cancel := t.callCtx(t.timeout)
	defer cancel()
	out, err := c.AppendEntries(ctx, encAppendReq(args))
	if err != nil {
		return fmt.Errorf("raftgrpc: append entries to %s: %w", target, err)
	}
	decAppendResp(out, resp)
	return nil
}

// RequestVote implements raft.Transport.
func (t *Transport) RequestVote(_ raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	c, err := t.client(target)
	if err != nil {
		return err
	}
	ctx, cancel := t.callCtx(t.timeout)
	defer cancel()
	out, err := c.RequestVote(ctx, encVoteReq(args))
	if err != nil {
		return fmt.Errorf("raftgrpc: request vote from %s: %w", target, err)
	}
	decVoteResp(out, resp)
	return nil
}

// RequestPreVote implements raft.WithPreVote.
func (t *Transport) RequestPreVote(_ raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	c, err := t.client(target)
	if err != nil {
		return err
	}
	ctx, cancel := t.callCtx(t.timeout)
	defer cancel()
	out, err := c.RequestPreVote(ctx, encPreVoteReq(args))
	if err != nil {
		return fmt.Errorf("raftgrpc: request pre-vote from %s: %w", target, err)
	}
	decPreVoteResp(out, resp)
	return nil
}

// TimeoutNow implements raft.Transport.
func (t *Transport) TimeoutNow(_ raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	c, err := t.client(target)
	if err != nil {
		return err
	}
	ctx, cancel := t.callCtx(t.timeout)
	defer cancel()
	out, err := c.TimeoutNow(ctx, &pb.TimeoutNowRequest{Header: encHeader(args.RPCHeader)})
	if err != nil {
		return fmt.Errorf("raftgrpc: timeout now to %s: %w", target, err)
	}
	*resp = raft.TimeoutNowResponse{RPCHeader: decHeader(out.Header)}
	return nil
}

// InstallSnapshot implements raft.Transport: the request, then the data in
// chunks of 256 KiB, on one client stream.
func (t *Transport) InstallSnapshot(_ raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	c, err := t.client(target)
	if err != nil {
		return err
	}
	timeout := t.timeout
	if scaled := t.timeout * time.Duration(args.Size/timeoutScale); scaled > timeout {
		timeout = scaled
	}
	ctx, cancel := t.callCtx(timeout)
	defer cancel()
	stream, err := c.InstallSnapshot(ctx)
	if err != nil {
		return fmt.Errorf("raftgrpc: install snapshot on %s: %w", target, err)
	}
	buf := make([]byte, snapshotChunkSize)
	first := true
	for {
		n, rerr := io.ReadFull(data, buf)
		if rerr != nil && rerr != io.EOF && rerr != io.ErrUnexpectedEOF {
			return fmt.Errorf("raftgrpc: read snapshot for %s: %w", target, rerr)
		}
		if n > 0 || first {
			chunk := &pb.InstallSnapshotChunk{Data: buf[:n]}
			if first {
				chunk.Request = encSnapReq(args)
				first = false
			}
			if err := stream.Send(chunk); err != nil {
				if err == io.EOF {
					// The server gave up; CloseAndRecv reports why.
					break
				}
				return fmt.Errorf("raftgrpc: send snapshot to %s: %w", target, err)
			}
		}
		if rerr != nil {
			break
		}
	}
	out, err := stream.CloseAndRecv()
	if err != nil {
		return fmt.Errorf("raftgrpc: install snapshot on %s: %w", target, err)
	}
	decSnapResp(out, resp)
	return nil
}
