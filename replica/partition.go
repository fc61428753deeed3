package replica

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quirelog/quire/record"
	"github.com/quirelog/quire/storage"
)

// Partition is one replica hosted by this broker. As leader it appends,
// tracks the LEO of every follower from its fetches and advances the high
// watermark to the smallest LEO over the ISR; waiters (acks=all produces,
// long-polling fetches) are woken whenever the high watermark moves, and
// follower fetches whenever the LEO does. It asks the controller to shrink
// the ISR when a follower falls behind and to expand it when one catches
// up (isr.go). As follower it is kept in step by the fetcher of its
// leader (fetcher.go, follower.go); the leader's side of that fetch is in
// leader_fetch.go.
type Partition struct {
	topic string
	id    int32
	log   *storage.Log
	rm    *Manager
	// io counts the records and bytes appended and read by clients, for
	// the topic (shared by its partitions; see Manager.Stats).
	io *TopicIO

	// appendMu serialises appends, leader or follower, and truncations, so
	// that offsets are assigned in order, HW updates follow them, and a
	// leadership change never lands in the middle of one.
	appendMu sync.Mutex

	mu             sync.Mutex
	leader         bool
	leaderID       int32
	leaderEpoch    int32
	partitionEpoch int32
	replicas       []int32
	isr            []int32
	followers      map[int32]*followerState // as leader: every other replica
	epochStart     int64                    // as leader: LEO when this epoch began
	isrPending     bool                     // an ISR change is on its way to the controller
	pendingISR     []int32                  // the ISR asked for, counted by the HW until settled
	isrUnanswered  bool                     // the last change got no answer: send it again
	// handedOff: the controller answered an ISR change with another
	// leader (it completed a reassignment that moves the leadership
	// away). Until the image makes this replica a follower, the HW stays
	// where it is: the new leader stopped fetching here, and a HW past
	// its log would acknowledge records the new leader lacks.
	handedOff  bool
	isrRetryAt time.Time // after a refused change, no new one before this
	hw         int64
	failed     error     // the log failed: the replica is out of service (logFailed)
	waiters    waiterSet // HW moves, leadership changes
	leoWaiters waiterSet // appends, leadership changes
	trace      tracer    // as leader: recent appends, timed through the stages

	// adding are the replicas a reassignment is adding (Assignment.Adding),
	// under mu: they do not count as missing from the ISR.
	adding []int32
	// reassigning: this broker is one of the partition's adding replicas
	// (a reassignment moving it here): its fetches count against the
	// reassignment throttle.
	reassigning atomic.Bool
	// ledEpoch is leaderEpoch while this replica leads, else -1 (set
	// with them under mu): a replica fetch's check, without mu, that
	// what it checked before still holds (idleRefresh).
	ledEpoch atomic.Int32
}

// followerState is what a leader knows of one follower, from its fetches
// (Kafka's ReplicaState).
type followerState struct {
	leo                int64 // its fetch offset; -1 until it fetches in this epoch
	lastCaughtUp       time.Time
	lastFetch          time.Time
	lastFetchLeaderLEO int64
	logFailed          bool  // its log failed: out of the ISR for this epoch
	logStart           int64 // its log start as its last fetch said; -1 unknown
}

func newPartition(rm *Manager, topic string, id int32, l *storage.Log) *Partition {
	p := &Partition{topic: topic, id: id, log: l, rm: rm, io: rm.topicIO(topic), leaderID: -1}
	p.ledEpoch.Store(-1)
	if hw, ok := l.HighWatermark(); ok {
		p.setHW(hw)
	} else {
		p.setHW(l.LogStartOffset())
	}
	return p
}

// Topic returns the topic name.
func (p *Partition) Topic() string { return p.topic }

// ID returns the partition number.
func (p *Partition) ID() int32 { return p.id }

// state is a consistent view of the replica's leadership and offsets.
type partitionState struct {
	leader         bool
	leaderID       int32
	leaderEpoch    int32
	partitionEpoch int32
	replicas       []int32
	isr            []int32
	hw             int64
}

