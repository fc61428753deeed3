package service

import (
	"context"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/request"
)

// ResetOffsets moves an empty group's committed offsets
// (request/group_reset.go).
func (s *groupService) ResetOffsets(ctx context.Context, req *quirev1.ResetOffsetsRequest) (*quirev1.ResetOffsetsResponse, error) {
	in := &request.ResetOffsetsRequest{Group: req.Group, Topics: req.Topics, DryRun: req.DryRun}
	switch to := req.To.(type) {
	case *quirev1.ResetOffsetsRequest_Earliest:
		in.To = request.ResetEarliest
	case *quirev1.ResetOffsetsRequest_Latest:
		in.To = request.ResetLatest
	case *quirev1.ResetOffsetsRequest_Offset:
		in.To, in.Value = request.ResetToOffset, to.Offset
	case *quirev1.ResetOffsetsRequest_TimestampMs:
		in.To, in.Value = request.ResetToTimestamp, to.TimestampMs
	case *quirev1.ResetOffsetsRequest_ShiftBy:
		in.To, in.Value = request.ResetShiftBy, to.ShiftBy
	}
	offsets, err := s.b.core.ResetOffsets(coreContext(ctx), in)
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &quirev1.ResetOffsetsResponse{Offsets: make([]*quirev1.ResetOffset, len(offsets))}
	for i, o := range offsets {
		resp.Offsets[i] = &quirev1.ResetOffset{Topic: o.Topic, Partition: o.Partition, Previous: o.Previous, Offset: o.Offset}
	}
	if !req.DryRun {
		s.b.logger.Info("reset group offsets", "group", req.Group, "partitions", len(resp.Offsets))
	}
	return resp, nil
}
