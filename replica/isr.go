package replica

import (
	"errors"
	"time"
)

// ISR changes: the leader adds a follower that caught up and drops one
// that fell behind, by asking the controller (AlterPartition, carrying
// the partition epoch); the change counts once the controller answers or
// a newer image has it.

// recordFollowerFetch takes offset as the follower's LEO: it may move the
// HW, and it tells whether the follower is caught up (Kafka's rule: its
// LEO reached the leader's LEO now, or the leader's LEO as of its previous
// fetch). A follower outside the ISR that has caught up with the HW (and
// with the start of this leader's epoch), and whose broker the controller
// has not fenced, is added back. A fetch checked against another leader
// epoch than the current one is ignored.
func (p *Partition) recordFollowerFetch(replica int32, offset, logStart int64, now time.Time, epoch int32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.leader || p.leaderEpoch != epoch {
		return
	}
	if f, ok := p.followers[replica]; ok {
		p.recordFollowerFetchLocked(f, replica, offset, logStart, now)
	}
}

// refreshFollowerFetch is recordFollowerFetch for a fetch checked in full
// before (followerFetch) and unchanged since: the same offset, at the same
// epochs. It stands only while this replica still leads at epoch, the
// follower is still one of its followers and offset is still in the log;
// otherwise it records nothing and reports false, and the fetch is to be
// checked in full again.
func (p *Partition) refreshFollowerFetch(replica int32, offset, logStart int64, now time.Time, epoch int32) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.leader || p.leaderEpoch != epoch || offset < p.log.LogStartOffset() || offset > p.log.LogEndOffset() {
		return false
	}
	f, ok := p.followers[replica]
	if !ok || f.logFailed {
		return false
	}
	p.recordFollowerFetchLocked(f, replica, offset, logStart, now)
	return true
}

