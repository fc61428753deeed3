package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

// GroupConfig configures a GroupConsumer.
type GroupConfig struct {
	// Group is the consumer group id (see ValidateGroupID).
	Group string
	// Topics and Regex are what the member reads: the topics named, and
	// those whose whole name matches the RE2 expression Regex (topics
	// created later included). At least one is needed.
	Topics []string
	Regex  string
	// Assignor asks for a server-side assignor ("uniform", "range",
	// "roundrobin"); "" the brokers' default.
	Assignor string
	// RebalanceTimeout is how long the member may take to give up a
	// revoked partition (default 60s).
	RebalanceTimeout time.Duration
	// InstanceID makes the member static (Kafka's group.instance.id):
	// one id per process that keeps its partitions across restarts, a
	// pod's name, say. Close leaves the member's place to the instance's
	// next process for the session timeout, and that process takes the
	// member's partitions with no rebalance. A process replaced by
	// another of its instance stops: Poll returns FENCED_INSTANCE_ID; if
	// it was still running, it owned its partitions until that heartbeat,
	// beside the new one, so give each process its own instance id.
	// "" a dynamic member.
	InstanceID string
	// AutoCommitInterval is how often the positions of owned partitions
	// are committed (default 5s; negative: never, only on revoke and
	// close). Positions are committed on revocation and Close either way.
	AutoCommitInterval time.Duration
	// Reset is where a partition the group never committed starts:
	// AtStart (the zero value) or AtEnd; or NoReset, Kafka's
	// auto.offset.reset=none: such a partition is not read and Poll
	// returns ErrNoCommittedOffset for it until it is Seek'd.
	//
	// A position out of range (a committed offset whose records
	// retention deleted, a Seek past the end) restarts at the client's
	// ConsumeResetOffset (AtStart unless set), except with NoReset here
	// or ConsumeResetNone on the client: then the partition is not read
	// and Poll returns the OFFSET_OUT_OF_RANGE error, naming the
	// partition, the offset and the valid range ("client: consume t/0:
	// ... offset 1000, valid offsets are 0 to 2 (log end 3)"), again
	// after every retry backoff, until the partition is Seek'd into the
	// log.
	Reset Offset
	// OnAssigned and OnRevoked are called with the partitions that join
	// or leave the member's assignment (only those that changed), from the
	// member's heartbeat loop: revoked partitions are no longer returned
	// by Poll when OnRevoked runs, and their positions are committed right
	// after it; assigned ones are read from when OnAssigned returns. Both
	// may be nil.
	OnAssigned func([]TopicPartition)
	OnRevoked  func([]TopicPartition)
}

// GroupConsumer is a member of a consumer group: the group coordinator
// (on the controller) assigns it partitions, and it reconciles
// incrementally (KIP-848): a partition taken from it is given up (no
// longer polled, its position committed) before its heartbeat says so,
// and only then can another member get it. Poll returns records of owned
// partitions only; records already buffered for a revoked partition are
// dropped. Poll must not be called concurrently.
type GroupConsumer struct {
	c        *Client
	cfg      GroupConfig
	memberID string
	ctx      context.Context
	cancel   context.CancelFunc
	done     chan struct{}

	// runMu is held by PollFunc while it passes one partition's records
	// to its callback (group_pollfunc.go), without mu. Whoever takes
	// both takes runMu first; a revocation takes it, with mu released,
	// to wait for the callback in progress before giving partitions up.
	runMu sync.Mutex

	mu       sync.Mutex
	epoch    int32
	owned    []TopicPartition // sorted
	pos      map[TopicPartition]int64
	posEpoch map[TopicPartition]int32 // leader epoch of the record before pos
	// fencing is, per owned partition, the member epoch at which the
	// group gave it to the member: its records' Record.FencingEpoch.
	fencing map[TopicPartition]int32
	// sought counts the Seeks of each partition, for PollFunc not to
	// move a position past a Seek made during its callbacks.
	sought map[TopicPartition]uint64
	cons   *Consumer // reads owned; replaced on every change
	// consGen is bumped (under mu) with every change of cons or of what
	// may be delivered; PollFunc reads it between callbacks without mu.
	consGen  atomic.Uint64
	changed  chan struct{}
	fatal    error
	interval time.Duration
	paused   map[TopicPartition]bool
	// lastAsync is closed when the latest CommitAsync is done; each
	// waits for the one before, so they apply in order.
	lastAsync chan struct{}
	// session is the coordinator's session timeout (0 until it said),
	// lastOK when the last heartbeat that got an answer was sent.
	session time.Duration
	lastOK  time.Time
}

