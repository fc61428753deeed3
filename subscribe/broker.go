package subscribe

import (
	"context"
	"time"

	"github.com/hashicorp/go-hclog"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/auth"
	"github.com/quirelog/quire/replica"
	"github.com/quirelog/quire/request"
)

// Core is the request core as a stream's member uses it: its group's
// heartbeats, commits and committed offsets, the positions it starts
// from and its reads, the operations every door calls. The core
// authorizes each with the principal of the context Serve was given
// (request.WithPrincipal), so a stream is held to the ACLs any other
// door is. *request.Core is one.
type Core interface {
	// ConsumerGroupHeartbeat: Read on the group, Describe on each topic
	// subscribed to by name.
	ConsumerGroupHeartbeat(ctx context.Context, hb *request.GroupHeartbeat) (*request.GroupHeartbeatResult, error)
	// CommitOffsets: Read on the group and on each topic.
	CommitOffsets(ctx context.Context, req *request.CommitOffsetsRequest) (time.Time, error)
	// FetchOffsets: Describe on the group and on each topic.
	FetchOffsets(ctx context.Context, group string, parts []request.GroupPartition) ([]request.CommittedOffset, error)
	// ListOffsetsAnywhere: Describe on each topic; each partition asked
	// of its leader.
	ListOffsetsAnywhere(ctx context.Context, parts []request.ListOffsetsPartition) ([]request.ListOffsetsResult, error)
	// Fetch: Read on each topic; with Route, each partition read by its
	// leader, here or elsewhere.
	Fetch(ctx context.Context, req *request.FetchRequest) ([]request.FetchResult, error)
	// DeniedTopics is, of names, those the principal may not do op on,
	// each with the core's refusal.
	DeniedTopics(ctx context.Context, op auth.Operation, names []string) map[string]error
	// ShareCore: the share operations of SHARED streams (shared.go).
	ShareCore
}

var _ Core = (*request.Core)(nil)

// Broker is what a stream needs of the broker it runs in besides the
// core: how an error reaches a client (the broker's one table of error
// codes), the stream's client address, the broker's shutdown and its
// logger.
type Broker interface {
	// Status is err as the stream ends with it: a gRPC status carrying a
	// quire.v1.Error.
	Status(err error) error
	// Error is err as the quire.v1.Error a client sees (its code, and
	// whether a retry may succeed).
	Error(err error) *quirev1.Error
	// ClientHost is the stream's client address, as group members list
	// it.
	ClientHost(ctx context.Context) string
	// Closing is closed when the broker shuts down; a stream then ends
	// with ShuttingDown.
	Closing() <-chan struct{}
	ShuttingDown() error
	Logger() hclog.Logger
	// GroupChanges is signalled (coalesced) after each change of this
	// node's metadata image, where the coordinator's decisions land;
	// stop ends it.
	GroupChanges() (changed <-chan struct{}, stop func())
	// Member is a member of group as this node's metadata image has it;
	// false when the image has no such member.
	Member(group, member string) (MemberView, bool)
	// TakenOver is the error a stream ends with when another stream took
	// its member over (FENCED_MEMBER_EPOCH).
	TakenOver(group, member string) error
	// Streams is this node's streams by member, for a stream taking a
	// member over to end the one it replaces.
	Streams() *Streams
}

// MemberView is a member as the coordinator last decided, replicated to
// every node's metadata image: the group's epoch and its own, its target
// assignment and the partitions of the target another member still
// holds.
type MemberView struct {
	// GroupEpoch past Epoch: a change for the coordinator to compute a
	// target from at the next heartbeat.
	GroupEpoch int32
	Epoch      int32
	Target     []request.GroupPartition // sorted by topic and partition
	Held       []request.GroupPartition // sorted
}

// ErrInvalidRequest: a stream message that breaks the protocol (the
// broker's own, so it reaches the client as INVALID_REQUEST).
var ErrInvalidRequest = replica.ErrInvalidRequest
