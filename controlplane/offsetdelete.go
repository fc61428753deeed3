package controlplane

import (
	"context"
	"errors"
	"fmt"

	pb "github.com/quirelog/quire/api/internalv1"
	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/internal/errcode"
	"github.com/quirelog/quire/metadata"
)

// DeleteOffsets removes some of a group's committed offsets on the
// controller. A topic naming no partitions stands for every partition
// it has. The answer carries each partition's refusal as a quire.v1.Error
// (the group's as a status): one request deletes what it may.
func (s *Service) DeleteOffsets(ctx context.Context, in *quirev1.DeleteOffsetsRequest) (*quirev1.DeleteOffsetsResponse, error) {
	var parts []metadata.TopicPartition
	img := s.node.Image()
	for _, t := range in.Topics {
		if len(t.Partitions) == 0 {
			info, ok := img.Topic(t.Topic)
			if !ok {
				parts = append(parts, metadata.TopicPartition{Topic: t.Topic, Partition: -1})
				continue
			}
			for p := range info.Partitions {
				parts = append(parts, metadata.TopicPartition{Topic: t.Topic, Partition: int32(p)})
			}
			continue
		}
		for _, p := range t.Partitions {
			parts = append(parts, metadata.TopicPartition{Topic: t.Topic, Partition: p})
		}
	}
	if len(parts) == 0 {
		return nil, toStatus(fmt.Errorf("%w: group %q: no partitions named", metadata.ErrInvalidPartition, in.Group))
	}
	res, err := s.node.Ctl().DeleteOffsets(ctx, in.Group, parts)
	if err != nil {
		return nil, toStatus(err)
	}
	out := &quirev1.DeleteOffsetsResponse{Partitions: make([]*quirev1.DeleteOffsetsResult, len(res))}
	for i, r := range res {
		out.Partitions[i] = &quirev1.DeleteOffsetsResult{Topic: r.Topic, Partition: r.Partition, Error: ErrorOf(r.Err)}
	}
	return out, nil
}

// DeleteOffsets removes some of a group's committed offsets on the
// controller (Service.DeleteOffsets).
func (f *Forwarder) DeleteOffsets(ctx context.Context, in *quirev1.DeleteOffsetsRequest) (*quirev1.DeleteOffsetsResponse, error) {
	return Call(ctx, f, (*Service).DeleteOffsets, pb.ControllerServiceClient.DeleteOffsets, in)
}

// ErrorOf is a metadata error as a quire.v1.Error with the code its row
// of the table gives it (UNKNOWN_SERVER_ERROR for one with none); nil for
// nil.
func ErrorOf(err error) *quirev1.Error {
	if err == nil {
		return nil
	}
	code := quirev1.ErrorCode_UNKNOWN_SERVER_ERROR
	for _, e := range errorTable {
		if errors.Is(err, e.err) {
			code = e.errCode
			break
		}
	}
	return &quirev1.Error{Code: code, Message: errcode.Message(err.Error()), Retriable: errcode.Retriable(code),
		LeaderId: -1}
}
