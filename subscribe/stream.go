package subscribe

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/auth"
	"github.com/quirelog/quire/internal/wire"
	"github.com/quirelog/quire/record"
	"github.com/quirelog/quire/request"
)

// Subscribe: the broker is a consumer group member on a stream's behalf,
// a door over the request core like the others: its heartbeats, commits,
// committed offsets, position look-ups and reads are the core's
// operations (Core), authorized there with the stream's principal.
// One goroutine (the stream's loop) owns the member's state: its epoch,
// its partitions with their fetch positions and the records sent and not
// yet acknowledged. Around it, one goroutine reads the client's messages,
// and each heartbeat and each fetch runs in a goroutine of its own, at
// most one of each at a time, their answers coming back to the loop.
// Commits and position look-ups run in the loop itself, so a partition
// revoked is committed before the heartbeat that gives it up is sent.
// records.go has the records: fetching, sending, acks; handover.go how
// partitions come and go: the member watched in the node's image, the
// grace of a revoked partition, the take-over of a member.

const (
	subscribeDefaultRecords   = 500
	subscribeDefaultBytes     = 1 << 20
	subscribeDefaultCommit    = 5 * time.Second
	subscribeDefaultRebalance = time.Minute
	// subscribeFetchBytes caps one fetch: what it read past the records
	// the credit lets it send is read again next time.
	subscribeFetchBytes = 512 << 10
	// subscribeFetchWait is each fetch's long poll.
	subscribeFetchWait = 500 * time.Millisecond
	// subscribeRetry is the wait before trying again a heartbeat, a
	// position look-up or a partition's fetch that failed.
	subscribeRetry = 200 * time.Millisecond
	// subscribeCallTimeout bounds each heartbeat, commit and look-up.
	subscribeCallTimeout = 10 * time.Second
	// subscribeJoinTimeout is how long a stream tries to join while the
	// answer is retriable (no controller) before it ends UNAVAILABLE.
	subscribeJoinTimeout = 30 * time.Second
)

// subPart is one partition assigned to a stream.
type subPart struct {
	tp partKey
	// fencing is the member epoch at which the group gave the stream
	// the partition: the fencing token's epoch of its records.
	fencing int32
	// next is the offset to fetch next; -1 while unknown (see state).
	next  int64
	state subPartState
	// sentNext is the offset after the last record sent (the position
	// resolved, before any): the commit point when nothing is unacked.
	sentNext int64
	// sent are the records sent from the first not acknowledged on
	// (records.go).
	sent sentQueue
	// held is what a fetch read past the credit, from the batch of the
	// record at next on (nil: none), in heldBuf when that is an internal/fetchbuf
	// buffer; heldCost is what it counts in the stream's heldBytes.
	held     []byte
	heldBuf  *[]byte
	heldCost int64
	// aborted filters the batches of the fetch held from (its aborted
	// transactions, and the markers); nil when nothing is held.
	aborted *record.AbortFilter
	// ackedEpoch is the leader epoch of the last record before the
	// commit point, -1 when unknown.
	ackedEpoch int32
	// committed is the group's committed offset as last known.
	committed int64
	retryAt   time.Time
	// revokeBy, when set, is the end of the partition's grace: it is
	// revoked, nothing more of it is sent, and it is given up once what
	// was sent is acknowledged or by then (handover.go).
	revokeBy time.Time
}

type subPartState int8

const (
	partNeedCommitted subPartState = iota // ask the group's committed offset
	partNeedReset                         // ask the leader per auto_offset_reset
	partReady                             // fetch from next
)

type partKey struct {
	topic string
	part  int32
}

func comparePartKey(a, b partKey) int {
	return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.part, b.part))
}

