package service

import (
	"context"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/request"
)

// DeleteOffsets is the request core's (request/offsets_delete.go): the
// refusal of a partition (a topic a member is subscribed to, an unknown
// one) is in the answer, the group's (unknown, a bad id) the call's
// status. A topic the caller may not read refuses the whole call.
func (s *groupService) DeleteOffsets(ctx context.Context, req *quirev1.DeleteOffsetsRequest) (*quirev1.DeleteOffsetsResponse, error) {
	in := &request.DeleteOffsetsRequest{Group: req.Group, Topics: make([]request.TopicPartitions, len(req.Topics)), AllOrNothing: true}
	for i, t := range req.Topics {
		in.Topics[i] = request.TopicPartitions{Topic: t.Topic, Partitions: t.Partitions}
	}
	res, err := s.b.core.DeleteOffsets(coreContext(ctx), in)
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &quirev1.DeleteOffsetsResponse{Partitions: make([]*quirev1.DeleteOffsetsResult, len(res))}
	for i, r := range res {
		resp.Partitions[i] = &quirev1.DeleteOffsetsResult{Topic: r.Topic, Partition: r.Partition, Error: partitionError(r.Err)}
	}
	return resp, nil
}
