package txn

import (
	"fmt"
	"slices"
)

// InitRequest is a transactional producer's InitProducerId.
type InitRequest struct {
	ID        string
	TimeoutMs int32
	// ProducerID and ProducerEpoch are the producer's current ones
	// (KIP-360: a producer bumping its own epoch), -1 when it has none.
	ProducerID    int64
	ProducerEpoch int16
	// BumpPerTransaction: the producer speaks transaction version 2.
	BumpPerTransaction bool
	NowMs              int64
}

// InitResult says what an Init does.
type InitResult struct {
	// Next is the state to write.
	Next Txn
	// AllocateID: Next needs a new producer id, at epoch 0 (a new
	// transactional id, or an epoch that cannot be bumped further).
	AllocateID bool
	// Aborting: an ongoing transaction is being aborted first (Next is
	// its PrepareAbort, with the epoch bumped to fence the old
	// producer); once its markers are written the caller answers
	// ErrConcurrentTransactions, and the producer's retry finds it
	// ended.
	Aborting bool
	// Unchanged: a retry of an Init already done; answer Next as it is.
	Unchanged bool
}

// Init is a transactional producer's InitProducerId: a new id gets a
// producer id at epoch 0; a known one gets its epoch bumped, fencing any
// older producer with the same transactional id.
func Init(cur *Txn, req InitRequest, maxTimeoutMs int32) (InitResult, error) {
	if err := CheckID(req.ID); err != nil {
		return InitResult{}, err
	}
	if req.TimeoutMs <= 0 || req.TimeoutMs > maxTimeoutMs {
		return InitResult{}, fmt.Errorf("%w: %d ms, transaction.max.timeout.ms is %d", ErrInvalidTimeout, req.TimeoutMs, maxTimeoutMs)
	}
	if cur == nil {
		return InitResult{AllocateID: true, Next: Txn{ID: req.ID, ProducerID: -1, ProducerEpoch: 0, LastProducerEpoch: -1,
			State: Empty, TimeoutMs: req.TimeoutMs, UpdateMs: req.NowMs, BumpEpoch: req.BumpPerTransaction}}, nil
	}
	if req.ProducerID >= 0 {
		if req.ProducerID != cur.ProducerID {
			return InitResult{}, fmt.Errorf("%w: transactional id %q has producer id %d, not %d", ErrInvalidProducerIDMapping, req.ID, cur.ProducerID, req.ProducerID)
		}
		if cur.State == Empty && req.ProducerEpoch == cur.LastProducerEpoch {
			return InitResult{Next: cur.Clone(), Unchanged: true}, nil // a retry
		}
		// The producer whose End at MaxEpoch exhausted the epoch may not
		// have had the answer: it starts again with a new id.
		ended := Exhausted(*cur) && !cur.State.Preparing() && req.ProducerEpoch == cur.LastProducerEpoch
		if req.ProducerEpoch != cur.ProducerEpoch && !ended {
			return InitResult{}, fmt.Errorf("%w: transactional id %q is at epoch %d, the producer has %d", ErrProducerFenced, req.ID, cur.ProducerEpoch, req.ProducerEpoch)
		}
	}
	next := cur.Clone()
	next.UpdateMs = req.NowMs
	switch cur.State {
	case PrepareCommit, PrepareAbort:
		return InitResult{}, fmt.Errorf("%w: transactional id %q is in %s", ErrConcurrentTransactions, req.ID, cur.State)
	case Ongoing:
		// Fence the producer of the ongoing transaction and abort it.
		// At the largest epoch the bump takes the one epoch kept for
		// markers (fenceEpoch); the retry then takes a new id.
		next.LastProducerEpoch, next.ProducerEpoch = cur.ProducerEpoch, fenceEpoch(cur.ProducerEpoch)
		next.State = PrepareAbort
		return InitResult{Aborting: true, Next: next}, nil
	}
	next.State, next.Partitions, next.Groups, next.StartMs = Empty, nil, nil, 0
	next.TimeoutMs, next.BumpEpoch = req.TimeoutMs, req.BumpPerTransaction
	if cur.ProducerEpoch >= MaxEpoch {
		next.ProducerID, next.ProducerEpoch, next.LastProducerEpoch = -1, 0, -1
		return InitResult{Next: next, AllocateID: true}, nil
	}
	next.LastProducerEpoch, next.ProducerEpoch = cur.ProducerEpoch, cur.ProducerEpoch+1
	return InitResult{Next: next}, nil
}

