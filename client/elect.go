package client

import (
	"context"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

// Election is one partition's outcome of ElectLeaders: Err nil when its
// preferred replica leads it now.
type Election struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Err       error  `json:"-"`
}

// ElectLeaders moves the leadership of a topic's partitions (every
// partition it has when none is named) to their preferred (first
// assigned) replicas now, each on its own: one its preferred replica
// leads already fails with ELECTION_NOT_NEEDED, one whose preferred
// replica is not alive or not in sync with PREFERRED_LEADER_NOT_AVAILABLE.
func (c *Client) ElectLeaders(ctx context.Context, topic string, partitions ...int32) ([]Election, error) {
	var resp *quirev1.ElectLeadersResponse
	err := c.admin(ctx, func(ctx context.Context, a quirev1.AdminClient) error {
		var err error
		resp, err = a.ElectLeaders(ctx, &quirev1.ElectLeadersRequest{
			Topics: []*quirev1.ElectLeadersTopic{{Topic: topic, Partitions: partitions}}})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]Election, len(resp.GetPartitions()))
	for i, p := range resp.GetPartitions() {
		out[i] = Election{Topic: p.GetTopic(), Partition: p.GetPartition(), Err: fromProto(p.GetError())}
	}
	return out, nil
}
