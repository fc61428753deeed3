package broker

// Who calls and what they may do. Every call gets a principal: the user
// of SCRAM credentials sent as gRPC metadata (quire-user, quire-password),
// checked against the salted credential in the metadata image; else the
// subject of a verified client certificate, mapped by
// tls.principal.mapping.rules; else User:ANONYMOUS. The internal services
// (replication, raft, controller) answer only node principals once
// super.users names them; with authorizer.enable, every other call is
// checked against the ACLs of the metadata image (authz.go).

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	grpcmd "google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/quirelog/quire/auth"
	"github.com/quirelog/quire/internal/errcode"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/service"
)

// The gRPC metadata keys of SCRAM authentication.
const (
	UserMetadataKey     = "quire-user"
	PasswordMetadataKey = "quire-password"
)

// Authentication and authorization errors (service/errors.go).
var (
	ErrAuthenticationFailed       = service.ErrAuthenticationFailed
	ErrTopicAuthorizationFailed   = service.ErrTopicAuthorizationFailed
	ErrGroupAuthorizationFailed   = service.ErrGroupAuthorizationFailed
	ErrClusterAuthorizationFailed = service.ErrClusterAuthorizationFailed
)

// internalPrefix names the services only nodes may call.
const internalPrefix = "/quire.internal.v1."

// Identity is who a call was made as (service.Identity).
type Identity = service.Identity

// IdentityFrom returns the identity of a call, as the auth interceptors
// found it.
func IdentityFrom(ctx context.Context) (Identity, bool) { return service.IdentityFrom(ctx) }

// guard holds what authentication needs that does not change while a
// node runs, and a cache of verified passwords.
type guard struct {
	rules      *auth.MappingRules
	superUsers map[string]bool
	authorize  bool

	mu       sync.Mutex
	verified map[[32]byte]string // sha256(user, password, stored key) -> user
}

// unknownUser is verified against for a user that does not exist.
var unknownUser = func() auth.Credential {
	c, err := auth.DeriveCredential("unknown-user", make([]byte, 16), auth.DefaultIterations)
	if err != nil {
		panic(err)
	}
	return c
}()

// maxVerified bounds the cache of verified passwords (cleared when full).
const maxVerified = 10000

func newGuard(s *SecurityConfig) (*guard, error) {
	rules, err := auth.ParseMappingRules(s.PrincipalMappingRules)
	if err != nil {
		return nil, fmt.Errorf("%w: tls.principal.mapping.rules: %v", ErrInvalidConfig, err)
	}
	su, err := auth.ParseSuperUsers(s.SuperUsers)
	if err != nil {
		return nil, fmt.Errorf("%w: super.users: %v", ErrInvalidConfig, err)
	}
	return &guard{rules: rules, superUsers: su, authorize: s.AuthorizerEnable, verified: map[[32]byte]string{}}, nil
}

// nodesOnly reports whether the internal services are closed to
// non-nodes: once super.users names the node principals.
func (g *guard) nodesOnly() bool { return len(g.superUsers) > 0 }

// authenticate finds the identity of a call against img.
func (g *guard) authenticate(ctx context.Context, img *metadata.Image) (Identity, error) {
	// Not FromIncomingContext: that copies every header, on every call.
	if users := grpcmd.ValueFromIncomingContext(ctx, UserMetadataKey); len(users) > 0 {
		pw := grpcmd.ValueFromIncomingContext(ctx, PasswordMetadataKey)
		if len(users) != 1 || len(pw) != 1 {
			return Identity{}, fmt.Errorf("%w: send one %s and one %s", ErrAuthenticationFailed, UserMetadataKey, PasswordMetadataKey)
		}
		if !g.verify(img, users[0], pw[0]) {
			return Identity{}, fmt.Errorf("%w: user %q with this password", ErrAuthenticationFailed, users[0])
		}
		return Identity{Principal: auth.UserPrincipal(users[0]), By: "scram"}, nil
	}
	if p, ok := peer.FromContext(ctx); ok {
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.VerifiedChains) > 0 && len(ti.State.VerifiedChains[0]) > 0 {
			subject := ti.State.VerifiedChains[0][0].Subject.String()
			name, err := g.rules.Map(subject)
			if err != nil {
				return Identity{}, fmt.Errorf("%w: certificate %q: %v", ErrAuthenticationFailed, subject, err)
			}
			return Identity{Principal: auth.UserPrincipal(name), By: "certificate"}, nil
		}
	}
	return Identity{Principal: auth.Anonymous, By: "none"}, nil
}

