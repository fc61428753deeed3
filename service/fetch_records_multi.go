package service

import (
	"context"
	"fmt"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/request"
)

// FetchRecordsMulti is FetchRecords for many partitions: one long poll
// (the request core's PollAnywhere: partitions led elsewhere are read by
// their leaders, first every broker without waiting; if none has a
// record, all wait at once and the first answer with a record or an error
// ends the others' waits), the records decoded here, errors per
// partition.
func (s *consumerService) FetchRecordsMulti(ctx context.Context, req *quirev1.FetchRecordsMultiRequest) (*quirev1.FetchRecordsMultiResponse, error) {
	if err := checkFetchRecordsMulti(req); err != nil {
		return nil, toStatus(err)
	}
	b := s.b
	maxRecords := int(req.MaxRecords)
	if maxRecords <= 0 {
		maxRecords = defaultMaxRecords
	}
	wait := time.Duration(req.MaxWaitMs) * time.Millisecond

	specs := make([]fetchSpec, len(req.Partitions))
	for i, p := range req.Partitions {
		specs[i] = fetchSpec{Topic: p.Topic, Partition: p.Partition, Offset: p.Offset, MaxBytes: int(p.MaxBytes)}
	}
	results := b.core.PollAnywhere(ctx, &request.FetchRequest{MaxWait: wait, MaxBytes: int(req.MaxBytes), Partitions: specs,
		Route: !forwarded(ctx), Received: b.queue.Received(), Isolation: request.Isolation(req.IsolationLevel)})
	answers := make([]*quirev1.FetchRecordsPartitionResult, len(req.Partitions))
	left := maxRecords
	for i, r := range results {
		a := &quirev1.FetchRecordsPartitionResult{Topic: r.Topic, Partition: r.Partition,
			NextOffset: r.Offset, HighWatermark: r.HighWatermark, LogStartOffset: r.LogStartOffset, LastStableOffset: r.LastStableOffset}
		answers[i] = a
		err := r.Err
		if err == nil {
			var d decodedPartition
			if d, err = decodeFetched(r, max(left, 0), req.Format); err == nil {
				a.Records, a.NextOffset = d.records, d.next
				left -= len(d.records)
			}
		}
		if err != nil {
			a.Error, a.HighWatermark, a.LogStartOffset = toError(err), -1, -1
		}
	}
	trimRecords(answers, maxRecords)
	return &quirev1.FetchRecordsMultiResponse{Partitions: answers}, nil
}

// checkFetchRecordsMulti rejects what is wrong with the request as a whole.
func checkFetchRecordsMulti(req *quirev1.FetchRecordsMultiRequest) error {
	if len(req.Partitions) == 0 {
		return fmt.Errorf("%w: no partitions", ErrInvalidRequest)
	}
	if err := checkRecordFormat(req.Format); err != nil {
		return err
	}
	if err := notNegative(field{"max_wait_ms", int64(req.MaxWaitMs)}, field{"max_records", int64(req.MaxRecords)},
		field{"max_bytes", int64(req.MaxBytes)}); err != nil { // validate.go
		return err
	}
	type key struct {
		topic string
		part  int32
	}
	seen := make(map[key]bool, len(req.Partitions))
	for _, p := range req.Partitions {
		k := key{p.Topic, p.Partition}
		if seen[k] {
			return fmt.Errorf("%w: partition %s-%d named twice", ErrInvalidRequest, p.Topic, p.Partition)
		}
		seen[k] = true
		if err := partitionMaxBytes(p.Topic, p.Partition, p.MaxBytes); err != nil { // validate.go
			return err
		}
	}
	return nil
}

// trimRecords keeps at most maxRecords records in all, filling partitions
// in request order; a partition cut short fetches next from the first
// record dropped.
func trimRecords(answers []*quirev1.FetchRecordsPartitionResult, maxRecords int) {
	left := maxRecords
	for _, a := range answers {
		if len(a.Records) > left {
			keep := max(left, 0)
			a.NextOffset = a.Records[keep].Offset
			a.Records = a.Records[:keep]
		}
		left -= len(a.Records)
	}
}
