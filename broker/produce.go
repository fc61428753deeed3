package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/partitioner"
	"github.com/quirelog/quire/record"
	"github.com/quirelog/quire/request"
	"github.com/quirelog/quire/storage"
)

const defaultProduceTimeout = request.DefaultProduceTimeout

// producerService implements quire.v1.Producer: a translation of
// quire.v1 to and from the request core's Produce.
type producerService struct {
	quirev1.UnimplementedProducerServer
	b *Broker
}

func parseAcks(set bool, acks int32) (int32, error) {
	if !set {
		return -1, nil
	}
	switch acks {
	case -1, 0, 1:
		return acks, nil
	}
	return 0, fmt.Errorf("%w: acks must be -1 (all), 0 or 1, not %d", ErrInvalidRequiredAcks, acks)
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
		Partitions: make([]request.ProducePartition, len(req.Partitions))}
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
// per partition and appends them.
func (s *producerService) ProduceRecords(ctx context.Context, req *quirev1.ProduceRecordsRequest) (*quirev1.ProduceRecordsResponse, error) {
	received := s.b.queue.Received()
	b := s.b
	acks, err := parseAcks(req.OptionalAcks != nil, req.GetAcks())
	if err != nil {
		return nil, toStatus(err)
	}
	if len(req.Records) == 0 {
		return nil, toStatus(fmt.Errorf("%w: no records", ErrInvalidRequest))
	}
	cctx, cancel := context.WithTimeout(ctx, produceTimeout(req.TimeoutMs))
	defer cancel()
	t, ok := b.cluster.image().Topic(req.Topic)
	if !ok {
		if !b.cfg.AutoCreateTopicsEnable {
			return nil, toStatus(unknownTopic(req.Topic))
		}
		if t, err = b.autoCreateTopic(cctx, req.Topic); err != nil {
			return nil, toStatus(err)
		}
	}
	n := int32(len(t.Partitions))
	now := b.clock.Now().UnixMilli()
	idem, err := parseRecordsProducer(req, acks)
	if err != nil {
		return nil, toStatus(err)
	}

	// Choose partitions, keeping request order within each.
	parts := make([]int32, len(req.Records))
	var order []int32
	byPart := map[int32][]int{}
	for i, r := range req.Records {
		var p int32
		key := recordKey(r)
		switch {
		case r.OptionalPartition != nil:
			p = r.GetPartition()
			if p < 0 || p >= n {
				return nil, toStatus(invalidPartition(req.Topic, p, int(n)))
			}
		case key != nil:
			p = partitioner.KeyPartition(key, n)
		default:
			p = b.sticky.Partition(req.Topic, n, len(recordValue(r))+len(key))
		}
		parts[i] = p
		if _, seen := byPart[p]; !seen {
			order = append(order, p)
		}
		byPart[p] = append(byPart[p], i)
	}

	results := make([]*quirev1.RecordResult, len(req.Records))
	bld := record.NewBuilder(record.None)
	in := &request.ProduceRequest{Acks: acks, Timeout: produceTimeout(req.TimeoutMs), Route: !forwarded(ctx), Received: received}
	limit := b.topicMaxMessageBytes(t)
	for _, p := range order {
		// A record that cannot fit any batch fails alone; the others of
		// the partition go in as many batches as max.message.bytes needs,
		// appended together (contiguous offsets, all or nothing).
		kept := byPart[p][:0:0]
		for _, i := range byPart[p] {
			r := req.Records[i]
			if size := record.HeaderSize + recordSizeBound(r); size > limit {
				if idem.on {
					// Sequences count every record of the request: refuse
					// it whole rather than leave a record out.
					return nil, toStatus(fmt.Errorf("%w: record %d of about %d bytes does not fit a batch of max.message.bytes %d of topic %q",
						storage.ErrRecordTooLarge, i, size, limit, req.Topic))
				}
				results[i] = &quirev1.RecordResult{Partition: p, Offset: -1, TimestampMs: r.TimestampMs, Error: toError(
					fmt.Errorf("%w: a record of about %d bytes does not fit a batch of max.message.bytes %d of topic %q",
						storage.ErrRecordTooLarge, size, limit, req.Topic))}
				continue
			}
			kept = append(kept, i)
		}
		byPart[p] = kept
		if len(kept) == 0 {
			continue
		}
		var batch []byte
		bld.Reset()
		for _, i := range kept {
			r := req.Records[i]
			if bld.Len() > 0 && bld.EstimatedSize()+recordSizeBound(r) > limit {
				batch = append(batch, idem.build(bld)...)
				bld.Reset()
			}
			ts := r.TimestampMs
			if ts == 0 {
				ts = now
			}
			bld.Append(ts, recordKey(r), recordValue(r), recordHeaders(r.Headers))
		}
		batch = append(batch, idem.build(bld)...)
		if err := idem.checkBatches(req.Topic, limit); err != nil {
			return nil, toStatus(err)
		}
		in.Partitions = append(in.Partitions, request.ProducePartition{Topic: req.Topic, Partition: p, Records: batch})
	}
	partResults := map[int32]*request.ProduceResult{}
	if len(in.Partitions) > 0 {
		// The core appends each partition (or has its leader append it)
		// and waits for acks, as for a Produce.
		out, err := b.core.Produce(coreContext(ctx), in)
		if err != nil {
			return nil, toStatus(err)
		}
		for i := range out {
			partResults[out[i].Partition] = &out[i]
		}
	}
	for p, idx := range byPart {
		res := partResults[p]
		if res == nil {
			continue // every record of p failed on its own above
		}
		perr := toError(res.Err)
		for j, i := range idx {
			rr := &quirev1.RecordResult{Partition: p, Offset: -1, TimestampMs: req.Records[i].TimestampMs, Error: perr}
			if rr.TimestampMs == 0 {
				rr.TimestampMs = now
			}
			if res.LogAppendTime > 0 {
				rr.TimestampMs = res.LogAppendTime
			}
			if res.Err == nil && res.BaseOffset >= 0 {
				rr.Offset = res.BaseOffset + int64(j)
			}
			results[i] = rr
		}
	}
	return &quirev1.ProduceRecordsResponse{Results: results}, nil
}

// recordSizeBound is the most bytes r takes in an uncompressed batch:
// its key, value and headers plus every varint at its longest.
func recordSizeBound(r *quirev1.ProduceRecord) int {
	// length, attributes, timestamp delta, offset delta, key and value
	// lengths, header count.
	n := 5 + 1 + 10 + 5 + 5 + 5 + 5 + len(recordKey(r)) + len(recordValue(r))
	for _, h := range r.Headers {
		n += 10 + len(h.Key) + len(h.Value)
	}
	return n
}

// topicMaxMessageBytes is the largest batch topic t accepts: its
// max.message.bytes, else the broker's message.max.bytes.
func (b *Broker) topicMaxMessageBytes(t metadata.TopicInfo) int {
	if tc, err := b.cfg.topicDefaults().resolve(t.Configs); err == nil {
		return int(tc.MaxMessageBytes)
	}
	return int(b.cfg.MessageMaxBytes)
}
