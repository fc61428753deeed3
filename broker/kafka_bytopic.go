package broker

// Authorization on the Kafka listeners: with authorizer.enable, the
// request core authorizes every call it serves, as for the gRPC door,
// with the principal the connection established (kafka_security.go) put
// into the context (coreContext). A request that names partitions is
// answered topic by topic, as Kafka does: a topic refused gets
// TOPIC_AUTHORIZATION_FAILED while the others are served (byTopic below;
// Metadata and OffsetDelete in the core).

import (
	"context"

	"github.com/quirelog/quire/auth"
	"github.com/quirelog/quire/service"
)

// byTopic makes a request core call that names partitions the way
// Kafka's protocol answers it under the ACLs: topic by topic. The
// partitions of topics the caller may not do op on are left out of the
// call and answered with the core's refusal (TOPIC_AUTHORIZATION_FAILED at
// the Kafka edge) beside the answers of the others, in request order; the
// gRPC door refuses such a request whole. With the authorizer off, or
// every topic allowed, it is call(parts).
func byTopic[P, R any](ctx context.Context, k kafkaBackend, op auth.Operation, parts []P, topic func(P) string,
	refused func(P, error) R, call func([]P) ([]R, error)) ([]R, error) {
	if !k.b.guard.authorize {
		return call(parts)
	}
	names := make([]string, len(parts))
	for i, p := range parts {
		names[i] = topic(p)
	}
	denied := k.b.core.DeniedTopics(service.CoreContext(ctx), op, names)
	if len(denied) == 0 {
		return call(parts)
	}
	var allowed []P
	for _, p := range parts {
		if _, no := denied[topic(p)]; !no {
			allowed = append(allowed, p)
		}
	}
	var served []R
	if len(allowed) > 0 {
		var err error
		if served, err = call(allowed); err != nil {
			return nil, err
		}
	}
	out := make([]R, 0, len(parts))
	for _, p := range parts {
		if err, no := denied[topic(p)]; no {
			out = append(out, refused(p, err))
			continue
		}
		if len(served) > 0 { // one answer per partition, in order
			out = append(out, served[0])
			served = served[1:]
		}
	}
	return out, nil
}