// lossDeadline is when the member must stop using its partitions if no
// heartbeat gets an answer before: a little before the coordinator,
// which counts the session from when it received the last heartbeat (no
// earlier than the member sent it), may give them to another member. The
// zero time when there is nothing to lose.
func (g *GroupConsumer) lossDeadlineLocked() time.Time {
	if g.session <= 0 || len(g.owned) == 0 || g.lastOK.IsZero() {
		return time.Time{}
	}
	return g.lastOK.Add(g.session - min(g.session/5, time.Second))
}

// NewGroupConsumer joins a consumer group. The first assignment comes
// with the answer to a heartbeat, so Poll returns nothing before it.
func (c *Client) NewGroupConsumer(cfg GroupConfig) (*GroupConsumer, error) {
	if err := ValidateGroupID(cfg.Group); err != nil {
		return nil, err
	}
	if len(cfg.Topics) == 0 && cfg.Regex == "" {
		return nil, newError(quirev1.ErrorCode_INVALID_REQUEST, "a group consumer needs topics or a regular expression")
	}
	if cfg.RebalanceTimeout <= 0 {
		cfg.RebalanceTimeout = time.Minute
	}
	if cfg.AutoCommitInterval == 0 {
		cfg.AutoCommitInterval = 5 * time.Second
	}
	if cfg.Reset.kind != offsetStart && cfg.Reset.kind != offsetEnd && cfg.Reset.kind != offsetNone {
		return nil, fmt.Errorf("%w: a group consumer's reset is AtStart, AtEnd or NoReset, not %s", ErrInvalidOffset, cfg.Reset)
	}
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, fmt.Errorf("client: member id: %w", err)
	}
	cons, err := c.NewConsumer(nil)
	if err != nil {
		return nil, err
	}
	g := &GroupConsumer{c: c, cfg: cfg, memberID: hex.EncodeToString(id[:]), done: make(chan struct{}),
		pos: map[TopicPartition]int64{}, posEpoch: map[TopicPartition]int32{}, fencing: map[TopicPartition]int32{}, sought: map[TopicPartition]uint64{},
		cons: cons, changed: make(chan struct{}), interval: time.Second, paused: map[TopicPartition]bool{}}
	g.ctx, g.cancel = context.WithCancel(c.ctx)
	go g.run()
	return g, nil
}

// MemberID is the id this member chose.
func (g *GroupConsumer) MemberID() string { return g.memberID }

// Assignment returns the partitions the member owns now.
func (g *GroupConsumer) Assignment() []TopicPartition {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.owned)
}

// FencingEpoch returns the member epoch at which the group gave the member
// partition tp (the FencingEpoch of its records), and whether the member
// owns tp now.
func (g *GroupConsumer) FencingEpoch(tp TopicPartition) (int32, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	e, ok := g.fencing[tp]
	return e, ok
}

// Epoch returns the member's epoch (0 before it joined).
func (g *GroupConsumer) Epoch() int32 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.epoch
}

