package service

import (
	"context"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/request"
)

// ElectLeaders is the request core's (request/elect.go): each
// partition's refusal (election not needed, preferred replica not
// available, unknown) is in the answer.
func (s *adminService) ElectLeaders(ctx context.Context, req *quirev1.ElectLeadersRequest) (*quirev1.ElectLeadersResponse, error) {
	topics := make([]request.TopicPartitions, len(req.Topics))
	for i, t := range req.Topics {
		topics[i] = request.TopicPartitions{Topic: t.Topic, Partitions: t.Partitions}
	}
	res, err := s.b.core.ElectLeaders(coreContext(ctx), topics)
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &quirev1.ElectLeadersResponse{Partitions: make([]*quirev1.ElectLeadersResult, len(res))}
	for i, r := range res {
		resp.Partitions[i] = &quirev1.ElectLeadersResult{Topic: r.Topic, Partition: r.Partition, Error: partitionError(r.Err)}
	}
	return resp, nil
}

// partitionError is a partition's refusal in the core's answer as
// quire.v1's; nil for none.
func partitionError(e *request.Error) *quirev1.Error {
	if e == nil {
		return nil
	}
	return toError(e)
}
