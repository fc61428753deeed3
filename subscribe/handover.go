package subscribe

import (
	"context"
	"slices"
	"sync"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/auth"
	"github.com/quirelog/quire/request"
)

// A stream's handovers: how its partitions reach it and leave it.
//
//   - The coordinator's decisions reach every node's metadata image; a
//     stream watches its member there (Broker.Member) and heartbeats at
//     once when the coordinator wants something of it (partitions to give
//     up, partitions now free to take, a new epoch), not at its next
//     heartbeat interval.
//   - A revoked partition is not given up at once: no more of its records
//     are sent, and the stream waits, up to its grace (three quarters of
//     the rebalance timeout, counted from the send of the heartbeat that
//     brought the revocation, so before the coordinator's own count
//     starts), for the acknowledgements of those it sent, commits them,
//     and only then revokes it and heartbeats without it.
//     What was acknowledged before the grace is committed as it starts,
//     so that a member dropped during it (which can commit nothing)
//     still hands over what its client had acknowledged.
//     The next owner starts where this one's client stopped: no record is
//     delivered twice, and no two clients work on one partition at once.
//   - A stream may take over the member an older stream of its client had
//     (SubscribeStart.member_id and member_epoch); an older stream of that
//     member on this node is ended first (Streams), its acknowledgements
//     committed.

// Streams is a node's Subscribe streams by group member.
type Streams struct {
	mu sync.Mutex
	m  map[streamKey]*streamEntry
}

type streamKey struct{ group, member string }

// streamEntry is one stream's place: replaced is closed when another
// stream takes its member over, done when it has finished.
type streamEntry struct {
	replaced chan struct{}
	done     chan struct{}
}

// NewStreams is an empty registry.
func NewStreams() *Streams { return &Streams{m: map[streamKey]*streamEntry{}} }

// claim makes the calling stream member's on this node: a stream that
// has it already is told to end, and waited for (until ctx ends) so that
// its acknowledgements are committed before the new one reads the group's
// committed offsets.
func (r *Streams) claim(ctx context.Context, group, member string) *streamEntry {
	e := &streamEntry{replaced: make(chan struct{}), done: make(chan struct{})}
	k := streamKey{group, member}
	r.mu.Lock()
	old := r.m[k]
	r.m[k] = e
	r.mu.Unlock()
	if old != nil {
		close(old.replaced)
		select {
		case <-old.done:
		case <-ctx.Done():
		}
	}
	return e
}

