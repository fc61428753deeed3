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
	"github.com/quirelog/quire/replica"
	"github.com/quirelog/quire/storage"
)

const defaultProduceTimeout = 30 * time.Second

// producerService implements quire.v1.Producer.
type producerService struct {
	quirev1.UnimplementedProducerServer
	b    *Broker
	pids *producerIDs // produce_ids.go
}

// pendingAck is an acks=all append waiting to be on every in-sync
// replica.
type pendingAck struct {
	part   *replica.Partition
	append replica.AppendResult
	result *quirev1.PartitionProduceResult
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

func (s *producerService) Produce(ctx context.Context, req *quirev1.ProduceRequest) (*quirev1.ProduceResponse, error) {
	acks, err := checkProduceRequest(req) // validate.go
	if err != nil {
		return nil, toStatus(err)
	}
	ctx, cancel := context.WithTimeout(ctx, produceTimeout(req.TimeoutMs))
	defer cancel()
	received := s.b.queue.Received()
	var fws []forward
	resp, pending := s.b.appendPartitions(ctx, req, acks, received, &fws)
	s.b.runForwards(ctx, fws, acks)
	s.b.awaitAcks(ctx, pending)
	if acks == 0 {
		return &quirev1.ProduceResponse{CorrelationId: req.CorrelationId}, nil
	}
	return resp, nil
}

// ProduceStream pipelines produce requests: appends happen in arrival
// order, and a request whose acks=all wait is pending does not hold up the
// appends of the requests behind it. Responses go out in request order
// (so in order within each partition); acks=0 requests get none.
func (s *producerService) ProduceStream(stream quirev1.Producer_ProduceStreamServer) error {
	ctx := stream.Context()
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
		acks, err := checkProduceRequest(req) // validate.go
		if err != nil {
			return finish(toStatus(err))
		}
		rctx, cancel := context.WithTimeout(ctx, produceTimeout(req.TimeoutMs))
		resp, pending := s.b.appendPartitions(rctx, req, acks, received, nil)
		m.release() // the records are in the log; nothing refers to them
		if acks == 0 {
			resp = nil
		}
		if len(pending) == 0 {
			cancel()
			if resp != nil {
				slots <- &slot{resp: resp, done: closed}
			}
			continue
		}
		sl := &slot{resp: resp, done: make(chan struct{})}
		slots <- sl
		go func() {
			defer close(sl.done)
			defer cancel()
			s.b.awaitAcks(rctx, pending)
		}()
	}
}

// appendPartitions appends every partition of req and returns the
// response with the acks=all appends still to be confirmed. With fws, a
// partition led by another broker is queued there to be passed on
// (route.go) instead of answered NOT_LEADER_OR_FOLLOWER.
func (b *Broker) appendPartitions(ctx context.Context, req *quirev1.ProduceRequest, acks int32, received time.Time, fws *[]forward) (*quirev1.ProduceResponse, []pendingAck) {
	resp := &quirev1.ProduceResponse{
		CorrelationId: req.CorrelationId,
		Partitions:    make([]*quirev1.PartitionProduceResult, 0, len(req.Partitions)),
	}
	var pending []pendingAck
	for _, pr := range req.Partitions {
		res := &quirev1.PartitionProduceResult{Topic: pr.Topic, Partition: pr.Partition, BaseOffset: -1, LastOffset: -1, LogAppendTimeMs: -1, LogStartOffset: -1}
		resp.Partitions = append(resp.Partitions, res)
		pa, err := b.appendOne(ctx, pr.Topic, pr.Partition, pr.Records, acks, received, res)
		if err != nil {
			if fws == nil || !b.maybeForward(ctx, err, pr.Records, res, fws) {
				res.Error = toError(err)
			}
			continue
		}
		if acks == -1 {
			pending = append(pending, pa)
		}
	}
	return resp, pending
}

// appendOne appends raw batches to one partition and fills res. The
// returned pendingAck is what an acks=all caller waits on. The time from
// received (zero: not timed) to the start of the append is the produce
// queue time.
func (b *Broker) appendOne(ctx context.Context, topic string, p int32, batches []byte, acks int32, received time.Time, res *quirev1.PartitionProduceResult) (pendingAck, error) {
	if len(batches) == 0 {
		return pendingAck{}, fmt.Errorf("%w: %s-%d: no records", ErrInvalidRequest, topic, p)
	}
	if acks != -1 {
		if err := checkIdempotentAcks(topic, p, batches, acks); err != nil {
			return pendingAck{}, err
		}
	}
	part, err := b.leaderPartition(ctx, topic, p, true)
	if err != nil {
		return pendingAck{}, err
	}
	if b.cluster.sessionLost() {
		// Cut off from the controller past the session timeout: another
		// broker leads this partition by now, or is about to.
		return pendingAck{}, fmt.Errorf("%w: %s-%d: this broker has not reached the controller for broker.session.timeout.ms and may have been replaced as leader",
			ErrLeaderNotAvailable, topic, p)
	}
	// A retry of batches already written (info.Duplicate) comes back with
	// the original offsets; the caller's AwaitReplicated then waits for the
	// HW to pass the original's last offset at this leader epoch, so a
	// retry of a batch still in flight gets its outcome, and one whose
	// original is lost with a leadership change gets NOT_LEADER, never a
	// success for records that may not survive.
	info, err := part.Append(batches, acks)
	if err != nil {
		return pendingAck{}, err
	}
	b.queue.ObserveProduce(received, info.Started)
	res.BaseOffset, res.LastOffset = info.FirstOffset, info.LastOffset
	if info.LogAppendTime > 0 {
		res.LogAppendTimeMs = info.LogAppendTime
	}
	res.LogStartOffset = info.LogStartOffset
	return pendingAck{part: part, append: info, result: res}, nil
}

