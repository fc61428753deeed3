package raftgrpc

import (
	"bytes"
	"crypto/rand"
	"io"
	"net"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// startTransport serves a Transport on a fresh 127.0.0.1 port.
func startTransport(t *testing.T, opts ...Option) *Transport {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tr := New(raft.ServerAddress(lis.Addr().String()), opts...)
	gs := grpc.NewServer()
	tr.Register(gs)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = gs.Serve(lis)
	}()
	t.Cleanup(func() {
		_ = tr.Close()
		gs.Stop()
		<-done
	})
	return tr
}

// serveOne answers the next RPC on tr with resp after checking its command.
func serveOne(t *testing.T, tr *Transport, want any, resp any) <-chan struct{} {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case rpc := <-tr.Consumer():
			if !reflect.DeepEqual(rpc.Command, want) {
				t.Errorf("command = %#v, want %#v", rpc.Command, want)
			}
			rpc.Respond(resp, nil)
		case <-time.After(time.Minute):
			t.Error("no rpc received")
		}
	}()
	return done
}

func header(tr *Transport) raft.RPCHeader {
	return raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("id1"), Addr: []byte(tr.LocalAddr())}
}

func sampleAppend(tr *Transport) *raft.AppendEntriesRequest {
	return &raft.AppendEntriesRequest{
		RPCHeader:         header(tr),
		Term:              10,
		PrevLogEntry:      100,
		PrevLogTerm:       4,
		LeaderCommitIndex: 90,
		Entries: []*raft.Log{
			{Index: 101, Term: 4, Type: raft.LogCommand, Data: []byte("foo"), AppendedAt: time.Unix(0, 12345)},
			{Index: 102, Term: 4, Type: raft.LogNoop, Extensions: []byte("ext")},
		},
	}
}

func TestTransportAppendEntries(t *testing.T) {
	t.Parallel()
	t1, t2 := startTransport(t), startTransport(t)
	args := sampleAppend(t1)
	want := raft.AppendEntriesResponse{RPCHeader: header(t2), Term: 4, LastLog: 90, Success: true, NoRetryBackoff: true}
	done := serveOne(t, t2, args, &want)
	var got raft.AppendEntriesResponse
	if err := t1.AppendEntries("id2", t2.LocalAddr(), args, &got); err != nil {
		t.Fatal(err)
	}
	<-done
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("response = %#v, want %#v", got, want)
	}
}