// is reports whether the replica is already in the state a describes, as
// seen from broker self.
func (st partitionState) is(a Assignment, self int32) bool {
	return st.leader == (a.Leader == self) && st.leaderID == a.Leader && st.leaderEpoch == a.LeaderEpoch &&
		st.partitionEpoch == a.PartitionEpoch && equalIDs(st.isr, a.ISR) && equalIDs(st.replicas, a.Replicas)
}

// State is a consistent view of a replica's leadership and offsets.
type State struct {
	Leader         bool // this broker leads it
	LeaderID       int32
	LeaderEpoch    int32
	PartitionEpoch int32
	Replicas       []int32
	ISR            []int32
	HighWatermark  int64
}

// State returns the replica's leadership and HW.
func (p *Partition) State() State {
	st := p.state()
	return State{Leader: st.leader, LeaderID: st.leaderID, LeaderEpoch: st.leaderEpoch, PartitionEpoch: st.partitionEpoch,
		Replicas: st.replicas, ISR: st.isr, HighWatermark: st.hw}
}

func (p *Partition) state() partitionState {
	p.mu.Lock()
	defer p.mu.Unlock()
	return partitionState{leader: p.leader, leaderID: p.leaderID, leaderEpoch: p.leaderEpoch,
		partitionEpoch: p.partitionEpoch, replicas: p.replicas, isr: p.isr, hw: p.hw}
}

// HighWatermarkEstablished reports whether, as leader, the replica's HW
// has reached the log end of when its leader epoch began. A leader elected
// moments ago starts from the HW it had as a follower, which may lag the
// one the previous leader answered; until its followers' fetches move it
// past the epoch's start, answering it as the latest offset would show
// clients the high watermark going backwards (Kafka's KIP-207:
// OFFSET_NOT_AVAILABLE meanwhile).
func (p *Partition) HighWatermarkEstablished() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.leader && p.hw >= p.epochStart
}

// HighWatermark returns the offset below which every record is on every
// in-sync replica.
func (p *Partition) HighWatermark() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hw
}

// becomeLeader makes this replica the leader (a.Leader is this broker). A
// new epoch forgets what it knew of the followers: the HW waits for each
// in-sync follower's first fetch, and every follower counts as caught up
// now, so none is dropped from the ISR before it has had
// replica.lag.time.max.ms to fetch. The same epoch with a new ISR (a
// change this leader asked for, or the controller's) keeps them; the same
// epoch at an older partition epoch (an image behind the controller's
// answer to this leader) is ignored.
func (p *Partition) becomeLeader(a Assignment, now time.Time) {
	p.appendMu.Lock() // no follower append or truncation under way
	defer p.appendMu.Unlock()
	p.mu.Lock()
	newEpoch := !p.leader || p.leaderEpoch != a.LeaderEpoch
	var epochErr error
	if !newEpoch && a.PartitionEpoch < p.partitionEpoch {
		// An image older than an ISR change this leader already applied
		// from the controller's answer: keep the newer state.
		p.mu.Unlock()
		return
	}
	if newEpoch {
		// The epoch starts at the log end now, not at its first append:
		// a follower's divergence check must find it even if this leader
		// never appends (see storage.Log.AssignEpochStart). It takes the
		// log's append lock, so not under mu (readers of the state wait
		// on it); appendMu keeps every append and leadership change out.
		p.mu.Unlock()
		epochErr = p.log.AssignEpochStart(a.LeaderEpoch)
		if epochErr != nil {
			p.rm.logger.Error("cannot record the leader epoch", "topic", p.topic, "partition", p.id, "epoch", a.LeaderEpoch, "error", epochErr)
		}
		p.mu.Lock()
	}
	if !newEpoch && a.PartitionEpoch > p.partitionEpoch && !p.isrPending {
		// The image has the outcome of the last change asked for.
		p.pendingISR, p.isrUnanswered = nil, false
	}
	p.leader, p.leaderID, p.leaderEpoch, p.partitionEpoch = true, a.Leader, a.LeaderEpoch, a.PartitionEpoch
	p.ledEpoch.Store(a.LeaderEpoch)
	p.replicas = append([]int32(nil), a.Replicas...)
	if !newEpoch {
		p.rm.countISRChange(p.isr, a.ISR)
	}
	p.isr = append([]int32(nil), a.ISR...)
	if newEpoch {
		p.followers = map[int32]*followerState{}
		p.trace.reset()
		p.epochStart = p.log.LogEndOffset()
		p.isrPending, p.pendingISR, p.isrUnanswered, p.handedOff = false, nil, false, false
	}
	for _, id := range p.replicas {
		if _, ok := p.followers[id]; !ok && id != a.Leader {
			p.followers[id] = &followerState{leo: -1, lastCaughtUp: now, lastFetch: now, lastFetchLeaderLEO: -1, logStart: -1}
		}
	}
	for id := range p.followers {
		if !contains(p.replicas, id) {
			delete(p.followers, id)
		}
	}
	p.maybeAdvanceHWLocked()
	p.leoWaiters.signal()
	p.waiters.signal() // a DeleteRecords waits on the ISR's members
	if errors.Is(epochErr, storage.ErrLogFailed) && p.failed == nil {
		// The epoch could not be recorded: the log is out of service.
		p.failed = epochErr
	}
	if p.failed != nil {
		// Elected with a failed log, or failing now: give it up again.
		p.giveUpLocked()
	}
	p.mu.Unlock()
}

