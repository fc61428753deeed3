package broker

// Authorization on the Kafka listeners: with authorizer.enable, the calls
// the request core serves (Produce, Fetch, ListOffsets, DeleteRecords,
// InitProducerId) are authorized by the core itself, as for the gRPC
// door, with the principal the connection established
// (kafka_security.go). Every other call kafkaBackend makes is checked,
// before it is made, by the table the gRPC interceptor uses (checkRequest,
// under the gRPC method the call stands for), and listings are filtered as
// the interceptor filters them (filterResponse). Metadata is the core's,
// checked topic by topic, as Kafka does: a topic refused gets
// TOPIC_AUTHORIZATION_FAILED while the others are answered. Every other
// call is refused whole, with the authorization error the gRPC door gives
// (Kafka's codes at the Kafka edge: TOPIC_, GROUP_ or
// CLUSTER_AUTHORIZATION_FAILED).

import (
	"context"

	"github.com/quirelog/quire/auth"
)

// kafkaAuthorized makes call under the ACLs when the authorizer is on:
// the request checked whole before, the answer filtered after.
func kafkaAuthorized[Req, Resp any](ctx context.Context, k kafkaBackend, method string, req Req, call func(context.Context, Req) (Resp, error)) (Resp, error) {
	if !k.b.guard.authorize {
		return call(ctx, req)
	}
	z, id := k.authz(ctx)
	if err := k.b.checkRequest(z, id, method, req); err != nil {
		var zero Resp
		return zero, authStatus(err)
	}
	resp, err := call(ctx, req)
	if err == nil {
		filterResponse(z, id, resp)
	}
	return resp, err
}

// authz is the authorizer of now and the caller of ctx; a context
// without an identity is User:ANONYMOUS.
func (k kafkaBackend) authz(ctx context.Context) (*auth.Authorizer, Identity) {
	id, ok := IdentityFrom(ctx)
	if !ok {
		id = Identity{Principal: auth.Anonymous, By: "none"}
	}
	return k.b.authorizer(), id
}
