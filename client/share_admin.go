package client

import (
	"context"
	"time"

	"google.golang.org/grpc"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

// ShareGroupDescription is a share group as the node serving it sees it.
type ShareGroupDescription struct {
	Group string `json:"group"`
	// Broker is the node that answered: share groups are served in memory
	// by the node leading their partitions.
	Broker          int32                 `json:"broker"`
	KeyOrdered      bool                  `json:"key_ordered"`
	DeadLetterTopic string                `json:"dead_letter_topic,omitempty"`
	Members         []ShareGroupMember    `json:"members"`
	Partitions      []ShareGroupPartition `json:"partitions"`
}

// ShareGroupMember is a member of a share group.
type ShareGroupMember struct {
	MemberID    string   `json:"member_id"`
	MemberEpoch int32    `json:"member_epoch"`
	Topics      []string `json:"topics"`
	// InFlight is how many records it holds.
	InFlight int64 `json:"in_flight"`
}

// ShareGroupPartition is one partition a share group reads.
type ShareGroupPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Every record below StartOffset is finished; EndOffset is the first
	// not yet taken in from the log.
	StartOffset int64 `json:"start_offset"`
	EndOffset   int64 `json:"end_offset"`
	// InFlight records are held by members; Available ones wait for one.
	InFlight  int64 `json:"in_flight"`
	Available int64 `json:"available"`
	// OldestLock is the in-flight record whose lock runs out first; its
	// offset is -1 when none is in flight.
	OldestLock struct {
		Offset        int64     `json:"offset"`
		Member        string    `json:"member,omitempty"`
		Expires       time.Time `json:"expires"`
		DeliveryCount int32     `json:"delivery_count"`
	} `json:"oldest_lock"`
	// DeadLettered counts the records dead-lettered (rejected, or past
	// the delivery count limit); saved with the share-partition's state,
	// it survives restarts and leader changes.
	DeadLettered int64 `json:"dead_lettered"`
}

// DescribeShareGroup describes a share group. Share groups are kept per
// node: each broker is asked in turn, and the first that serves the
// group answers. A group no broker serves is GROUP_ID_NOT_FOUND.
func (c *Client) DescribeShareGroup(ctx context.Context, group string) (ShareGroupDescription, error) {
	if len(c.meta.brokerList()) == 0 {
		if err := c.meta.refresh(ctx, nil, false); err != nil {
			return ShareGroupDescription{}, err
		}
	}
	var last error = newError(quirev1.ErrorCode_GROUP_ID_NOT_FOUND, "share group "+group+" not found: no broker serves it")
	for _, b := range c.meta.brokerList() {
		if b.fenced {
			continue
		}
		var resp *quirev1.DescribeShareGroupResponse
		err := c.onBroker(ctx, b.addr, func(ctx context.Context, cc *grpc.ClientConn) (err error) {
			resp, err = quirev1.NewGroupsClient(cc).DescribeShareGroup(ctx, &quirev1.DescribeShareGroupRequest{Group: group})
			return err
		})
		if err == nil {
			return shareDescriptionFromPB(b.id, resp), nil
		}
		switch ErrorCode(err) {
		case quirev1.ErrorCode_GROUP_ID_NOT_FOUND:
			continue
		case quirev1.ErrorCode_UNSUPPORTED_VERSION, quirev1.ErrorCode_NETWORK_EXCEPTION, quirev1.ErrorCode_REQUEST_TIMED_OUT:
			last = err
			continue
		}
		return ShareGroupDescription{}, err
	}
	return ShareGroupDescription{}, last
}

// onBroker calls fn once with a connection to addr, within the request
// timeout.
func (c *Client) onBroker(ctx context.Context, addr string, fn func(ctx context.Context, cc *grpc.ClientConn) error) error {
	cc, err := c.conn(addr)
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, c.cfg.requestTimeout)
	defer cancel()
	return fromStatus(fn(rctx, cc))
}

func shareDescriptionFromPB(broker int32, resp *quirev1.DescribeShareGroupResponse) ShareGroupDescription {
	d := ShareGroupDescription{Group: resp.GetGroup(), Broker: broker, KeyOrdered: resp.GetKeyOrdered(), DeadLetterTopic: resp.GetDeadLetterTopic(),
		Members: []ShareGroupMember{}, Partitions: []ShareGroupPartition{}}
	for _, m := range resp.GetMembers() {
		d.Members = append(d.Members, ShareGroupMember{MemberID: m.GetMemberId(), MemberEpoch: m.GetMemberEpoch(), Topics: m.GetTopics(), InFlight: m.GetInFlight()})
	}
	for _, p := range resp.GetPartitions() {
		sp := ShareGroupPartition{Topic: p.GetTopic(), Partition: p.GetPartition(), StartOffset: p.GetStartOffset(), EndOffset: p.GetEndOffset(),
			InFlight: p.GetInFlight(), Available: p.GetAvailable(), DeadLettered: p.GetDeadLettered()}
		sp.OldestLock.Offset, sp.OldestLock.Member, sp.OldestLock.DeliveryCount = p.GetOldestLockOffset(), p.GetOldestLockMember(), p.GetOldestLockDeliveryCount()
		if p.GetOldestLockOffset() >= 0 {
			sp.OldestLock.Expires = time.UnixMilli(p.GetOldestLockExpiresMs())
		}
		d.Partitions = append(d.Partitions, sp)
	}
	return d
}