func TestTransportAppendEntriesPipeline(t *testing.T) {
	t.Parallel()
	t1, t2 := startTransport(t), startTransport(t)
	const n = 50
	go func() {
		for i := 0; i < n; i++ {
			select {
			case rpc := <-t2.Consumer():
				req := rpc.Command.(*raft.AppendEntriesRequest)
				rpc.Respond(&raft.AppendEntriesResponse{Term: req.Term, LastLog: req.PrevLogEntry + 1, Success: true}, nil)
			case <-time.After(time.Minute):
				t.Error("pipeline rpc not received")
				return
			}
		}
	}()
	p, err := t1.AppendEntriesPipeline("id2", t2.LocalAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i := 0; i < n; i++ {
		args := sampleAppend(t1)
		args.PrevLogEntry = uint64(i)
		if _, err := p.AppendEntries(args, new(raft.AppendEntriesResponse)); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < n; i++ {
		select {
		case f := <-p.Consumer():
			if err := f.Error(); err != nil {
				t.Fatal(err)
			}
			if got := f.Response().LastLog; got != uint64(i)+1 {
				t.Fatalf("answer %d: last log %d, out of order", i, got)
			}
			if f.Request().PrevLogEntry != uint64(i) {
				t.Fatalf("answer %d paired with request %d", i, f.Request().PrevLogEntry)
			}
		case <-time.After(time.Minute):
			t.Fatal("pipeline answer timed out")
		}
	}
}

func TestTransportPipelineRemoteError(t *testing.T) {
	t.Parallel()
	t1, t2 := startTransport(t), startTransport(t)
	go func() {
		select {
		case rpc := <-t2.Consumer():
			rpc.Respond(nil, io.ErrUnexpectedEOF)
		case <-time.After(time.Minute):
		}
	}()
	p, err := t1.AppendEntriesPipeline("id2", t2.LocalAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.AppendEntries(sampleAppend(t1), new(raft.AppendEntriesResponse)); err != nil {
		t.Fatal(err)
	}
	select {
	case f := <-p.Consumer():
		if f.Error() == nil || f.Response().Success {
			t.Fatalf("want failed future, got err=%v success=%v", f.Error(), f.Response().Success)
		}
	case <-time.After(time.Minute):
		t.Fatal("no answer")
	}
}

func TestTransportRequestVote(t *testing.T) {
	t.Parallel()
	t1, t2 := startTransport(t), startTransport(t)
	args := &raft.RequestVoteRequest{RPCHeader: header(t1), Term: 20, LastLogIndex: 100, LastLogTerm: 19, LeadershipTransfer: true}
	want := raft.RequestVoteResponse{RPCHeader: header(t2), Term: 100, Granted: true}
	done := serveOne(t, t2, args, &want)
	var got raft.RequestVoteResponse
	if err := t1.RequestVote("id2", t2.LocalAddr(), args, &got); err != nil {
		t.Fatal(err)
	}
	<-done
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("response = %#v, want %#v", got, want)
	}
}

func TestTransportRequestPreVote(t *testing.T) {
	t.Parallel()
	t1, t2 := startTransport(t), startTransport(t)
	args := &raft.RequestPreVoteRequest{RPCHeader: header(t1), Term: 20, LastLogIndex: 100, LastLogTerm: 19}
	want := raft.RequestPreVoteResponse{RPCHeader: header(t2), Term: 20, Granted: true}
	done := serveOne(t, t2, args, &want)
	var got raft.RequestPreVoteResponse
	if err := t1.RequestPreVote("id2", t2.LocalAddr(), args, &got); err != nil {
		t.Fatal(err)
	}
	<-done
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("response = %#v, want %#v", got, want)
	}
}

func TestTransportTimeoutNow(t *testing.T) {
	t.Parallel()
	t1, t2 := startTransport(t), startTransport(t)
	args := &raft.TimeoutNowRequest{RPCHeader: header(t1)}
	want := raft.TimeoutNowResponse{RPCHeader: header(t2)}
	done := serveOne(t, t2, args, &want)
	var got raft.TimeoutNowResponse
	if err := t1.TimeoutNow("id2", t2.LocalAddr(), args, &got); err != nil {
		t.Fatal(err)
	}
	<-done
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("response = %#v, want %#v", got, want)
	}
}

