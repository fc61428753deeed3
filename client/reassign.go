package client

import (
	"context"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

// ReassignmentTarget is one partition's new replicas (the preferred
// leader first), or with Cancel, the undoing of its pending
// reassignment.
type ReassignmentTarget struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Replicas  []int32 `json:"replicas,omitempty"`
	Cancel    bool    `json:"cancel,omitempty"`
}

// Reassignment is a pending partition reassignment: Replicas holds the
// target and the replicas being removed.
type Reassignment struct {
	Topic            string  `json:"topic"`
	Partition        int32   `json:"partition"`
	Replicas         []int32 `json:"replicas"`
	AddingReplicas   []int32 `json:"adding_replicas"`
	RemovingReplicas []int32 `json:"removing_replicas"`
	ISR              []int32 `json:"isr"`
	Leader           int32   `json:"leader"`
	// LeaderLogEndOffset and LeaderSizeBytes are the leader's log end and
	// size on disk, -1 when the leader did not answer.
	LeaderLogEndOffset int64 `json:"leader_log_end_offset"`
	LeaderSizeBytes    int64 `json:"leader_size_bytes"`
	// Adding is how far each of AddingReplicas has caught up, in its
	// order (empty from a broker that does not report it).
	Adding []AddingReplica `json:"adding,omitempty"`
}

// AddingReplica is a replica being added by a reassignment, as its broker
// has it: SizeBytes 0 and LogEndOffset -1 when it has no log yet, both -1
// when its broker did not answer. BytesLeft is what it has still to
// fetch (the leader's size on disk less its own), -1 when not known.
type AddingReplica struct {
	BrokerID     int32 `json:"broker_id"`
	LogEndOffset int64 `json:"log_end_offset"`
	SizeBytes    int64 `json:"size_bytes"`
	BytesLeft    int64 `json:"bytes_left"`
}

// AlterPartitionReassignments starts, replaces or cancels partition
// reassignments (Kafka's KIP-455), all or none: an unknown partition, an
// unknown, fenced or cordoned broker, a broker named twice or fewer
// replicas than min.insync.replicas refuses the whole call, starting
// nothing. It returns once the reassignments are recorded; the moves go
// on in the background (ListPartitionReassignments follows them).
func (c *Client) AlterPartitionReassignments(ctx context.Context, targets []ReassignmentTarget) error {
	req := &quirev1.AlterPartitionReassignmentsRequest{Partitions: make([]*quirev1.ReassignmentTarget, len(targets))}
	for i, t := range targets {
		req.Partitions[i] = &quirev1.ReassignmentTarget{Topic: t.Topic, Partition: t.Partition, Replicas: t.Replicas, Cancel: t.Cancel}
	}
	return c.admin(ctx, func(ctx context.Context, a quirev1.AdminClient) error {
		_, err := a.AlterPartitionReassignments(ctx, req)
		return err
	})
}

// ListPartitionReassignments lists the pending reassignments of a
// topic's partitions (every one it has when none is named), or of the
// whole cluster when topic is "".
func (c *Client) ListPartitionReassignments(ctx context.Context, topic string, partitions ...int32) ([]Reassignment, error) {
	req := &quirev1.ListPartitionReassignmentsRequest{}
	if topic != "" {
		req.Topics = []*quirev1.ElectLeadersTopic{{Topic: topic, Partitions: partitions}}
	}
	var resp *quirev1.ListPartitionReassignmentsResponse
	err := c.admin(ctx, func(ctx context.Context, a quirev1.AdminClient) (err error) {
		resp, err = a.ListPartitionReassignments(ctx, req)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]Reassignment, len(resp.GetReassignments()))
	for i, r := range resp.GetReassignments() {
		out[i] = Reassignment{Topic: r.GetTopic(), Partition: r.GetPartition(), Replicas: r.GetReplicas(),
			AddingReplicas: r.GetAddingReplicas(), RemovingReplicas: r.GetRemovingReplicas(), ISR: r.GetIsr(), Leader: r.GetLeader(),
			LeaderLogEndOffset: r.GetLeaderLogEndOffset(), LeaderSizeBytes: r.GetLeaderSizeBytes()}
		for _, a := range r.GetAddingProgress() {
			out[i].Adding = append(out[i].Adding, AddingReplica{BrokerID: a.GetBrokerId(), LogEndOffset: a.GetLogEndOffset(),
				SizeBytes: a.GetSizeBytes(), BytesLeft: a.GetBytesLeft()})
		}
	}
	return out, nil
}

// CordonBroker cordons a broker (no new replica is placed on it: topic
// creates, partition increases, reassignments) or, with cordon false,
// uncordons it.
func (c *Client) CordonBroker(ctx context.Context, id int32, cordon bool) error {
	return c.admin(ctx, func(ctx context.Context, a quirev1.AdminClient) error {
		_, err := a.CordonBroker(ctx, &quirev1.CordonBrokerRequest{BrokerId: id, Cordon: cordon})
		return err
	})
}

// SetReassignmentThrottle sets replica.reassignment.throttle.bytes.per.second
// (0: unthrottled) on the brokers named, every broker when none is; with
// unset, they go back to their configuration's value.
func (c *Client) SetReassignmentThrottle(ctx context.Context, bytesPerSecond int64, unset bool, brokers ...int32) error {
	return c.admin(ctx, func(ctx context.Context, a quirev1.AdminClient) error {
		_, err := a.SetReassignmentThrottle(ctx, &quirev1.SetReassignmentThrottleRequest{BrokerIds: brokers, BytesPerSecond: bytesPerSecond, Unset: unset})
		return err
	})
}

// UnregisterBroker removes a broker gone for good (stopped, fenced, not a
// controller): from the metadata quorum, the broker list and every ISR;
// partitions keep it in their replica lists (move them off first).
func (c *Client) UnregisterBroker(ctx context.Context, id int32) error {
	return c.admin(ctx, func(ctx context.Context, a quirev1.AdminClient) error {
		_, err := a.UnregisterBroker(ctx, &quirev1.UnregisterBrokerRequest{BrokerId: id})
		return err
	})
}
