package broker

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/status"

	pb "github.com/quirelog/quire/api/internalv1"
	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/replica"
	"github.com/quirelog/quire/storage"
)

// replicaService implements quire.internal.v1.ReplicaService: node-to-node
// calls answered from the replicas this broker hosts, the follower fetch
// (replica.Manager.HandleFetch) and DescribeLogs (describe.go). It turns
// the wire messages into the replica package's plain types and back.
type replicaService struct {
	pb.UnimplementedReplicaServiceServer
	b *Broker
}

// DescribeLogs answers the offsets of the named replicas hosted here.
func (s *replicaService) DescribeLogs(ctx context.Context, req *pb.DescribeLogsRequest) (*pb.DescribeLogsResponse, error) {
	resp := &pb.DescribeLogsResponse{Logs: make([]*pb.LogDescription, 0, len(req.Partitions))}
	for _, ref := range req.Partitions {
		d := s.b.describeLog(ref.GetTopic(), ref.GetPartition())
		if d.Leader && len(ref.TimestampOffsets) > 0 {
			d.Timestamps = s.b.recordTimestamps(ref.GetTopic(), ref.GetPartition(), ref.TimestampOffsets)
		}
		resp.Logs = append(resp.Logs, d)
	}
	return resp, nil
}

// ReplicaFetch is a follower's pull (see replica.proto), answered by the
// replica manager (replica.Manager.HandleFetch).
func (s *replicaService) ReplicaFetch(ctx context.Context, req *pb.ReplicaFetchRequest) (*pb.ReplicaFetchResponse, error) {
	if req.GetIncremental() || len(req.GetForgotten()) > 0 {
		return nil, toStatus(fmt.Errorf("%w: an incremental replica fetch needs the session of a ReplicaFetchStream", ErrInvalidRequest))
	}
	return s.fetch(ctx, fetchRequestFromPB(req), nil, false)
}

// fetch answers a whole replica fetch; in a stream's session, cut to
// what the session sends (leaderSession.answer).
func (s *replicaService) fetch(ctx context.Context, req *replica.FetchRequest, session *leaderSession, incremental bool) (*pb.ReplicaFetchResponse, error) {
	resp, err := s.b.rm.HandleFetch(ctx, req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		return nil, toStatus(err)
	}
	if session != nil {
		session.answer(incremental, resp)
	}
	out := fetchResponseToPB(resp)
	out.Session = session != nil
	// The records lie in pooled read buffers: the handler around this
	// one (withPooledReplicaFetch) has them sent from there and given
	// back. Without it, they stay with the records, for the garbage
	// collector.
	if hold, ok := ctx.Value(replicaFetchHoldKey{}).(*replicaFetchHold); ok {
		hold.take(resp)
	}
	return out, nil
}

func fetchRequestFromPB(req *pb.ReplicaFetchRequest) *replica.FetchRequest {
	out := &replica.FetchRequest{ReplicaID: req.GetReplicaId(), Incarnation: req.GetIncarnation(), MaxWaitMs: req.GetMaxWaitMs(),
		MinBytes: req.GetMinBytes(), MaxBytes: req.GetMaxBytes(), Partitions: make([]replica.FetchPartition, len(req.GetPartitions()))}
	for i, f := range req.GetPartitions() {
		out.Partitions[i] = fetchPartitionFromPB(f)
	}
	return out
}

func fetchPartitionFromPB(f *pb.ReplicaFetchPartition) replica.FetchPartition {
	out := replica.FetchPartition{Topic: f.GetTopic(), Partition: f.GetPartition(), CurrentLeaderEpoch: f.GetCurrentLeaderEpoch(),
		FetchOffset: f.GetFetchOffset(), LastFetchedEpoch: f.GetLastFetchedEpoch(), PartitionMaxBytes: f.GetPartitionMaxBytes(),
		LogFailed: f.GetLogFailed(), LogStartOffset: -1}
	if f.GetOptionalLogStartOffset() != nil {
		out.LogStartOffset = f.GetLogStartOffset()
	}
	return out
}