func (p *Partition) recordFollowerFetchLocked(f *followerState, replica int32, offset, logStart int64, now time.Time) {
	f.logFailed = false // a fetch into a working log: reopened since
	if logStart != f.logStart {
		f.logStart = logStart
		p.waiters.signal() // a DeleteRecords waiting for it (DeleteRecordsBefore)
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
	if p.failed == nil && !contains(p.isr, replica) && offset >= p.hw && offset >= p.epochStart &&
		!now.Before(p.isrRetryAt) && p.rm.mayJoinISR(replica) {
		p.requestISRLocked(append(append([]int32(nil), p.isr...), replica), "caught up", replica)
	}
}

// maybeShrinkISR drops from the ISR every follower that has not been
// caught up for lag (replica.lag.time.max.ms). The leader itself stays.
func (p *Partition) maybeShrinkISR(now time.Time, lag time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.leader || p.isrPending {
		return
	}
	if p.failed != nil {
		p.giveUpLocked()
		return
	}
	if p.isrUnanswered && !now.Before(p.isrRetryAt) {
		p.isrUnanswered = false
		// Never an ISR without this leader: the controller takes that
		// for the leader giving its replica up (giveUpLocked, above).
		if contains(p.pendingISR, p.leaderID) {
			p.requestISRLocked(p.pendingISR, "retrying an unanswered change")
			return
		}
	}
	var keep, out []int32
	for _, id := range p.isr {
		f, ok := p.followers[id]
		if id != p.leaderID && (!ok || f.logFailed || now.Sub(f.lastCaughtUp) > lag) {
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
	if p.isrPending || p.handedOff {
		return
	}
	// An unanswered earlier request stays counted alongside this one.
	p.isrPending, p.pendingISR = true, union(p.pendingISR, isr)
	a := Assignment{Partition: p.id, Leader: p.leaderID, LeaderEpoch: p.leaderEpoch, PartitionEpoch: p.partitionEpoch, Replicas: p.replicas, ISR: isr}
	p.rm.logger.Info("changing ISR", "topic", p.topic, "partition", p.id, "reason", why, "replicas", ids, "from", p.isr, "to", isr)
	p.rm.goBackground(func() {
		got, err := p.rm.ctl.AlterPartition(p.rm.ctx, p.topic, p.id, a)
		p.mu.Lock()
		defer p.mu.Unlock()
		if !p.leader || p.leaderEpoch != a.LeaderEpoch {
			return
		}
		p.isrPending = false
		switch {
		case errors.Is(err, ErrISRRefused):
			// A newer epoch, or a follower the controller has fenced: the
			// next image says what changed; do not ask again at once. An
			// earlier change left unanswered was part of this one
			// (pendingISR is their union): settled with it.
			p.pendingISR, p.isrUnanswered = nil, false
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
			if got.Leader != p.leaderID || got.LeaderEpoch != p.leaderEpoch {
				// The change completed a reassignment that moved the
				// leadership away: the next image makes this replica a
				// follower or removes it. Meanwhile the HW stays put
				// (handedOff): the new leader no longer fetches here, so
				// a HW counted without it would pass its log.
				p.handedOff = true
				break
			}
			p.pendingISR, p.isrUnanswered = nil, false
			if got.PartitionEpoch > p.partitionEpoch {
				p.rm.countISRChange(p.isr, got.ISR)
				p.partitionEpoch, p.isr = got.PartitionEpoch, append([]int32(nil), got.ISR...)
				p.waiters.signal() // a DeleteRecords waits on the ISR's members
			}
		}
		p.maybeAdvanceHWLocked()
	})
}

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

// followerLogFailed records that follower replica's log has failed (its
// fetch said so, at leader epoch epoch): it is dropped from the ISR at once
// (again by the ISR check if a change is under way) and not added back
// while it says so.
func (p *Partition) followerLogFailed(replica int32, epoch int32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, ok := p.followers[replica]
	if !p.leader || p.leaderEpoch != epoch || !ok {
		return
	}
	if !f.logFailed {
		f.logFailed = true
		p.rm.logger.Warn("follower's log failed", "topic", p.topic, "partition", p.id, "follower", replica)
	}
	if contains(p.isr, replica) && !p.isrPending {
		p.requestISRLocked(without(p.isr, replica), "follower's log failed", replica)
	}
}

// logFailed takes the replica out of service once its log has failed
// (storage.ErrLogFailed: an I/O error on write or sync; the log refuses
// appends until reopened), whether an append found it or the log reported
// it itself (storage.Log.OnFailure: a flush, a checkpoint, recording a
// leader epoch). As leader it asks the controller for the ISR without
// itself, which hands leadership to an in-sync follower; as follower its
// fetches take no more records and tell the leader, which drops it from
// the ISR. Only the first failure asks: an ask that goes unanswered is
// asked again by the ISR check, not by every later report of the same
// failure (which may come from the append and the log's report alike).
func (p *Partition) logFailed(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failed != nil {
		return
	}
	p.failed = err
	p.rm.logger.Error("replica log failed: giving up leadership and the ISR", "topic", p.topic, "partition", p.id,
		"dir", p.log.Dir(), "leader", p.leader, "error", err)
	p.giveUpLocked()
}

// giveUpLocked asks, as leader of a failed replica, for the ISR without
// this broker, unless a change is already on its way (the ISR check asks
// again once it is settled).
func (p *Partition) giveUpLocked() {
	if p.leader && !p.isrPending {
		p.requestISRLocked(without(p.isr, p.leaderID), "log failed", p.leaderID)
	}
}

// DirtyRatio is the share of the replica's cleanable bytes not yet
// cleaned, and whether its topic is compacted at all.
func (p *Partition) DirtyRatio() (ratio float64, compacted bool) {
	if !p.log.Config().Compact {
		return 0, false
	}
	return p.log.CleanerStats().DirtyRatio, true
}

// LogFailure is the error the replica's log failed with, nil while it
// works, and the log's directory.
func (p *Partition) LogFailure() (dir string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.Dir(), p.failed
}

func without(s []int32, v int32) []int32 {
	out := make([]int32, 0, len(s))
	for _, x := range s {
		if x != v {
			out = append(out, x)
		}
	}
	return out
}
