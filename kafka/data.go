package kafka

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

// partKey names a partition, to match answers to requests.
type partKey struct {
	topic string
	part  int32
}

// partResult is a partition's answer from the backend.
type partResult interface {
	comparable
	GetTopic() string
	GetPartition() int32
	GetError() *quirev1.Error
}

// partResults are the backend's answers by partition, or the code (and
// message) of its whole call's failure.
type partResults[R partResult] struct {
	byPart map[partKey]R
	code   int16
	msg    string
}

// collect indexes a call's answers, or keeps its error.
func collect[R partResult](rs []R, err error) partResults[R] {
	if err != nil {
		code, msg := callError(err)
		return partResults[R]{code: code, msg: msg}
	}
	m := make(map[partKey]R, len(rs))
	for _, r := range rs {
		m[partKey{r.GetTopic(), r.GetPartition()}] = r
	}
	return partResults[R]{byPart: m}
}

// of is topic-partition's answer and code: the whole call's error, its
// own, or UNKNOWN_SERVER_ERROR for a partition left unanswered; code 0
// when it succeeded.
func (p partResults[R]) of(topic string, part int32) (R, int16, string) {
	var zero R
	if p.code != 0 {
		return zero, p.code, p.msg
	}
	r, ok := p.byPart[partKey{topic, part}]
	switch {
	case !ok || r == zero:
		return zero, kerr.UnknownServerError.Code, "no answer for this partition"
	case codeOf(r.GetError()) != 0:
		return zero, codeOf(r.GetError()), r.GetError().Message
	}
	return r, 0, ""
}

