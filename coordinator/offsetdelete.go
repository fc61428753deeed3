package coordinator

import (
	"context"

	"github.com/quirelog/quire/metadata"
)

// DeleteOffsets writes, in group id's turn, the deletion of its offsets
// of partitions whose topic no member subscribes to, and returns the
// topics some member subscribes to (their partitions' offsets kept).
// Written in the turn, the check and the deletion see the same members:
// a member subscribing meanwhile is written after the deletion. The
// controller calls it only at metadata.version 10 and above (where every
// group's membership is in the log).
func (co *Coordinator) DeleteOffsets(ctx context.Context, id string, partitions []metadata.TopicPartition) (map[string]bool, error) {
	var subscribed map[string]bool
	err := co.doWrite(ctx, id, func(g *groupRun) (groupWrite, error) {
		subscribed = g.m.SubscribedTopics(id)
		var del []metadata.TopicPartition
		for _, tp := range partitions {
			if !subscribed[tp.Topic] {
				del = append(del, tp)
			}
		}
		if len(del) == 0 {
			return groupWrite{}, nil
		}
		return groupWrite{before: metadata.DeleteOffsetsCommand(id, del)}, nil
	})
	if err != nil {
		return nil, err
	}
	return subscribed, nil
}
