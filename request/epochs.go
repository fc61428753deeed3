package request

import (
	"context"

	"github.com/quirelog/quire/auth"
)

// OffsetForLeaderEpoch is, at topic-partition's leader, the largest
// leader epoch at or below epoch that its log has and the offset where
// that epoch ends (the next one's start, or the log end offset for the
// latest): a client's truncation check after a leader change (KIP-320).
// An epoch the log does not know gives -1, -1. current, when not -1, is
// the caller's view of the partition's leader epoch, checked first
// (FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH). Needs Describe on the
// topic, as Kafka's does.
func (c *Core) OffsetForLeaderEpoch(ctx context.Context, topic string, partition, current, epoch int32) (int32, int64, error) {
	if err := c.authorizeTopics(ctx, auth.OpDescribe, []string{topic}, nil); err != nil {
		return -1, -1, err
	}
	part, err := c.leaderPartition(ctx, topic, partition, false)
	if err != nil {
		return -1, -1, c.fail(err)
	}
	var cur *int32
	if current >= 0 {
		cur = &current
	}
	e, end, err := part.EndOffsetForEpoch(cur, epoch)
	if err != nil {
		return -1, -1, c.fail(err)
	}
	return e, end, nil
}
