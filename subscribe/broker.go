package subscribe

import (
	"context"
	"time"

	"github.com/hashicorp/go-hclog"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/internal/fetchbuf"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/replica"
)

// Broker is what a stream's member needs of the broker it runs in: the
// group coordinator's calls (passed on to the controller), the
// partitions' reads and offsets wherever they are led, the stream
// caller's rights, and how the broker's errors reach a client.
type Broker interface {
	// Heartbeat is a KIP-848 group heartbeat, answered by the
	// coordinator.
	Heartbeat(ctx context.Context, req *quirev1.ConsumerGroupHeartbeatRequest) (*quirev1.ConsumerGroupHeartbeatResponse, error)
	// CommitOffsets commits offs for the member.
	CommitOffsets(ctx context.Context, group string, member metadata.GroupMember, offs []metadata.OffsetCommit) error
	// FetchOffsets returns the group's committed offsets of tps (-1:
	// none).
	FetchOffsets(ctx context.Context, group string, tps []metadata.TopicPartition) ([]metadata.CommittedOffset, error)
	// ListOffset is ListOffsets of one partition (ts -2 earliest, -1
	// latest), asked of its leader.
	ListOffset(ctx context.Context, topic string, partition int32, ts int64) (int64, error)
	// Fetch reads the batches of every spec from its leader, here or
	// elsewhere, long-polling up to wait until anything is there, at
	// most maxBytes in all. A result's Buf, if any, is from
	// internal/fetchbuf and now the caller's.
	Fetch(ctx context.Context, specs []Spec, wait time.Duration, maxBytes int) []Result
	// AuthorizeRead refuses a topic the stream's caller may not read.
	AuthorizeRead(ctx context.Context, topic string) error
	// CheckSubscription refuses a subscription that no heartbeat would
	// take (a topic name no topic can have), as ConsumerGroupHeartbeat
	// does.
	CheckSubscription(sub *quirev1.GroupSubscription) error
	// ClientHost is the stream's client address, as group members list
	// it.
	ClientHost(ctx context.Context) string
	// Status is err as the stream ends with it: a gRPC status carrying a
	// quire.v1.Error.
	Status(err error) error
	// Error is err as the quire.v1.Error a client sees (its code, and
	// whether a retry may succeed).
	Error(err error) *quirev1.Error
	// Closing is closed when the broker shuts down; a stream then ends
	// with ShuttingDown.
	Closing() <-chan struct{}
	ShuttingDown() error
	Logger() hclog.Logger
}

// ErrInvalidRequest: a stream message that breaks the protocol (the
// broker's own, so it reaches the client as INVALID_REQUEST).
var ErrInvalidRequest = replica.ErrInvalidRequest

// Spec is one partition of a fetch.
type Spec struct {
	Topic     string
	Partition int32
	Offset    int64
}

// Result is one partition's answer to a fetch.
type Result struct {
	Spec
	Batches []byte
	Err     error
	Buf     *[]byte // the internal/fetchbuf buffer holding Batches, if any
}

// release gives back the buffers of results not held.
func release(results []Result) {
	for i := range results {
		if results[i].Buf != nil {
			fetchbuf.Put(results[i].Buf)
			results[i].Buf, results[i].Batches = nil, nil
		}
	}
}