type subscription struct {
	core   Core
	b      Broker
	stream grpc.BidiStreamingServer[quirev1.SubscribeRequest, quirev1.SubscribeResponse]
	start  *quirev1.SubscribeStart
	ctx    context.Context // the stream's with its principal, ended by Broker.Shutdown too

	memberID   string
	epoch      int32
	interval   time.Duration
	maxRecords int64
	maxBytes   int64
	commitIntv time.Duration
	resetTS    int64 // ListOffsets timestamp: -2 earliest, -1 latest
	isolation  request.Isolation

	owned map[partKey]*subPart
	// everSent is, per partition, the offset after the highest record
	// ever sent on the stream: an ack at or past it is the client's
	// mistake.
	everSent map[partKey]int64
	// outRecords and outBytes are what was sent and not acknowledged.
	outRecords, outBytes int64
	// heldBytes is what the partitions hold (subPart.held).
	heldBytes  int64
	rotate     int // the partition fetched first, round robin
	rotateHeld int // the partition sent from first, round robin

	hbInFlight bool
	hbAt       time.Time
	// hbSent is when the last heartbeat (or join) was sent: the
	// coordinator starts a revocation's rebalance timeout when it
	// handles it, so no earlier than that, and a revoked partition's
	// grace starts from it (startRevoking), not from the answer's
	// arrival, which a loaded node can hold up.
	hbSent     time.Time
	hbDone     chan hbResult
	fetchStop  context.CancelFunc // the fetch in flight, nil when none
	fetchDone  chan fetchDone
	nextCommit time.Time

	// entry is the stream's place in Broker.Streams.
	entry *streamEntry
	// lastView is the member as last seen in the image (onGroupChange).
	lastView MemberView
	viewSeen bool
	// hbAgain: the image asked for a heartbeat while one was out.
	hbAgain bool
	// hbOwned is what the heartbeat out said the member owns.
	hbOwned []partKey
	// takeover: the join takes the member of SubscribeStart.member_id
	// over at member_epoch.
	takeover bool
}

type hbResult struct {
	resp *request.GroupHeartbeatResult
	err  error
}

type fetchDone struct {
	results []request.FetchResult // of Core.Fetch
	err     error                 // the fetch refused whole
}

type recvResult struct {
	msg *quirev1.SubscribeRequest
	err error
}

// malformed reports whether err is the refusal of a message that did not
// parse (INVALID_ARGUMENT, made by the broker's decoder): the stream ends
// with it, where any other receive error means the client went away.
func malformed(err error) bool {
	return status.Code(err) == codes.InvalidArgument
}

// Serve runs one stream's group member until the stream, the member or
// the broker ends; see the proto for what the client sees. ctx is the
// stream's context with the caller's principal (request.WithPrincipal):
// every call to core is authorized as it.
func Serve(ctx context.Context, core Core, b Broker, stream grpc.BidiStreamingServer[quirev1.SubscribeRequest, quirev1.SubscribeResponse]) error {
	first, err := stream.Recv()
	if malformed(err) {
		return err
	}
	if err != nil {
		return nil // the client left before it said anything
	}
	start := first.GetStart()
	if start == nil {
		return b.Status(fmt.Errorf("%w: the first message of a Subscribe stream must be a start", ErrInvalidRequest))
	}
	if err := checkMode(start); err != nil {
		return b.Status(err)
	}
	if start.Mode == quirev1.SubscribeMode_SHARED {
		return serveShared(ctx, core, b, stream, start) // shared.go
	}
	sub, err := newSubscription(core, b, stream, start)
	if err != nil {
		return b.Status(err)
	}
	// Read on each topic named, before the member joins (the join itself
	// needs Read on the group); topics a regular expression matches are
	// checked as they are assigned.
	if err := firstDenied(core.DeniedTopics(ctx, auth.OpRead, start.Subscription.Topics), start.Subscription.Topics); err != nil {
		return b.Status(fmt.Errorf("subscribe to group %q: %w", start.Group, err))
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-b.Closing():
			cancel()
		case <-ctx.Done():
		}
	}()
	sub.ctx = ctx
	return sub.run()
}

// firstDenied is the refusal of the first of names in denied, nil for
// none.
func firstDenied(denied map[string]error, names []string) error {
	for _, t := range names {
		if err, ok := denied[t]; ok {
			return err
		}
	}
	return nil
}

