// Package txn is the transaction coordinator's state machine: one
// transactional id's state (Kafka's TransactionMetadata) and the
// transitions the coordinator's calls make on it, as pure functions: a
// state and a call in, the next state (to write to the metadata log) or
// a refusal out. It does no I/O and keeps no clock; the coordinator
// around it (package txncoord) writes the states, sends the markers and
// runs the timers.
//
// A transactional id goes
//
//	Empty ──AddPartitions/AddOffsets──▶ Ongoing ──End(commit)──▶ PrepareCommit ──markers written──▶ CompleteCommit
//	                                       │  └──End(abort), timeout, Init──▶ PrepareAbort ──markers written──▶ CompleteAbort
//	CompleteCommit, CompleteAbort ──AddPartitions──▶ Ongoing;  ──Init──▶ Empty (epoch bumped)
//
// Transaction version 2 (KIP-890 part 2, BumpEpoch): each transaction's
// end bumps the producer epoch, and its markers carry the new epoch, so a
// late batch of the transaction (a retry of the old epoch) is refused by
// every partition instead of opening a transaction no marker will end.
package txn

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
)

// State is a transaction's state, numbered as stored (the
// TransactionState record's state field).
type State int8

// The states, in Kafka's names.
const (
	Empty State = iota
	Ongoing
	PrepareCommit
	PrepareAbort
	CompleteCommit
	CompleteAbort
)

var stateNames = [...]string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort"}

func (s State) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", int8(s))
}

// ParseState is String's inverse.
func ParseState(name string) (State, bool) {
	for i, n := range stateNames {
		if n == name {
			return State(i), true
		}
	}
	return 0, false
}

// Valid reports whether s is a known state.
func (s State) Valid() bool { return s >= Empty && s <= CompleteAbort }

// Preparing reports whether markers are being written.
func (s State) Preparing() bool { return s == PrepareCommit || s == PrepareAbort }

// MaxEpoch is the largest producer epoch a producer is given; the
// coordinator gives the producer a new id rather than bump past it.
const MaxEpoch = math.MaxInt16 - 1

// FenceEpoch is the epoch past MaxEpoch, kept for the markers that end a
// transaction at MaxEpoch (as Kafka does): they fence that producer's late
// batches as any bump does. No producer call is accepted at it.
const FenceEpoch = MaxEpoch + 1

// Sentinels, one per Kafka error code the transitions answer.
var (
	// ErrConcurrentTransactions: the transaction is being ended (its
	// markers are being written); retry shortly.
	ErrConcurrentTransactions = errors.New("txn: the transaction is still being ended")
	// ErrProducerFenced: a newer producer with the same transactional id
	// bumped the epoch.
	ErrProducerFenced = errors.New("txn: producer fenced by a newer epoch")
	// ErrInvalidProducerIDMapping: the producer id is not the
	// transactional id's (or it has none).
	ErrInvalidProducerIDMapping = errors.New("txn: producer id not the transactional id's")
	// ErrInvalidTxnState: the call does not fit the transaction's state
	// (ending a transaction never begun, committing one being aborted, an
	// offset commit for a group not in the transaction).
	ErrInvalidTxnState = errors.New("txn: invalid transaction state for this request")
	// ErrInvalidTimeout: a transaction timeout not in (0, max].
	ErrInvalidTimeout = errors.New("txn: invalid transaction timeout")
	// ErrInvalidTransactionalID: an empty transactional id, or one too
	// long.
	ErrInvalidTransactionalID = errors.New("txn: invalid transactional id")
)

// MaxIDLen is the longest transactional id, in bytes.
const MaxIDLen = 1024

// Producer names the producer a call comes from.
type Producer struct {
	ID    string // the transactional id
	PID   int64
	Epoch int16
}

// Member is the consumer group member a transaction's offsets are sent
// as (TxnOffsetCommit v3 and later: its member id, generation or member
// epoch, group instance id). The zero value names none: such offsets are
// not checked against the group's membership.
type Member struct {
	ID         string
	InstanceID string
	Epoch      int32
}

// TopicPartition names a partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func compareTP(a, b TopicPartition) int {
	return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
}

// Offset is one partition's offset staged by a transactional offset
// commit.
type Offset struct {
	Topic       string
	Partition   int32
	Offset      int64
	LeaderEpoch int32
	Metadata    string
}

// GroupOffsets is a consumer group in a transaction, with the offsets
// staged for it (committed with the transaction).
type GroupOffsets struct {
	Group   string
	Offsets []Offset
}

// Txn is one transactional id's state.
type Txn struct {
	ID            string
	ProducerID    int64
	ProducerEpoch int16
	// LastProducerEpoch is the epoch before the latest bump (-1: none):
	// a call retried with it after the bump is recognised.
	LastProducerEpoch int16
	State             State
	TimeoutMs         int32
	// StartMs is when the ongoing transaction began; UpdateMs when the
	// state last changed (the coordinator's clock, ms).
	StartMs, UpdateMs int64
	// Partitions are the transaction's partitions, sorted.
	Partitions []TopicPartition
	// Groups are the consumer groups in the transaction, sorted, with
	// their staged offsets.
	Groups []GroupOffsets
	// BumpEpoch: transaction version 2, the end of each transaction
	// bumps the epoch.
	BumpEpoch bool
	// CoordinatorEpoch is the epoch of the coordinator that wrote the
	// prepare state; the markers carry it.
	CoordinatorEpoch int32
}

// Clone returns a deep copy.
func (t Txn) Clone() Txn {
	t.Partitions = slices.Clone(t.Partitions)
	gs := make([]GroupOffsets, len(t.Groups))
	for i, g := range t.Groups {
		gs[i] = GroupOffsets{Group: g.Group, Offsets: slices.Clone(g.Offsets)}
	}
	if t.Groups == nil {
		gs = nil
	}
	t.Groups = gs
	return t
}

// checkProducer fences a call by producer id and epoch.
func (t *Txn) checkProducer(pid int64, epoch int16) error {
	if pid != t.ProducerID {
		return fmt.Errorf("%w: transactional id %q has producer id %d, not %d", ErrInvalidProducerIDMapping, t.ID, t.ProducerID, pid)
	}
	if epoch != t.ProducerEpoch || epoch > MaxEpoch {
		return fmt.Errorf("%w: transactional id %q is at epoch %d, the call has %d", ErrProducerFenced, t.ID, t.ProducerEpoch, epoch)
	}
	return nil
}

// begin turns a transaction not ongoing into a new ongoing one.
func (t *Txn) begin(nowMs int64) {
	if t.State != Ongoing {
		t.State, t.StartMs, t.Partitions, t.Groups = Ongoing, nowMs, nil, nil
	}
}

// CheckID validates a transactional id.
func CheckID(id string) error {
	if id == "" || len(id) > MaxIDLen {
		return fmt.Errorf("%w: %d bytes (1 to %d)", ErrInvalidTransactionalID, len(id), MaxIDLen)
	}
	return nil
}
