package replica

import (
	"context"

	"github.com/quirelog/quire/storage"
)

// The Manager's dependencies, given to New. Each is as small as the
// replicas need; the broker implements them over the metadata node, the
// controller forwarder and its node-to-node connections, and the tests
// over fakes.

// Logs is the storage engine's side: the partition logs of the data
// directory. A replica records its HW in its own log
// (storage.Log.SetHighWatermark), not here: an HW move takes no lock
// shared by all partitions.
type Logs interface {
	// GetOrCreate opens (or creates) a partition's log with cfg.
	GetOrCreate(topic string, partition int32, cfg storage.LogConfig) (*storage.Log, error)
	// Delete closes and removes a partition's log.
	Delete(topic string, partition int32) error
	// Logs lists the open logs.
	Logs() []*storage.Log
}

// Controller is the controller's side of ISR changes.
type Controller interface {
	// AlterPartition asks for want's ISR at want's leader and partition
	// epochs and returns the partition as committed. A refusal (a newer
	// epoch, a fenced follower) wraps ErrISRRefused; any other error
	// means the change may or may not have been committed.
	AlterPartition(ctx context.Context, topic string, partition int32, want Assignment) (Assignment, error)
}

// Buffers lends the leader the buffers it reads follower fetches into
// (FetchResult.Buffer). Get returns a buffer of length n (its contents
// undefined); Put takes one back once nothing refers to it. gRPC's
// mem.BufferPool has this shape, so a front end that sends the records
// straight from the buffer hands it to its transport to give back.
type Buffers interface {
	Get(n int) *[]byte
	Put(b *[]byte)
}

// freshBuffers is the Buffers of a Config without any: a new buffer for
// every read, left to the garbage collector.
type freshBuffers struct{}

func (freshBuffers) Get(n int) *[]byte { b := make([]byte, n); return &b }
func (freshBuffers) Put(*[]byte)       {}

// Brokers looks up the registration of a broker as the metadata has it.
type Brokers interface {
	Registration(id int32) (Registration, bool)
}

// Registration is what a leader needs to know of a follower's broker:
// only its registered process (incarnation) may fetch, and only an
// unfenced broker may join an ISR.
type Registration struct {
	Incarnation string
	Fenced      bool
}

// Peers carries a follower's fetch to the broker that leads the
// partitions in it. While the connection to the leader is down, a fetch
// should wait for it to come back within ctx rather than fail at once:
// the fetcher then sends again without a backoff, so replication resumes
// as soon as the link does.
type Peers interface {
	ReplicaFetch(ctx context.Context, leader int32, req *FetchRequest) (*FetchResponse, error)
}

// SessionPeers is Peers that can also keep a session with a leader for
// the fetches of one fetcher (one stream, say), sparing each fetch the
// setup of a call of its own. A fetcher whose Peers is one opens a
// session when it starts and closes it when it stops.
type SessionPeers interface {
	Peers
	OpenFetchSession(leader int32) FetchSession
}

// FetchSession carries one fetcher's fetches to its leader, one at a
// time; it is not for concurrent use.
type FetchSession interface {
	// Fetch is Peers.ReplicaFetch over the session: the same answer, the
	// same errors, and ctx bounds it the same way (ending ctx ends the
	// call in flight; the session stays usable for the next one).
	Fetch(ctx context.Context, req *FetchRequest) (*FetchResponse, error)
	// Close ends the session.
	Close()
}

// unarySession is the FetchSession of a Peers without sessions: every
// fetch a call of its own.
type unarySession struct {
	peers  Peers
	leader int32
}

func (s unarySession) Fetch(ctx context.Context, req *FetchRequest) (*FetchResponse, error) {
	return s.peers.ReplicaFetch(ctx, s.leader, req)
}

func (unarySession) Close() {}

// openFetchSession opens a session with leader over peers.
func openFetchSession(peers Peers, leader int32) FetchSession {
	if sp, ok := peers.(SessionPeers); ok {
		return sp.OpenFetchSession(leader)
	}
	return unarySession{peers: peers, leader: leader}
}