// awaitAcks waits until each acks=all append is below the HW, turning
// those that do not make it in time into errors.
func (b *Broker) awaitAcks(ctx context.Context, pending []pendingAck) {
	for _, pa := range pending {
		if err := b.awaitReplicated(ctx, pa); err != nil {
			// Appended, then not known to be committed: the records may
			// yet be read, or never (see Error.outcome_unknown).
			pa.result.Error = toError(err)
			pa.result.Error.OutcomeUnknown = true
		}
	}
}

// awaitReplicated waits for one acks=all append to be committed, but not
// past the moment this broker's session with the controller runs out
// (broker.session.timeout.ms after the last answered heartbeat): a leader
// cut off from the controller has been, or is about to be, replaced, and
// its followers may never fetch again. Held until the produce timeout,
// the answer would keep the client on this broker long after the
// partition moved; answered now (NOT_LEADER_OR_FOLLOWER, no leader hint,
// outcome unknown) the client looks for the new leader.
func (b *Broker) awaitReplicated(ctx context.Context, pa pendingAck) error {
	for {
		until, ok := b.cluster.sessionDeadline()
		if !ok {
			return pa.part.AwaitReplicated(ctx, pa.append)
		}
		wctx, cancel := context.WithDeadline(ctx, until)
		err := pa.part.AwaitReplicated(wctx, pa.append)
		cancel()
		if err == nil || ctx.Err() != nil || wctx.Err() == nil {
			return err
		}
		// The session deadline passed: lost, or renewed meanwhile.
		if b.cluster.sessionLost() {
			return notLeader(pa.part.Topic(), pa.part.ID(), -1, -1)
		}
	}
}

// leaderPartition finds the replica this broker leads for topic-p. With
// autoCreate and auto.create.topics.enable, an unknown topic is created
// with the broker's defaults first.
func (b *Broker) leaderPartition(ctx context.Context, topic string, p int32, autoCreate bool) (*replica.Partition, error) {
	if part, ok := b.rm.Partition(topic, p); ok {
		return part, nil
	}
	img := b.cluster.image()
	t, ok := img.Topic(topic)
	if !ok {
		if !autoCreate || !b.cfg.AutoCreateTopicsEnable {
			return nil, unknownTopic(topic)
		}
		var err error
		if t, err = b.autoCreateTopic(ctx, topic); err != nil {
			return nil, err
		}
		if part, ok := b.rm.Partition(topic, p); ok {
			return part, nil
		}
	}
	if p < 0 || int(p) >= len(t.Partitions) {
		return nil, invalidPartition(topic, p, len(t.Partitions))
	}
	pi := t.Partitions[p]
	if pi.Leader < 0 {
		return nil, fmt.Errorf("%w: %s-%d has no leader", ErrLeaderNotAvailable, topic, p)
	}
	if pi.Leader != b.cfg.NodeID {
		return nil, notLeader(topic, p, pi.Leader, pi.LeaderEpoch)
	}
	// Led here by the image, but the replica is not open yet.
	return nil, fmt.Errorf("%w: %s-%d is still being opened", ErrLeaderNotAvailable, topic, p)
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
	ctx, cancel := context.WithTimeout(ctx, produceTimeout(req.TimeoutMs))
	defer cancel()
	t, ok := b.cluster.image().Topic(req.Topic)
	if !ok {
		if !b.cfg.AutoCreateTopicsEnable {
			return nil, toStatus(unknownTopic(req.Topic))
		}
		if t, err = b.autoCreateTopic(ctx, req.Topic); err != nil {
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
	var pending []pendingAck
	var fws []forward
	partResults := map[int32]*quirev1.PartitionProduceResult{}
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
		res := &quirev1.PartitionProduceResult{Topic: req.Topic, Partition: p}
		partResults[p] = res
		pa, err := b.appendOne(ctx, req.Topic, p, batch, acks, received, res)
		if err != nil {
			if !b.maybeForward(ctx, err, batch, res, &fws) {
				res.Error = toError(err)
			}
			continue
		}
		if acks == -1 {
			pending = append(pending, pa)
		}
	}
	b.runForwards(ctx, fws, acks)
	b.awaitAcks(ctx, pending)
	for p, idx := range byPart {
		res := partResults[p]
		if res == nil {
			continue // every record of p failed on its own above
		}
		for j, i := range idx {
			rr := &quirev1.RecordResult{Partition: p, Offset: -1, TimestampMs: req.Records[i].TimestampMs, Error: res.Error}
			if rr.TimestampMs == 0 {
				rr.TimestampMs = now
			}
			if res.LogAppendTimeMs > 0 {
				rr.TimestampMs = res.LogAppendTimeMs
			}
			if res.Error == nil && res.BaseOffset >= 0 {
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
