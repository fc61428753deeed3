package service

import (
	"context"
	"errors"
	"io"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/request"
)

const defaultProduceTimeout = request.DefaultProduceTimeout

// producerService implements quire.v1.Producer: a translation of
// quire.v1 to and from the request core's Produce.
type producerService struct {
	quirev1.UnimplementedProducerServer
	b *node
}

func produceTimeout(ms int32) time.Duration {
	if ms <= 0 {
		return defaultProduceTimeout
	}
	return time.Duration(ms) * time.Millisecond
}

// produceRequest is req as the core takes it: acks -1 when unset, and
// routed to the leaders when a client sent it (route). Its partitions
// reuse parts' array (the core keeps neither past Append).
func produceRequest(req *quirev1.ProduceRequest, parts []request.ProducePartition, route bool, received time.Time) request.ProduceRequest {
	acks := int32(-1)
	if req.OptionalAcks != nil {
		acks = req.GetAcks()
	}
	parts = parts[:0]
	for _, p := range req.Partitions {
		parts = append(parts, request.ProducePartition{Topic: p.Topic, Partition: p.Partition, Records: p.Records})
	}
	return request.ProduceRequest{Acks: acks, Timeout: produceTimeout(req.TimeoutMs), Route: route, Received: received, Partitions: parts,
		TransactionalID: req.TransactionalId, VerifyPartitions: req.VerifyPartitions}
}

// produceResponse is the core's answer as quire.v1's: the answer to one
// partition (most requests) in one allocation.
func produceResponse(correlationID int64, results []request.ProduceResult) *quirev1.ProduceResponse {
	var resp *quirev1.ProduceResponse
	var rs []quirev1.PartitionProduceResult
	if len(results) == 1 {
		one := &struct {
			resp quirev1.ProduceResponse
			ptr  [1]*quirev1.PartitionProduceResult
			res  [1]quirev1.PartitionProduceResult
		}{}
		resp, rs = &one.resp, one.res[:]
		resp.Partitions = one.ptr[:]
	} else {
		resp = &quirev1.ProduceResponse{Partitions: make([]*quirev1.PartitionProduceResult, len(results))}
		rs = make([]quirev1.PartitionProduceResult, len(results))
	}
	resp.CorrelationId = correlationID
	for i, r := range results {
		pr := &rs[i]
		pr.Topic, pr.Partition, pr.BaseOffset, pr.LastOffset = r.Topic, r.Partition, r.BaseOffset, r.LastOffset
		pr.LogAppendTimeMs, pr.LogStartOffset, pr.Error = r.LogAppendTime, r.LogStartOffset, toError(r.Err)
		resp.Partitions[i] = pr
	}
	return resp
}

// Produce appends through the core, passing partitions led elsewhere on
// to their leaders unless another broker passed the request on itself.
func (s *producerService) Produce(ctx context.Context, req *quirev1.ProduceRequest) (*quirev1.ProduceResponse, error) {
	in := produceRequest(req, nil, !forwarded(ctx), s.b.queue.Received())
	results, err := s.b.core.Produce(coreContext(ctx), &in)
	if err != nil {
		return nil, toStatus(err)
	}
	if in.Acks == 0 {
		return &quirev1.ProduceResponse{CorrelationId: req.CorrelationId}, nil
	}
	return produceResponse(req.CorrelationId, results), nil
}

// ProduceStream pipelines produce requests: appends happen in arrival
// order, and a request whose acks=all wait is pending does not hold up the
// appends of the requests behind it. Responses go out in request order
// (so in order within each partition); acks=0 requests get none.
func (s *producerService) ProduceStream(stream quirev1.Producer_ProduceStreamServer) error {
	ctx := coreContext(stream.Context())
	// slots carries each request's response, in request order, to the
	// sender: resp, or the one later gives once acks=all is waited for.
	// start is when the request arrived: each request counts as a
	// Produce call once answered (observeCall).
	type slot struct {
		resp  *quirev1.ProduceResponse
		later chan *quirev1.ProduceResponse
		start time.Time
	}
	slots := make(chan slot, 256)
	sendErr := make(chan error, 1)
	go func() {
		var err error
		for sl := range slots {
			resp := sl.resp
			if sl.later != nil {
				resp = <-sl.later
			}
			if err == nil {
				err = stream.Send(resp)
				s.b.observeCall(quirev1.Producer_Produce_FullMethodName, sl.start, err)
			}
		}
		sendErr <- err
	}()
	finish := func(err error) error {
		close(slots)
		if serr := <-sendErr; err == nil && serr != nil {
			err = serr
		}
		return err
	}
	var m pooledProduce // produce_buf.go
	defer m.release()
	var in request.ProduceRequest // reused, as m is
	for {
		err := stream.RecvMsg(&m)
		received := s.b.queue.Received()
		start := s.b.callStart()
		if errors.Is(err, io.EOF) {
			return finish(nil)
		}
		if err != nil {
			return finish(err)
		}
		req := &m.req
		in = produceRequest(req, in.Partitions, false, received)
		// The request's timeout runs from Append to the end of Wait.
		appended, err := s.b.core.Append(ctx, &in)
		m.release() // the records are in the log; nothing refers to them
		if err != nil {
			err = toStatus(err)
			s.b.observeCall(quirev1.Producer_Produce_FullMethodName, start, err)
			return finish(err)
		}
		correlationID := req.CorrelationId
		if !appended.Pending() {
			if in.Acks != 0 {
				slots <- slot{resp: produceResponse(correlationID, appended.Wait(ctx)), start: start}
			} else {
				// Nothing to answer: done once appended.
				s.b.observeCall(quirev1.Producer_Produce_FullMethodName, start, nil)
			}
			continue
		}
		later := make(chan *quirev1.ProduceResponse, 1)
		slots <- slot{later: later, start: start}
		go func() { later <- produceResponse(correlationID, appended.Wait(ctx)) }()
	}
}

// ProduceRecords partitions plain records on the broker, builds one batch
// per partition and appends them: the request core's ProduceRecords.
func (s *producerService) ProduceRecords(ctx context.Context, req *quirev1.ProduceRecordsRequest) (*quirev1.ProduceRecordsResponse, error) {
	in := &request.ProduceRecordsRequest{Topic: req.Topic, Acks: -1, Timeout: produceTimeout(req.TimeoutMs), ProducerID: -1,
		Route: !forwarded(ctx), Received: s.b.queue.Received(), Records: make([]request.Record, len(req.Records))}
	if req.OptionalAcks != nil {
		in.Acks = req.GetAcks()
	}
	if req.OptionalProducerId != nil {
		in.ProducerID, in.ProducerEpoch, in.BaseSequence = req.GetProducerId(), req.ProducerEpoch, req.BaseSequence
	}
	in.TransactionalID = req.TransactionalId
	for i, r := range req.Records {
		in.Records[i] = request.Record{Key: recordKey(r), Value: recordValue(r), Headers: recordHeaders(r.Headers), Timestamp: r.TimestampMs,
			Partition: r.GetPartition(), HasPartition: r.OptionalPartition != nil}
	}
	out, err := s.b.core.ProduceRecords(coreContext(ctx), in)
	if err != nil {
		return nil, toStatus(err)
	}
	results := make([]*quirev1.RecordResult, len(out))
	for i, r := range out {
		results[i] = &quirev1.RecordResult{Partition: r.Partition, Offset: r.Offset, TimestampMs: r.Timestamp, Error: toError(r.Err)}
	}
	return &quirev1.ProduceRecordsResponse{Results: results}, nil
}
