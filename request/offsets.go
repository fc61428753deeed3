package request

import (
	"context"
	"fmt"

	"github.com/quirelog/quire/auth"
	"github.com/quirelog/quire/replica"
)

// Timestamps of ListOffsets that name an end of the log, as Kafka's do.
const (
	LatestTimestamp   = -1 // the high watermark
	EarliestTimestamp = -2 // the log start offset
)

// ListOffsetsPartition asks for the first offset of a partition whose
// record has a timestamp at or after Timestamp (or LatestTimestamp,
// EarliestTimestamp).
type ListOffsetsPartition struct {
	Topic     string
	Partition int32
	Timestamp int64
}

// ListOffsetsResult is one partition's answer, in request order: Offset
// -1 (and Timestamp -1) when no record has such a timestamp.
type ListOffsetsResult struct {
	Topic       string
	Partition   int32
	Offset      int64
	Timestamp   int64
	LeaderEpoch int32
	// Err is an *Error, or nil.
	Err error
}

// ListOffsets answers each partition at this broker, its leader
// (Describe on each topic).
func (c *Core) ListOffsets(ctx context.Context, parts []ListOffsetsPartition) ([]ListOffsetsResult, error) {
	if len(parts) == 0 {
		return nil, c.fail(fmt.Errorf("%w: no partitions", replica.ErrInvalidRequest))
	}
	if err := c.authorizeEach(ctx, auth.OpDescribe, len(parts), func(i int) string { return parts[i].Topic }, nil); err != nil {
		return nil, err
	}
	out := make([]ListOffsetsResult, len(parts))
	for i, p := range parts {
		out[i] = c.ListOffset(ctx, p)
	}
	return out, nil
}

// ListOffsetsAnywhere is ListOffsets of partitions wherever they are
// led: here, or asked of their leaders through the OffsetLister (a
// Subscribe stream's auto_offset_reset). Describe on each topic.
func (c *Core) ListOffsetsAnywhere(ctx context.Context, parts []ListOffsetsPartition) ([]ListOffsetsResult, error) {
	if len(parts) == 0 {
		return nil, c.fail(fmt.Errorf("%w: no partitions", replica.ErrInvalidRequest))
	}
	if err := c.authorizeEach(ctx, auth.OpDescribe, len(parts), func(i int) string { return parts[i].Topic }, nil); err != nil {
		return nil, err
	}
	out := make([]ListOffsetsResult, len(parts))
	for i, p := range parts {
		out[i] = c.listOffsetAnywhere(ctx, p)
	}
	return out, nil
}

// ListOffset is ListOffsets of one partition for a caller that has
// authorized it (a group's offset reset).
func (c *Core) ListOffset(ctx context.Context, p ListOffsetsPartition) ListOffsetsResult {
	res := ListOffsetsResult{Topic: p.Topic, Partition: p.Partition, Offset: -1, Timestamp: -1, LeaderEpoch: -1}
	res.Err = c.fail(c.listOffset(ctx, p, &res))
	return res
}

func (c *Core) listOffset(ctx context.Context, p ListOffsetsPartition, res *ListOffsetsResult) error {
	part, err := c.leaderPartition(ctx, p.Topic, p.Partition, false)
	if err != nil {
		return err
	}
	st := part.State()
	res.LeaderEpoch = st.LeaderEpoch
	if p.Timestamp != EarliestTimestamp && c.cfg.Cluster.SessionLost() {
		// Cut off from the controller, or not yet caught up since: the
		// leadership and HW it knows may be out of date.
		return fmt.Errorf("%w: %s-%d: this broker's metadata may be out of date (cut off from the controller); ask again",
			replica.ErrOffsetNotAvailable, p.Topic, p.Partition)
	}
	if p.Timestamp != EarliestTimestamp && !part.HighWatermarkEstablished() {
		return fmt.Errorf("%w: %s-%d: the leader elected at epoch %d has not yet established its high watermark (%d); ask again",
			replica.ErrOffsetNotAvailable, p.Topic, p.Partition, st.LeaderEpoch, st.HighWatermark)
	}
	switch ts := p.Timestamp; {
	case ts == LatestTimestamp:
		res.Offset = st.HighWatermark
	case ts == EarliestTimestamp:
		res.Offset = part.LogStartOffset()
	case ts < 0:
		return fmt.Errorf("%w: timestamp %d (want -1, -2 or milliseconds since the epoch)", replica.ErrInvalidRequest, ts)
	default:
		off, found, ok, err := part.OffsetForTimestamp(ts)
		if err != nil {
			return err
		}
		if ok && off < st.HighWatermark {
			res.Offset, res.Timestamp = off, found
		}
	}
	return nil
}
