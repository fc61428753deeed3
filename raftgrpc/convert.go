package raftgrpc

import (
	"time"

	"github.com/hashicorp/raft"

	pb "github.com/quirelog/quire/api/internalv1"
)

// Conversions between hashicorp/raft's command structs and their protobuf
// mirrors in proto/quire/internal/v1/raft.proto. Every field is carried.

func encHeader(h raft.RPCHeader) *pb.RPCHeader {
	return &pb.RPCHeader{ProtocolVersion: int32(h.ProtocolVersion), Id: h.ID, Addr: h.Addr}
}

func decHeader(h *pb.RPCHeader) raft.RPCHeader {
	if h == nil {
		return raft.RPCHeader{}
	}
	return raft.RPCHeader{ProtocolVersion: raft.ProtocolVersion(h.ProtocolVersion), ID: h.Id, Addr: h.Addr}
}

func encLog(l *raft.Log) *pb.RaftLog {
	out := &pb.RaftLog{Index: l.Index, Term: l.Term, Type: uint32(l.Type), Data: l.Data, Extensions: l.Extensions}
	if !l.AppendedAt.IsZero() {
		out.AppendedAt = l.AppendedAt.UnixNano()
	}
	return out
}

func decLog(l *pb.RaftLog) *raft.Log {
	out := &raft.Log{Index: l.Index, Term: l.Term, Type: raft.LogType(l.Type), Data: l.Data, Extensions: l.Extensions}
	if l.AppendedAt != 0 {
		out.AppendedAt = time.Unix(0, l.AppendedAt)
	}
	return out
}

func encAppendReq(r *raft.AppendEntriesRequest) *pb.AppendEntriesRequest {
	out := &pb.AppendEntriesRequest{
		Header: encHeader(r.RPCHeader),
		Term:   r.Term,
		//lint:ignore SA1019 carried for peers that read the leader from it
		Leader:            r.Leader,
		PrevLogEntry:      r.PrevLogEntry,
		PrevLogTerm:       r.PrevLogTerm,
		LeaderCommitIndex: r.LeaderCommitIndex,
	}
	if len(r.Entries) > 0 {
		out.Entries = make([]*pb.RaftLog, len(r.Entries))
		for i, e := range r.Entries {
			out.Entries[i] = encLog(e)
		}
	}
	return out
}

func decAppendReq(r *pb.AppendEntriesRequest) *raft.AppendEntriesRequest {
	out := &raft.AppendEntriesRequest{
		RPCHeader: decHeader(r.Header),
		Term:      r.Term,
		//lint:ignore SA1019 carried for peers that read the leader from it
		Leader:            r.Leader,
		PrevLogEntry:      r.PrevLogEntry,
		PrevLogTerm:       r.PrevLogTerm,
		LeaderCommitIndex: r.LeaderCommitIndex,
	}
	if len(r.Entries) > 0 {
		out.Entries = make([]*raft.Log, len(r.Entries))
		for i, e := range r.Entries {
			out.Entries[i] = decLog(e)
		}
	}
	return out
}

func encAppendResp(r *raft.AppendEntriesResponse) *pb.AppendEntriesResponse {
	return &pb.AppendEntriesResponse{
		Header: encHeader(r.RPCHeader), Term: r.Term, LastLog: r.LastLog,
		Success: r.Success, NoRetryBackoff: r.NoRetryBackoff,
	}
}

func decAppendResp(r *pb.AppendEntriesResponse, out *raft.AppendEntriesResponse) {
	*out = raft.AppendEntriesResponse{
		RPCHeader: decHeader(r.Header), Term: r.Term, LastLog: r.LastLog,
		Success: r.Success, NoRetryBackoff: r.NoRetryBackoff,
	}
}

func encVoteReq(r *raft.RequestVoteRequest) *pb.RequestVoteRequest {
	return &pb.RequestVoteRequest{
		Header: encHeader(r.RPCHeader), Term: r.Term,
		//lint:ignore SA1019 carried for peers that read the candidate from it
		Candidate:    r.Candidate,
		LastLogIndex: r.LastLogIndex, LastLogTerm: r.LastLogTerm, LeadershipTransfer: r.LeadershipTransfer,
	}
}