// verify checks a password against the user's stored credential; a
// success is remembered for that credential, so that only the first call
// of a connection pays for the key derivation.
func (g *guard) verify(img *metadata.Image, user, password string) bool {
	cred, ok := img.UserCredential(user)
	if !ok {
		// The same work as for a user that exists, so that the time an
		// answer takes does not tell which users do.
		unknownUser.Verify(password)
		return false
	}
	h := sha256.New()
	for _, part := range [][]byte{[]byte(user), {0}, []byte(password), {0}, cred.StoredKey, cred.Salt, {0}, cred.StoredKey512, cred.Salt512} {
		h.Write(part)
	}
	var key [32]byte
	h.Sum(key[:0])
	g.mu.Lock()
	_, hit := g.verified[key]
	g.mu.Unlock()
	if hit {
		return true
	}
	if !cred.Verify(password) {
		return false
	}
	g.mu.Lock()
	if len(g.verified) >= maxVerified {
		clear(g.verified)
	}
	g.verified[key] = user
	g.mu.Unlock()
	return true
}

// isNode reports whether id is a node principal: authenticated by
// certificate and named in super.users.
func (g *guard) isNode(id Identity) bool {
	return id.By == "certificate" && g.superUsers[id.Principal]
}

// authStatus is the status of an authentication or authorization error:
// UNAUTHENTICATED or PERMISSION_DENIED, with the quire.v1.Error detail.
func authStatus(err error) error {
	c := codes.PermissionDenied
	if errors.Is(err, ErrAuthenticationFailed) {
		c = codes.Unauthenticated
	}
	return errcode.Status(c, service.ErrorOf(err))
}

// admit authenticates a call and refuses a non-node on an internal
// service; it returns the context carrying the identity.
func (b *Broker) admit(ctx context.Context, method string) (context.Context, Identity, error) {
	id, err := b.guard.authenticate(ctx, b.cluster.node.Image())
	if err != nil {
		return nil, Identity{}, authStatus(err)
	}
	if strings.HasPrefix(method, internalPrefix) && b.guard.nodesOnly() && !b.guard.isNode(id) {
		return nil, Identity{}, authStatus(fmt.Errorf("%w: %s may not call %s: only nodes (certificate principals in super.users) may",
			ErrClusterAuthorizationFailed, id.Principal, method))
	}
	return service.WithIdentity(ctx, id), id, nil
}

// authInterceptors authenticate every call and authorize it (authz.go).
func (b *Broker) authInterceptors() []grpc.ServerOption {
	unary := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		ctx, id, err := b.admit(ctx, info.FullMethod)
		if err != nil {
			return nil, err
		}
		if !b.guard.authorize || strings.HasPrefix(info.FullMethod, internalPrefix) {
			return handler(ctx, req)
		}
		z := b.authorizer()
		if err := b.checkRequest(z, id, info.FullMethod, req); err != nil {
			return nil, authStatus(err)
		}
		resp, err := handler(ctx, req)
		if err == nil {
			filterResponse(z, id, resp)
		}
		return resp, err
	}
	stream := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx, id, err := b.admit(ss.Context(), info.FullMethod)
		if err != nil {
			return err
		}
		w := &authStream{ServerStream: ss, ctx: ctx}
		if b.guard.authorize && !strings.HasPrefix(info.FullMethod, internalPrefix) {
			w.check = func(m any) error {
				if err := b.checkRequest(b.authorizer(), id, info.FullMethod, m); err != nil {
					return authStatus(err)
				}
				return nil
			}
		}
		return handler(srv, w)
	}
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(unary), grpc.ChainStreamInterceptor(stream)}
}

// authStream carries the identity and checks each message received.
type authStream struct {
	grpc.ServerStream
	ctx   context.Context
	check func(any) error
}

func (s *authStream) Context() context.Context { return s.ctx }

func (s *authStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if s.check != nil {
		return s.check(m)
	}
	return nil
}
