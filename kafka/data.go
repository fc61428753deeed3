package kafka

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/quirelog/quire/request"
)

// partKey names a partition, to match answers to requests.
type partKey struct {
	topic string
	part  int32
}

// produce appends each partition's record batches through the request
// core, passed on untouched; nil (no answer) for acks=0. An acks=0
// produce that failed anywhere closes the connection (the error), as
// Kafka does, so the client learns of it and looks up the leaders again.
func produce(ctx context.Context, b Backend, req *kmsg.ProduceRequest) (kmsg.Response, error) {
	resp := kmsg.NewPtrProduceResponse()
	n := 0
	for _, t := range req.Topics {
		n += len(t.Partitions)
	}
	// Sized once: a request may name many partitions (up to the element
	// cap, bound.go), and growing by doubling would allocate twice over.
	in := &request.ProduceRequest{Acks: int32(req.Acks), Timeout: time.Duration(max(req.TimeoutMillis, 0)) * time.Millisecond, Route: true,
		Partitions: make([]request.ProducePartition, 0, n)}
	if req.TransactionID != nil {
		// Transaction version 1 (before Produce 12): the producer added
		// its partitions, the leader checks it did; version 2: the leader
		// adds them.
		in.TransactionalID, in.VerifyPartitions = *req.TransactionID, req.Version < 12
	}
	seen := make(map[partKey]bool, n)
	dup := ""
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			k := partKey{t.Topic, p.Partition}
			if seen[k] && dup == "" {
				dup = fmt.Sprintf("partition %s/%d named twice in one request", t.Topic, p.Partition)
			}
			seen[k] = true
			in.Partitions = append(in.Partitions, request.ProducePartition{Topic: t.Topic, Partition: p.Partition, Records: p.Records})
		}
	}
	var (
		results  []request.ProduceResult
		code     int16
		msg      string
		answered bool
	)
	switch {
	case dup != "":
		code, msg = invalidRequest, dup
	case len(in.Partitions) == 0:
	default:
		var err error
		results, err = b.Produce(ctx, in)
		code, msg = coreError(err)
		answered = err == nil
	}
	if req.Acks == 0 {
		if code != 0 {
			return nil, fmt.Errorf("acks=0 produce failed: error %d: %s", code, msg)
		}
		for _, r := range results {
			if r.Err != nil {
				return nil, fmt.Errorf("acks=0 produce to %s/%d failed: %v", r.Topic, r.Partition, r.Err)
			}
		}
		return nil, nil
	}
	if answered && len(results) != len(in.Partitions) {
		code, msg = kerr.UnknownServerError.Code, fmt.Sprintf("%d answers for %d partitions", len(results), len(in.Partitions))
	}
	resp.Topics = make([]kmsg.ProduceResponseTopic, 0, len(req.Topics))
	var leaders hinted
	i := 0
	for _, t := range req.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.ProduceResponseTopicPartition, 0, len(t.Partitions))
		for _, p := range t.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition = p.Partition
			rp.BaseOffset, rp.LogAppendTime, rp.LogStartOffset = -1, -1, -1
			pcode, pmsg := code, msg
			if pcode == 0 && i < len(results) {
				r := results[i]
				rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = leaderHint(r.Err)
				leaders.add(rp.CurrentLeader.LeaderID)
				if pcode, pmsg = coreError(r.Err); pcode == 0 {
					rp.BaseOffset, rp.LogStartOffset = r.BaseOffset, r.LogStartOffset
					if r.LogAppendTime > 0 {
						rp.LogAppendTime = r.LogAppendTime
					}
				}
			}
			i++
			rp.ErrorCode = pcode
			if pcode != 0 && pmsg != "" {
				rp.ErrorMessage = kmsg.StringPtr(pmsg)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if req.Version >= 10 {
		for _, e := range leaderEndpoints(ctx, b, leaders) {
			resp.Brokers = append(resp.Brokers, kmsg.ProduceResponseBroker{NodeID: e.id, Host: e.host, Port: e.port, Rack: e.rack})
		}
	}
	return resp, nil
}