func newSubscription(core Core, b Broker, stream grpc.BidiStreamingServer[quirev1.SubscribeRequest, quirev1.SubscribeResponse], st *quirev1.SubscribeStart) (*subscription, error) {
	if st.Subscription == nil || (len(st.Subscription.Topics) == 0 && st.Subscription.Regex == "") {
		return nil, fmt.Errorf("%w: a Subscribe start needs subscription.topics or subscription.regex", ErrInvalidRequest)
	}
	if err := request.CheckSubscription(subscriptionOf(st)); err != nil {
		return nil, err
	}
	if st.MaxOutstandingRecords < 0 || st.MaxOutstandingBytes < 0 || st.RebalanceTimeoutMs < 0 || st.CommitIntervalMs < 0 || st.MemberEpoch < 0 {
		return nil, fmt.Errorf("%w: negative max_outstanding_records, max_outstanding_bytes, rebalance_timeout_ms, commit_interval_ms or member_epoch", ErrInvalidRequest)
	}
	if st.MemberEpoch > 0 && st.MemberId == "" {
		return nil, fmt.Errorf("%w: member_epoch %d without the member_id it is the epoch of", ErrInvalidRequest, st.MemberEpoch)
	}
	if err := wire.CheckFormat(st.Format); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	sub := &subscription{core: core, b: b, stream: stream, start: st, interval: time.Second,
		maxRecords: subscribeDefaultRecords, maxBytes: subscribeDefaultBytes, commitIntv: subscribeDefaultCommit,
		owned: map[partKey]*subPart{}, everSent: map[partKey]int64{}, hbDone: make(chan hbResult, 1), fetchDone: make(chan fetchDone, 1)}
	switch st.AutoOffsetReset {
	case "", "earliest":
		sub.resetTS = -2
	case "latest":
		sub.resetTS = -1
	default:
		return nil, fmt.Errorf("%w: auto_offset_reset %q (want earliest or latest)", ErrInvalidRequest, st.AutoOffsetReset)
	}
	// Unset is read_committed, the group consumer's default.
	sub.isolation = request.ReadCommitted
	if lvl, ok := st.OptionalIsolationLevel.(*quirev1.SubscribeStart_IsolationLevel); ok {
		switch lvl.IsolationLevel {
		case quirev1.IsolationLevel_READ_COMMITTED:
		case quirev1.IsolationLevel_READ_UNCOMMITTED:
			sub.isolation = request.ReadUncommitted
		default:
			return nil, fmt.Errorf("%w: isolation_level %d (want READ_UNCOMMITTED or READ_COMMITTED)", ErrInvalidRequest, lvl.IsolationLevel)
		}
	}
	if st.MaxOutstandingRecords > 0 {
		sub.maxRecords = int64(st.MaxOutstandingRecords)
	}
	if st.MaxOutstandingBytes > 0 {
		sub.maxBytes = st.MaxOutstandingBytes
	}
	if st.CommitIntervalMs > 0 {
		sub.commitIntv = time.Duration(st.CommitIntervalMs) * time.Millisecond
	}
	sub.memberID, sub.epoch, sub.takeover = st.MemberId, st.MemberEpoch, st.MemberEpoch > 0
	if sub.memberID == "" {
		var id [16]byte
		if _, err := rand.Read(id[:]); err != nil {
			return nil, fmt.Errorf("subscribe: member id: %w", err)
		}
		sub.memberID = hex.EncodeToString(id[:])
	}
	return sub, nil
}

// errSubscribeEnd marks an error that ends the stream with err's status.
// leave says whether the member leaves its group first: not after a
// heartbeat's refusal (the member is gone, or was never let in), but
// after an error of the stream's own (a partition assigned of a topic the
// caller may not read), so that its partitions go to others at once.
type errSubscribeEnd struct {
	err   error
	leave bool
}

func (e errSubscribeEnd) Error() string { return e.err.Error() }
func (e errSubscribeEnd) Unwrap() error { return e.err }

