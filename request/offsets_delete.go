package request

import (
	"context"
	"fmt"

	"github.com/quirelog/quire/auth"
)

// DeleteOffsetsRequest removes some of a group's committed offsets
// (Kafka's OffsetDelete).
type DeleteOffsetsRequest struct {
	Group string
	// Topics a topic naming no partitions stands for every partition it
	// has.
	Topics []TopicPartitions
	// AllOrNothing refuses the whole request when the caller may not
	// read a topic named (the gRPC API's rule); otherwise that topic's
	// partitions alone get the refusal (Kafka's).
	AllOrNothing bool
}

// DeleteOffsets removes some of a group's committed offsets on the
// coordinator. It needs Delete on the group (else the whole call is
// refused) and Read on each topic, as Kafka's OffsetDelete does. The
// refusal of a partition (a topic a member subscribes to, an unknown
// one, a topic the caller may not read) is in its result, after those of
// the partitions asked of the coordinator; the group's (unknown, a bad
// id) is the call's error.
func (c *Core) DeleteOffsets(ctx context.Context, req *DeleteOffsetsRequest) ([]PartitionResult, error) {
	g, err := c.coordinator()
	if err != nil {
		return nil, err
	}
	topics := make([]string, len(req.Topics))
	for i, t := range req.Topics {
		topics[i] = t.Topic
	}
	if req.AllOrNothing {
		if err := c.authorizeGroup(ctx, auth.OpDelete, req.Group, auth.OpRead, topics); err != nil {
			return nil, err
		}
		return c.deleteOffsets(ctx, g, req.Group, req.Topics)
	}
	if err := c.authorizeGroup(ctx, auth.OpDelete, req.Group, "", nil); err != nil {
		return nil, err
	}
	denied := c.DeniedTopics(ctx, auth.OpRead, topics)
	allowed := req.Topics
	var refused []PartitionResult
	if len(denied) > 0 {
		allowed = nil
		for _, t := range req.Topics {
			err, no := denied[t.Topic]
			if !no {
				allowed = append(allowed, t)
				continue
			}
			for _, p := range t.Partitions {
				refused = append(refused, PartitionResult{Topic: t.Topic, Partition: p, Err: c.asError(err)})
			}
		}
	}
	var out []PartitionResult
	if len(allowed) > 0 {
		if out, err = c.deleteOffsets(ctx, g, req.Group, allowed); err != nil {
			return nil, err
		}
	}
	return append(out, refused...), nil
}

func (c *Core) deleteOffsets(ctx context.Context, g GroupCoordinator, group string, topics []TopicPartitions) ([]PartitionResult, error) {
	out, err := g.DeleteOffsets(ctx, group, topics)
	if err != nil {
		return nil, c.fail(fmt.Errorf("delete offsets: %w", err))
	}
	return out, nil
}
