package broker

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/auth"
	"github.com/quirelog/quire/group"
	"github.com/quirelog/quire/group/assignor"
	"github.com/quirelog/quire/metadata"
)

// ResetOffsets moves an empty group's committed offsets. The targets are
// asked of the partitions' leaders here; the commit, with no member, goes
// to the coordinator, which refuses it if a member joined meanwhile.
func (s *groupService) ResetOffsets(ctx context.Context, req *quirev1.ResetOffsetsRequest) (*quirev1.ResetOffsetsResponse, error) {
	resp, err := s.b.resetOffsets(ctx, req)
	if err != nil {
		return nil, toStatus(fmt.Errorf("reset offsets of group %q: %w", req.Group, err))
	}
	if !req.DryRun {
		s.b.logger.Info("reset group offsets", "group", req.Group, "partitions", len(resp.Offsets))
	}
	return resp, nil
}

func (b *Broker) resetOffsets(ctx context.Context, req *quirev1.ResetOffsetsRequest) (*quirev1.ResetOffsetsResponse, error) {
	if err := metadata.ValidateGroupID(req.Group); err != nil {
		return nil, err
	}
	switch to := req.To.(type) {
	case nil:
		return nil, fmt.Errorf("%w: no target (earliest, latest, offset, timestamp_ms or shift_by)", ErrInvalidRequest)
	case *quirev1.ResetOffsetsRequest_Offset:
		if to.Offset < 0 {
			return nil, fmt.Errorf("%w: negative offset %d", ErrInvalidRequest, to.Offset)
		}
	case *quirev1.ResetOffsetsRequest_TimestampMs:
		if to.TimestampMs < 0 {
			return nil, fmt.Errorf("%w: negative timestamp %d", ErrInvalidRequest, to.TimestampMs)
		}
	}
	fwd := b.cluster.fwd
	d, err := fwd.DescribeGroup(ctx, &quirev1.DescribeGroupRequest{Group: req.Group})
	switch {
	case err != nil && toError(err).Code != quirev1.ErrorCode_GROUP_ID_NOT_FOUND:
		return nil, err
	case err == nil && len(d.Members) > 0:
		return nil, fmt.Errorf("%w: the group has %d members; only a group with none can be reset", group.ErrNonEmptyGroup, len(d.Members))
	}
	committed, err := fwd.FetchOffsets(ctx, req.Group, nil)
	if err != nil {
		return nil, err
	}
	prev := map[group.TopicPartition]int64{}
	for _, o := range committed {
		if o.Offset >= 0 {
			prev[group.TopicPartition{Topic: o.Topic, Partition: o.Partition}] = o.Offset
		}
	}
	var parts []group.TopicPartition
	if len(req.Topics) == 0 {
		if len(prev) == 0 {
			return nil, fmt.Errorf("%w: the group has no committed offsets; name the topics to reset", ErrInvalidRequest)
		}
		for k := range prev {
			if err := b.authorizeTopic(ctx, auth.OpRead, k.Topic); err != nil {
				return nil, err
			}
			parts = append(parts, k)
		}
	} else {
		img := b.cluster.image()
		for _, name := range slices.Compact(slices.Sorted(slices.Values(req.Topics))) {
			t, ok := img.Topic(name)
			if !ok {
				return nil, unknownTopic(name)
			}
			for p := range t.Partitions {
				parts = append(parts, group.TopicPartition{Topic: name, Partition: int32(p)})
			}
		}
	}
	slices.SortFunc(parts, assignor.Compare)

	resp := &quirev1.ResetOffsetsResponse{}
	var commits []metadata.OffsetCommit
	for _, k := range parts {
		before, had := prev[k]
		if !had {
			before = -1
		}
		start, err := b.listOffsetAnywhere(ctx, k.Topic, k.Partition, -2)
		if err != nil {
			return nil, err
		}
		end, err := b.listOffsetAnywhere(ctx, k.Topic, k.Partition, -1)
		if err != nil {
			return nil, err
		}
		var at int64
		switch to := req.To.(type) {
		case *quirev1.ResetOffsetsRequest_Earliest:
			at = start
		case *quirev1.ResetOffsetsRequest_Latest:
			at = end
		case *quirev1.ResetOffsetsRequest_Offset:
			at = to.Offset
		case *quirev1.ResetOffsetsRequest_TimestampMs:
			if at, err = b.listOffsetAnywhere(ctx, k.Topic, k.Partition, to.TimestampMs); err != nil {
				return nil, err
			}
			if at < 0 {
				at = end // no record that late
			}
		case *quirev1.ResetOffsetsRequest_ShiftBy:
			if !had {
				return nil, fmt.Errorf("%w: %s-%d has no committed offset to shift", ErrInvalidRequest, k.Topic, k.Partition)
			}
			at = before + to.ShiftBy
		}
		at = min(max(at, start), end)
		resp.Offsets = append(resp.Offsets, &quirev1.ResetOffset{Topic: k.Topic, Partition: k.Partition, Previous: before, Offset: at})
		commits = append(commits, metadata.OffsetCommit{Topic: k.Topic, Partition: k.Partition, Offset: at, LeaderEpoch: -1})
	}
	slices.SortFunc(resp.Offsets, func(a, b *quirev1.ResetOffset) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	if req.DryRun {
		return resp, nil
	}
	if _, err := fwd.CommitOffsets(ctx, req.Group, metadata.GroupMember{}, commits, b.clock.Now()); err != nil {
		if toError(err).Code == quirev1.ErrorCode_UNKNOWN_MEMBER_ID {
			return nil, fmt.Errorf("%w: a member joined the group meanwhile; nothing was reset: %v", group.ErrNonEmptyGroup, err)
		}
		return nil, err
	}
	return resp, nil
}