// Poll waits for records of owned partitions and returns them. It fails
// for good when the group refused the member (an unknown assignor, a bad
// regular expression, a full group) or another process of its instance
// replaced it, and with ErrClosed after Close.
func (g *GroupConsumer) Poll(ctx context.Context) ([]*Record, error) {
	for {
		g.mu.Lock()
		cons, gen, changed, fatal := g.cons, g.consGen.Load(), g.changed, g.fatal
		g.mu.Unlock()
		if fatal != nil {
			return nil, fatal
		}
		if g.ctx.Err() != nil {
			return nil, ErrClosed
		}
		pctx, cancel := context.WithCancel(ctx)
		go func() {
			select {
			case <-changed:
				cancel()
			case <-pctx.Done():
			}
		}()
		recs, err := cons.Poll(pctx)
		cancel()
		if ctx.Err() != nil && len(recs) == 0 {
			return nil, ctx.Err()
		}
		g.mu.Lock()
		var out []*Record
		if gen == g.consGen.Load() {
			out = g.takeLocked(recs)
		}
		g.mu.Unlock()
		if ctx.Err() != nil {
			// Records taken from the consumer as ctx ended: returned,
			// not lost (their positions moved on).
			if len(out) > 0 {
				return out, nil
			}
			return nil, ctx.Err()
		}
		if gen != g.currentGen() || errors.Is(err, ErrClosed) || errors.Is(err, context.Canceled) {
			if len(out) > 0 {
				return out, nil
			}
			continue // the assignment changed: poll the new consumer
		}
		if err != nil {
			return out, err
		}
		if len(out) > 0 {
			return out, nil
		}
	}
}

// takeLocked keeps, in place, the records of owned partitions at or past
// their positions, and moves the positions past them. The consumer
// returns each partition's records in runs in offset order, so the
// ownership test and the position maps are visited once per run, not per
// record.
func (g *GroupConsumer) takeLocked(recs []*Record) []*Record {
	out := recs[:0]
	for i := 0; i < len(recs); {
		tp := TopicPartition{recs[i].Topic, recs[i].Partition}
		j := i + 1
		for j < len(recs) && recs[j].Partition == tp.Partition && recs[j].Topic == tp.Topic {
			j++
		}
		if _, owned := slices.BinarySearchFunc(g.owned, tp, compareTP); owned {
			p, hasPos := g.pos[tp]
			fencing := g.fencing[tp]
			var epoch int32
			took := false
			for _, r := range recs[i:j] {
				if hasPos && r.Offset < p {
					continue
				}
				r.FencingEpoch = fencing
				p, hasPos, epoch, took = r.Offset+1, true, r.LeaderEpoch, true
				out = append(out, r)
			}
			if took {
				g.pos[tp], g.posEpoch[tp] = p, epoch
			}
		}
		i = j
	}
	clear(recs[len(out):])
	return out
}

func (g *GroupConsumer) currentGen() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.consGen.Load()
}

func compareTP(a, b TopicPartition) int {
	if a.Topic != b.Topic {
		if a.Topic < b.Topic {
			return -1
		}
		return 1
	}
	return int(a.Partition - b.Partition)
}

// Commit commits the positions of the owned partitions (the offset after
// the last record Poll returned), at the member's epoch.
func (g *GroupConsumer) Commit(ctx context.Context) error {
	return g.commitOwned(ctx)
}

// commitOwned commits the positions of the owned partitions, holding the
// member's lock only to read them: a commit that takes long (a broker cut
// off) must not hold up the heartbeat loop, which gives the partitions up
// when the session is about to end.
func (g *GroupConsumer) commitOwned(ctx context.Context) error {
	g.mu.Lock()
	req := g.commitRequestLocked(g.owned)
	g.mu.Unlock()
	if req == nil {
		return nil
	}
	return g.c.group(ctx, func(ctx context.Context, gc quirev1.GroupsClient) error {
		_, err := gc.CommitOffsets(ctx, req)
		return err
	})
}

// CommitAsync commits the positions of the owned partitions as Commit
// does, without waiting: cb (if not nil) gets the outcome, from another
// goroutine. Commits made with CommitAsync apply in the order made; Close
// waits for them.
func (g *GroupConsumer) CommitAsync(cb func(error)) {
	g.mu.Lock()
	req := g.commitRequestLocked(g.owned)
	prev, done := g.lastAsync, make(chan struct{})
	g.lastAsync = done
	g.mu.Unlock()
	go func() {
		defer close(done)
		if prev != nil {
			<-prev
		}
		var err error
		if req != nil {
			err = g.c.group(g.c.ctx, func(ctx context.Context, gc quirev1.GroupsClient) error {
				_, err := gc.CommitOffsets(ctx, req)
				return err
			})
		}
		if cb != nil {
			cb(err)
		}
	}()
}