// fetch reads each partition from its offset through the request core,
// long-polled as asked: the log's batches go into the response as the
// core read them, into pooled buffers that cs holds until the answer is
// framed (handle gives them back). Fetch sessions are declined: session
// id 0, every answer in full.
func fetch(ctx context.Context, b Backend, cs *connState, req *kmsg.FetchRequest) *kmsg.FetchResponse {
	resp := kmsg.NewPtrFetchResponse()
	if req.Version >= 7 {
		if code := fetchSessionError(req.SessionID, req.SessionEpoch); code != 0 {
			resp.ErrorCode = code
			return resp
		}
	}
	// Negative sizes and waits are the core's to refuse (INVALID_REQUEST).
	in := &request.FetchRequest{MaxWait: time.Duration(req.MaxWaitMillis) * time.Millisecond, MinBytes: int(req.MinBytes),
		MaxBytes: int(req.MaxBytes), Isolation: request.Isolation(req.IsolationLevel), Pooled: true}
	n := 0
	for _, t := range req.Topics {
		n += len(t.Partitions)
	}
	in.Partitions = make([]request.FetchPartition, 0, n)
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			fp := request.FetchPartition{Topic: t.Topic, Partition: p.Partition, Offset: p.FetchOffset, MaxBytes: int(p.PartitionMaxBytes)}
			if req.Version >= 9 && p.CurrentLeaderEpoch >= 0 {
				epoch := p.CurrentLeaderEpoch
				fp.CurrentLeaderEpoch = &epoch
			}
			in.Partitions = append(in.Partitions, fp)
		}
	}
	if len(in.Partitions) == 0 {
		// Nothing to read: wait as asked, so a client polling with no
		// partitions does not spin.
		t := time.NewTimer(in.MaxWait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		return resp
	}
	results, err := b.Fetch(ctx, in)
	cs.held = results
	code, _ := coreError(err)
	if err == nil && len(results) != len(in.Partitions) {
		code = kerr.UnknownServerError.Code
	}
	resp.Topics = make([]kmsg.FetchResponseTopic, 0, len(req.Topics))
	i := 0
	for _, t := range req.Topics {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.FetchResponseTopicPartition, 0, len(t.Partitions))
		for _, p := range t.Partitions {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition = p.Partition
			rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
			rp.RecordBatches = []byte{} // empty, not null: clients read a size
			pcode := code
			if pcode == 0 {
				r := &results[i]
				rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = leaderHint(r.Err)
				if pcode, _ = coreError(r.Err); pcode == 0 {
					rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = r.HighWatermark, r.LastStableOffset, r.LogStartOffset
					if len(r.Records) > 0 {
						rp.RecordBatches = r.Records
					}
					// A read_committed consumer drops these transactions'
					// records (and every marker) itself.
					for _, a := range r.Aborted {
						at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
						at.ProducerID, at.FirstOffset = a.ProducerID, a.FirstOffset
						rp.AbortedTransactions = append(rp.AbortedTransactions, at)
					}
				}
			}
			i++
			rp.ErrorCode = pcode
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
// end, -2 the start) through the request core.
func listOffsets(ctx context.Context, b Backend, req *kmsg.ListOffsetsRequest) *kmsg.ListOffsetsResponse {
	resp := kmsg.NewPtrListOffsetsResponse()
	var in []request.ListOffsetsPartition
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			in = append(in, request.ListOffsetsPartition{Topic: t.Topic, Partition: p.Partition, Timestamp: p.Timestamp})
		}
	}
	var results []request.ListOffsetsResult
	var code int16
	if len(in) > 0 {
		var err error
		results, err = b.ListOffsets(ctx, in)
		code, _ = coreError(err)
		if err == nil && len(results) != len(in) {
			code = kerr.UnknownServerError.Code
		}
	}
	i := 0
	for _, t := range req.Topics {
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewListOffsetsResponseTopicPartition()
			rp.Partition = p.Partition
			rp.Timestamp, rp.Offset, rp.LeaderEpoch = -1, -1, -1
			pcode := code
			if pcode == 0 {
				r := results[i]
				if pcode, _ = coreError(r.Err); pcode == 0 {
					rp.Offset, rp.LeaderEpoch = r.Offset, r.LeaderEpoch
					if p.Timestamp >= 0 {
						rp.Timestamp = r.Timestamp
					}
				}
			}
			i++
			rp.ErrorCode = pcode
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// initProducerID gives an idempotent producer its id and epoch, or bumps
// the epoch of the id it names (KIP-360); with a transactional id it is
// the transaction coordinator's (initTxnProducer, transactions.go).
func initProducerID(ctx context.Context, b Backend, req *kmsg.InitProducerIDRequest) *kmsg.InitProducerIDResponse {
	resp := kmsg.NewPtrInitProducerIDResponse()
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		return initTxnProducer(ctx, b, req)
	}
	in := request.InitProducerIDRequest{ProducerID: -1}
	if req.Version >= 3 && req.ProducerID >= 0 {
		in.ProducerID, in.ProducerEpoch = req.ProducerID, int32(req.ProducerEpoch)
	}
	out, err := b.InitProducerID(ctx, in)
	if err != nil {
		resp.ErrorCode, _ = coreError(err)
		return resp
	}
	resp.ProducerID, resp.ProducerEpoch = out.ProducerID, out.ProducerEpoch
	return resp
}
