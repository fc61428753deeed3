package broker

import (
	"context"
	"fmt"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/storage"
)

// DescribeProducers lists the idempotent producers of the partitions this
// broker leads, from each log's producer state (KIP-664). A partition led
// elsewhere, or not led by anyone, gets its error in its result; an
// unknown topic or a partition past the topic's count fails the call.
func (s *adminService) DescribeProducers(_ context.Context, req *quirev1.DescribeProducersRequest) (*quirev1.DescribeProducersResponse, error) {
	t, ok := s.b.cluster.image().Topic(req.Topic)
	if !ok {
		return nil, toStatus(unknownTopic(req.Topic))
	}
	parts := req.Partitions
	if len(parts) == 0 {
		for i := range t.Partitions {
			parts = append(parts, int32(i))
		}
	}
	for _, p := range parts {
		if p < 0 || int(p) >= len(t.Partitions) {
			return nil, toStatus(invalidPartition(req.Topic, p, len(t.Partitions)))
		}
	}
	resp := &quirev1.DescribeProducersResponse{Partitions: make([]*quirev1.PartitionProducers, 0, len(parts))}
	for _, p := range parts {
		pp := &quirev1.PartitionProducers{Partition: p}
		resp.Partitions = append(resp.Partitions, pp)
		part, ok := s.b.rm.Partition(req.Topic, p)
		var err error
		switch pi := t.Partitions[p]; {
		case !ok || !part.State().Leader:
			if pi.Leader < 0 {
				err = fmt.Errorf("%w: %s-%d has no leader", ErrLeaderNotAvailable, req.Topic, p)
			} else {
				err = notLeader(req.Topic, p, pi.Leader, pi.LeaderEpoch)
			}
		default:
			if _, err = part.LogFailure(); err != nil {
				err = fmt.Errorf("%w: %s-%d: %w", storage.ErrLogFailed, req.Topic, p, err)
			}
		}
		if err != nil {
			pp.Error = toError(err)
			continue
		}
		for _, in := range part.Producers() {
			pp.Producers = append(pp.Producers, &quirev1.ProducerDescription{
				ProducerId: in.ProducerID, ProducerEpoch: int32(in.ProducerEpoch), LastSequence: in.LastSequence,
				LastTimestampMs: in.LastTimestamp, LastOffset: in.LastOffset,
			})
		}
	}
	return resp, nil
}