// AddPartitions adds partitions to the producer's transaction, beginning
// one if none is ongoing. next is nil when nothing changes (every
// partition is in already). With verifyOnly it changes nothing and
// refuses (ErrInvalidTxnState) unless every partition is in the ongoing
// transaction (KIP-890 part 1's check by a partition leader).
func AddPartitions(cur *Txn, pid int64, epoch int16, parts []TopicPartition, verifyOnly bool, nowMs int64) (*Txn, error) {
	if cur == nil {
		return nil, fmt.Errorf("%w: no such transactional id", ErrInvalidProducerIDMapping)
	}
	if err := cur.checkProducer(pid, epoch); err != nil {
		return nil, err
	}
	if cur.State.Preparing() {
		return nil, fmt.Errorf("%w: transactional id %q is in %s", ErrConcurrentTransactions, cur.ID, cur.State)
	}
	missing := 0
	for _, p := range parts {
		if cur.State != Ongoing || !slices.ContainsFunc(cur.Partitions, func(q TopicPartition) bool { return q == p }) {
			missing++
		}
	}
	if verifyOnly {
		if missing > 0 {
			return nil, fmt.Errorf("%w: %d partitions not in the ongoing transaction of %q", ErrInvalidTxnState, missing, cur.ID)
		}
		return nil, nil
	}
	if missing == 0 && cur.State == Ongoing {
		return nil, nil
	}
	next := cur.Clone()
	next.begin(nowMs)
	for _, p := range parts {
		if i, found := slices.BinarySearchFunc(next.Partitions, p, compareTP); !found {
			next.Partitions = slices.Insert(next.Partitions, i, p)
		}
	}
	next.UpdateMs = nowMs
	return &next, nil
}

// AddGroup adds a consumer group to the producer's transaction
// (AddOffsetsToTxn), beginning one if none is ongoing; nil when it is in
// already.
func AddGroup(cur *Txn, pid int64, epoch int16, group string, nowMs int64) (*Txn, error) {
	if group == "" {
		return nil, fmt.Errorf("%w: empty group id", ErrInvalidTxnState)
	}
	if cur == nil {
		return nil, fmt.Errorf("%w: no such transactional id", ErrInvalidProducerIDMapping)
	}
	if err := cur.checkProducer(pid, epoch); err != nil {
		return nil, err
	}
	if cur.State.Preparing() {
		return nil, fmt.Errorf("%w: transactional id %q is in %s", ErrConcurrentTransactions, cur.ID, cur.State)
	}
	if cur.State == Ongoing && cur.hasGroup(group) {
		return nil, nil
	}
	next := cur.Clone()
	next.begin(nowMs)
	next.addGroup(group)
	next.UpdateMs = nowMs
	return &next, nil
}

func (t *Txn) hasGroup(group string) bool {
	_, found := slices.BinarySearchFunc(t.Groups, group, func(g GroupOffsets, id string) int { return compareStrings(g.Group, id) })
	return found
}

