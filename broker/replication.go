package broker

import (
	"errors"
	"fmt"
	"math"
	"time"

	pb "github.com/quirelog/quire/api/internalv1"
	"github.com/quirelog/quire/storage"
)

// The leader's side of replication: what a follower's fetch does to the
// partition (its LEO, the HW, the ISR) and what it reads. The RPC handler
// is in replica_service.go, the follower's side in fetcher.go.

// followerFetch checks a follower's fetch of this partition against the
// leader's state and records the fetch offset as that follower's LEO. It
// returns the divergence the follower must truncate at, if its log has
// diverged from this one (KIP-320): the largest epoch <= its last fetched
// epoch that this log knows, and where that epoch ends here.
func (p *Partition) followerFetch(replica int32, f *pb.ReplicaFetchPartition, now time.Time) (*pb.EpochEndOffset, error) {
	st := p.state()
	if !st.leader {
		return nil, &notLeaderError{topic: p.topic, partition: p.id, leader: st.leaderID, epoch: st.leaderEpoch}
	}
	epoch := f.GetCurrentLeaderEpoch()
	if err := p.checkLeaderEpoch(&epoch); err != nil {
		return nil, err
	}
	if !contains(st.replicas, replica) || replica == st.leaderID {
		return nil, fmt.Errorf("%w: broker %d is not a follower of %s-%d (replicas %v)", ErrInvalidRequest, replica, p.topic, p.id, st.replicas)
	}
	offset := f.GetFetchOffset()
	if last := f.GetLastFetchedEpoch(); last >= 0 {
		e, end := p.log.EndOffsetForEpoch(last)
		if e < last || end < offset {
			return &pb.EpochEndOffset{Epoch: e, EndOffset: end}, nil
		}
	}
	start, leo := p.log.LogStartOffset(), p.log.LogEndOffset()
	if offset < start || offset > leo {
		return nil, fmt.Errorf("%w: %s-%d: follower %d fetches at %d, log is [%d, %d]",
			storage.ErrOffsetOutOfRange, p.topic, p.id, replica, offset, start, leo)
	}
	p.recordFollowerFetch(replica, offset, now, st.leaderEpoch)
	return nil, nil
}

// recordFollowerFetch takes offset as the follower's LEO: it may move the
// HW, and it tells whether the follower is caught up (Kafka's rule: its
// LEO reached the leader's LEO now, or the leader's LEO as of its previous
// fetch). A follower outside the ISR that has caught up with the HW (and
// with the start of this leader's epoch), and whose broker the controller
// has not fenced, is added back. A fetch checked against another leader
// epoch than the current one is ignored.
func (p *Partition) recordFollowerFetch(replica int32, offset int64, now time.Time, epoch int32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.leader || p.leaderEpoch != epoch {
		return
	}
	f, ok := p.followers[replica]
	if !ok {
		return
	}
	leo := p.log.LogEndOffset()
	switch {
	case offset >= leo:
		f.lastCaughtUp = now
	case offset >= f.lastFetchLeaderLEO && f.lastFetch.After(f.lastCaughtUp):
		f.lastCaughtUp = f.lastFetch
	}
	f.leo, f.lastFetch, f.lastFetchLeaderLEO = offset, now, leo
	p.maybeAdvanceHWLocked()
	if !contains(p.isr, replica) && offset >= p.hw && offset >= p.epochStart &&
		!now.Before(p.isrRetryAt) && p.rm.mayJoinISR(replica) {
		p.requestISRLocked(append(append([]int32(nil), p.isr...), replica), "caught up", replica)
	}
}

// mayJoinISR reports whether broker id is registered and not fenced.
func (rm *ReplicaManager) mayJoinISR(id int32) bool {
	if rm.registered == nil {
		return true
	}
	r, ok := rm.registered(id)
	return ok && !r.fenced
}

// maybeShrinkISR drops from the ISR every follower that has not been
// caught up for lag (replica.lag.time.max.ms). The leader itself stays.
func (p *Partition) maybeShrinkISR(now time.Time, lag time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.leader || p.isrPending {
		return
	}
	if p.isrUnanswered && !now.Before(p.isrRetryAt) {
		p.isrUnanswered = false
		p.requestISRLocked(p.pendingISR, "retrying an unanswered change")
		return
	}
	var keep, out []int32
	for _, id := range p.isr {
		f, ok := p.followers[id]
		if id != p.leaderID && (!ok || now.Sub(f.lastCaughtUp) > lag) {
			out = append(out, id)
			continue
		}
		keep = append(keep, id)
	}
	if len(out) > 0 {
		p.requestISRLocked(keep, "fell behind", out...)
	}
}

