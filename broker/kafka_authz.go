package broker

// Authorization on the Kafka listeners: with authorizer.enable, the calls
// the request core serves (Produce, Fetch, ListOffsets, DeleteRecords,
// InitProducerId, FindCoordinator, the group calls, the ACL and SCRAM
// administration) are authorized by the core itself, as for the gRPC
// door, with the principal the connection established
// (kafka_security.go). Every other call kafkaBackend makes is checked,
// before it is made, by the table the gRPC interceptor uses (checkRequest,
// under the gRPC method the call stands for), and listings are filtered as
// the interceptor filters them (filterResponse). Metadata is checked
// topic by topic, as Kafka does: a topic refused gets
// TOPIC_AUTHORIZATION_FAILED while the others are answered. Every other
// call is refused whole, with the authorization error the gRPC door gives
// (Kafka's codes at the Kafka edge: TOPIC_, GROUP_ or
// CLUSTER_AUTHORIZATION_FAILED).

import (
	"context"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/auth"
)

// authz is the authorizer of now and the caller of ctx; a context
// without an identity is User:ANONYMOUS.
func (k kafkaBackend) authz(ctx context.Context) (*auth.Authorizer, Identity) {
	id, ok := IdentityFrom(ctx)
	if !ok {
		id = Identity{Principal: auth.Anonymous, By: "none"}
	}
	return k.b.authorizer(), id
}

// deniedTopics checks each topic of a request alone (one builds a
// request naming that topic only) and returns the refusal of each topic
// refused; nil with the authorizer off or nothing refused.
func (k kafkaBackend) deniedTopics(ctx context.Context, method string, topics []string, one func(topic string) any) (map[string]*quirev1.Error, *auth.Authorizer, Identity) {
	if !k.b.guard.authorize {
		return nil, nil, Identity{}
	}
	z, id := k.authz(ctx)
	var denied map[string]*quirev1.Error
	for _, t := range topics {
		if _, done := denied[t]; done {
			continue
		}
		if err := k.b.checkRequest(z, id, method, one(t)); err != nil {
			if denied == nil {
				denied = map[string]*quirev1.Error{}
			}
			denied[t] = toError(err)
		}
	}
	return denied, z, id
}

// authorizedMetadata answers the topics named that the caller may
// describe (and create, where the request would create them), each
// refused one with TOPIC_AUTHORIZATION_FAILED, and of all topics only
// those it may describe. The brokers are answered in every case: a
// client refused every topic still learns where the brokers are.
func (k kafkaBackend) authorizedMetadata(ctx context.Context, req *quirev1.GetMetadataRequest) (*quirev1.GetMetadataResponse, error) {
	const method = quirev1.Metadata_GetMetadata_FullMethodName
	denied, z, id := k.deniedTopics(ctx, method, req.Topics, func(t string) any {
		return &quirev1.GetMetadataRequest{Topics: []string{t}, AllowAutoTopicCreation: req.AllowAutoTopicCreation}
	})
	if !k.b.guard.authorize {
		return k.metadata(ctx, req)
	}
	asked := req.Topics
	if denied != nil {
		kept := req.Topics[:0:0]
		for _, t := range req.Topics {
			if _, ok := denied[t]; !ok {
				kept = append(kept, t)
			}
		}
		req.Topics = kept
	}
	resp, err := k.metadata(ctx, req)
	if err != nil {
		return nil, err
	}
	if len(asked) > 0 && len(req.Topics) == 0 {
		// Every topic named was refused: asked for none, the backend
		// answered all, of which none was asked for.
		resp.Topics = nil
	}
	filterResponse(z, id, resp)
	for _, t := range asked {
		if e, ok := denied[t]; ok {
			resp.Topics = append(resp.Topics, &quirev1.TopicMetadata{Name: t, Error: e})
			delete(denied, t) // a topic named twice is answered once
		}
	}
	return resp, nil
}