func (t *Txn) addGroup(group string) int {
	i, found := slices.BinarySearchFunc(t.Groups, group, func(g GroupOffsets, id string) int { return compareStrings(g.Group, id) })
	if !found {
		t.Groups = slices.Insert(t.Groups, i, GroupOffsets{Group: group})
	}
	return i
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// CommitOffsets stages a group's offsets in the producer's ongoing
// transaction (TxnOffsetCommit): they are committed with it, or dropped
// with its abort. A later offset of the same partition replaces an
// earlier one. The group must be in the transaction (AddGroup) unless
// addGroup (TxnOffsetCommit v5, transaction version 2) adds it.
func CommitOffsets(cur *Txn, pid int64, epoch int16, group string, offsets []Offset, addGroup bool, nowMs int64) (*Txn, error) {
	if cur == nil {
		return nil, fmt.Errorf("%w: no such transactional id", ErrInvalidProducerIDMapping)
	}
	if err := cur.checkProducer(pid, epoch); err != nil {
		return nil, err
	}
	if cur.State.Preparing() {
		return nil, fmt.Errorf("%w: transactional id %q is in %s", ErrConcurrentTransactions, cur.ID, cur.State)
	}
	if !addGroup && (cur.State != Ongoing || !cur.hasGroup(group)) {
		return nil, fmt.Errorf("%w: group %q is not in the ongoing transaction of %q", ErrInvalidTxnState, group, cur.ID)
	}
	if group == "" {
		return nil, fmt.Errorf("%w: empty group id", ErrInvalidTxnState)
	}
	next := cur.Clone()
	next.begin(nowMs)
	i := next.addGroup(group)
	g := &next.Groups[i]
	for _, o := range offsets {
		j := slices.IndexFunc(g.Offsets, func(x Offset) bool { return x.Topic == o.Topic && x.Partition == o.Partition })
		if j >= 0 {
			g.Offsets[j] = o
		} else {
			g.Offsets = append(g.Offsets, o)
		}
	}
	next.UpdateMs = nowMs
	return &next, nil
}

// EndResult says what an End does.
type EndResult struct {
	// Next is the prepare state to write, then to complete once its
	// markers are written; nil when nothing is to be written.
	Next *Txn
	// Done: the transaction had ended this way already (a retry):
	// answer Current's producer id and epoch.
	Done    bool
	Current Txn
}

// End ends the producer's transaction (EndTxn): commit or abort. An
// ongoing transaction goes to PrepareCommit or PrepareAbort; with
// BumpEpoch the epoch is bumped there, and its markers carry the new
// one. A retry of an End already complete is Done; one still being
// completed is ErrConcurrentTransactions. A bump at MaxEpoch goes to
// FenceEpoch: the state is Exhausted, and the coordinator answers the
// producer a new producer id once the markers are written (Kafka's
// EndTxn 5 answers the next producer id the same way).
//
// bump says the caller speaks version 2 whatever the id was initialized
// with (Kafka's EndTxn 5): the end bumps the epoch, and the id is of
// version 2 from then on.
func End(cur *Txn, pid int64, epoch int16, commit, bump bool, nowMs int64) (EndResult, error) {
	if cur == nil {
		return EndResult{}, fmt.Errorf("%w: no such transactional id", ErrInvalidProducerIDMapping)
	}
	if pid != cur.ProducerID {
		return EndResult{}, fmt.Errorf("%w: transactional id %q has producer id %d, not %d", ErrInvalidProducerIDMapping, cur.ID, cur.ProducerID, pid)
	}
	if bump && !cur.BumpEpoch {
		c := cur.Clone()
		c.BumpEpoch = true
		cur = &c
	}
	want, wantDone := PrepareAbort, CompleteAbort
	if commit {
		want, wantDone = PrepareCommit, CompleteCommit
	}
	// A retry after the bump carries the epoch before it.
	retry := epoch == cur.LastProducerEpoch && cur.BumpEpoch && cur.LastProducerEpoch >= 0
	if (epoch != cur.ProducerEpoch && !retry) || epoch > MaxEpoch {
		return EndResult{}, fmt.Errorf("%w: transactional id %q is at epoch %d, the call has %d", ErrProducerFenced, cur.ID, cur.ProducerEpoch, epoch)
	}
	switch {
	case cur.State == want:
		return EndResult{}, fmt.Errorf("%w: transactional id %q is in %s", ErrConcurrentTransactions, cur.ID, cur.State)
	case cur.State == wantDone && (retry || !cur.BumpEpoch):
		return EndResult{Done: true, Current: cur.Clone()}, nil
	case retry:
		// The epoch before the bump, for a transaction not just ended:
		// an older producer.
		return EndResult{}, fmt.Errorf("%w: transactional id %q is at epoch %d, the call has %d", ErrProducerFenced, cur.ID, cur.ProducerEpoch, epoch)
	case cur.State == Ongoing:
		next := cur.Clone()
		next.State, next.UpdateMs = want, nowMs
		if cur.BumpEpoch {
			next.LastProducerEpoch, next.ProducerEpoch = cur.ProducerEpoch, fenceEpoch(cur.ProducerEpoch)
		}
		return EndResult{Next: &next}, nil
	case !cur.State.Preparing():
		// No transaction: under version 2 an abort of nothing is fine
		// (the producer may abort whatever it began, even if nothing
		// reached a partition), and bumps the epoch as any end.
		if !commit && cur.BumpEpoch {
			next := cur.Clone()
			next.State, next.UpdateMs, next.Partitions, next.Groups = PrepareAbort, nowMs, nil, nil
			next.LastProducerEpoch, next.ProducerEpoch = cur.ProducerEpoch, fenceEpoch(cur.ProducerEpoch)
			return EndResult{Next: &next}, nil
		}
	}
	return EndResult{}, fmt.Errorf("%w: transactional id %q is in %s, cannot %s", ErrInvalidTxnState, cur.ID, cur.State, map[bool]string{true: "commit", false: "abort"}[commit])
}

// Complete is the state once a prepare state's markers are all written:
// CompleteCommit (whose staged offsets the caller commits in the same
// write) or CompleteAbort. The partitions stay for describing; the
// offsets too, for the caller to commit, and are dropped by Stored.
func Complete(cur Txn, nowMs int64) (Txn, error) {
	next := cur.Clone()
	switch cur.State {
	case PrepareCommit:
		next.State = CompleteCommit
	case PrepareAbort:
		next.State = CompleteAbort
		next.Groups = nil
	default:
		return Txn{}, fmt.Errorf("%w: transactional id %q is in %s, not preparing", ErrInvalidTxnState, cur.ID, cur.State)
	}
	next.UpdateMs = nowMs
	return next, nil
}

// Expired reports whether an ongoing transaction has passed its timeout
// at nowMs, and returns its PrepareAbort: the epoch is bumped, fencing
// the producer, whose next call gets ErrProducerFenced (as in Kafka).
func Expired(cur Txn, nowMs int64) (Txn, bool) {
	if cur.State != Ongoing || nowMs-cur.StartMs <= int64(cur.TimeoutMs) {
		return Txn{}, false
	}
	next := cur.Clone()
	next.State, next.UpdateMs = PrepareAbort, nowMs
	next.LastProducerEpoch, next.ProducerEpoch = cur.ProducerEpoch, fenceEpoch(cur.ProducerEpoch)
	return next, true
}

// fenceEpoch is the epoch a bump from epoch gives: the next one, up to
// FenceEpoch, the one kept for the markers that end a transaction at
// MaxEpoch. A state at FenceEpoch is exhausted: no producer is ever
// answered it (see Exhausted), and its producer id is replaced by a new
// one once its markers are written.
func fenceEpoch(epoch int16) int16 {
	if epoch >= MaxEpoch {
		return FenceEpoch
	}
	return epoch + 1
}

// Exhausted reports whether t's epoch cannot be handed to a producer:
// the transaction at MaxEpoch was ended (or aborted) at FenceEpoch, and
// its producer goes on with a new producer id (Init's AllocateID, or the
// coordinator's allocation once an End's markers are written).
func Exhausted(t Txn) bool { return t.ProducerEpoch > MaxEpoch }

// IDExpired reports whether a transactional id is to be forgotten at
// nowMs (Kafka's transactional.id.expiration.ms, expirationMs): no
// transaction in progress (Empty, or one complete) and no change for at
// least expirationMs. One ongoing or being ended never expires; its
// transaction timeout ends it first.
func IDExpired(cur Txn, nowMs, expirationMs int64) bool {
	switch cur.State {
	case Empty, CompleteCommit, CompleteAbort:
		return nowMs-cur.UpdateMs >= expirationMs
	}
	return false
}

// Marker is what a prepare state writes to each of its partitions.
type Marker struct {
	ProducerID       int64
	ProducerEpoch    int16
	Commit           bool
	CoordinatorEpoch int32
	Partitions       []TopicPartition
}

// Markers returns the markers of a prepare state.
func Markers(t Txn) (Marker, bool) {
	if !t.State.Preparing() {
		return Marker{}, false
	}
	return Marker{ProducerID: t.ProducerID, ProducerEpoch: t.ProducerEpoch, Commit: t.State == PrepareCommit,
		CoordinatorEpoch: t.CoordinatorEpoch, Partitions: slices.Clone(t.Partitions)}, true
}