// Pause stops reading the given owned partitions: Poll returns none of
// their records (those buffered are dropped) until Resume. They stay
// assigned to the member, and their positions are committed as usual.
// Partitions it does not own are ignored.
func (g *GroupConsumer) Pause(ps ...TopicPartition) {
	g.setPaused(ps, true)
}

// Resume reads paused partitions again, from their positions.
func (g *GroupConsumer) Resume(ps ...TopicPartition) {
	g.setPaused(ps, false)
}

// Paused returns the paused partitions the member owns.
func (g *GroupConsumer) Paused() []TopicPartition {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []TopicPartition
	for _, tp := range g.owned {
		if g.paused[tp] {
			out = append(out, tp)
		}
	}
	return out
}

func (g *GroupConsumer) setPaused(ps []TopicPartition, paused bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	changed := false
	for _, tp := range ps {
		if g.paused[tp] != paused {
			changed = true
			if paused {
				g.paused[tp] = true
			} else {
				delete(g.paused, tp)
			}
		}
	}
	if !changed || g.ctx.Err() != nil {
		return
	}
	g.cons.Close()
	g.consGen.Add(1)
	g.signalLocked()
	g.startLocked()
}

func (g *GroupConsumer) commitLocked(ctx context.Context, parts []TopicPartition) error {
	req := g.commitRequestLocked(parts)
	if req == nil {
		return nil
	}
	return g.c.group(ctx, func(ctx context.Context, gc quirev1.GroupsClient) error {
		_, err := gc.CommitOffsets(ctx, req)
		return err
	})
}

// commitRequestLocked is the commit of parts' positions, nil when there
// is nothing to commit (or no epoch to commit at).
func (g *GroupConsumer) commitRequestLocked(parts []TopicPartition) *quirev1.CommitOffsetsRequest {
	req := &quirev1.CommitOffsetsRequest{Group: g.cfg.Group, MemberId: g.memberID, MemberEpoch: g.epoch}
	for _, tp := range parts {
		if p, ok := g.pos[tp]; ok {
			oc := &quirev1.OffsetCommit{Topic: tp.Topic, Partition: tp.Partition, Offset: p}
			if e, ok := g.posEpoch[tp]; ok {
				oc.OptionalLeaderEpoch = &quirev1.OffsetCommit_LeaderEpoch{LeaderEpoch: e}
			}
			req.Offsets = append(req.Offsets, oc)
		}
	}
	if len(req.Offsets) == 0 || g.epoch <= 0 {
		return nil
	}
	return req
}

// Close gives up the owned partitions (OnRevoked), commits their
// positions, leaves the group (its partitions go to the other members at
// once) and stops reading.
func (g *GroupConsumer) Close(ctx context.Context) error {
	return g.close(ctx, true)
}

// Leave is Close without the commit, for a member that could not process
// what Poll returned: the group's next owner of each partition reads from
// the last commit.
func (g *GroupConsumer) Leave(ctx context.Context) error {
	return g.close(ctx, false)
}

