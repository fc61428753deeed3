package service

import (
	"context"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/record"
	"github.com/quirelog/quire/request"
)

// defaultStreamWait is a FetchStream's long-poll when the request has
// none: a stream never answers "nothing yet" in a tight loop.
const defaultStreamWait = 500 * time.Millisecond

// FetchStream answers the request again and again, each partition moving
// on past the batches of the previous response, until the client goes
// away or a partition fails. Send blocks once the client's flow-control
// window is full, which bounds how far ahead the broker reads.
func (s *consumerService) FetchStream(req *quirev1.FetchRequest, stream quirev1.Consumer_FetchStreamServer) error {
	// Each response counts as a Fetch call (observeCall): the first from
	// the request's arrival, the next ones from the end of the send
	// before, when the stream asks again on its own; a refused request
	// counts once, refused.
	start := s.b.callStart()
	if err := checkFetchRequest(req); err != nil { // validate.go
		err = toStatus(err)
		s.b.observeCall(quirev1.Consumer_Fetch_FullMethodName, start, err)
		return err
	}
	specs := fetchSpecs(req)
	wait := time.Duration(req.MaxWaitMs) * time.Millisecond
	if wait <= 0 {
		wait = defaultStreamWait
	}
	// The stream ends when the broker shuts down (GracefulStop waits for
	// it), the client reconnecting elsewhere or later.
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	go func() {
		select {
		case <-s.b.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	// A stream answers only when there is something new: min_bytes 0
	// (answer at once) would spin out empty responses.
	minBytes := max(int(req.MinBytes), 1)
	// Only the first read answers a request received; the later ones
	// follow on from the stream's own sends.
	received := s.b.queue.Received()
	for {
		results := s.b.fetch(ctx, specs, received, wait, minBytes, int(req.MaxBytes), true, request.Isolation(req.IsolationLevel))
		received = time.Time{}
		select {
		case <-s.b.stop:
			return toStatus(ErrShuttingDown)
		default:
		}
		if ctx.Err() != nil {
			return nil // the client is gone
		}
		// The next offsets first: once sent, the buffers go back to the
		// pool (internal/fetchbuf) and may be reused by any read.
		failed := false
		msg := &pooledFetch{resp: fetchResponse(results), bufs: make([]*[]byte, len(results))}
		for i := range results {
			r := &results[i]
			failed = failed || r.Err != nil
			if len(r.Records) > 0 {
				specs[i].Offset = max(specs[i].Offset, record.NextAfterRead(r.Records))
			}
			msg.bufs[i] = r.Buf
		}
		err := stream.SendMsg(msg)
		s.b.observeCall(quirev1.Consumer_Fetch_FullMethodName, start, err)
		if err != nil {
			return err
		}
		start = s.b.callStart()
		if failed {
			return nil // the client restarts from its own view
		}
	}
}

func fetchSpecs(req *quirev1.FetchRequest) []fetchSpec {
	specs := make([]fetchSpec, len(req.Partitions))
	for i, p := range req.Partitions {
		specs[i] = fetchSpec{Topic: p.Topic, Partition: p.Partition, Offset: p.Offset, MaxBytes: int(p.MaxBytes), CurrentLeaderEpoch: currentLeaderEpoch(p)}
	}
	return specs
}

func fetchResponse(results []fetchResult) *quirev1.FetchResponse {
	resp := &quirev1.FetchResponse{Partitions: make([]*quirev1.FetchPartitionResult, len(results))}
	for i, r := range results {
		resp.Partitions[i] = &quirev1.FetchPartitionResult{
			Topic:          r.Topic,
			Partition:      r.Partition,
			Error:          toError(r.Err),
			HighWatermark:  r.HighWatermark,
			LogEndOffset:   r.LogEndOffset,
			LogStartOffset: r.LogStartOffset,
			Records:        r.Records,
		}
		resp.Partitions[i].LastStableOffset = r.LastStableOffset
		for _, a := range r.Aborted {
			resp.Partitions[i].AbortedTransactions = append(resp.Partitions[i].AbortedTransactions,
				&quirev1.AbortedTransaction{ProducerId: a.ProducerID, FirstOffset: a.FirstOffset})
		}
	}
	return resp
}

// currentLeaderEpoch is p's current_leader_epoch, nil when unset.
func currentLeaderEpoch(p *quirev1.FetchPartition) *int32 {
	if e, ok := p.OptionalCurrentLeaderEpoch.(*quirev1.FetchPartition_CurrentLeaderEpoch); ok {
		return &e.CurrentLeaderEpoch
	}
	return nil
}