// isrRetryBackoff is how long a leader waits after a refused ISR change
// before asking to add a follower again (dropping one is never held back).
const isrRetryBackoff = time.Second

// requestISRLocked asks the controller, in the background, for a new ISR
// at the current leader and partition epochs; one request at a time. The
// answer (or the next metadata image) updates the partition.
func (p *Partition) requestISRLocked(isr []int32, why string, ids ...int32) {
	if p.isrPending || p.rm.alterISR == nil {
		return
	}
	// An unanswered earlier request stays counted alongside this one.
	p.isrPending, p.pendingISR = true, union(p.pendingISR, isr)
	a := assignment{leader: p.leaderID, leaderEpoch: p.leaderEpoch, partitionEpoch: p.partitionEpoch, replicas: p.replicas, isr: isr}
	p.rm.logger.Info("changing ISR", "topic", p.topic, "partition", p.id, "reason", why, "replicas", ids, "from", p.isr, "to", isr)
	p.rm.goBackground(func() {
		got, err := p.rm.alterISR(p.topic, p.id, a)
		p.mu.Lock()
		defer p.mu.Unlock()
		if !p.leader || p.leaderEpoch != a.leaderEpoch {
			return
		}
		p.isrPending = false
		switch {
		case errors.Is(err, errISRRefused):
			// A newer epoch, or a follower the controller has fenced: the
			// next image says what changed; do not ask again at once.
			p.pendingISR = nil
			p.isrRetryAt = time.Now().Add(isrRetryBackoff)
			p.rm.logger.Warn("ISR change refused", "topic", p.topic, "partition", p.id, "isr", isr, "error", err)
		case err != nil:
			// No answer (the controller unreachable, or the write timed
			// out): it may have been committed. The HW goes on counting the
			// ISR asked for until an image at a newer partition epoch says
			// what happened (becomeLeader), and the shrink check sends the
			// same request again (answered or refused, it then settles).
			p.isrRetryAt = time.Now().Add(isrRetryBackoff)
			p.isrUnanswered = true
			p.rm.logger.Warn("ISR change not answered", "topic", p.topic, "partition", p.id, "isr", isr, "error", err)
		default:
			p.pendingISR = nil
			if got.partitionEpoch > p.partitionEpoch {
				p.partitionEpoch, p.isr = got.partitionEpoch, append([]int32(nil), got.isr...)
			}
		}
		p.maybeAdvanceHWLocked()
	})
}

// errISRRefused marks an ISR change the controller refused (as opposed to
// one it did not answer).
var errISRRefused = errors.New("broker: ISR change refused")

