package client

import (
	"context"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

// OffsetDeletion is one partition's outcome of DeleteOffsets: Err nil
// when the group no longer has an offset of it.
type OffsetDeletion struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Err       error  `json:"-"`
}

// DeleteOffsets removes a group's committed offsets of a topic's
// partitions (every partition the topic has when none is named), each on
// its own: one of a topic a member of the group is subscribed to is
// refused with GROUP_SUBSCRIBED_TO_TOPIC, one the topic does not have
// with UNKNOWN_TOPIC_OR_PARTITION. A group with neither members nor
// offsets fails the whole call with GROUP_ID_NOT_FOUND.
func (c *Client) DeleteOffsets(ctx context.Context, group, topic string, partitions ...int32) ([]OffsetDeletion, error) {
	var resp *quirev1.DeleteOffsetsResponse
	err := c.group(ctx, func(ctx context.Context, g quirev1.GroupsClient) error {
		var err error
		resp, err = g.DeleteOffsets(ctx, &quirev1.DeleteOffsetsRequest{Group: group,
			Topics: []*quirev1.DeleteOffsetsTopic{{Topic: topic, Partitions: partitions}}})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]OffsetDeletion, len(resp.GetPartitions()))
	for i, p := range resp.GetPartitions() {
		out[i] = OffsetDeletion{Topic: p.GetTopic(), Partition: p.GetPartition()}
		if p.GetError() != nil {
			out[i].Err = fromProto(p.GetError())
		}
	}
	return out, nil
}
