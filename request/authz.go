package request

import (
	"context"
	"fmt"
	"slices"

	"github.com/quirelog/quire/auth"
)

// Authorizer decides requests against the ACLs in force when it is
// asked (the broker evaluates against its current metadata image).
type Authorizer interface {
	Authorize(r auth.Request) bool
	// AuthorizeAny reports whether principal may do op on some resource
	// of type rt.
	AuthorizeAny(principal string, op auth.Operation, rt auth.ResourceType) bool
}

type principalKey struct{}

// Anonymous is the principal of a caller that did not authenticate.
const Anonymous = auth.Anonymous

// WithPrincipal returns ctx carrying the principal a door authenticated
// the caller as; the core authorizes every operation as it.
func WithPrincipal(ctx context.Context, principal string) context.Context {
	return context.WithValue(ctx, principalKey{}, principal)
}

// Principal is the principal of ctx; Anonymous when the door put none.
func Principal(ctx context.Context) string {
	if p, ok := ctx.Value(principalKey{}).(string); ok && p != "" {
		return p
	}
	return Anonymous
}

type nodeKey struct{}

// asNode returns ctx for a write the node makes on its own behalf (a
// share group's dead letters, KIP-1191's broker write): no principal's
// ACLs apply to it, and it never creates a topic.
func asNode(ctx context.Context) context.Context {
	return context.WithValue(ctx, nodeKey{}, true)
}

// isNode reports whether ctx is the node's own (asNode).
func isNode(ctx context.Context) bool {
	on, _ := ctx.Value(nodeKey{}).(bool)
	return on
}

// distinct is the n names at(i) gives, each once, in the order first
// named.
func distinct(n int, at func(i int) string) []string {
	var out []string
	for i := range n {
		if t := at(i); !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// authorizeEach is authorizeTopics of the n topics at(i) names, each
// once; with authorization off it costs nothing.
func (c *Core) authorizeEach(ctx context.Context, op auth.Operation, n int, at func(i int) string, create func(topic string) bool) error {
	if c.cfg.Authorizer == nil {
		return nil
	}
	return c.authorizeTopics(ctx, op, distinct(n, at), create)
}

// authorizeTopics refuses the whole operation unless the principal of ctx
// may do op on every topic named, with Create too for those create says
// will be created (Create on the cluster is enough, as in Kafka).
func (c *Core) authorizeTopics(ctx context.Context, op auth.Operation, topics []string, create func(topic string) bool) error {
	z := c.cfg.Authorizer
	if z == nil || isNode(ctx) {
		return nil
	}
	principal := Principal(ctx)
	for _, t := range topics {
		r := auth.Request{Principal: principal, Operation: op, ResourceType: auth.ResourceTopic, ResourceName: t}
		if !z.Authorize(r) {
			return c.fail(Refusal(r))
		}
	}
	for _, t := range topics {
		if create == nil || !create(t) {
			continue
		}
		r := auth.Request{Principal: principal, Operation: auth.OpCreate, ResourceType: auth.ResourceTopic, ResourceName: t}
		if z.Authorize(r) || z.Authorize(auth.Request{Principal: principal, Operation: auth.OpCreate, ResourceType: auth.ResourceCluster, ResourceName: auth.ClusterName}) {
			continue
		}
		return c.fail(Refusal(r))
	}
	return nil
}

// Refusal is the error for a refused request, by resource type.
func Refusal(r auth.Request) error {
	sentinel := ErrClusterAuthorizationFailed
	kind := "cluster"
	switch r.ResourceType {
	case auth.ResourceTopic:
		sentinel, kind = ErrTopicAuthorizationFailed, "topic"
	case auth.ResourceGroup:
		sentinel, kind = ErrGroupAuthorizationFailed, "group"
	}
	return fmt.Errorf("%w: %s lacks %s on %s %q", sentinel, r.Principal, r.Operation, kind, r.ResourceName)
}

// DeniedTopics is, for a door whose protocol answers each topic on its
// own (Kafka's), the topics among names that the principal of ctx may not
// do op on, each with the error the core would refuse the whole
// operation with; nil with authorization off or every topic allowed. The
// door leaves those topics out of the operation and answers them with
// that error, as Kafka answers TOPIC_AUTHORIZATION_FAILED beside the
// topics it serves.
func (c *Core) DeniedTopics(ctx context.Context, op auth.Operation, names []string) map[string]error {
	if c.cfg.Authorizer == nil {
		return nil
	}
	var denied map[string]error
	for _, t := range names {
		if _, seen := denied[t]; seen {
			continue
		}
		if err := c.authorizeTopics(ctx, op, []string{t}, nil); err != nil {
			if denied == nil {
				denied = map[string]error{}
			}
			denied[t] = err
		}
	}
	return denied
}
