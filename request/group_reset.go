package request

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/quirelog/quire/auth"
	"github.com/quirelog/quire/group"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/replica"
)

// OffsetLister asks the leader of a partition led by another broker for
// an offset, as ListOffsets answers it there.
type OffsetLister interface {
	ListOffset(ctx context.Context, leader int32, p ListOffsetsPartition) (ListOffsetsResult, error)
}

// ResetTo is what an offset reset moves each partition to.
type ResetTo int

const (
	ResetNone        ResetTo = iota
	ResetEarliest            // the log start offset
	ResetLatest              // the high watermark
	ResetToOffset            // Value, held to the log's range
	ResetToTimestamp         // the first offset at or after Value ms
	ResetShiftBy             // the committed offset plus Value
)

// ResetOffsetsRequest moves an empty group's committed offsets: of the
// partitions of Topics, or of every committed one for none.
type ResetOffsetsRequest struct {
	Group  string
	Topics []string
	To     ResetTo
	Value  int64
	// DryRun answers the offsets without committing them.
	DryRun bool
}

// ResetOffset is one partition's offset before (-1: none) and after.
type ResetOffset struct {
	Topic     string
	Partition int32
	Previous  int64
	Offset    int64
}

// Kafka's codes the reset tells apart.
const (
	codeUnknownMemberID = 25
	codeGroupIDNotFound = 69
)

// ResetOffsets moves an empty group's committed offsets (Read on the
// group and on each topic; with no topic named, on each topic committed,
// as it is reset). The targets are asked of the partitions' leaders; the
// commit, with no member, goes to the coordinator, which refuses it if a
// member joined meanwhile. The answer is sorted by topic and partition.
func (c *Core) ResetOffsets(ctx context.Context, req *ResetOffsetsRequest) ([]ResetOffset, error) {
	g, err := c.coordinator()
	if err != nil {
		return nil, err
	}
	if err := c.authorizeGroup(ctx, auth.OpRead, req.Group, auth.OpRead, req.Topics); err != nil {
		return nil, err
	}
	out, err := c.resetOffsets(ctx, g, req)
	if err != nil {
		return nil, c.fail(fmt.Errorf("reset offsets of group %q: %w", req.Group, err))
	}
	return out, nil
}

