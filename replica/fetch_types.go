package replica

// The replica fetch in plain types, for the follower's fetcher and the
// leader's answer alike; a front end (the broker's gRPC ReplicaService)
// turns them into its wire messages and back.

import (
	"time"

	"github.com/quirelog/quire/storage"
)

// FetchRequest is one follower's pull of many partitions from one leader.
type FetchRequest struct {
	ReplicaID   int32
	Incarnation string // the follower process's, as registered
	MaxWaitMs   int32
	MinBytes    int32
	MaxBytes    int32
	Partitions  []FetchPartition
	// Session, on a leader, is the fetch session of the follower's stream
	// (nil: a fetch on its own). In one, the partitions are the session's
	// own, kept from one fetch to the next: HandleFetch notes in them what
	// it checked, and a partition the follower did not change since is
	// only refreshed. The answer is then valid until the session's next
	// fetch.
	Session *LeaderSession
	// Incremental says the request is a fetch session's after its first:
	// Partitions holds only those changed since the session's last fetch
	// (new ones, or a changed fetch offset, epoch or limit), and
	// Forgotten those it no longer fetches; every other partition of the
	// session is fetched as last named. Only a LeaderSession takes one
	// (Manager.HandleSessionFetch).
	Incremental bool
	Forgotten   []storage.TopicPartition
}

// FetchPartition is one partition of a FetchRequest.
type FetchPartition struct {
	Topic              string
	Partition          int32
	CurrentLeaderEpoch int32
	FetchOffset        int64
	// LastFetchedEpoch is the epoch of the follower's batch just below
	// FetchOffset, or -1.
	LastFetchedEpoch  int32
	PartitionMaxBytes int32
	// LogFailed says the follower's log has failed: it takes no records,
	// and the leader drops it from the ISR and does not add it back.
	LogFailed bool
	// LogStartOffset is the follower's log start, or -1 when it did not
	// say (a follower that predates it): what the leader's DeleteRecords
	// waits for on every in-sync follower.
	LogStartOffset int64

	// checked is the partition a leader checked this fetch against in
	// full, and found nothing to refuse, within a fetch session; a
	// changed fetch is a new FetchPartition, without it.
	checked *Partition
	// refreshed is when the leader last recorded this fetch in the
	// follower's state (zero: never; idleRefresh).
	refreshed time.Time
}

// FetchResponse answers the partitions of a FetchRequest, in its order.
type FetchResponse struct {
	Partitions []FetchResult
	// Done, when set, is called once the records are no longer used (a
	// follower's fetcher calls it once it has appended them): they may
	// lie in a buffer the transport lends.
	Done func()
	// Session says the leader keeps the fetch session the request came
	// in: the follower's next fetch may be incremental.
	Session bool
}

// done calls Done, if set.
func (r *FetchResponse) done() {
	if r.Done != nil {
		r.Done()
	}
}

// FetchResult is one partition's answer. Err is set when the leader
// refused it (storage.ErrOffsetOutOfRange: the follower truncates or
// restarts its log); Diverging when the follower's log has diverged.
type FetchResult struct {
	Topic     string
	Partition int32
	Err       error
	Records   []byte
	// Buffer, in a leader's answer, is the buffer from Config.ReadBuffers
	// that Records lies in (nil: none). It belongs to whoever holds the
	// answer: give it back (Buffers.Put) once the records are sent, or
	// call Manager.ReleaseFetch.
	Buffer         *[]byte
	Diverging      *EpochEndOffset
	HighWatermark  int64
	LogStartOffset int64
	LogEndOffset   int64
	// Unchanged, in a follower's answer, says the leader's fetch session
	// left the partition out: nothing new since the answer before, whose
	// offsets these are, and which the follower has applied.
	Unchanged bool
}

// EpochEndOffset is the largest epoch <= the follower's last fetched one
// that the leader's log knows, and where that epoch ends there (KIP-320).
type EpochEndOffset struct {
	Epoch     int32
	EndOffset int64
}
