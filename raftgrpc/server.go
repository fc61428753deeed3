package raftgrpc

import (
	"context"
	"errors"
	"io"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/quirelog/quire/api/internalv1"
)

// server is the receiving side: it hands each RPC to raft through the
// transport's consumer channel and waits for raft's answer.
type server struct {
	pb.UnimplementedRaftTransportServer
	t *Transport
}

// dispatch gives one RPC to raft and waits for its response.
func (t *Transport) dispatch(ctx context.Context, cmd any, data io.Reader, heartbeat bool) (any, error) {
	respCh := make(chan raft.RPCResponse, 1)
	rpc := raft.RPC{Command: cmd, Reader: data, RespChan: respCh}
	handled := false
	if heartbeat {
		var err error
		if handled, err = t.heartbeat(rpc); err != nil {
			return nil, status.Error(codes.Unavailable, err.Error())
		}
	}
	if !handled {
		select {
		case t.consumer <- rpc:
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		case <-t.shutdownCh:
			return nil, status.Error(codes.Unavailable, ErrTransportShutdown.Error())
		}
	}
	select {
	case resp := <-respCh:
		if resp.Error != nil {
			return nil, status.Error(codes.Unknown, resp.Error.Error())
		}
		return resp.Response, nil
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	case <-t.shutdownCh:
		return nil, status.Error(codes.Unavailable, ErrTransportShutdown.Error())
	}
}

// isHeartbeat matches raft's NetworkTransport: a term and a leader, and no
// log position or entries.
func isHeartbeat(r *raft.AppendEntriesRequest) bool {
	leader := r.RPCHeader.Addr
	if len(leader) == 0 {
		//lint:ignore SA1019 a peer that sets only the deprecated field
		leader = r.Leader
	}
	return r.Term != 0 && leader != nil && r.PrevLogEntry == 0 && r.PrevLogTerm == 0 &&
		len(r.Entries) == 0 && r.LeaderCommitIndex == 0
}

func (s *server) AppendEntries(ctx context.Context, in *pb.AppendEntriesRequest) (*pb.AppendEntriesResponse, error) {
	req := decAppendReq(in)
	out, err := s.t.dispatch(ctx, req, nil, isHeartbeat(req))
	if err != nil {
		return nil, err
	}
	return encAppendResp(out.(*raft.AppendEntriesResponse)), nil
}

func (s *server) AppendEntriesPipeline(stream pb.RaftTransport_AppendEntriesPipelineServer) error {
	ctx := stream.Context()
	// Receive in a goroutine so that Close ends the stream at once: the
	// leader keeps its pipeline open for ever, and a node that stops must
	// not wait for it (grpc.Server.GracefulStop would).
	type recv struct {
		in  *pb.AppendEntriesRequest
		err error
	}
	next := make(chan recv)
	go func() {
		for {
			in, err := stream.Recv()
			select {
			case next <- recv{in, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	for {
		var r recv
		select {
		case r = <-next:
		case <-s.t.shutdownCh:
			return status.Error(codes.Unavailable, ErrTransportShutdown.Error())
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
		in, err := r.in, r.err
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		out, err := s.t.dispatch(ctx, decAppendReq(in), nil, false)
		if err != nil {
			s.t.logger.Debug("pipelined append entries failed", "error", err)
			// Answer in order, then end the stream: the sender falls back.
			_ = stream.Send(&pb.AppendEntriesResponse{Error: err.Error()})
			return err
		}
		if err := stream.Send(encAppendResp(out.(*raft.AppendEntriesResponse))); err != nil {
			return err
		}
	}
}

func (s *server) RequestVote(ctx context.Context, in *pb.RequestVoteRequest) (*pb.RequestVoteResponse, error) {
	out, err := s.t.dispatch(ctx, decVoteReq(in), nil, false)
	if err != nil {
		return nil, err
	}
	return encVoteResp(out.(*raft.RequestVoteResponse)), nil
}

func (s *server) RequestPreVote(ctx context.Context, in *pb.RequestPreVoteRequest) (*pb.RequestPreVoteResponse, error) {
	out, err := s.t.dispatch(ctx, decPreVoteReq(in), nil, false)
	if err != nil {
		return nil, err
	}
	return encPreVoteResp(out.(*raft.RequestPreVoteResponse)), nil
}

func (s *server) TimeoutNow(ctx context.Context, in *pb.TimeoutNowRequest) (*pb.TimeoutNowResponse, error) {
	out, err := s.t.dispatch(ctx, &raft.TimeoutNowRequest{RPCHeader: decHeader(in.Header)}, nil, false)
	if err != nil {
		return nil, err
	}
	return &pb.TimeoutNowResponse{Header: encHeader(out.(*raft.TimeoutNowResponse).RPCHeader)}, nil
}

func (s *server) InstallSnapshot(stream pb.RaftTransport_InstallSnapshotServer) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	if first.Request == nil {
		return status.Error(codes.InvalidArgument, "raftgrpc: install snapshot: first chunk carries no request")
	}
	req := decSnapReq(first.Request)
	r := &chunkReader{stream: stream, buf: first.Data}
	out, err := s.t.dispatch(stream.Context(), req, io.LimitReader(r, req.Size), false)
	if err != nil {
		s.t.logger.Warn("install snapshot failed", "size", req.Size, "error", err)
		return err
	}
	return stream.SendAndClose(encSnapResp(out.(*raft.InstallSnapshotResponse)))
}

// chunkReader reads the snapshot bytes out of the stream's chunks.
type chunkReader struct {
	stream pb.RaftTransport_InstallSnapshotServer
	buf    []byte
	err    error
}

func (r *chunkReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		c, err := r.stream.Recv()
		if err != nil {
			r.err = err
			continue
		}
		r.buf = c.Data
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}
