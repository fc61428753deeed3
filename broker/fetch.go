package broker

import (
	"context"
	"fmt"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/replica"
	"github.com/quirelog/quire/storage"
)

const (
	defaultFetchMaxBytes = 52428800 // fetch.max.bytes
	// maxSendBytes is the gRPC server's send limit (grpc.MaxSendMsgSize).
	maxSendBytes = 64 << 20
	// maxFetchResponseBytes caps a fetch's max_bytes: a response may pass
	// its cap by one batch (at least one batch is always returned), and
	// must still fit under maxSendBytes, or the client would retry the
	// same too-large fetch for ever.
	maxFetchResponseBytes = maxSendBytes / 2
	defaultMaxRecords     = 500 // max.poll.records
	maxFetchWait          = 5 * time.Minute
)

// consumerService implements quire.v1.Consumer.
type consumerService struct {
	quirev1.UnimplementedConsumerServer
	b *Broker
}

// fetchSpec is one partition of a fetch.
type fetchSpec struct {
	topic        string
	partition    int32
	offset       int64
	maxBytes     int
	currentEpoch *int32
	pooled       bool // read into a buffer from internal/fetchbuf
}

// fetchResult is one partition's answer.
type fetchResult struct {
	spec    fetchSpec
	batches []byte
	hw      int64
	leo     int64
	start   int64
	err     error
	buf     *[]byte // the fetchbuf buffer holding batches, if any
}

// fetch reads every partition, long-polling until minBytes are available or
// maxWait passes. It registers with each partition before reading, so an
// append between the read and the wait is never missed. The time from
// received (zero: not timed) to the first read of each partition is the
// fetch queue time.
func (b *Broker) fetch(ctx context.Context, specs []fetchSpec, received time.Time, maxWait time.Duration, minBytes, maxBytes int) []fetchResult {
	if maxBytes <= 0 {
		maxBytes = defaultFetchMaxBytes
	}
	maxBytes = min(maxBytes, maxFetchResponseBytes)
	maxWait = min(max(maxWait, 0), maxFetchWait)
	wake := make(chan struct{}, 1)
	var watched []*replica.Partition
	defer func() {
		for _, p := range watched {
			p.Unwatch(wake)
		}
	}()
	var timer <-chan time.Time
	if maxWait > 0 {
		t := time.NewTimer(maxWait)
		defer t.Stop()
		timer = t.C
	}
	for first := true; ; first = false {
		if !first {
			received = time.Time{}
		}
		results, total, anyErr := b.readAll(specs, maxBytes, received, first, &watched, wake)
		// As Kafka: no wait, min_bytes 0, or enough data answer at once.
		if maxWait == 0 || total >= minBytes || anyErr {
			return results
		}
		releaseFetchBufs(results)
		select {
		case <-wake:
		case <-timer:
			return b.readAllNoWatch(specs, maxBytes)
		case <-ctx.Done():
			return results
		}
	}
}

func (b *Broker) readAllNoWatch(specs []fetchSpec, maxBytes int) []fetchResult {
	results, _, _ := b.readAll(specs, maxBytes, time.Time{}, false, nil, nil)
	return results
}

// readAll reads each partition once. On the first pass it registers wake
// with every partition found.
func (b *Broker) readAll(specs []fetchSpec, maxBytes int, received time.Time, register bool, watched *[]*replica.Partition, wake chan struct{}) ([]fetchResult, int, bool) {
	results := make([]fetchResult, len(specs))
	total := 0
	anyErr := false
	for i, s := range specs {
		r := &results[i]
		r.spec, r.hw, r.leo, r.start = s, -1, -1, -1
		part, err := b.leaderPartition(context.Background(), s.topic, s.partition, false)
		if err != nil {
			r.err, anyErr = err, true
			continue
		}
		if register && watched != nil {
			part.Watch(wake)
			*watched = append(*watched, part)
		}
		if err := part.CheckLeaderEpoch(s.currentEpoch); err != nil {
			r.err, anyErr = err, true
			continue
		}
		limit := replica.ReadLimit(s.maxBytes, maxBytes, total)
		if limit <= 0 {
			r.hw, r.leo, r.start = part.HighWatermark(), part.LogEndOffset(), part.LogStartOffset()
			continue
		}
		var res storage.ReadResult
		var hw int64
		b.queue.ObserveFetch(received)
		if s.pooled {
			res, hw, r.buf, err = readPooled(part, s.offset, limit)
		} else {
			res, hw, err = part.Read(s.offset, limit)
		}
		r.hw, r.leo, r.start = hw, part.LogEndOffset(), part.LogStartOffset()
		if err != nil {
			r.err, anyErr = err, true
			continue
		}
		r.batches = res.Batches
		total += len(res.Batches)
	}
	return results, total, anyErr
}