// union is a followed by the members of b it lacks.
func union(a, b []int32) []int32 {
	out := append([]int32(nil), a...)
	for _, id := range b {
		if !contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// readForFollower reads from offset up to maxBytes, past the HW: a
// follower copies everything the leader has.
func (p *Partition) readForFollower(offset int64, maxBytes int) (storage.ReadResult, error) {
	res, err := p.log.Read(offset, maxBytes, math.MaxInt64)
	if err != nil {
		return res, fmt.Errorf("%s-%d: %w", p.topic, p.id, err)
	}
	return res, nil
}

// The follower's side: applying one partition's part of a fetch response.

// fromLeader is one partition's answer from the leader, for a fetch made at
// fetchOffset in leaderEpoch.
type fromLeader struct {
	leaderEpoch    int32
	fetchOffset    int64
	records        []byte
	diverging      *pb.EpochEndOffset
	highWatermark  int64
	logStartOffset int64
	logEndOffset   int64
	outOfRange     bool
}

// applyFromLeader appends the leader's batches, truncates a diverged log,
// and follows the leader's HW and log start. It does nothing if the replica
// no longer follows at that epoch or its log moved since the fetch (the
// next fetch starts from where it is). It returns the bytes appended.
func (p *Partition) applyFromLeader(r fromLeader) (int, error) {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	st := p.state()
	if st.leader || st.leaderEpoch != r.leaderEpoch || p.log.LogEndOffset() != r.fetchOffset {
		return 0, nil
	}
	switch {
	case r.diverging != nil:
		to := r.diverging.EndOffset
		if r.diverging.Epoch < 0 || to < 0 {
			// The leader does not know our last epoch (it records its own
			// at election, so ours is newer than its: it should not
			// happen). Keep what is committed, as Kafka does: cut to our
			// HW, or the leader's end if that is lower.
			st := p.state()
			return 0, p.truncate(min(st.hw, r.logEndOffset), "the leader does not know our last epoch")
		}
		if e, end := p.log.EndOffsetForEpoch(r.diverging.Epoch); e >= 0 {
			to = min(to, end)
		}
		return 0, p.truncate(to, fmt.Sprintf("diverged from the leader at epoch %d", r.diverging.Epoch))
	case r.outOfRange:
		if r.fetchOffset > r.logEndOffset {
			return 0, p.truncate(r.logEndOffset, "ahead of the leader")
		}
		return 0, p.truncateFully(r.logStartOffset, "behind the leader's log start")
	}
	n := 0
	if len(r.records) > 0 {
		base, err := firstBaseOffset(r.records)
		if err != nil {
			return 0, err
		}
		if base < r.fetchOffset {
			// Only an empty log restarted at the leader's log start, which
			// may fall inside a batch, meets a batch that began before it:
			// start the log at that batch instead (as Kafka does on an
			// unexpected append offset). Anywhere else the logs disagree.
			if p.log.LogEndOffset() != p.log.LogStartOffset() {
				return 0, fmt.Errorf("%s-%d: the leader's batch at %d overlaps the log end %d", p.topic, p.id, base, r.fetchOffset)
			}
			if err := p.truncateFully(base, "the leader's log start is inside a batch"); err != nil {
				return 0, err
			}
		}
		if _, err := p.log.AppendAsFollower(r.records); err != nil {
			return 0, fmt.Errorf("%s-%d: %w", p.topic, p.id, err)
		}
		n = len(r.records)
	}
	if start := min(r.logStartOffset, p.log.LogEndOffset()); start > p.log.LogStartOffset() {
		if err := p.log.DeleteRecordsBefore(start); err != nil {
			return n, fmt.Errorf("%s-%d: %w", p.topic, p.id, err)
		}
	}
	p.followHW(r.highWatermark)
	return n, nil
}

// truncate cuts the follower's log at offset (appendMu held). At or past
// the log end it only drops leader epochs that start there (see
// storage.Log.Truncate).
func (p *Partition) truncate(offset int64, why string) error {
	if offset < p.log.LogEndOffset() {
		p.rm.logger.Info("truncating follower log", "topic", p.topic, "partition", p.id,
			"from", p.log.LogEndOffset(), "to", offset, "reason", why)
	}
	if err := p.log.Truncate(offset); err != nil {
		return fmt.Errorf("%s-%d: truncate to %d: %w", p.topic, p.id, offset, err)
	}
	p.capHW()
	return nil
}

// truncateFully empties the follower's log and restarts it at offset
// (appendMu held).
func (p *Partition) truncateFully(offset int64, why string) error {
	p.rm.logger.Info("restarting follower log", "topic", p.topic, "partition", p.id,
		"from", p.log.LogEndOffset(), "at", offset, "reason", why)
	if err := p.log.TruncateFullyAndStartAt(max(offset, 0)); err != nil {
		return fmt.Errorf("%s-%d: restart at %d: %w", p.topic, p.id, offset, err)
	}
	p.mu.Lock()
	p.hw = p.log.LogEndOffset()
	p.rm.storage.SetHighWatermark(p.topic, p.id, p.hw)
	p.mu.Unlock()
	return nil
}

// capHW keeps a follower's HW at or below its LEO after a truncation.
func (p *Partition) capHW() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if leo := p.log.LogEndOffset(); p.hw > leo {
		p.hw = leo
		p.rm.storage.SetHighWatermark(p.topic, p.id, leo)
	}
}

// followHW moves a follower's HW up to the leader's, capped at its own LEO.
func (p *Partition) followHW(leaderHW int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if hw := min(leaderHW, p.log.LogEndOffset()); hw > p.hw {
		p.hw = hw
		p.rm.storage.SetHighWatermark(p.topic, p.id, hw)
	}
}

// lastFetchedEpoch is the epoch of the follower's last batch, or -1.
func (p *Partition) lastFetchedEpoch() int32 {
	if e, ok := p.log.LatestEpoch(); ok {
		return e
	}
	return -1
}