// becomeFollower records the current leader (-1: none); the fetcher of
// that leader keeps the log in step.
func (p *Partition) becomeFollower(a Assignment) {
	p.appendMu.Lock() // no leader append under way
	p.mu.Lock()
	p.leader, p.leaderID, p.leaderEpoch, p.partitionEpoch = false, a.Leader, a.LeaderEpoch, a.PartitionEpoch
	p.ledEpoch.Store(-1)
	p.replicas = append([]int32(nil), a.Replicas...)
	p.isr = append([]int32(nil), a.ISR...)
	p.followers = nil
	p.isrPending, p.pendingISR, p.isrUnanswered, p.handedOff = false, nil, false, false
	p.trace.reset()
	p.waiters.signal()
	p.leoWaiters.signal()
	p.mu.Unlock()
	p.appendMu.Unlock()
}

// maybeAdvanceHWLocked sets the HW to the smallest LEO over the ISR (and
// the ISR change pending, if any), never
// moving it back, and wakes waiters when it moves. A follower whose LEO is
// not yet known holds the HW where it is.
func (p *Partition) maybeAdvanceHWLocked() {
	if !p.leader || p.handedOff {
		return
	}
	hw := p.log.LogEndOffset()
	// The ISR being asked for counts too (Kafka's maximal ISR, KIP-497): a
	// follower being added must not be passed by the HW while the change
	// is committed, or it would join the ISR without records the HW says
	// every member has.
	for _, isr := range [2][]int32{p.isr, p.pendingISR} {
		for _, id := range isr {
			if id == p.leaderID {
				continue
			}
			f, ok := p.followers[id]
			if !ok || f.leo < 0 {
				return
			}
			hw = min(hw, f.leo)
		}
	}
	if hw <= p.hw {
		return
	}
	p.hw = hw
	p.log.SetHighWatermark(hw)
	p.trace.passed(&p.rm.stages, StageReplicated, hw-1, time.Now())
	p.waiters.signal()
}

// setHW is used when a replica is first opened: the checkpointed HW, capped
// at the LEO.
func (p *Partition) setHW(hw int64) {
	p.mu.Lock()
	p.hw = min(max(hw, p.log.LogStartOffset()), p.log.LogEndOffset())
	p.mu.Unlock()
}

// waiterSet holds the channels of goroutines waiting for a change; each
// gets a coalesced signal (callers hold Partition.mu).
type waiterSet map[chan struct{}]struct{}