// produce appends each partition's record batches, passed on untouched;
// nil (no answer) for acks=0. An acks=0 produce that failed anywhere
// closes the connection (the error), as Kafka does, so the client learns
// of it and looks up the leaders again.
func produce(ctx context.Context, b Backend, req *kmsg.ProduceRequest) (kmsg.Response, error) {
	resp := kmsg.NewPtrProduceResponse()
	in := &quirev1.ProduceRequest{OptionalAcks: &quirev1.ProduceRequest_Acks{Acks: int32(req.Acks)}, TimeoutMs: req.TimeoutMillis}
	n := 0
	for _, t := range req.Topics {
		n += len(t.Partitions)
	}
	// Sized once: a request may name many partitions (up to the element
	// cap, bound.go), and growing by doubling would allocate twice over.
	in.Partitions = make([]*quirev1.PartitionRecords, 0, n)
	recs := make([]quirev1.PartitionRecords, n)
	seen := make(map[partKey]bool, n)
	dup := ""
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			k := partKey{t.Topic, p.Partition}
			if seen[k] && dup == "" {
				dup = fmt.Sprintf("partition %s/%d named twice in one request", t.Topic, p.Partition)
			}
			seen[k] = true
			r := &recs[len(in.Partitions)]
			r.Topic, r.Partition, r.Records = t.Topic, p.Partition, p.Records
			in.Partitions = append(in.Partitions, r)
		}
	}
	var results partResults[*quirev1.PartitionProduceResult]
	switch {
	case req.TransactionID != nil:
		results.code, results.msg = kerr.TransactionalIDAuthorizationFailed.Code, "transactions are not supported"
	case dup != "":
		results.code, results.msg = invalidRequest, dup
	case len(in.Partitions) == 0:
	default:
		out, err := b.Produce(ctx, in)
		results = collect(out.GetPartitions(), err)
	}
	if req.Acks == 0 {
		if results.code != 0 {
			return nil, fmt.Errorf("acks=0 produce failed: error %d: %s", results.code, results.msg)
		}
		for _, r := range results.byPart {
			if r.Error != nil {
				return nil, fmt.Errorf("acks=0 produce to %s/%d failed: %s", r.Topic, r.Partition, r.Error.Message)
			}
		}
		return nil, nil
	}
	resp.Topics = make([]kmsg.ProduceResponseTopic, 0, len(req.Topics))
	for _, t := range req.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.ProduceResponseTopicPartition, 0, len(t.Partitions))
		for _, p := range t.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition = p.Partition
			rp.BaseOffset, rp.LogAppendTime, rp.LogStartOffset = -1, -1, -1
			r, code, msg := results.of(t.Topic, p.Partition)
			if code == 0 {
				rp.BaseOffset, rp.LogStartOffset = r.BaseOffset, r.LogStartOffset
				if r.LogAppendTimeMs > 0 {
					rp.LogAppendTime = r.LogAppendTimeMs
				}
			}
			rp.ErrorCode = code
			if code != 0 && msg != "" {
				rp.ErrorMessage = kmsg.StringPtr(msg)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// fetch reads each partition from its offset, long-polled as asked. Fetch
// sessions are declined: session id 0, every answer in full.
func fetch(ctx context.Context, b Backend, req *kmsg.FetchRequest) *kmsg.FetchResponse {
	resp := kmsg.NewPtrFetchResponse()
	if req.Version >= 7 {
		if code := fetchSessionError(req.SessionID, req.SessionEpoch); code != 0 {
			resp.ErrorCode = code
			return resp
		}
	}
	in := &quirev1.FetchRequest{MaxWaitMs: req.MaxWaitMillis, MinBytes: req.MinBytes, MaxBytes: req.MaxBytes}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			fp := &quirev1.FetchPartition{Topic: t.Topic, Partition: p.Partition, Offset: p.FetchOffset, MaxBytes: p.PartitionMaxBytes}
			if req.Version >= 9 && p.CurrentLeaderEpoch >= 0 {
				fp.OptionalCurrentLeaderEpoch = &quirev1.FetchPartition_CurrentLeaderEpoch{CurrentLeaderEpoch: p.CurrentLeaderEpoch}
			}
			in.Partitions = append(in.Partitions, fp)
		}
	}
	if len(in.Partitions) == 0 {
		// Nothing to read: wait as asked, so a client polling with no
		// partitions does not spin.
		t := time.NewTimer(time.Duration(max(req.MaxWaitMillis, 0)) * time.Millisecond)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		return resp
	}
	out, err := b.Fetch(ctx, in)
	results := collect(out.GetPartitions(), err)
	resp.Topics = make([]kmsg.FetchResponseTopic, 0, len(req.Topics))
	for _, t := range req.Topics {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.FetchResponseTopicPartition, 0, len(t.Partitions))
		for _, p := range t.Partitions {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition = p.Partition
			rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
			rp.RecordBatches = []byte{} // empty, not null: clients read a size
			r, code, _ := results.of(t.Topic, p.Partition)
			if code == 0 {
				// No transactions: the last stable offset is the high
				// watermark, under either isolation level.
				rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = r.HighWatermark, r.HighWatermark, r.LogStartOffset
				if len(r.Records) > 0 {
					rp.RecordBatches = r.Records
				}
			}
			rp.ErrorCode = code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// fetchSessionError is the code of a fetch whose session (KIP-227) is
// not served, 0 for one answered in full. As Kafka has it, epoch 0 (a
// new session) and -1 (the final epoch: no session) ask for a full
// fetch whatever the session id, which closes any session named;
// another epoch continues a session, and none is ever kept.
func fetchSessionError(id, epoch int32) int16 {
	switch {
	case epoch == 0 || epoch == -1:
		return 0
	case id == 0:
		return kerr.InvalidFetchSessionEpoch.Code
	}
	return kerr.FetchSessionIDNotFound.Code
}

// listOffsets finds, per partition, the offset for a timestamp (-1 the
// end, -2 the start).
func listOffsets(ctx context.Context, b Backend, req *kmsg.ListOffsetsRequest) *kmsg.ListOffsetsResponse {
	resp := kmsg.NewPtrListOffsetsResponse()
	in := &quirev1.ListOffsetsRequest{}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			in.Partitions = append(in.Partitions, &quirev1.ListOffsetsPartition{Topic: t.Topic, Partition: p.Partition, TimestampMs: p.Timestamp})
		}
	}
	var results partResults[*quirev1.ListOffsetsResult]
	if len(in.Partitions) > 0 {
		out, err := b.ListOffsets(ctx, in)
		results = collect(out.GetPartitions(), err)
	}
	for _, t := range req.Topics {
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewListOffsetsResponseTopicPartition()
			rp.Partition = p.Partition
			rp.Timestamp, rp.Offset, rp.LeaderEpoch = -1, -1, -1
			r, code, _ := results.of(t.Topic, p.Partition)
			if code == 0 {
				rp.Offset, rp.LeaderEpoch = r.Offset, r.LeaderEpoch
				if p.Timestamp >= 0 {
					rp.Timestamp = r.TimestampMs
				}
			}
			rp.ErrorCode = code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// noTransactions is the message of a transactional request's refusal.
const noTransactions = "transactions are not supported by this cluster (no transaction coordinator); idempotent producers are"

// initProducerID gives an idempotent producer its id and epoch, or bumps
// the epoch of the id it names (KIP-360). A transactional id is refused
// UNSUPPORTED_VERSION, as its FindCoordinator is (noTransactions): a code
// that tells no lie about permissions (TRANSACTIONAL_ID_AUTHORIZATION_FAILED
// would send the user to ACLs) or the request's form (INVALID_REQUEST),
// and that clients take as final, not to be retried: franz-go fails the
// producer with it, the Java client with the message FindCoordinator
// carries.
func initProducerID(ctx context.Context, b Backend, req *kmsg.InitProducerIDRequest) *kmsg.InitProducerIDResponse {
	resp := kmsg.NewPtrInitProducerIDResponse()
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		resp.ErrorCode = unsupportedVersion
		return resp
	}
	in := &quirev1.InitProducerIdRequest{}
	if req.Version >= 3 && req.ProducerID >= 0 {
		in.OptionalProducerId = &quirev1.InitProducerIdRequest_ProducerId{ProducerId: req.ProducerID}
		in.ProducerEpoch = int32(req.ProducerEpoch)
	}
	out, err := b.InitProducerID(ctx, in)
	if err != nil {
		resp.ErrorCode, _ = callError(err)
		return resp
	}
	resp.ProducerID, resp.ProducerEpoch = out.ProducerId, int16(out.ProducerEpoch)
	return resp
}
