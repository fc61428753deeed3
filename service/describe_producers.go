package service

import (
	"context"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

// DescribeProducers is the request core's (request/cluster.go).
func (s *adminService) DescribeProducers(ctx context.Context, req *quirev1.DescribeProducersRequest) (*quirev1.DescribeProducersResponse, error) {
	ps, err := s.b.core.DescribeProducers(coreContext(ctx), req.Topic, req.Partitions)
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &quirev1.DescribeProducersResponse{Partitions: make([]*quirev1.PartitionProducers, len(ps))}
	for i, p := range ps {
		pp := &quirev1.PartitionProducers{Partition: p.Partition}
		if p.Err != nil {
			pp.Error = toError(p.Err)
		}
		for _, in := range p.Producers {
			pp.Producers = append(pp.Producers, &quirev1.ProducerDescription{
				ProducerId: in.ProducerID, ProducerEpoch: int32(in.ProducerEpoch), LastSequence: in.LastSequence,
				LastTimestampMs: in.LastTimestamp, LastOffset: in.LastOffset,
			})
		}
		resp.Partitions[i] = pp
	}
	return resp, nil
}
