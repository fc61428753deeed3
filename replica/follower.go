package replica

import (
	"errors"
	"fmt"

	"github.com/quirelog/quire/record"
	"github.com/quirelog/quire/storage"
)

// The follower's side: applying one partition's part of a fetch response.

// fromLeader is one partition's answer from the leader, for a fetch made at
// fetchOffset in leaderEpoch.
type fromLeader struct {
	leaderEpoch    int32
	fetchOffset    int64
	records        []byte
	diverging      *EpochEndOffset
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
			if errors.Is(err, storage.ErrLogFailed) {
				p.logFailed(err)
			}
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
	p.log.SetHighWatermark(p.hw)
	p.mu.Unlock()
	return nil
}

// capHW keeps a follower's HW at or below its LEO after a truncation.
func (p *Partition) capHW() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if leo := p.log.LogEndOffset(); p.hw > leo {
		p.hw = leo
		p.log.SetHighWatermark(leo)
	}
}

// followHW moves a follower's HW up to the leader's, capped at its own LEO.
func (p *Partition) followHW(leaderHW int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if hw := min(leaderHW, p.log.LogEndOffset()); hw > p.hw {
		p.hw = hw
		p.log.SetHighWatermark(hw)
	}
}

// lastFetchedEpoch is the epoch of the follower's last batch, or -1.
func (p *Partition) lastFetchedEpoch() int32 {
	if e, ok := p.log.LatestEpoch(); ok {
		return e
	}
	return -1
}

// firstBaseOffset is the base offset of the first batch of records.
func firstBaseOffset(records []byte) (int64, error) {
	h, err := record.ParseHeader(records)
	if err != nil {
		return 0, fmt.Errorf("replica: batch from the leader: %w", err)
	}
	return h.BaseOffset, nil
}
