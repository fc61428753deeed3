package service

import (
	"context"
	"fmt"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/request"
)

// DeleteRecords deletes the records below an offset of each partition
// named (Kafka's DeleteRecords) through the request core, which passes
// the partitions led elsewhere on to their leaders unless another broker
// passed this request on itself.
func (s *adminService) DeleteRecords(ctx context.Context, req *quirev1.DeleteRecordsRequest) (*quirev1.DeleteRecordsResponse, error) {
	if req.TimeoutMs < 0 {
		return nil, toStatus(fmt.Errorf("%w: timeout_ms %d is negative", ErrInvalidRequest, req.TimeoutMs))
	}
	in := &request.DeleteRecordsRequest{Timeout: time.Duration(req.TimeoutMs) * time.Millisecond, Route: !forwarded(ctx),
		Partitions: make([]request.DeleteRecordsPartition, len(req.Partitions))}
	for i, p := range req.Partitions {
		in.Partitions[i] = request.DeleteRecordsPartition{Topic: p.Topic, Partition: p.Partition, Offset: p.Offset}
	}
	out, err := s.b.core.DeleteRecords(coreContext(ctx), in)
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &quirev1.DeleteRecordsResponse{Partitions: make([]*quirev1.DeleteRecordsResult, len(out))}
	for i, r := range out {
		resp.Partitions[i] = &quirev1.DeleteRecordsResult{Topic: r.Topic, Partition: r.Partition, LowWatermark: r.LowWatermark, Error: toError(r.Err)}
	}
	return resp, nil
}
