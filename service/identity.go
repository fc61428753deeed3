package service

import (
	"context"
	"net"
	"strconv"

	grpcmd "google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/quirelog/quire/request"
)

// Identity is who a caller is, as the node's authentication found it
// (the gRPC interceptors, a Kafka listener's TLS or SASL).
type Identity struct {
	Principal string
	// By is "certificate", "scram", "plain" (SASL/PLAIN on a Kafka
	// listener) or "none".
	By string
}

type identityKey struct{}

// WithIdentity returns ctx carrying the caller's identity.
func WithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// IdentityFrom returns the identity of a call, as the auth interceptors
// found it.
func IdentityFrom(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}

// CoreContext is ctx as the core takes it: carrying the principal the
// auth interceptor found (an anonymous caller's is the core's default,
// which spares every call of the common case a context of its own).
func CoreContext(ctx context.Context) context.Context {
	if id, ok := IdentityFrom(ctx); ok && id.Principal != request.Anonymous {
		return request.WithPrincipal(ctx, id.Principal)
	}
	return ctx
}

func coreContext(ctx context.Context) context.Context { return CoreContext(ctx) }

// ForwardedHeader marks a request a broker passed on; its value is that
// broker's id.
const ForwardedHeader = "quire-forwarded-by"

// Forwarded reports whether ctx is a request another broker passed on:
// the core passes on only a client's own.
func Forwarded(ctx context.Context) bool {
	// Not FromIncomingContext: that copies every header, on every call.
	return len(grpcmd.ValueFromIncomingContext(ctx, ForwardedHeader)) > 0
}

func forwarded(ctx context.Context) bool { return Forwarded(ctx) }

// ForwardContext marks ctx's outgoing call as passed on by node.
func ForwardContext(ctx context.Context, node int32) context.Context {
	return grpcmd.AppendToOutgoingContext(ctx, ForwardedHeader, strconv.Itoa(int(node)))
}

// ClientHost is the IP address of the calling client (of a gRPC call or
// a Kafka listener's request), without its port, which changes with each
// connection; "" when unknown.
func ClientHost(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return ""
	}
	if host, _, err := net.SplitHostPort(p.Addr.String()); err == nil {
		return host
	}
	return p.Addr.String()
}