// rename moves e to another member id (a join answered with another id).
func (r *Streams) rename(e *streamEntry, group, from, to string) {
	if from == to {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m[streamKey{group, from}] == e {
		delete(r.m, streamKey{group, from})
	}
	r.m[streamKey{group, to}] = e
}

// drop ends e's claim.
func (r *Streams) drop(e *streamEntry, group, member string) {
	r.mu.Lock()
	if r.m[streamKey{group, member}] == e {
		delete(r.m, streamKey{group, member})
	}
	r.mu.Unlock()
	close(e.done)
}

func (s *subscription) reconcile(target []partKey, always bool) error {
	_, err := s.reconcileChanged(target, always)
	return err
}

// reconcileChanged moves to a new assignment: revoked partitions are
// dropped (no record of them is sent from here on) and their
// acknowledged offsets committed, then the client is told. It reports
// whether anything changed; always sends the assignment regardless.
func (s *subscription) reconcileChanged(target []partKey, always bool) (bool, error) {
	var revoked, added []partKey
	for _, k := range s.ownedKeys() {
		if _, ok := slices.BinarySearchFunc(target, k, comparePartKey); !ok {
			revoked = append(revoked, k)
		}
	}
	for _, k := range target {
		if s.owned[k] == nil {
			added = append(added, k)
		}
	}
	// A partition revoking that is assigned again goes on.
	for _, k := range target {
		if p := s.owned[k]; p != nil && p.revoking() {
			p.revokeBy = time.Time{}
			added = append(added, k) // told again
		}
	}
	var revoking []partKey
	if len(revoked) > 0 {
		if s.epoch > 0 {
			// Given up once what was sent is acknowledged
			// (finishRevoking), not before.
			revoking = s.startRevoking(revoked, s.graceFrom(time.Now()))
			revoked = nil
		} else {
			// Fenced: it is someone else's already.
			if s.fetchStop != nil {
				s.fetchStop()
			}
			for _, k := range revoked {
				p := s.owned[k]
				for p.sent.len() > 0 {
					s.acked(p.sent.front()) // its credit is the client's again
					p.sent.pop()
				}
				s.release(p)
				delete(s.owned, k)
			}
		}
	}
	if len(revoked) == 0 && len(added) == 0 && len(revoking) == 0 && !always {
		return false, nil
	}
	if len(added) > 0 {
		topics := make([]string, len(added))
		for i, k := range added {
			topics[i] = k.topic
		}
		if err := firstDenied(s.core.DeniedTopics(s.ctx, auth.OpRead, topics), topics); err != nil {
			return true, errSubscribeEnd{err: err, leave: true}
		}
	}
	var fresh []partKey
	for _, k := range added {
		if s.owned[k] == nil {
			s.owned[k] = &subPart{tp: k, fencing: s.epoch, next: -1, sentNext: -1, ackedEpoch: -1, committed: -1}
			fresh = append(fresh, k)
		}
	}
	err := s.stream.Send(&quirev1.SubscribeResponse{Event: &quirev1.SubscribeResponse_Assignment{Assignment: &quirev1.SubscribeAssignment{
		MemberId: s.memberID, MemberEpoch: s.epoch, Assigned: partsToAssignment(fresh),
		Revoked: partsToAssignment(revoked), Owned: partsToAssignment(s.ownedKeys()), Revoking: partsToAssignment(s.revokingKeys())}}})
	if err != nil {
		return true, err
	}
	if len(revoking) > 0 {
		// What the client acknowledged of them already is committed
		// now, not only at the end of their grace: a member the
		// coordinator drops before that (its rebalance timeout runs
		// from the coordinator's answer; the grace from the
		// heartbeat's send, earlier, but a node stalled for the last
		// quarter of the timeout still overruns it) can commit
		// nothing then, and its next owner would read those records
		// again.
		s.commit(revoking)
	}
	changed := len(revoked)+len(added)+len(revoking) > 0
	if changed {
		s.b.Logger().Debug("subscribe stream assignment changed", "group", s.start.Group, "member", s.memberID,
			"epoch", s.epoch, "assigned", len(fresh), "revoked", len(revoked), "revoking", len(revoking), "owned", len(s.owned))
	}
	return changed, nil
}

// grace is how long a revoked partition waits for the acknowledgements
// of what was sent of it: three quarters of the rebalance timeout, the
// rest left to commit and heartbeat before the coordinator gives up on
// the member.
func (s *subscription) grace() time.Duration {
	rt := subscribeDefaultRebalance
	if s.start.RebalanceTimeoutMs > 0 {
		rt = time.Duration(s.start.RebalanceTimeoutMs) * time.Millisecond
	}
	return rt * 3 / 4
}

// graceFrom is when a revocation learnt now starts its grace: when the
// heartbeat that brought it was sent, or now when that is unknown.
func (s *subscription) graceFrom(now time.Time) time.Time {
	if !s.hbSent.IsZero() && s.hbSent.Before(now) {
		return s.hbSent
	}
	return now
}

func (p *subPart) revoking() bool { return !p.revokeBy.IsZero() }

// startRevoking stops sending revoked partitions and starts their grace;
// those with nothing unacknowledged are revoked at once (finishRevoking).
// It returns the partitions that start their grace now.
func (s *subscription) startRevoking(revoked []partKey, now time.Time) []partKey {
	var started []partKey
	for _, k := range revoked {
		p := s.owned[k]
		if p.revoking() {
			continue
		}
		p.revokeBy = now.Add(s.grace())
		s.release(p) // nothing more of it is sent
		started = append(started, k)
	}
	if len(started) > 0 && s.fetchStop != nil {
		s.fetchStop() // its answer is dropped for partitions revoking
	}
	return started
}

// finishRevoking revokes the partitions whose grace is over or whose
// records sent were all acknowledged: their acknowledged offsets are
// committed, they are dropped, the client is told, and the next
// heartbeat (at once) gives them up. force revokes every revoking
// partition.
func (s *subscription) finishRevoking(now time.Time, force bool) error {
	var done []partKey
	for _, k := range s.ownedKeys() {
		p := s.owned[k]
		if p.revoking() && (force || p.sent.len() == 0 || !now.Before(p.revokeBy)) {
			done = append(done, k)
		}
	}
	if len(done) == 0 {
		return nil
	}
	if s.epoch > 0 {
		s.commit(done)
	}
	for _, k := range done {
		p := s.owned[k]
		if p.sent.len() > 0 {
			s.b.Logger().Info("subscribe stream revoked a partition with records unacknowledged after its grace",
				"group", s.start.Group, "member", s.memberID, "topic", k.topic, "partition", k.part, "unacknowledged", p.sent.len())
		}
		for p.sent.len() > 0 {
			s.acked(p.sent.front()) // its credit is the client's again
			p.sent.pop()
		}
		s.release(p)
		delete(s.owned, k)
	}
	s.hbAt = now // give them up at once
	return s.stream.Send(&quirev1.SubscribeResponse{Event: &quirev1.SubscribeResponse_Assignment{Assignment: &quirev1.SubscribeAssignment{
		MemberId: s.memberID, MemberEpoch: s.epoch, Revoked: partsToAssignment(done), Owned: partsToAssignment(s.ownedKeys()),
		Assigned: &quirev1.GroupAssignment{}, Revoking: partsToAssignment(s.revokingKeys())}}})
}

func (s *subscription) revokingKeys() []partKey {
	var out []partKey
	for _, k := range s.ownedKeys() {
		if s.owned[k].revoking() {
			out = append(out, k)
		}
	}
	return out
}

// revokeWake is the earliest end of a grace, or far when none.
func (s *subscription) revokeWake(wake time.Time) time.Time {
	for _, p := range s.owned {
		if p.revoking() {
			wake = minTime(wake, p.revokeBy)
		}
	}
	return wake
}

// onGroupChange looks at the member in this node's image after a change
// and heartbeats at once when the coordinator wants something of it:
// owned partitions out of its target (to give up), target partitions
// nobody holds (to take), an epoch it has not seen, or a group epoch past
// its own (a member gone: the next heartbeat computes the new target). It acts once per
// change of what it sees, so that a coordinator that does not move as
// expected is heard from at the heartbeat interval, as before.
func (s *subscription) onGroupChange(now time.Time) {
	if s.epoch <= 0 {
		return
	}
	v, ok := s.b.Member(s.start.Group, s.memberID)
	if !ok {
		v = MemberView{Epoch: -1} // removed: the next heartbeat learns why
	}
	if s.viewSeen && viewEqual(v, s.lastView) {
		return
	}
	s.lastView, s.viewSeen = v, true
	if s.wants(v) {
		s.hbAt = now
		// A heartbeat out may have been answered before the change:
		// look again when it is back.
		s.hbAgain = s.hbInFlight
	}
}

// wants reports whether the coordinator's view of the member asks for a
// heartbeat now: a change of the group for it to learn its target
// from, or a target it has not reconciled with.
func (s *subscription) wants(v MemberView) bool {
	if v.Epoch != s.epoch || v.GroupEpoch > s.epoch {
		return true
	}
	for _, k := range s.ownedKeys() {
		if !s.owned[k].revoking() && !containsTP(v.Target, k) {
			return true
		}
	}
	for _, tp := range v.Target {
		k := partKey{tp.Topic, tp.Partition}
		if s.owned[k] == nil && !containsTP(v.Held, k) {
			return true
		}
	}
	return false
}

func containsTP(tps []request.GroupPartition, k partKey) bool {
	_, ok := slices.BinarySearchFunc(tps, k, func(tp request.GroupPartition, k partKey) int {
		return comparePartKey(partKey{tp.Topic, tp.Partition}, k)
	})
	return ok
}

func viewEqual(a, b MemberView) bool {
	return a.GroupEpoch == b.GroupEpoch && a.Epoch == b.Epoch && slices.Equal(a.Target, b.Target) && slices.Equal(a.Held, b.Held)
}