func (c *Core) resetOffsets(ctx context.Context, g GroupCoordinator, req *ResetOffsetsRequest) ([]ResetOffset, error) {
	if err := metadata.ValidateGroupID(req.Group); err != nil {
		return nil, err
	}
	switch req.To {
	case ResetEarliest, ResetLatest, ResetShiftBy:
	case ResetToOffset:
		if req.Value < 0 {
			return nil, fmt.Errorf("%w: negative offset %d", replica.ErrInvalidRequest, req.Value)
		}
	case ResetToTimestamp:
		if req.Value < 0 {
			return nil, fmt.Errorf("%w: negative timestamp %d", replica.ErrInvalidRequest, req.Value)
		}
	default:
		return nil, fmt.Errorf("%w: no target (earliest, latest, offset, timestamp_ms or shift_by)", replica.ErrInvalidRequest)
	}
	d, err := g.DescribeGroup(ctx, req.Group)
	switch {
	case err != nil && c.asError(err).Code != codeGroupIDNotFound:
		return nil, err
	case err == nil && len(d.Members) > 0:
		return nil, fmt.Errorf("%w: the group has %d members; only a group with none can be reset", group.ErrNonEmptyGroup, len(d.Members))
	}
	committed, err := g.FetchOffsets(ctx, req.Group, nil)
	if err != nil {
		return nil, err
	}
	prev := map[GroupPartition]int64{}
	for _, o := range committed {
		if o.Offset >= 0 {
			prev[GroupPartition{Topic: o.Topic, Partition: o.Partition}] = o.Offset
		}
	}
	var parts []GroupPartition
	if len(req.Topics) == 0 {
		if len(prev) == 0 {
			return nil, fmt.Errorf("%w: the group has no committed offsets; name the topics to reset", replica.ErrInvalidRequest)
		}
		for k := range prev {
			if err := c.authorizeTopics(ctx, auth.OpRead, []string{k.Topic}, nil); err != nil {
				return nil, err
			}
			parts = append(parts, k)
		}
	} else {
		for _, name := range slices.Compact(slices.Sorted(slices.Values(req.Topics))) {
			t, ok := c.cfg.Cluster.Topic(name)
			if !ok {
				return nil, unknownTopic(name)
			}
			for p := range t.Partitions {
				parts = append(parts, GroupPartition{Topic: name, Partition: int32(p)})
			}
		}
	}
	slices.SortFunc(parts, func(a, b GroupPartition) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})

	out := make([]ResetOffset, 0, len(parts))
	commits := make([]OffsetCommit, 0, len(parts))
	for _, k := range parts {
		before, had := prev[k]
		if !had {
			before = -1
		}
		start, err := c.offsetAnywhere(ctx, k, EarliestTimestamp)
		if err != nil {
			return nil, err
		}
		end, err := c.offsetAnywhere(ctx, k, LatestTimestamp)
		if err != nil {
			return nil, err
		}
		var at int64
		switch req.To {
		case ResetEarliest:
			at = start
		case ResetLatest:
			at = end
		case ResetToOffset:
			at = req.Value
		case ResetToTimestamp:
			if at, err = c.offsetAnywhere(ctx, k, req.Value); err != nil {
				return nil, err
			}
			if at < 0 {
				at = end // no record that late
			}
		case ResetShiftBy:
			if !had {
				return nil, fmt.Errorf("%w: %s-%d has no committed offset to shift", replica.ErrInvalidRequest, k.Topic, k.Partition)
			}
			at = before + req.Value
		}
		at = min(max(at, start), end)
		out = append(out, ResetOffset{Topic: k.Topic, Partition: k.Partition, Previous: before, Offset: at})
		commits = append(commits, OffsetCommit{Topic: k.Topic, Partition: k.Partition, Offset: at, LeaderEpoch: -1})
	}
	if req.DryRun {
		return out, nil
	}
	if _, err := g.CommitOffsets(ctx, req.Group, GroupMember{}, commits, c.cfg.Now()); err != nil {
		if c.asError(err).Code == codeUnknownMemberID {
			return nil, fmt.Errorf("%w: a member joined the group meanwhile; nothing was reset: %v", group.ErrNonEmptyGroup, err)
		}
		return nil, err
	}
	return out, nil
}

// offsetAnywhere is the offset of k at ts, wherever it is led.
func (c *Core) offsetAnywhere(ctx context.Context, k GroupPartition, ts int64) (int64, error) {
	res := c.listOffsetAnywhere(ctx, ListOffsetsPartition{Topic: k.Topic, Partition: k.Partition, Timestamp: ts})
	if res.Err != nil {
		return -1, res.Err
	}
	return res.Offset, nil
}

// listOffsetAnywhere is ListOffset of a partition wherever it is led:
// here, or asked of its leader through the OffsetLister.
func (c *Core) listOffsetAnywhere(ctx context.Context, p ListOffsetsPartition) ListOffsetsResult {
	var nle *replica.NotLeaderError
	if err := c.ledElsewhere(p.Topic, p.Partition); c.cfg.OffsetLister != nil && errors.As(err, &nle) {
		res, err := c.cfg.OffsetLister.ListOffset(ctx, nle.Leader, p)
		if err != nil {
			return ListOffsetsResult{Topic: p.Topic, Partition: p.Partition, Offset: -1, Timestamp: -1, LeaderEpoch: -1, Err: c.fail(err)}
		}
		res.Topic, res.Partition, res.Err = p.Topic, p.Partition, c.fail(res.Err)
		return res
	}
	return c.ListOffset(ctx, p)
}
