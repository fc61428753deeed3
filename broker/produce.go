package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/request"
)

const defaultProduceTimeout = request.DefaultProduceTimeout

// producerService implements quire.v1.Producer: a translation of
// quire.v1 to and from the request core's Produce.
type producerService struct {
	quirev1.UnimplementedProducerServer
	b *Broker
}

func produceTimeout(ms int32) time.Duration {
	if ms <= 0 {
		return defaultProduceTimeout
	}
	return time.Duration(ms) * time.Millisecond
}

// produceRequest is req as the core takes it: acks -1 when unset, and
// routed to the leaders when a client sent it (route).
func produceRequest(req *quirev1.ProduceRequest, route bool, received time.Time) *request.ProduceRequest {
	acks := int32(-1)
	if req.OptionalAcks != nil {
		acks = req.GetAcks()
	}
	out := &request.ProduceRequest{Acks: acks, Timeout: produceTimeout(req.TimeoutMs), Route: route, Received: received,
		Partitions: make([]request.ProducePartition, len(req.Partitions)), TransactionalID: req.TransactionalId, VerifyPartitions: req.VerifyPartitions}
	for i, p := range req.Partitions {
		out.Partitions[i] = request.ProducePartition{Topic: p.Topic, Partition: p.Partition, Records: p.Records}
	}
	return out
}

// produceResponse is the core's answer as quire.v1's.
func produceResponse(correlationID int64, results []request.ProduceResult) *quirev1.ProduceResponse {
	resp := &quirev1.ProduceResponse{CorrelationId: correlationID, Partitions: make([]*quirev1.PartitionProduceResult, len(results))}
	for i, r := range results {
		resp.Partitions[i] = &quirev1.PartitionProduceResult{Topic: r.Topic, Partition: r.Partition, BaseOffset: r.BaseOffset, LastOffset: r.LastOffset,
			LogAppendTimeMs: r.LogAppendTime, LogStartOffset: r.LogStartOffset, Error: toError(r.Err)}
	}
	return resp
}

// Produce appends through the core, passing partitions led elsewhere on
// to their leaders unless another broker passed the request on itself.
func (s *producerService) Produce(ctx context.Context, req *quirev1.ProduceRequest) (*quirev1.ProduceResponse, error) {
	in := produceRequest(req, !forwarded(ctx), s.b.queue.Received())
	results, err := s.b.core.Produce(coreContext(ctx), in)
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
	// sender; done is closed once resp is final.
	type slot struct {
		resp *quirev1.ProduceResponse
		done chan struct{}
	}
	slots := make(chan *slot, 256)
	sendErr := make(chan error, 1)
	go func() {
		var err error
		for sl := range slots {
			<-sl.done
			if err == nil && sl.resp != nil {
				err = stream.Send(sl.resp)
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
	closed := make(chan struct{})
	close(closed)
	var m pooledProduce // produce_buf.go
	defer m.release()
	for {
		err := stream.RecvMsg(&m)
		received := s.b.queue.Received()
		if errors.Is(err, io.EOF) {
			return finish(nil)
		}
		if err != nil {
			return finish(err)
		}
		req := &m.req
		in := produceRequest(req, false, received)
		rctx, cancel := context.WithTimeout(ctx, in.Timeout)
		appended, err := s.b.core.Append(rctx, in)
		m.release() // the records are in the log; nothing refers to them
		if err != nil {
			cancel()
			return finish(toStatus(err))
		}
		correlationID := req.CorrelationId
		if !appended.Pending() {
			cancel()
			if in.Acks != 0 {
				slots <- &slot{resp: produceResponse(correlationID, appended.Wait(rctx)), done: closed}
			}
			continue
		}
		sl := &slot{done: make(chan struct{})}
		slots <- sl
		go func() {
			defer close(sl.done)
			defer cancel()
			sl.resp = produceResponse(correlationID, appended.Wait(rctx))
		}()
	}
}

// autoCreateTopic creates topic with the broker's defaults (or finds it
// created by someone else) and waits until this broker's view has it.
func (b *Broker) autoCreateTopic(ctx context.Context, topic string) (metadata.TopicInfo, error) {
	if err := validateTopicName(topic); err != nil {
		return metadata.TopicInfo{}, err
	}
	_, err := b.cluster.fwd.CreateTopic(ctx, metadata.TopicSpec{
		Name:              topic,
		Partitions:        b.cfg.NumPartitions,
		ReplicationFactor: b.cfg.DefaultReplicationFactor,
	})
	if err != nil && !errors.Is(err, metadata.ErrTopicExists) {
		return metadata.TopicInfo{}, fmt.Errorf("auto-create topic %q: %w", topic, err)
	}
	b.logger.Info("auto-created topic", "topic", topic, "partitions", b.cfg.NumPartitions)
	img, err := b.cluster.waitFor(ctx, func(img *metadata.Image) bool { _, ok := img.Topic(topic); return ok })
	if err != nil {
		return metadata.TopicInfo{}, fmt.Errorf("%w: topic %q is being created", ErrLeaderNotAvailable, topic)
	}
	t, _ := img.Topic(topic)
	return t, nil
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

// topicMaxMessageBytes is the largest batch topic t accepts: its
// max.message.bytes, else the broker's message.max.bytes.
func (b *Broker) topicMaxMessageBytes(t metadata.TopicInfo) int {
	if tc, err := b.cfg.topicDefaults().resolve(t.Configs); err == nil {
		return int(tc.MaxMessageBytes)
	}
	return int(b.cfg.MessageMaxBytes)
}