func (g *GroupConsumer) close(ctx context.Context, commit bool) error {
	g.cancel()
	<-g.done
	g.mu.Lock()
	async := g.lastAsync
	g.mu.Unlock()
	if async != nil {
		select {
		case <-async:
		case <-ctx.Done():
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	// No PollFunc callback runs once the partitions are given up.
	g.consGen.Add(1)
	g.signalLocked()
	g.waitCallbackLocked()
	if len(g.owned) > 0 && g.cfg.OnRevoked != nil {
		g.cfg.OnRevoked(slices.Clone(g.owned))
	}
	var errCommit error
	if commit {
		errCommit = g.commitLocked(ctx, g.owned)
	}
	g.owned = nil
	g.consGen.Add(1)
	g.signalLocked()
	var errLeave error
	if g.epoch > 0 {
		// A static member leaves its place to its instance's next
		// process (-2); a dynamic one leaves (-1).
		leave := int32(-1)
		if g.cfg.InstanceID != "" {
			leave = -2
		}
		errLeave = g.c.group(ctx, func(ctx context.Context, gc quirev1.GroupsClient) error {
			_, err := gc.ConsumerGroupHeartbeat(ctx, &quirev1.ConsumerGroupHeartbeatRequest{
				Group: g.cfg.Group, MemberId: g.memberID, MemberEpoch: leave, InstanceId: g.cfg.InstanceID})
			return err
		})
		// A member the group no longer has (its session ran out, or it
		// was fenced) has left already, as Kafka's consumers take it.
		if c := ErrorCode(errLeave); c == quirev1.ErrorCode_UNKNOWN_MEMBER_ID || c == quirev1.ErrorCode_FENCED_MEMBER_EPOCH {
			errLeave = nil
		}
	}
	g.cons.Close()
	return errors.Join(errCommit, errLeave)
}

// run heartbeats at the interval the coordinator asks for, and at once
// after an assignment change (to acknowledge it).
func (g *GroupConsumer) run() {
	defer close(g.done)
	nextCommit := time.Now().Add(g.cfg.AutoCommitInterval)
	for {
		again, err := g.heartbeat()
		if ErrorCode(err) == quirev1.ErrorCode_FENCED_INSTANCE_ID {
			return // another process is this instance now
		}
		wait := g.intervalNow()
		switch {
		case err == nil && again:
			wait = 0
		case err != nil && g.ctx.Err() == nil:
			g.c.log.Debug("group heartbeat failed", "group", g.cfg.Group, "error", err)
			wait = min(wait, 200*time.Millisecond)
		}
		g.mu.Lock()
		if d := g.lossDeadlineLocked(); !d.IsZero() {
			// Wake for the deadline: the heartbeat sent then fails at
			// once, and gives the partitions up in time.
			wait = max(0, min(wait, time.Until(d)))
		}
		g.mu.Unlock()
		if g.cfg.AutoCommitInterval > 0 && time.Now().After(nextCommit) {
			ctx, cancel := g.ctx, context.CancelFunc(func() {})
			g.mu.Lock()
			if d := g.lossDeadlineLocked(); !d.IsZero() {
				// Not past the moment the partitions may have to go.
				ctx, cancel = context.WithDeadline(g.ctx, d)
			}
			g.mu.Unlock()
			if err := g.commitOwned(ctx); err != nil && g.ctx.Err() == nil {
				g.c.log.Warn("group auto-commit failed", "group", g.cfg.Group, "error", err)
			}
			cancel()
			nextCommit = time.Now().Add(g.cfg.AutoCommitInterval)
		}
		if g.c.sleepCtx(g.ctx, wait) != nil {
			return
		}
	}
}

func (g *GroupConsumer) intervalNow() time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.interval
}

// heartbeat sends one heartbeat and reconciles with its answer. It says
// whether the assignment changed (so the next heartbeat acknowledges it
// at once).
func (g *GroupConsumer) heartbeat() (bool, error) {
	g.mu.Lock()
	req := &quirev1.ConsumerGroupHeartbeatRequest{Group: g.cfg.Group, MemberId: g.memberID, MemberEpoch: g.epoch,
		Owned: assignmentPB(g.owned)}
	if g.epoch == 0 {
		req.Subscription = &quirev1.GroupSubscription{Topics: g.cfg.Topics, Regex: g.cfg.Regex}
		req.RebalanceTimeoutMs = int32(g.cfg.RebalanceTimeout.Milliseconds())
		req.Assignor = g.cfg.Assignor
		req.InstanceId = g.cfg.InstanceID
	}
	deadline := g.lossDeadlineLocked()
	g.mu.Unlock()
	ctx, cancel := g.ctx, context.CancelFunc(func() {})
	if !deadline.IsZero() {
		// No answer by then is no answer at all: the partitions go.
		ctx, cancel = context.WithDeadline(g.ctx, deadline)
	}
	defer cancel()
	sent := time.Now()
	var resp *quirev1.ConsumerGroupHeartbeatResponse
	err := g.c.group(ctx, func(ctx context.Context, gc quirev1.GroupsClient) error {
		var err error
		resp, err = gc.ConsumerGroupHeartbeat(ctx, req)
		return err
	})
	g.mu.Lock()
	defer g.mu.Unlock()
	if err != nil && ErrorCode(err) == quirev1.ErrorCode_FENCED_INSTANCE_ID {
		// Another process joined as this instance and took the member's
		// place and partitions: this one stops (before the loss
		// deadline's rejoin, which would take the place back).
		g.reconcileLocked(nil, false)
		g.epoch = 0
		if g.fatal == nil {
			g.fatal = fmt.Errorf("client: group %q: another process joined as instance %q: %w", g.cfg.Group, g.cfg.InstanceID, err)
			g.signalLocked()
		}
		return false, err
	}
	if err != nil {
		if d := g.lossDeadlineLocked(); !d.IsZero() && !time.Now().Before(d) && g.ctx.Err() == nil {
			// The coordinator may have removed the member by now and
			// given its partitions to others: they are lost (no commit,
			// which would be refused), and the member joins again.
			g.c.log.Warn("group heartbeats unanswered for nearly the session timeout; giving up partitions and rejoining",
				"group", g.cfg.Group, "session_timeout", g.session, "partitions", len(g.owned), "error", err)
			g.reconcileLocked(nil, false)
			g.epoch = 0
			return true, err
		}
		switch ErrorCode(err) {
		case quirev1.ErrorCode_FENCED_MEMBER_EPOCH, quirev1.ErrorCode_UNKNOWN_MEMBER_ID:
			// Fenced: everything it had is someone else's now; rejoin.
			g.reconcileLocked(nil, false)
			g.epoch = 0
			return true, err
		case quirev1.ErrorCode_UNSUPPORTED_ASSIGNOR, quirev1.ErrorCode_INVALID_REGULAR_EXPRESSION,
			quirev1.ErrorCode_GROUP_MAX_SIZE_REACHED, quirev1.ErrorCode_INVALID_GROUP_ID, quirev1.ErrorCode_INVALID_REQUEST,
			quirev1.ErrorCode_UNSUPPORTED_VERSION:
			if g.fatal == nil {
				g.fatal = fmt.Errorf("client: group %q: %w", g.cfg.Group, err)
				g.signalLocked()
			}
		}
		return false, err
	}
	g.epoch = resp.MemberEpoch
	g.lastOK = sent
	if resp.SessionTimeoutMs > 0 {
		g.session = time.Duration(resp.SessionTimeoutMs) * time.Millisecond
	}
	if resp.HeartbeatIntervalMs > 0 {
		g.interval = time.Duration(resp.HeartbeatIntervalMs) * time.Millisecond
	}
	if resp.Assignment == nil {
		return false, nil
	}
	return g.reconcileLocked(assignmentFromPB(resp.Assignment), true), nil
}

// reconcileLocked moves to a new assignment: revoked partitions first
// (callback, commit of their positions), then the new ones.
func (g *GroupConsumer) reconcileLocked(target []TopicPartition, commit bool) bool {
	var revoked, added []TopicPartition
	for _, tp := range g.owned {
		if _, ok := slices.BinarySearchFunc(target, tp, compareTP); !ok {
			revoked = append(revoked, tp)
		}
	}
	for _, tp := range target {
		if _, ok := slices.BinarySearchFunc(g.owned, tp, compareTP); !ok {
			added = append(added, tp)
		}
	}
	if len(revoked) == 0 && len(added) == 0 {
		return false
	}
	g.owned = target
	if len(revoked) > 0 {
		// From here on PollFunc calls back for no revoked partition (it
		// checks the generation before each record); the callback in
		// progress, if any, returns and its records count in the
		// positions before the partitions are given up below.
		g.consGen.Add(1)
		g.signalLocked()
		g.waitCallbackLocked()
	}
	// Poll drops what the old consumer buffered from here on.
	g.cons.Close()
	g.consGen.Add(1)
	g.signalLocked()
	if len(revoked) > 0 {
		if g.cfg.OnRevoked != nil {
			g.cfg.OnRevoked(revoked)
		}
		if commit {
			if err := g.commitLocked(g.ctx, revoked); err != nil {
				g.c.log.Warn("group commit of revoked partitions failed", "group", g.cfg.Group, "error", err)
			}
		}
		for _, tp := range revoked {
			delete(g.pos, tp)
			delete(g.posEpoch, tp)
			delete(g.fencing, tp)
			delete(g.sought, tp)
			delete(g.paused, tp)
		}
	}
	for _, tp := range added {
		g.fencing[tp] = g.epoch // the epoch of the answer that gave it
	}
	if !g.startLocked() {
		return false
	}
	if len(added) > 0 && g.cfg.OnAssigned != nil {
		g.cfg.OnAssigned(added)
	}
	return true
}

// startLocked starts a partition consumer of the owned partitions, each
// at its position, else at the group's committed offset (else Reset). It
// fails only when the client is closed.
func (g *GroupConsumer) startLocked() bool {
	assign := map[string]map[int32]Offset{}
	for _, tp := range g.owned {
		if g.paused[tp] {
			continue
		}
		start := AtCommitted(g.cfg.Group, g.cfg.Reset)
		if p, ok := g.pos[tp]; ok {
			start = At(p)
		}
		if assign[tp.Topic] == nil {
			assign[tp.Topic] = map[int32]Offset{}
		}
		assign[tp.Topic][tp.Partition] = start
	}
	// Reset NoReset is Kafka's auto.offset.reset=none for an offset out
	// of range too: reported, never moved.
	cons, err := g.c.newConsumer(assign, g.c.cfg.resetNone || g.cfg.Reset.kind == offsetNone, g.c.groupIsolation())
	if err != nil {
		// The client is closed: nothing more will be read.
		g.owned = nil
		return false
	}
	g.cons = cons
	return true
}

// Seek sets an owned partition's position: the next Poll reads it from
// offset, and a commit commits offset. Records of it already buffered are
// dropped.
func (g *GroupConsumer) Seek(topic string, partition int32, offset int64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	tp := TopicPartition{topic, partition}
	if _, ok := slices.BinarySearchFunc(g.owned, tp, compareTP); !ok {
		return newError(quirev1.ErrorCode_INVALID_REQUEST, fmt.Sprintf("seek %s/%d: the member does not own it", topic, partition))
	}
	if offset < 0 {
		return fmt.Errorf("%w: seek %s/%d to %d", ErrInvalidOffset, topic, partition, offset)
	}
	g.pos[tp] = offset
	delete(g.posEpoch, tp)
	g.sought[tp]++
	g.cons.Close()
	g.consGen.Add(1)
	g.signalLocked()
	if !g.startLocked() {
		return ErrClosed
	}
	return nil
}

// waitCallbackLocked waits, with mu released meanwhile, until no
// PollFunc callback is running. The caller has bumped consGen under mu
// first, so none starts again for what it took away; the callback may
// itself take mu (Commit, Seek), hence the release.
func (g *GroupConsumer) waitCallbackLocked() {
	g.mu.Unlock()
	g.runMu.Lock()
	//lint:ignore SA2001 an empty critical section: waiting for the holder is the point
	g.runMu.Unlock()
	g.mu.Lock()
}

func (g *GroupConsumer) signalLocked() {
	close(g.changed)
	g.changed = make(chan struct{})
}

func assignmentPB(ps []TopicPartition) *quirev1.GroupAssignment {
	out := &quirev1.GroupAssignment{}
	for _, tp := range ps {
		if n := len(out.Topics); n == 0 || out.Topics[n-1].Topic != tp.Topic {
			out.Topics = append(out.Topics, &quirev1.GroupTopicPartitions{Topic: tp.Topic})
		}
		last := out.Topics[len(out.Topics)-1]
		last.Partitions = append(last.Partitions, tp.Partition)
	}
	return out
}

func assignmentFromPB(a *quirev1.GroupAssignment) []TopicPartition {
	out := []TopicPartition{}
	for _, t := range a.Topics {
		for _, p := range t.Partitions {
			out = append(out, TopicPartition{t.Topic, p})
		}
	}
	slices.SortFunc(out, compareTP)
	return out
}
