package subscribe

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/request"
)

// The acknowledgements of a SHARED stream. Each range is checked against
// what the stream holds: a malformed range, or one naming a record the
// stream does not hold, is refused alone. The rest go to the core in one
// call, each partition's all or nothing there (a lock that ran out in
// between refuses that partition's ranges).

// ackRange is a range checked and waiting for the core.
type ackRange struct {
	i   int // its index in the message
	ack request.ShareAck
}

// acknowledge applies a ShareAcks and answers it, range by range.
func (s *sharedStream) acknowledge(m *quirev1.ShareAcks) *quirev1.ShareAckResults {
	now := time.Now()
	s.expire(now)
	out := &quirev1.ShareAckResults{Id: m.Id, Ranges: make([]*quirev1.ShareAckRangeResult, len(m.Ranges))}
	byPart := map[partKey][]ackRange{}
	var order []partKey
	for i, r := range m.Ranges {
		out.Ranges[i] = &quirev1.ShareAckRangeResult{Range: r}
		if err := s.checkRange(r); err != nil {
			out.Ranges[i].Error = s.b.Error(err)
			continue
		}
		k := partKey{r.Topic, r.Partition}
		if _, ok := byPart[k]; !ok {
			order = append(order, k)
		}
		byPart[k] = append(byPart[k], ackRange{i, request.ShareAck{First: r.FirstOffset, Last: r.LastOffset, Type: request.ShareAckType(r.Type)}})
	}
	// The core takes each partition's ranges in offset order, not
	// overlapping: a range overlapping an earlier one of the message is
	// refused.
	parts := make([]request.SharePartition, 0, len(order))
	sent := make([][]ackRange, 0, len(order))
	for _, k := range order {
		rs := byPart[k]
		slices.SortStableFunc(rs, func(a, b ackRange) int { return cmp.Compare(a.ack.First, b.ack.First) })
		kept := rs[:0]
		for _, r := range rs {
			if n := len(kept); n > 0 && r.ack.First <= kept[n-1].ack.Last {
				out.Ranges[r.i].Error = s.b.Error(fmt.Errorf("%w: ack of %s-%d offsets %d to %d overlaps another range of the same message",
					ErrInvalidRequest, k.topic, k.part, r.ack.First, r.ack.Last))
				continue
			}
			kept = append(kept, r)
		}
		if len(kept) == 0 {
			continue
		}
		acks := make([]request.ShareAck, len(kept))
		for i, r := range kept {
			acks[i] = r.ack
		}
		parts = append(parts, request.SharePartition{Topic: k.topic, Partition: k.part, Acks: acks})
		sent = append(sent, kept)
	}
	if len(parts) == 0 {
		return out
	}
	ctx, cancel := context.WithTimeout(s.ctx, subscribeCallTimeout)
	res, err := s.core.ShareAcknowledgeRouted(ctx, s.start.Group, s.memberID, s.start.KeyOrdered, parts)
	cancel()
	for i, kept := range sent {
		perr := err
		if perr == nil && i < len(res) {
			perr = res[i].Err
		}
		if perr != nil {
			e := s.b.Error(perr)
			for _, r := range kept {
				out.Ranges[r.i].Error = e
			}
			continue
		}
		s.applied(partKey{parts[i].Topic, parts[i].Partition}, kept, now)
	}
	return out
}

// checkRange refuses a range that is malformed or names a record the
// stream does not hold (or whose lock ran out).
func (s *sharedStream) checkRange(r *quirev1.ShareAckRange) error {
	switch {
	case r.Type < quirev1.ShareAckType_SHARE_ACCEPT || r.Type > quirev1.ShareAckType_SHARE_RENEW:
		return fmt.Errorf("%w: ack of %s-%d offsets %d to %d has type %d (want SHARE_ACCEPT, SHARE_RELEASE, SHARE_REJECT or SHARE_RENEW)",
			ErrInvalidRequest, r.Topic, r.Partition, r.FirstOffset, r.LastOffset, r.Type)
	case r.FirstOffset < 0 || r.LastOffset < r.FirstOffset:
		return fmt.Errorf("%w: ack of %s-%d offsets %d to %d: want 0 <= first_offset <= last_offset",
			ErrInvalidRequest, r.Topic, r.Partition, r.FirstOffset, r.LastOffset)
	}
	k := partKey{r.Topic, r.Partition}
	if _, ok := slices.BinarySearchFunc(s.parts, k, comparePartKey); !ok {
		return fmt.Errorf("%w: ack of %s-%d: the partition is not assigned to this stream", ErrInvalidRequest, r.Topic, r.Partition)
	}
	h := s.held[k]
	if r.LastOffset-r.FirstOffset >= int64(len(h)) {
		return fmt.Errorf("%w: ack of %s-%d offsets %d to %d: the stream holds %d records of the partition",
			request.ErrShareRecordNotHeld, r.Topic, r.Partition, r.FirstOffset, r.LastOffset, len(h))
	}
	for off := r.FirstOffset; off <= r.LastOffset; off++ {
		if _, ok := h[off]; !ok {
			return fmt.Errorf("%w: ack of %s-%d offsets %d to %d: the stream does not hold offset %d (never sent to it, acknowledged already, or its lock ran out)",
				request.ErrShareRecordNotHeld, r.Topic, r.Partition, r.FirstOffset, r.LastOffset, off)
		}
	}
	return nil
}

// applied updates what the stream holds after the core applied acks: a
// renewed lock starts over, anything else is the stream's no more.
func (s *sharedStream) applied(k partKey, acks []ackRange, now time.Time) {
	h := s.held[k]
	deadline := now.Add(s.lockFor)
	for _, r := range acks {
		for off := r.ack.First; off <= r.ack.Last; off++ {
			if r.ack.Type == request.ShareRenew {
				h[off] = sharedLock{deadline: deadline}
				continue
			}
			delete(h, off)
			s.nHeld--
		}
	}
	if len(h) == 0 {
		delete(s.held, k)
	}
	if s.nextExpiry.IsZero() && s.nHeld > 0 {
		s.nextExpiry = deadline
	}
}
