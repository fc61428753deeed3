package broker

import (
	"context"

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

// forwardContext marks ctx as a request this broker passes on.
func (b *Broker) forwardContext(ctx context.Context) context.Context {
	return service.ForwardContext(ctx, b.cfg.NodeID)
}
