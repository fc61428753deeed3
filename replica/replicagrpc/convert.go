package replicagrpc

import (
	"errors"
	"fmt"

	pb "github.com/quirelog/quire/api/internalv1"
	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/replica"
	"github.com/quirelog/quire/storage"
)

// ErrLeaderRefused is a partition of a replica fetch the leader refused
// (its code and message are in the error's text).
var ErrLeaderRefused = errors.New("replica: the leader refused the replica fetch")

// Codec turns replica fetches into ReplicaService messages and back. The
// error code of a partition's refusal is the node's error table's (given
// to NewCodec), so this package keeps no table of its own.
type Codec struct {
	errorCode func(error) (quirev1.ErrorCode, string)
	// leadership are the codes of a leader refusing a replica fetch for
	// leadership (replica.LeadershipRefusals, through errorCode), with
	// the sentinels they stand for.
	leadership map[quirev1.ErrorCode]error
	maxAnswer  int
}

// NewCodec returns the codec of a node whose error table is errorCode (a
// refusal's code and the message sent with it), whose followers take
// answers of up to maxAnswerBytes.
func NewCodec(errorCode func(error) (quirev1.ErrorCode, string), maxAnswerBytes int) *Codec {
	c := &Codec{errorCode: errorCode, leadership: map[quirev1.ErrorCode]error{}, maxAnswer: maxAnswerBytes}
	for _, e := range replica.LeadershipRefusals {
		code, _ := errorCode(e)
		c.leadership[code] = e
	}
	return c
}

// RequestFromPB is the fetch req stands for (incremental or not).
func RequestFromPB(req *pb.ReplicaFetchRequest) *replica.FetchRequest {
	out := &replica.FetchRequest{}
	RequestInto(out, req)
	return out
}

// RequestInto sets *out to the fetch req stands for, reusing out's
// slices: a stream's fetches go through one FetchRequest, which a
// LeaderSession does not keep past its Request.
func RequestInto(out *replica.FetchRequest, req *pb.ReplicaFetchRequest) {
	parts, forgotten := out.Partitions[:0], out.Forgotten[:0]
	*out = replica.FetchRequest{ReplicaID: req.GetReplicaId(), Incarnation: req.GetIncarnation(), MaxWaitMs: req.GetMaxWaitMs(),
		MinBytes: req.GetMinBytes(), MaxBytes: req.GetMaxBytes(), Incremental: req.GetIncremental()}
	for _, f := range req.GetPartitions() {
		parts = append(parts, partitionFromPB(f))
	}
	for _, f := range req.GetForgotten() {
		forgotten = append(forgotten, storage.TopicPartition{Topic: f.GetTopic(), Partition: f.GetPartition()})
	}
	out.Partitions, out.Forgotten = parts, forgotten
}

func partitionFromPB(f *pb.ReplicaFetchPartition) replica.FetchPartition {
	out := replica.FetchPartition{Topic: f.GetTopic(), Partition: f.GetPartition(), CurrentLeaderEpoch: f.GetCurrentLeaderEpoch(),
		FetchOffset: f.GetFetchOffset(), LastFetchedEpoch: f.GetLastFetchedEpoch(), PartitionMaxBytes: f.GetPartitionMaxBytes(),
		LogFailed: f.GetLogFailed(), LogStartOffset: -1}
	if f.GetOptionalLogStartOffset() != nil {
		out.LogStartOffset = f.GetLogStartOffset()
	}
	return out
}

// RequestToPB is req as sent.
func RequestToPB(req *replica.FetchRequest) *pb.ReplicaFetchRequest {
	out := &pb.ReplicaFetchRequest{ReplicaId: req.ReplicaID, Incarnation: req.Incarnation, MaxWaitMs: req.MaxWaitMs,
		MinBytes: req.MinBytes, MaxBytes: req.MaxBytes, Incremental: req.Incremental}
	if len(req.Partitions) > 0 {
		out.Partitions = make([]*pb.ReplicaFetchPartition, len(req.Partitions))
		for i := range req.Partitions {
			out.Partitions[i] = partitionToPB(&req.Partitions[i])
		}
	}
	for _, k := range req.Forgotten {
		out.Forgotten = append(out.Forgotten, &pb.ReplicaFetchForgotten{Topic: k.Topic, Partition: k.Partition})
	}
	return out
}

func partitionToPB(f *replica.FetchPartition) *pb.ReplicaFetchPartition {
	out := &pb.ReplicaFetchPartition{Topic: f.Topic, Partition: f.Partition, CurrentLeaderEpoch: f.CurrentLeaderEpoch,
		FetchOffset: f.FetchOffset, LastFetchedEpoch: f.LastFetchedEpoch, PartitionMaxBytes: f.PartitionMaxBytes,
		LogFailed: f.LogFailed}
	if f.LogStartOffset >= 0 {
		out.OptionalLogStartOffset = &pb.ReplicaFetchPartition_LogStartOffset{LogStartOffset: f.LogStartOffset}
	}
	return out
}

// ResponseToPB is resp as sent, its records referenced, not copied.
func (c *Codec) ResponseToPB(resp *replica.FetchResponse) *pb.ReplicaFetchResponse {
	out := &pb.ReplicaFetchResponse{Partitions: make([]*pb.ReplicaFetchPartitionResult, len(resp.Partitions)), Session: resp.Session}
	for i := range resp.Partitions {
		r := &resp.Partitions[i]
		pr := &pb.ReplicaFetchPartitionResult{Topic: r.Topic, Partition: r.Partition, Records: r.Records,
			HighWatermark: r.HighWatermark, LogStartOffset: r.LogStartOffset, LogEndOffset: r.LogEndOffset}
		if r.Diverging != nil {
			pr.DivergingEpoch = &pb.EpochEndOffset{Epoch: r.Diverging.Epoch, EndOffset: r.Diverging.EndOffset}
		}
		if r.Err != nil {
			code, msg := c.errorCode(r.Err)
			pr.ErrorCode, pr.ErrorMessage = int32(code), msg
		}
		out.Partitions[i] = pr
	}
	return out
}

// ResponseFromPB is the answer msg stands for, its records aliasing msg's.
func (c *Codec) ResponseFromPB(msg *pb.ReplicaFetchResponse) *replica.FetchResponse {
	out := &replica.FetchResponse{Partitions: make([]replica.FetchResult, len(msg.GetPartitions())), Session: msg.GetSession()}
	for i, r := range msg.GetPartitions() {
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
			if sentinel, ok := c.leadership[code]; ok {
				fr.Err = fmt.Errorf("%w: %w: %s", ErrLeaderRefused, sentinel, r.GetErrorMessage())
			} else {
				fr.Err = fmt.Errorf("%w: %s: %s", ErrLeaderRefused, code, r.GetErrorMessage())
			}
		}
		out.Partitions[i] = fr
	}
	return out
}
