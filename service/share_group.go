package service

import (
	"context"
	"errors"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/request"
)

// DescribeShareGroup is the core's ShareGroupDescribe.
func (s *groupService) DescribeShareGroup(ctx context.Context, req *quirev1.DescribeShareGroupRequest) (*quirev1.DescribeShareGroupResponse, error) {
	d, err := s.b.core.ShareGroupDescribe(coreContext(ctx), req.Group)
	if err != nil {
		return nil, toStatus(err)
	}
	out := &quirev1.DescribeShareGroupResponse{Group: d.Group, KeyOrdered: d.KeyOrdering, DeadLetterTopic: d.DeadLetterTopic}
	for _, m := range d.Members {
		out.Members = append(out.Members, &quirev1.ShareGroupMember{MemberId: m.MemberID, MemberEpoch: m.Epoch, Topics: m.Topics, InFlight: int64(m.InFlight)})
	}
	for _, p := range d.Partitions {
		pb := &quirev1.ShareGroupPartition{Topic: p.Topic, Partition: p.Partition, StartOffset: p.StartOffset, EndOffset: p.EndOffset,
			InFlight: int64(p.InFlight), Available: int64(p.Available), OldestLockOffset: p.OldestLock.Offset,
			OldestLockMember: p.OldestLock.Member, DeadLettered: p.DeadLettered}
		if p.OldestLock.Offset >= 0 {
			pb.OldestLockExpiresMs = p.OldestLock.Deadline.UnixMilli()
			pb.OldestLockDeliveryCount = int32(p.OldestLock.DeliveryCount)
		}
		out.Partitions = append(out.Partitions, pb)
	}
	return out, nil
}

// DescribeShareGroupOffsets is the core's DescribeShareGroupOffsets:
// a partition's refusal is in its result, the group's the call's status.
func (s *groupService) DescribeShareGroupOffsets(ctx context.Context, req *quirev1.DescribeShareGroupOffsetsRequest) (*quirev1.DescribeShareGroupOffsetsResponse, error) {
	var topics []request.ShareOffsetTopic
	for _, t := range req.Topics {
		topics = append(topics, request.ShareOffsetTopic{Topic: t.Topic, Partitions: t.Partitions})
	}
	res, err := s.b.core.DescribeShareGroupOffsets(coreContext(ctx), req.Group, topics)
	if err != nil {
		return nil, toStatus(err)
	}
	return &quirev1.DescribeShareGroupOffsetsResponse{Partitions: shareOffsetsToPB(res)}, nil
}

// AlterShareGroupOffsets is the core's AlterShareGroupOffsets: a
// partition's refusal is in its result, the group's the call's status.
func (s *groupService) AlterShareGroupOffsets(ctx context.Context, req *quirev1.AlterShareGroupOffsetsRequest) (*quirev1.AlterShareGroupOffsetsResponse, error) {
	offsets := make([]request.ShareStartOffset, len(req.Offsets))
	for i, o := range req.Offsets {
		offsets[i] = request.ShareStartOffset{Topic: o.Topic, Partition: o.Partition, StartOffset: o.StartOffset}
	}
	res, err := s.b.core.AlterShareGroupOffsets(coreContext(ctx), req.Group, offsets)
	if err != nil {
		return nil, toStatus(err)
	}
	return &quirev1.AlterShareGroupOffsetsResponse{Partitions: shareOffsetsToPB(res)}, nil
}

func shareOffsetsToPB(res []request.ShareOffset) []*quirev1.ShareGroupOffset {
	out := make([]*quirev1.ShareGroupOffset, len(res))
	for i, r := range res {
		out[i] = &quirev1.ShareGroupOffset{Topic: r.Topic, Partition: r.Partition, StartOffset: r.StartOffset, LeaderEpoch: r.LeaderEpoch, Lag: r.Lag}
		if r.Err != nil {
			var e *request.Error
			if !errors.As(r.Err, &e) {
				e = &request.Error{Code: int32(quirev1.ErrorCode_UNKNOWN_SERVER_ERROR), Message: r.Err.Error()}
			}
			out[i].Error = toError(e)
		}
	}
	return out
}
