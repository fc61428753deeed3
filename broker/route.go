package broker

import (
	"context"
	"errors"
	"fmt"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/replica"
	"github.com/quirelog/quire/request"
	"github.com/quirelog/quire/service"
)

// Routing: a plain gRPC client (grpcurl, a script) may send a unary
// Produce, ProduceRecords, FetchRecords, FetchRecordsMulti or
// DeleteRecords to any broker of a cluster. A partition led elsewhere is
// passed on to its leader over the node-to-node connection, once (the
// request core decides, with Route; its Forwarder is broker/core.go's): a
// request that was already passed on is answered NOT_LEADER_OR_FOLLOWER
// (with the leader's id) rather than passed on again, so two brokers with
// different views cannot bounce it. The pipelined APIs (ProduceStream,
// Fetch, FetchStream) are for clients that route themselves, and answer
// NOT_LEADER_OR_FOLLOWER.

// routeTo returns the address of the leader to pass a request on to when
// err says this broker does not lead the partition and ctx is a client's
// own request.
func (b *Broker) routeTo(ctx context.Context, err error) (string, bool) {
	var nle *replica.NotLeaderError
	if !errors.As(err, &nle) || nle.Leader < 0 || nle.Leader == b.cfg.NodeID {
		return "", false
	}
	if service.Forwarded(ctx) {
		return "", false
	}
	return b.cluster.brokerAddr(nle.Leader)
}

func (b *Broker) forwardContext(ctx context.Context) context.Context {
	return service.ForwardContext(ctx, b.cfg.NodeID)
}

// listOffsetAnywhere is ListOffsets for one partition, asked of its
// leader wherever that is: -1 when no record has a timestamp at or after
// ts.
func (b *Broker) listOffsetAnywhere(ctx context.Context, topic string, part int32, ts int64) (int64, error) {
	lp := &quirev1.ListOffsetsPartition{Topic: topic, Partition: part, TimestampMs: ts}
	if addr, ok := b.routeTo(ctx, b.ledElsewhere(topic, part)); ok {
		cc, err := b.cluster.peer(addr)
		if err != nil {
			return -1, err
		}
		resp, err := quirev1.NewConsumerClient(cc).ListOffsets(b.forwardContext(ctx), &quirev1.ListOffsetsRequest{Partitions: []*quirev1.ListOffsetsPartition{lp}})
		if err != nil {
			return -1, err
		}
		if len(resp.Partitions) != 1 {
			return -1, fmt.Errorf("broker: the leader at %s answered %d partitions for 1", addr, len(resp.Partitions))
		}
		if res := resp.Partitions[0]; res.Error != nil {
			return -1, fromWire(res.Error)
		}
		return resp.Partitions[0].Offset, nil
	}
	res := b.core.ListOffset(ctx, request.ListOffsetsPartition{Topic: topic, Partition: part, Timestamp: ts})
	if res.Err != nil {
		return -1, res.Err
	}
	return res.Offset, nil
}

// ledElsewhere returns the NOT_LEADER error for a partition the metadata
// image says another broker leads, else nil: the partition is read here,
// and reading it says what is wrong with it, if anything.
func (b *Broker) ledElsewhere(topic string, p int32) error {
	t, ok := b.cluster.image().Topic(topic)
	if !ok || p < 0 || int(p) >= len(t.Partitions) {
		return nil
	}
	pi := t.Partitions[p]
	if pi.Leader < 0 || pi.Leader == b.cfg.NodeID {
		return nil
	}
	return &replica.NotLeaderError{Topic: topic, Partition: p, Leader: pi.Leader, Epoch: pi.LeaderEpoch}
}