func (s *subscription) run() error {
	log := s.b.Logger().With("group", s.start.Group, "member", s.memberID)
	// A stream of the member on this node ends (committing what its
	// client acknowledged) before this one joins as it.
	streams := s.b.Streams()
	s.entry = streams.claim(s.ctx, s.start.Group, s.memberID)
	defer func() { streams.drop(s.entry, s.start.Group, s.memberID) }()
	changes, unwatch := s.b.GroupChanges()
	defer unwatch()
	// The join, here, so that a refusal ends the stream before anything
	// else happens.
	resp, err := s.join()
	if err != nil {
		return s.b.Status(fmt.Errorf("subscribe to group %q: %w", s.start.Group, err))
	}
	if resp.MemberID != "" && resp.MemberID != s.memberID {
		streams.rename(s.entry, s.start.Group, s.memberID, resp.MemberID)
		s.memberID = resp.MemberID
	}
	log.Debug("subscribe stream joined", "epoch", resp.MemberEpoch)
	s.nextCommit = time.Now().Add(s.commitIntv)
	if err := s.onHeartbeat(resp, nil, true); err != nil {
		return s.finish(err, false, log)
	}

	recv := make(chan recvResult)
	go func() {
		for {
			m, err := s.stream.Recv()
			select {
			case recv <- recvResult{m, err}:
			case <-s.ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()

	for {
		now := time.Now()
		if !s.hbInFlight && !now.Before(s.hbAt) {
			s.spawnHeartbeat()
		}
		if err := s.finishRevoking(now, false); err != nil {
			return s.finish(nil, true, log) // sending failed: the stream broke
		}
		if err := s.resolve(now); err != nil {
			return s.finish(err, true, log)
		}
		if err := s.sendHeld(); err != nil {
			return s.finish(nil, false, log) // sending failed: the stream broke
		}
		s.maybeFetch(now)
		if !now.Before(s.nextCommit) {
			s.commit(s.ownedKeys())
			s.nextCommit = now.Add(s.commitIntv)
		}
		wake := s.nextCommit
		if !s.hbInFlight {
			wake = minTime(wake, s.hbAt)
		}
		for _, p := range s.owned {
			if p.retryAt.After(now) {
				wake = minTime(wake, p.retryAt)
			}
		}
		wake = s.revokeWake(wake)
		timer := time.NewTimer(max(time.Until(wake), time.Millisecond))
		select {
		case <-s.ctx.Done():
			timer.Stop()
			if s.stopping() {
				return s.finish(s.b.Status(s.b.ShuttingDown()), true, log)
			}
			return s.finish(nil, true, log) // the stream broke, or was cancelled: its partitions go at once
		case <-s.entry.replaced:
			timer.Stop()
			return s.finish(errSubscribeEnd{err: s.b.TakenOver(s.start.Group, s.memberID)}, false, log)
		case <-changes:
			timer.Stop()
			s.onGroupChange(time.Now())
		case r := <-recv:
			timer.Stop()
			if errors.Is(r.err, io.EOF) {
				return s.finish(nil, true, log) // closed cleanly
			}
			if malformed(r.err) {
				return s.finish(r.err, true, log)
			}
			if r.err != nil {
				return s.finish(nil, true, log) // the stream broke: its partitions go at once
			}
			if err := s.onMessage(r.msg); err != nil {
				return s.finish(s.b.Status(err), true, log)
			}
		case h := <-s.hbDone:
			timer.Stop()
			s.hbInFlight = false
			if err := s.onHeartbeat(h.resp, h.err, false); err != nil {
				return s.finish(err, false, log)
			}
			if s.hbAgain {
				// The image changed while the heartbeat was out: look
				// again, its answer may predate the change.
				s.hbAgain, s.viewSeen = false, false
				s.onGroupChange(time.Now())
			}
		case f := <-s.fetchDone:
			timer.Stop()
			if err := s.onFetch(f); err != nil {
				if errors.As(err, new(errSubscribeEnd)) {
					return s.finish(err, true, log) // refused
				}
				return s.finish(nil, false, log) // sending failed: the stream broke
			}
		case <-timer.C:
		}
	}
}

// finish commits what was acknowledged and, when leave is set, leaves the
// group at once, a broken or cancelled stream too, so that its
// partitions go to others without waiting for the session timeout (a
// static member leaves its place to its instance's next stream for that
// long instead). It returns err, the stream's status.
func (s *subscription) finish(err error, leave bool, log interface{ Debug(string, ...any) }) error {
	if s.fetchStop != nil {
		s.fetchStop()
	}
	if s.hbInFlight {
		// A join still in flight must not land after the leave.
		h := <-s.hbDone
		if h.err == nil && h.resp.MemberEpoch > 0 {
			s.epoch = h.resp.MemberEpoch
		}
	}
	var end errSubscribeEnd
	if errors.As(err, &end) {
		err = s.b.Status(fmt.Errorf("subscribe to group %q: %w", s.start.Group, end.err))
		leave = end.leave
	}
	s.commit(s.ownedKeys())
	for _, p := range s.owned {
		s.release(p)
	}
	if leave && err == nil && len(s.owned) > 0 && s.ctx.Err() == nil {
		// Closed by the client: it is told it has nothing left.
		_ = s.stream.Send(&quirev1.SubscribeResponse{Event: &quirev1.SubscribeResponse_Assignment{Assignment: &quirev1.SubscribeAssignment{
			MemberId: s.memberID, MemberEpoch: -1, Revoked: partsToAssignment(s.ownedKeys()), Owned: &quirev1.GroupAssignment{}}}})
	}
	if leave && s.epoch > 0 {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), subscribeCallTimeout)
		defer cancel()
		epoch := int32(-1)
		if s.start.InstanceId != "" {
			epoch = -2 // the place stays the instance's next stream's
		}
		if _, lerr := s.core.ConsumerGroupHeartbeat(ctx, &request.GroupHeartbeat{
			Group: s.start.Group, MemberID: s.memberID, MemberEpoch: epoch, InstanceID: s.start.InstanceId}); lerr != nil {
			s.b.Logger().Warn("subscribe stream could not leave its group", "group", s.start.Group, "member", s.memberID, "error", lerr)
		}
	}
	log.Debug("subscribe stream ended", "left", leave, "error", err)
	return err
}

// subscriptionOf is a start's subscription as the core has it.
func subscriptionOf(st *quirev1.SubscribeStart) *request.GroupSubscription {
	return &request.GroupSubscription{Topics: st.Subscription.GetTopics(), Regex: st.Subscription.GetRegex()}
}

func (s *subscription) heartbeatRequest() *request.GroupHeartbeat {
	req := &request.GroupHeartbeat{Group: s.start.Group, MemberID: s.memberID, MemberEpoch: s.epoch,
		Owned: partsToGroupAssignment(s.ownedKeys()), ClientAddress: s.b.ClientHost(s.ctx)}
	if s.epoch == 0 || s.takeover {
		// A join, or a take-over: a full heartbeat (subscription,
		// rebalance timeout, owning nothing yet), answered with the
		// member's whole assignment.
		req.Subscription = subscriptionOf(s.start)
		req.RebalanceTimeoutMs = s.start.RebalanceTimeoutMs
		if req.RebalanceTimeoutMs == 0 {
			req.RebalanceTimeoutMs = int32(subscribeDefaultRebalance.Milliseconds())
		}
		req.Assignor = s.start.Assignor
		req.InstanceID = s.start.InstanceId
	}
	return req
}

// join sends the first heartbeat, again while the answer is retriable (a
// controller election) for up to subscribeJoinTimeout.
func (s *subscription) join() (*request.GroupHeartbeatResult, error) {
	deadline := time.Now().Add(subscribeJoinTimeout)
	for {
		ctx, cancel := context.WithTimeout(s.ctx, subscribeCallTimeout)
		s.hbSent = time.Now()
		resp, err := s.core.ConsumerGroupHeartbeat(ctx, s.heartbeatRequest())
		cancel()
		if s.takeover && err != nil {
			switch s.b.Error(err).Code {
			case quirev1.ErrorCode_FENCED_MEMBER_EPOCH, quirev1.ErrorCode_UNKNOWN_MEMBER_ID:
				// The member left, or moved on: join as a new one
				// under its id.
				s.b.Logger().Debug("subscribe stream cannot take its member over; joining", "group", s.start.Group, "member", s.memberID, "error", err)
				s.takeover, s.epoch = false, 0
				continue
			}
		}
		if err == nil {
			s.takeover = false
		}
		if err == nil || !s.b.Error(err).Retriable || s.ctx.Err() != nil || time.Now().After(deadline) {
			return resp, err
		}
		t := time.NewTimer(subscribeRetry)
		select {
		case <-s.ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
	}
}

func (s *subscription) spawnHeartbeat() {
	req := s.heartbeatRequest()
	s.hbInFlight, s.hbOwned, s.hbSent = true, s.ownedKeys(), time.Now()
	// Not ended with the stream: finish waits for it, so that a join
	// in flight is not answered after the leave.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), subscribeCallTimeout)
	go func() {
		defer cancel()
		resp, err := s.core.ConsumerGroupHeartbeat(ctx, req)
		s.hbDone <- hbResult{resp, err}
	}()
}

// onHeartbeat reconciles with a heartbeat's answer; the error it returns
// (an errSubscribeEnd) ends the stream.
func (s *subscription) onHeartbeat(resp *request.GroupHeartbeatResult, err error, joined bool) error {
	now := time.Now()
	if err != nil {
		switch code := s.b.Error(err).Code; code {
		case quirev1.ErrorCode_FENCED_MEMBER_EPOCH, quirev1.ErrorCode_UNKNOWN_MEMBER_ID:
			// Everything it had is someone else's now: drop it, rejoin.
			s.b.Logger().Info("subscribe stream fenced; joining again", "group", s.start.Group, "member", s.memberID, "error", err)
			s.epoch = 0
			if err := s.reconcile(nil, false); err != nil {
				return err
			}
			s.hbAt = now
			return nil
		case quirev1.ErrorCode_UNSUPPORTED_ASSIGNOR, quirev1.ErrorCode_INVALID_REGULAR_EXPRESSION,
			quirev1.ErrorCode_GROUP_MAX_SIZE_REACHED, quirev1.ErrorCode_INVALID_GROUP_ID, quirev1.ErrorCode_INVALID_REQUEST,
			quirev1.ErrorCode_UNSUPPORTED_VERSION,
			// The caller's ACLs changed: no longer a member it may be.
			quirev1.ErrorCode_GROUP_AUTHORIZATION_FAILED, quirev1.ErrorCode_TOPIC_AUTHORIZATION_FAILED:
			return errSubscribeEnd{err: err}
		case quirev1.ErrorCode_FENCED_INSTANCE_ID:
			// Replaced by another stream of its instance: its partitions
			// are that one's, with nothing to commit or leave.
			s.epoch = 0
			return errSubscribeEnd{err: err}
		}
		if s.ctx.Err() == nil {
			s.b.Logger().Debug("subscribe stream heartbeat failed", "group", s.start.Group, "member", s.memberID, "error", err)
		}
		s.hbAt = now.Add(min(s.interval, subscribeRetry))
		return nil
	}
	epochMoved := s.epoch != resp.MemberEpoch
	s.epoch = resp.MemberEpoch
	if resp.HeartbeatIntervalMs > 0 {
		s.interval = time.Duration(resp.HeartbeatIntervalMs) * time.Millisecond
	}
	s.hbAt = now.Add(s.interval)
	if !slices.Equal(s.ownedKeys(), s.hbOwned) {
		// Partitions given up (finishRevoking) while it was out: say so
		// at once.
		s.hbAt = now
	}
	var target []partKey
	if resp.Assignment != nil {
		target = assignmentToParts(resp.Assignment)
	} else if !joined {
		return nil
	} else {
		target = s.ownedKeys()
	}
	// A new epoch is told too: it is what a restarted client takes its
	// member over with (SubscribeStart.member_epoch).
	changed, err := s.reconcileChanged(target, joined || epochMoved)
	if err != nil {
		return err
	}
	if changed {
		s.hbAt = now // acknowledge it at once
	}
	return nil
}

func (s *subscription) ownedKeys() []partKey {
	out := make([]partKey, 0, len(s.owned))
	for k := range s.owned {
		out = append(out, k)
	}
	slices.SortFunc(out, comparePartKey)
	return out
}

// commit commits the commit points of parts that moved since the last
// commit.
func (s *subscription) commit(parts []partKey) {
	if s.epoch <= 0 {
		return
	}
	var offs []request.OffsetCommit
	var moved []*subPart
	for _, k := range parts {
		p := s.owned[k]
		if p == nil {
			continue
		}
		if at := p.commitPoint(); at >= 0 && at != p.committed {
			offs = append(offs, request.OffsetCommit{Topic: k.topic, Partition: k.part, Offset: at, LeaderEpoch: p.ackedEpoch})
			moved = append(moved, p)
		}
	}
	if len(offs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), subscribeCallTimeout)
	defer cancel()
	if _, err := s.core.CommitOffsets(ctx, &request.CommitOffsetsRequest{Group: s.start.Group, MemberID: s.memberID, MemberEpoch: s.epoch,
		Offsets: offs}); err != nil {
		s.b.Logger().Warn("subscribe stream commit failed", "group", s.start.Group, "member", s.memberID, "error", err)
		return
	}
	for i, p := range moved {
		p.committed = offs[i].Offset
	}
}

// resolve finds the positions of partitions not ready: the group's
// committed offset, else (or when out of range) the auto_offset_reset.
// The error it returns (an errSubscribeEnd: the core refused the
// caller) ends the stream.
func (s *subscription) resolve(now time.Time) error {
	var need []request.GroupPartition
	for _, k := range s.ownedKeys() {
		if p := s.owned[k]; p.state == partNeedCommitted && !now.Before(p.retryAt) {
			need = append(need, request.GroupPartition{Topic: k.topic, Partition: k.part})
		}
	}
	if len(need) > 0 {
		ctx, cancel := context.WithTimeout(s.ctx, subscribeCallTimeout)
		got, err := s.core.FetchOffsets(ctx, s.start.Group, need)
		cancel()
		if refused(err) {
			return errSubscribeEnd{err: err, leave: true}
		}
		for _, o := range got {
			p := s.owned[partKey{o.Topic, o.Partition}]
			if err != nil || p == nil || p.state != partNeedCommitted {
				continue
			}
			if o.Offset < 0 {
				p.state = partNeedReset
				continue
			}
			p.committed, p.ackedEpoch = o.Offset, o.LeaderEpoch
			p.setPosition(o.Offset)
		}
		for _, tp := range need {
			if p := s.owned[partKey{tp.Topic, tp.Partition}]; p.state == partNeedCommitted {
				p.retryAt = now.Add(subscribeRetry) // failed, or not answered
			}
		}
	}
	var resets []request.ListOffsetsPartition
	for _, k := range s.ownedKeys() {
		if p := s.owned[k]; p.state == partNeedReset && !now.Before(p.retryAt) {
			resets = append(resets, request.ListOffsetsPartition{Topic: k.topic, Partition: k.part, Timestamp: s.resetTS})
		}
	}
	if len(resets) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(s.ctx, subscribeCallTimeout)
	got, err := s.core.ListOffsetsAnywhere(ctx, resets)
	cancel()
	if refused(err) {
		return errSubscribeEnd{err: err, leave: true}
	}
	for i, lp := range resets {
		p := s.owned[partKey{lp.Topic, lp.Partition}]
		if err != nil || got[i].Err != nil || got[i].Offset < 0 {
			p.retryAt = now.Add(subscribeRetry)
			continue
		}
		p.setPosition(got[i].Offset)
	}
	return nil
}

// refused reports whether err is the core's refusal of the caller: its
// ACLs no longer let it read what it was given.
func refused(err error) bool {
	return errors.Is(err, request.ErrTopicAuthorizationFailed) || errors.Is(err, request.ErrGroupAuthorizationFailed)
}

func (p *subPart) setPosition(off int64) {
	p.next, p.state = off, partReady
	if p.sent.len() == 0 {
		p.sentNext = off
	}
}

func partsToAssignment(ps []partKey) *quirev1.GroupAssignment {
	out := &quirev1.GroupAssignment{}
	for _, k := range ps {
		if n := len(out.Topics); n == 0 || out.Topics[n-1].Topic != k.topic {
			out.Topics = append(out.Topics, &quirev1.GroupTopicPartitions{Topic: k.topic})
		}
		last := out.Topics[len(out.Topics)-1]
		last.Partitions = append(last.Partitions, k.part)
	}
	return out
}

// partsToGroupAssignment is partsToAssignment as the core has it.
func partsToGroupAssignment(ps []partKey) *request.GroupAssignment {
	out := &request.GroupAssignment{}
	for _, k := range ps {
		if n := len(out.Topics); n == 0 || out.Topics[n-1].Topic != k.topic {
			out.Topics = append(out.Topics, request.GroupTopicPartitions{Topic: k.topic})
		}
		last := &out.Topics[len(out.Topics)-1]
		last.Partitions = append(last.Partitions, k.part)
	}
	return out
}

func assignmentToParts(a *request.GroupAssignment) []partKey {
	out := []partKey{}
	for _, t := range a.Topics {
		for _, p := range t.Partitions {
			out = append(out, partKey{t.Topic, p})
		}
	}
	slices.SortFunc(out, comparePartKey)
	return slices.Compact(out)
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func (s *subscription) stopping() bool {
	select {
	case <-s.b.Closing():
		return true
	default:
		return false
	}
}