func (s *consumerService) Fetch(ctx context.Context, req *quirev1.FetchRequest) (*quirev1.FetchResponse, error) {
	if err := checkFetchRequest(req); err != nil { // validate.go
		return nil, toStatus(err)
	}
	results := s.b.fetch(ctx, fetchSpecs(req), s.b.queue.Received(), time.Duration(req.MaxWaitMs)*time.Millisecond, int(req.MinBytes), int(req.MaxBytes))
	return fetchResponse(results), nil // fetch_stream.go
}

// FetchRecords is Fetch for one partition, decoded. Errors are whole-call
// statuses. With max_wait_ms it waits for at least one record.
func (s *consumerService) FetchRecords(ctx context.Context, req *quirev1.FetchRecordsRequest) (*quirev1.FetchRecordsResponse, error) {
	if err := checkFetchRecords(req); err != nil { // validate.go
		return nil, toStatus(err)
	}
	maxRecords := int(req.MaxRecords)
	if maxRecords == 0 {
		maxRecords = defaultMaxRecords
	}
	spec := fetchSpec{topic: req.Topic, partition: req.Partition, offset: req.Offset, maxBytes: int(req.MaxBytes)}
	results := s.b.fetch(ctx, []fetchSpec{spec}, s.b.queue.Received(), time.Duration(req.MaxWaitMs)*time.Millisecond, 1, 0)
	r := results[0]
	if r.err != nil {
		if resp, ok, err := s.b.forwardFetchRecords(ctx, req, r.err); ok {
			return resp, err
		}
		return nil, toStatus(r.err)
	}
	d, err := decodeFetched(r, maxRecords, req.Format)
	if err != nil {
		return nil, toStatus(err)
	}
	return &quirev1.FetchRecordsResponse{Records: d.records, NextOffset: d.next, HighWatermark: r.hw, LogStartOffset: r.start}, nil
}

func (s *consumerService) ListOffsets(ctx context.Context, req *quirev1.ListOffsetsRequest) (*quirev1.ListOffsetsResponse, error) {
	if len(req.Partitions) == 0 {
		return nil, toStatus(fmt.Errorf("%w: no partitions", ErrInvalidRequest))
	}
	resp := &quirev1.ListOffsetsResponse{Partitions: make([]*quirev1.ListOffsetsResult, len(req.Partitions))}
	for i, p := range req.Partitions {
		res := &quirev1.ListOffsetsResult{Topic: p.Topic, Partition: p.Partition, Offset: -1, TimestampMs: -1, LeaderEpoch: -1}
		resp.Partitions[i] = res
		if err := s.b.listOffset(ctx, p, res); err != nil {
			res.Error = toError(err)
		}
	}
	return resp, nil
}

func (b *Broker) listOffset(ctx context.Context, p *quirev1.ListOffsetsPartition, res *quirev1.ListOffsetsResult) error {
	part, err := b.leaderPartition(ctx, p.Topic, p.Partition, false)
	if err != nil {
		return err
	}
	st := part.State()
	res.LeaderEpoch = st.LeaderEpoch
	if p.TimestampMs != -2 && b.cluster.sessionLost() {
		// Cut off from the controller, or not yet caught up since: the
		// leadership and HW it knows may be out of date.
		return fmt.Errorf("%w: %s-%d: this broker's metadata may be out of date (cut off from the controller); ask again",
			replica.ErrOffsetNotAvailable, p.Topic, p.Partition)
	}
	if p.TimestampMs != -2 && !part.HighWatermarkEstablished() {
		return fmt.Errorf("%w: %s-%d: the leader elected at epoch %d has not yet established its high watermark (%d); ask again",
			replica.ErrOffsetNotAvailable, p.Topic, p.Partition, st.LeaderEpoch, st.HighWatermark)
	}
	switch ts := p.TimestampMs; {
	case ts == -1:
		res.Offset = st.HighWatermark
	case ts == -2:
		res.Offset = part.LogStartOffset()
	case ts < 0:
		return fmt.Errorf("%w: timestamp %d (want -1, -2 or milliseconds since the epoch)", ErrInvalidRequest, ts)
	default:
		off, found, ok, err := part.OffsetForTimestamp(ts)
		if err != nil {
			return err
		}
		if ok && off < st.HighWatermark {
			res.Offset, res.TimestampMs = off, found
		}
	}
	return nil
}