func decVoteReq(r *pb.RequestVoteRequest) *raft.RequestVoteRequest {
	return &raft.RequestVoteRequest{
		RPCHeader: decHeader(r.Header), Term: r.Term,
		//lint:ignore SA1019 carried for peers that read the candidate from it
		Candidate:    r.Candidate,
		LastLogIndex: r.LastLogIndex, LastLogTerm: r.LastLogTerm, LeadershipTransfer: r.LeadershipTransfer,
	}
}

func encVoteResp(r *raft.RequestVoteResponse) *pb.RequestVoteResponse {
	return &pb.RequestVoteResponse{Header: encHeader(r.RPCHeader), Term: r.Term, Peers: r.Peers, Granted: r.Granted} //nolint:staticcheck
}

func decVoteResp(r *pb.RequestVoteResponse, out *raft.RequestVoteResponse) {
	*out = raft.RequestVoteResponse{RPCHeader: decHeader(r.Header), Term: r.Term, Peers: r.Peers, Granted: r.Granted}
}

func encPreVoteReq(r *raft.RequestPreVoteRequest) *pb.RequestPreVoteRequest {
	return &pb.RequestPreVoteRequest{Header: encHeader(r.RPCHeader), Term: r.Term, LastLogIndex: r.LastLogIndex, LastLogTerm: r.LastLogTerm}
}

func decPreVoteReq(r *pb.RequestPreVoteRequest) *raft.RequestPreVoteRequest {
	return &raft.RequestPreVoteRequest{RPCHeader: decHeader(r.Header), Term: r.Term, LastLogIndex: r.LastLogIndex, LastLogTerm: r.LastLogTerm}
}

func encPreVoteResp(r *raft.RequestPreVoteResponse) *pb.RequestPreVoteResponse {
	return &pb.RequestPreVoteResponse{Header: encHeader(r.RPCHeader), Term: r.Term, Granted: r.Granted}
}

func decPreVoteResp(r *pb.RequestPreVoteResponse, out *raft.RequestPreVoteResponse) {
	*out = raft.RequestPreVoteResponse{RPCHeader: decHeader(r.Header), Term: r.Term, Granted: r.Granted}
}

func encSnapReq(r *raft.InstallSnapshotRequest) *pb.InstallSnapshotRequest {
	return &pb.InstallSnapshotRequest{
		Header: encHeader(r.RPCHeader), SnapshotVersion: int32(r.SnapshotVersion), Term: r.Term,
		Leader: r.Leader, LastLogIndex: r.LastLogIndex, LastLogTerm: r.LastLogTerm, //nolint:staticcheck
		Peers: r.Peers, Configuration: r.Configuration, ConfigurationIndex: r.ConfigurationIndex, Size: r.Size, //nolint:staticcheck
	}
}

func decSnapReq(r *pb.InstallSnapshotRequest) *raft.InstallSnapshotRequest {
	return &raft.InstallSnapshotRequest{
		RPCHeader: decHeader(r.Header), SnapshotVersion: raft.SnapshotVersion(r.SnapshotVersion), Term: r.Term,
		Leader: r.Leader, LastLogIndex: r.LastLogIndex, LastLogTerm: r.LastLogTerm,
		Peers: r.Peers, Configuration: r.Configuration, ConfigurationIndex: r.ConfigurationIndex, Size: r.Size,
	}
}

func encSnapResp(r *raft.InstallSnapshotResponse) *pb.InstallSnapshotResponse {
	return &pb.InstallSnapshotResponse{Header: encHeader(r.RPCHeader), Term: r.Term, Success: r.Success}
}

func decSnapResp(r *pb.InstallSnapshotResponse, out *raft.InstallSnapshotResponse) {
	*out = raft.InstallSnapshotResponse{RPCHeader: decHeader(r.Header), Term: r.Term, Success: r.Success}
}
