package broker

// Authorization on the Kafka listeners: with authorizer.enable, the
// request core authorizes every call it serves (all but DescribeLogDirs),
// as for the gRPC door, with the principal the connection established
// (kafka_security.go) put into the context (coreContext). A request that
// names partitions is answered topic by topic, as Kafka does: a topic
// refused gets TOPIC_AUTHORIZATION_FAILED while the others are served
// (kafka_bytopic.go; Metadata in the core). What the core does not serve
// is checked here (authorizeKafkaNeed), with Kafka's codes at the Kafka
// edge.

import (
	"context"

	"github.com/quirelog/quire/auth"
)

// authorizeKafkaNeed refuses a Kafka call the request core does not
// serve (DescribeLogDirs) unless the caller of ctx has the need it names;
// a connection not authenticated is User:ANONYMOUS.
func (b *Broker) authorizeKafkaNeed(ctx context.Context, n need) error {
	if !b.guard.authorize {
		return nil
	}
	id, ok := IdentityFrom(ctx)
	if !ok || id.Principal == "" {
		id = Identity{Principal: auth.Anonymous, By: "none"}
	}
	if r := requestOf(id.Principal, n); !b.authorizer().Authorize(r) {
		return authStatus(refusal(r))
	}
	return nil
}
