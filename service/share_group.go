package service

import (
	"context"

	quirev1 "github.com/quirelog/quire/api/quirev1"
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