func TestTransportInstallSnapshot(t *testing.T) {
	t.Parallel()
	t1, t2 := startTransport(t), startTransport(t)
	data := make([]byte, 5<<20+123)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	args := &raft.InstallSnapshotRequest{
		RPCHeader: header(t1), SnapshotVersion: raft.SnapshotVersionMax, Term: 10,
		LastLogIndex: 100, LastLogTerm: 9, Configuration: []byte("cfg"), ConfigurationIndex: 7,
		Size: int64(len(data)),
	}
	got := make(chan []byte, 1)
	go func() {
		select {
		case rpc := <-t2.Consumer():
			if !reflect.DeepEqual(rpc.Command, args) {
				t.Errorf("command = %#v, want %#v", rpc.Command, args)
			}
			b, err := io.ReadAll(rpc.Reader)
			if err != nil {
				t.Error(err)
			}
			got <- b
			rpc.Respond(&raft.InstallSnapshotResponse{Term: 10, Success: true}, nil)
		case <-time.After(time.Minute):
			t.Error("no snapshot rpc")
			got <- nil
		}
	}()
	var resp raft.InstallSnapshotResponse
	if err := t1.InstallSnapshot("id2", t2.LocalAddr(), args, &resp, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	if !resp.Success || resp.Term != 10 {
		t.Fatalf("response = %#v", resp)
	}
	if b := <-got; !bytes.Equal(b, data) {
		t.Fatalf("snapshot data differs: got %d bytes, want %d", len(b), len(data))
	}
}

func TestTransportHeartbeatFastPath(t *testing.T) {
	t.Parallel()
	t1, t2 := startTransport(t), startTransport(t)
	called := make(chan struct{}, 1)
	t2.SetHeartbeatHandler(func(rpc raft.RPC) {
		called <- struct{}{}
		rpc.Respond(&raft.AppendEntriesResponse{Term: 7, Success: true}, nil)
	})
	args := &raft.AppendEntriesRequest{RPCHeader: header(t1), Term: 7}
	var resp raft.AppendEntriesResponse
	if err := t1.AppendEntries("id2", t2.LocalAddr(), args, &resp); err != nil {
		t.Fatal(err)
	}
	select {
	case <-called:
	default:
		t.Fatal("heartbeat handler not used")
	}
	if !resp.Success || resp.Term != 7 {
		t.Fatalf("response = %#v", resp)
	}
}

// TestTransportCloseWaitsForHeartbeat: raft runs heartbeats on the
// transport's goroutines, not its own, so raft's Shutdown does not wait for
// them. Close must: the node closes raft's stores after it, and a handler
// still running would write the term into a closed store (a panic).
func TestTransportCloseWaitsForHeartbeat(t *testing.T) {
	t.Parallel()
	t1, t2 := startTransport(t), startTransport(t)
	entered := make(chan struct{})
	release := make(chan struct{})
	var calls atomic.Int32
	t2.SetHeartbeatHandler(func(rpc raft.RPC) {
		if calls.Add(1) == 1 {
			close(entered)
			<-release
		}
		rpc.Respond(&raft.AppendEntriesResponse{Term: 7, Success: true}, nil)
	})
	args := &raft.AppendEntriesRequest{RPCHeader: header(t1), Term: 7}
	sent := make(chan error, 1)
	go func() { sent <- t1.AppendEntries("id2", t2.LocalAddr(), args, new(raft.AppendEntriesResponse)) }()
	select {
	case <-entered:
	case <-time.After(time.Minute):
		t.Fatal("heartbeat handler never called")
	}
	closed := make(chan error, 1)
	go func() { closed <- t2.Close() }()
	select {
	case <-closed:
		t.Fatal("Close returned while a heartbeat handler was running")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Close did not return after the handler did")
	}
	<-sent
	// After Close, a heartbeat fails and never reaches the handler.
	if err := t1.AppendEntries("id2", t2.LocalAddr(), args, new(raft.AppendEntriesResponse)); err == nil {
		t.Fatal("heartbeat to a closed transport succeeded")
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("handler called %d times, want 1", n)
	}
}

func TestTransportClosedFails(t *testing.T) {
	t.Parallel()
	t1, t2 := startTransport(t), startTransport(t)
	if err := t1.Close(); err != nil {
		t.Fatal(err)
	}
	err := t1.RequestVote("id2", t2.LocalAddr(), &raft.RequestVoteRequest{}, new(raft.RequestVoteResponse))
	if err == nil {
		t.Fatal("call on closed transport succeeded")
	}
}

func TestTransportUnreachablePeerFailsFast(t *testing.T) {
	t.Parallel()
	// An RPC timeout far above the deadline below: a vote that waited for
	// the peer would run it out.
	t1 := startTransport(t, WithTimeout(5*time.Minute))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := raft.ServerAddress(lis.Addr().String())
	lis.Close()
	start := time.Now()
	if err := t1.RequestVote("x", addr, &raft.RequestVoteRequest{}, new(raft.RequestVoteResponse)); err == nil {
		t.Fatal("vote to a closed port succeeded")
	}
	if d := time.Since(start); d > time.Minute {
		t.Fatalf("unreachable peer took %v: the vote waited for it", d)
	}
}
