package service

import (
	"context"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/request"
)

const (
	// maxSendBytes is the gRPC server's send limit (grpc.MaxSendMsgSize).
	maxSendBytes          = request.MaxSendBytes
	maxFetchResponseBytes = request.MaxFetchResponseBytes
	defaultMaxRecords     = 500 // max.poll.records
)

// consumerService implements quire.v1.Consumer.
type consumerService struct {
	quirev1.UnimplementedConsumerServer
	b *node
}

// fetchSpec is one partition of a fetch, and fetchResult its answer, as
// the request core has them.
type (
	fetchSpec   = request.FetchPartition
	fetchResult = request.FetchResult
)

// fetch reads every partition through the core, long-polling until
// minBytes are available or maxWait passes, for a caller the gRPC
// interceptor (or the Subscribe stream's own check) authorized; pooled
// reads into buffers from internal/fetchbuf.
func (b *node) fetch(ctx context.Context, specs []fetchSpec, received time.Time, maxWait time.Duration, minBytes, maxBytes int, pooled bool, isolation request.Isolation) []fetchResult {
	return b.core.Poll(ctx, &request.FetchRequest{MaxWait: maxWait, MinBytes: minBytes, MaxBytes: maxBytes, Partitions: specs, Pooled: pooled, Received: received,
		Isolation: isolation})
}

func (s *consumerService) Fetch(ctx context.Context, req *quirev1.FetchRequest) (*quirev1.FetchResponse, error) {
	if err := checkFetchRequest(req); err != nil { // validate.go
		return nil, toStatus(err)
	}
	// Under withPooledFetch (fetch_buf.go) the partitions are read into
	// pooled buffers, sent from there and given back once written.
	hold := unaryFetchHold(ctx)
	results, err := s.b.core.Fetch(coreContext(ctx), &request.FetchRequest{MaxWait: time.Duration(req.MaxWaitMs) * time.Millisecond,
		MinBytes: int(req.MinBytes), MaxBytes: int(req.MaxBytes), Partitions: fetchSpecs(req), Received: s.b.queue.Received(),
		Isolation: request.Isolation(req.IsolationLevel), Pooled: hold != nil})
	if err != nil {
		return nil, toStatus(err)
	}
	resp := fetchResponse(results) // fetch_stream.go
	if hold != nil {
		msg := &pooledFetch{resp: resp, bufs: make([]*[]byte, len(results))}
		for i := range results {
			msg.bufs[i] = results[i].Buf
		}
		hold.keep(msg)
	}
	return resp, nil
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
	// Read by the leader, wherever it is (passed on once), and decoded
	// here.
	spec := fetchSpec{Topic: req.Topic, Partition: req.Partition, Offset: req.Offset, MaxBytes: int(req.MaxBytes)}
	r := s.b.core.PollAnywhere(ctx, &request.FetchRequest{MaxWait: time.Duration(req.MaxWaitMs) * time.Millisecond, Partitions: []fetchSpec{spec},
		Route: !forwarded(ctx), Received: s.b.queue.Received(), Isolation: request.Isolation(req.IsolationLevel)})[0]
	if r.Err != nil {
		return nil, toStatus(r.Err)
	}
	d, err := decodeFetched(r, maxRecords, req.Format)
	if err != nil {
		return nil, toStatus(err)
	}
	return &quirev1.FetchRecordsResponse{Records: d.records, NextOffset: d.next, HighWatermark: r.HighWatermark, LogStartOffset: r.LogStartOffset,
		LastStableOffset: r.LastStableOffset}, nil
}

func (s *consumerService) ListOffsets(ctx context.Context, req *quirev1.ListOffsetsRequest) (*quirev1.ListOffsetsResponse, error) {
	in := make([]request.ListOffsetsPartition, len(req.Partitions))
	for i, p := range req.Partitions {
		in[i] = request.ListOffsetsPartition{Topic: p.Topic, Partition: p.Partition, Timestamp: p.TimestampMs}
	}
	out, err := s.b.core.ListOffsets(coreContext(ctx), in)
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &quirev1.ListOffsetsResponse{Partitions: make([]*quirev1.ListOffsetsResult, len(out))}
	for i, r := range out {
		resp.Partitions[i] = &quirev1.ListOffsetsResult{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, TimestampMs: r.Timestamp,
			LeaderEpoch: r.LeaderEpoch, Error: toError(r.Err)}
	}
	return resp, nil
}