func fetchRequestToPB(req *replica.FetchRequest) *pb.ReplicaFetchRequest {
	out := &pb.ReplicaFetchRequest{ReplicaId: req.ReplicaID, Incarnation: req.Incarnation, MaxWaitMs: req.MaxWaitMs,
		MinBytes: req.MinBytes, MaxBytes: req.MaxBytes, Partitions: make([]*pb.ReplicaFetchPartition, len(req.Partitions))}
	for i, f := range req.Partitions {
		out.Partitions[i] = fetchPartitionToPB(f)
	}
	return out
}

func fetchPartitionToPB(f replica.FetchPartition) *pb.ReplicaFetchPartition {
	out := &pb.ReplicaFetchPartition{Topic: f.Topic, Partition: f.Partition, CurrentLeaderEpoch: f.CurrentLeaderEpoch,
		FetchOffset: f.FetchOffset, LastFetchedEpoch: f.LastFetchedEpoch, PartitionMaxBytes: f.PartitionMaxBytes,
		LogFailed: f.LogFailed}
	if f.LogStartOffset >= 0 {
		out.OptionalLogStartOffset = &pb.ReplicaFetchPartition_LogStartOffset{LogStartOffset: f.LogStartOffset}
	}
	return out
}

func fetchResponseToPB(resp *replica.FetchResponse) *pb.ReplicaFetchResponse {
	out := &pb.ReplicaFetchResponse{Partitions: make([]*pb.ReplicaFetchPartitionResult, len(resp.Partitions))}
	for i, r := range resp.Partitions {
		pr := &pb.ReplicaFetchPartitionResult{Topic: r.Topic, Partition: r.Partition, Records: r.Records,
			HighWatermark: r.HighWatermark, LogStartOffset: r.LogStartOffset, LogEndOffset: r.LogEndOffset}
		if r.Diverging != nil {
			pr.DivergingEpoch = &pb.EpochEndOffset{Epoch: r.Diverging.Epoch, EndOffset: r.Diverging.EndOffset}
		}
		if r.Err != nil {
			e := toError(r.Err)
			pr.ErrorCode, pr.ErrorMessage = int32(e.Code), e.Message
		}
		out.Partitions[i] = pr
	}
	return out
}

// errLeaderRefused is a partition of a replica fetch the leader refused
// (its code and message are in the error's text).
var errLeaderRefused = errors.New("broker: the leader refused the replica fetch")

// leadershipCodes are the codes of a leader refusing a replica fetch for
// leadership (replica.LeadershipRefusals, through the error table), with
// the sentinels they stand for.
var leadershipCodes = func() map[quirev1.ErrorCode]error {
	m := map[quirev1.ErrorCode]error{}
	for _, e := range replica.LeadershipRefusals {
		m[lookupError(e).code] = e
	}
	return m
}()

func fetchResponseFromPB(resp *pb.ReplicaFetchResponse) *replica.FetchResponse {
	out := &replica.FetchResponse{Partitions: make([]replica.FetchResult, len(resp.GetPartitions()))}
	for i, r := range resp.GetPartitions() {
		fr := replica.FetchResult{Topic: r.GetTopic(), Partition: r.GetPartition(), Records: r.GetRecords(),
			HighWatermark: r.GetHighWatermark(), LogStartOffset: r.GetLogStartOffset(), LogEndOffset: r.GetLogEndOffset()}
		if d := r.GetDivergingEpoch(); d != nil {
			fr.Diverging = &replica.EpochEndOffset{Epoch: d.GetEpoch(), EndOffset: d.GetEndOffset()}
		}
		switch code := quirev1.ErrorCode(r.GetErrorCode()); code {
		case quirev1.ErrorCode_NONE:
		case quirev1.ErrorCode_OFFSET_OUT_OF_RANGE:
			fr.Err = fmt.Errorf("%w: %s", storage.ErrOffsetOutOfRange, r.GetErrorMessage())
		default:
			// Leadership refusals keep their replica sentinel, so the
			// fetcher can tell a leader behind on metadata (asked again
			// at once) from a failing one (backed off).
			if sentinel, ok := leadershipCodes[code]; ok {
				fr.Err = fmt.Errorf("%w: %w: %s", errLeaderRefused, sentinel, r.GetErrorMessage())
			} else {
				fr.Err = fmt.Errorf("%w: %s: %s", errLeaderRefused, code, r.GetErrorMessage())
			}
		}
		out.Partitions[i] = fr
	}
	return out
}