func (w *waiterSet) add(ch chan struct{}) {
	if *w == nil {
		*w = waiterSet{}
	}
	(*w)[ch] = struct{}{}
}

func (w waiterSet) signal() {
	for ch := range w {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Watch registers ch to receive a (coalesced) signal whenever the HW
// advances or leadership changes; Unwatch removes it. Consumer fetches
// long-poll on it.
func (p *Partition) Watch(ch chan struct{}) { p.withLock(func() { p.waiters.add(ch) }) }

// Unwatch undoes Watch.
func (p *Partition) Unwatch(ch chan struct{}) { p.withLock(func() { delete(p.waiters, ch) }) }

// watchLEO registers ch to receive a (coalesced) signal whenever the log
// end offset moves or leadership changes: follower fetches long-poll on
// it. unwatchLEO removes it.
func (p *Partition) watchLEO(ch chan struct{}) { p.withLock(func() { p.leoWaiters.add(ch) }) }

func (p *Partition) unwatchLEO(ch chan struct{}) { p.withLock(func() { delete(p.leoWaiters, ch) }) }

func (p *Partition) withLock(fn func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fn()
}

// AppendResult is an append made as leader: where the batches went, and
// what an acks=all caller waits on (AwaitReplicated).
type AppendResult struct {
	storage.AppendInfo
	LeaderEpoch int32
	// LogStartOffset is the log start after the append.
	LogStartOffset int64
	// MinInsyncReplicas is min.insync.replicas when the batches were
	// appended.
	MinInsyncReplicas int32
	// AppendedAt is when the leader appended them.
	AppendedAt time.Time
	// Started is when the append began: it had the partition to itself
	// (the appends ahead of it done).
	Started time.Time
}

// Append appends batches as leader (RecordBatch v2 bytes, modified in
// place: base offsets and the leader epoch are written into them).
// requiredAcks -1 checks the ISR against the topic's min.insync.replicas
// first (NOT_ENOUGH_REPLICAS: nothing appended); then wait with
// AwaitReplicated.
func (p *Partition) Append(batches []byte, requiredAcks int32) (AppendResult, error) {
	tc, _ := p.rm.topicConfig(p.topic)
	res, err := p.appendAsLeader(batches, requiredAcks, tc.MinInsyncReplicas)
	if err != nil {
		return res, err
	}
	res.LogStartOffset = p.log.LogStartOffset()
	return res, nil
}

// AwaitReplicated blocks until the append res is on every in-sync replica
// (the HW passed it), ctx ends (ErrRequestTimedOut), or the replica stops
// leading at the append's epoch (a NotLeaderError).
func (p *Partition) AwaitReplicated(ctx context.Context, res AppendResult) error {
	err := p.waitHW(ctx, res.LeaderEpoch, res.LastOffset, res.MinInsyncReplicas)
	if err == nil && !res.AppendedAt.IsZero() {
		p.rm.stages[StageAcked].observe(time.Since(res.AppendedAt))
	}
	return err
}

// delivered times the appends a read returned up to res.HighOffset
// through stage s.
func (p *Partition) delivered(s Stage, res storage.ReadResult) {
	if len(res.Batches) == 0 {
		return
	}
	p.mu.Lock()
	p.trace.passed(&p.rm.stages, s, res.HighOffset-1, time.Now())
	p.mu.Unlock()
}

// appendAsLeader appends batches (RecordBatch v2 bytes, modified in place:
// base offsets and the leader epoch are written into them). requiredAcks
// -1 checks the ISR against min.insync.replicas first.
func (p *Partition) appendAsLeader(batches []byte, requiredAcks int32, minISR int32) (AppendResult, error) {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	started := time.Now()
	st := p.state()
	if !st.leader {
		return AppendResult{}, &NotLeaderError{Topic: p.topic, Partition: p.id, Leader: st.leaderID, Epoch: st.leaderEpoch}
	}
	if requiredAcks == -1 && int32(len(st.isr)) < minISR {
		return AppendResult{}, fmt.Errorf("%w: %s-%d has %d in-sync replicas, min.insync.replicas is %d",
			ErrNotEnoughReplicas, p.topic, p.id, len(st.isr), minISR)
	}
	info, err := p.log.AppendAsLeader(batches, st.leaderEpoch)
	if errors.Is(err, storage.ErrLogFailed) {
		p.logFailed(err)
	}
	if err != nil {
		return AppendResult{AppendInfo: info, LeaderEpoch: st.leaderEpoch, MinInsyncReplicas: minISR}, fmt.Errorf("%s-%d: %w", p.topic, p.id, err)
	}
	now := time.Now()
	p.mu.Lock()
	p.trace.add(info.LastOffset, now)
	p.maybeAdvanceHWLocked()
	p.leoWaiters.signal()
	p.mu.Unlock()
	if !info.Duplicate {
		p.io.RecordsIn.Add(uint64(info.NumRecords))
		p.io.BytesIn.Add(uint64(info.Bytes))
	}
	return AppendResult{AppendInfo: info, LeaderEpoch: st.leaderEpoch, MinInsyncReplicas: minISR, AppendedAt: now, Started: started}, nil
}

// waitHW blocks until the HW passes offset, appended at leader epoch epoch
// (so that offset is on every in-sync replica), ctx ends, or the replica
// stops leading at that epoch. If the ISR has
// shrunk below minISR by the time the HW passes, fewer copies than the
// producer asked for exist: that is NOT_ENOUGH_REPLICAS_AFTER_APPEND, as in
// Kafka, and the producer retries.
func (p *Partition) waitHW(ctx context.Context, epoch int32, offset int64, minISR int32) error {
	ch := make(chan struct{}, 1)
	p.Watch(ch)
	defer p.Unwatch(ch)
	for {
		st := p.state()
		// Leadership first: a replica that stopped leading after the
		// append may have truncated it and copied another leader's
		// records at that offset since, up to that leader's HW.
		if !st.leader || st.leaderEpoch != epoch {
			return &NotLeaderError{Topic: p.topic, Partition: p.id, Leader: st.leaderID, Epoch: st.leaderEpoch}
		}
		if st.hw > offset {
			if int32(len(st.isr)) < minISR {
				return fmt.Errorf("%w: %s-%d: offset %d is on %d in-sync replicas, min.insync.replicas is %d",
					ErrNotEnoughReplicasAfterAppend, p.topic, p.id, offset, len(st.isr), minISR)
			}
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%w: %s-%d: offset %d not replicated to the in-sync replicas in time",
				ErrRequestTimedOut, p.topic, p.id, offset)
		}
	}
}

// CheckLeaderEpoch compares a client's view of the leader epoch with ours.
func (p *Partition) CheckLeaderEpoch(current *int32) error {
	if current == nil || *current < 0 {
		return nil
	}
	st := p.state()
	switch {
	case *current < st.leaderEpoch:
		return fmt.Errorf("%w: %s-%d: epoch %d, current %d", ErrFencedLeaderEpoch, p.topic, p.id, *current, st.leaderEpoch)
	case *current > st.leaderEpoch:
		return fmt.Errorf("%w: %s-%d: epoch %d, current %d", ErrUnknownLeaderEpoch, p.topic, p.id, *current, st.leaderEpoch)
	}
	return nil
}

// Read returns whole batches from offset, never at or past the HW, and
// the HW they were read under; only the leader answers.
func (p *Partition) Read(offset int64, maxBytes int) (storage.ReadResult, int64, error) {
	st := p.state()
	if !st.leader {
		return storage.ReadResult{}, st.hw, &NotLeaderError{Topic: p.topic, Partition: p.id, Leader: st.leaderID, Epoch: st.leaderEpoch}
	}
	res, err := p.log.Read(offset, maxBytes, st.hw)
	if err != nil {
		return res, st.hw, fmt.Errorf("%s-%d: %w", p.topic, p.id, err)
	}
	p.io.countRead(res.Batches)
	p.delivered(StageDelivered, res)
	return res, st.hw, nil
}

// ReadAppend is Read into buf's spare capacity (see
// storage.Log.ReadAppend).
func (p *Partition) ReadAppend(buf []byte, offset int64, maxBytes int) (storage.ReadResult, int64, error) {
	st := p.state()
	if !st.leader {
		return storage.ReadResult{}, st.hw, &NotLeaderError{Topic: p.topic, Partition: p.id, Leader: st.leaderID, Epoch: st.leaderEpoch}
	}
	res, err := p.log.ReadAppend(buf, offset, maxBytes, st.hw)
	if err != nil {
		return res, st.hw, fmt.Errorf("%s-%d: %w", p.topic, p.id, err)
	}
	p.io.countRead(res.Batches[len(buf):])
	if len(res.Batches) > len(buf) {
		p.delivered(StageDelivered, res)
	}
	return res, st.hw, nil
}

// LogStartOffset is the first offset of the replica's log.
func (p *Partition) LogStartOffset() int64 { return p.log.LogStartOffset() }

// LogEndOffset is the next offset the replica's log will write.
func (p *Partition) LogEndOffset() int64 { return p.log.LogEndOffset() }

// SizeBytes is the size of the replica's log on disk (its segments'
// record batches).
func (p *Partition) SizeBytes() int64 { return p.log.Size() }

// Producers lists the idempotent producers the replica's log holds state
// for, by id (storage.Log.Producers).
func (p *Partition) Producers() []storage.ProducerInfo { return p.log.Producers() }

// OffsetForTimestamp is the first offset whose timestamp is at least ts
// (see storage.Log.OffsetForTimestamp).
func (p *Partition) OffsetForTimestamp(ts int64) (offset, timestamp int64, ok bool, err error) {
	off, found, ok, err := p.log.OffsetForTimestamp(ts)
	if err != nil {
		return off, found, ok, fmt.Errorf("%s-%d: %w", p.topic, p.id, err)
	}
	return off, found, ok, nil
}

// RecordTimestamp is the timestamp of the first record a reader from
// offset gets (from the log start, for an offset below it), for a
// consumer group's lag in seconds; ok is false when there is none below
// the HW. Only the leader answers. It is not counted as a read.
func (p *Partition) RecordTimestamp(offset int64) (ts int64, ok bool, err error) {
	st := p.state()
	if !st.leader {
		return -1, false, &NotLeaderError{Topic: p.topic, Partition: p.id, Leader: st.leaderID, Epoch: st.leaderEpoch}
	}
	offset = max(offset, p.log.LogStartOffset())
	if offset >= st.hw {
		return -1, false, nil
	}
	// One batch is usually enough: a read returns at least the one
	// holding offset. In a compacted log that batch may hold no record at
	// or after offset (the cleaner removed them, or left it empty): then
	// the next one, a few times at most.
	found := errors.New("found")
	for tries := 0; tries < 16 && offset < st.hw; tries++ {
		res, err := p.log.Read(offset, 1, st.hw)
		if err != nil {
			return -1, false, fmt.Errorf("%s-%d: %w", p.topic, p.id, err)
		}
		err = record.SplitBatches(res.Batches, func(batch []byte, h record.Header) error {
			if h.LastOffset() < offset {
				return nil
			}
			return record.ForEachRecord(batch, func(r *record.Record) error {
				if r.Offset < offset {
					return nil
				}
				ts, ok = r.Timestamp, true
				return found
			})
		})
		if err != nil && !errors.Is(err, found) {
			return -1, false, fmt.Errorf("%s-%d: reading the record at %d: %w", p.topic, p.id, offset, err)
		}
		if ok || res.HighOffset <= offset {
			break
		}
		offset = res.HighOffset
	}
	return ts, ok, nil
}
