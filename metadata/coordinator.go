package metadata

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	pb "github.com/quirelog/quire/api/metapb"
	"github.com/quirelog/quire/group"
)

// The consumer group coordinator runs on the controller, where the
// committed offsets are. It owns one group.Machine, built for each
// leadership term from the image (Replay, which gives every member one
// session timeout to heartbeat to the new coordinator), and fed by
// heartbeats, by a ticker (session and rebalance timeouts) and by the
// image's topics (SetTopics). Every state change is written to the
// metadata log, one GroupRecords command per group changed, before the
// answer goes out, with no lock held across the write and each group's
// changes in order (coordwrite.go); if a write fails the Machine is thrown
// away and rebuilt from the log, so what members are told is always what
// the log holds.

// Clock tells the time; the coordinator's deadlines follow it.
type Clock interface {
	Now() time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// GroupMember names the member an offset commit comes from: its id and
// current epoch. The zero value is no member (manual assignment).
type GroupMember struct {
	ID    string
	Epoch int32
}

type coordinator struct {
	c     *Controller
	cfg   group.Config
	clock Clock

	logs       LogReader // nil: no lag figures
	lagRefresh time.Duration
	lag        lagState // grouplag.go

	log logWriter // the metadata log: the controller's raftApply (tests wrap it)

	// mu guards the Machine and the fields below; it is held while the
	// Machine computes, never across a metadata write (but while the
	// Machine is built: see machine). turns orders each group's writes.
	mu     sync.Mutex
	m      *group.Machine // nil until built for term
	term   uint64
	mgen   uint64           // turns.gen when m was built: m is stale once it moves
	topics map[string]int32 // as last given to m
	turns  groupTurns
	// emptySince is since when a group with membership state has had no
	// members: its offsets expire a retention after that or after their
	// last commit, whichever is later (a group that never had members:
	// after the last commit). It is the time the group's records stamp
	// (group.Listing.EmptySince: the leave or expiry of the last member,
	// in the metadata log from metadata.version 4), so every controller
	// counts from the same moment; for a group whose records carry none
	// (it emptied below level 4), when this coordinator first saw it
	// empty.
	emptySince map[string]time.Time
	nextExpiry time.Time
}

func newCoordinator(c *Controller, cfg group.Config, clock Clock, logs LogReader, lagRefresh time.Duration) *coordinator {
	co := &coordinator{c: c, log: c, cfg: cfg, clock: clock, logs: logs, lagRefresh: lagRefresh, emptySince: map[string]time.Time{}}
	co.turns.init()
	return co
}

// retention is offsets.retention.minutes.
func (co *coordinator) retention() time.Duration {
	if r := co.c.n.cfg.OffsetsRetention; r > 0 {
		return r
	}
	return DefaultOffsetsRetention
}

// tickEvery is how often the controller loop checks the groups' deadlines
// and the topics: a tenth of the shortest session timeout a member may
// have (the group's, or the least a classic member may ask for), within
// 50ms and 1s.
func (co *coordinator) tickEvery() time.Duration {
	return min(max(min(co.cfg.SessionTimeout, co.cfg.MinSessionTimeout)/10, 50*time.Millisecond), time.Second)
}

// machine returns the Machine of the current term, building it if need
// be. It is called with co.mu held, after c.active succeeded. Building
// is the one time co.mu is held across metadata writes (a barrier and
// the replayed records): nothing can be served before the Machine exists.
// It first drops every change computed on the Machine before (turns.gen)
// and waits for the writes under way, so that the image it replays holds
// all they wrote.
func (co *coordinator) machine(ctx context.Context) (*group.Machine, error) {
	co.c.mu.Lock()
	term := co.c.term
	co.c.mu.Unlock()
	if co.m != nil && co.term == term && co.mgen == co.turns.gen.Load() {
		return co.m, nil
	}
	co.m = nil
	gen := co.turns.gen.Add(1)
	co.turns.waitIdle()
	// Everything proposed before (by this term's writes that failed, or
	// an earlier term's) is applied here before the image is read.
	if err := co.c.barrier(ctx); err != nil {
		return nil, err
	}
	m, err := group.New(co.cfg)
	if err != nil {
		return nil, err
	}
	img := co.c.n.Image()
	topics := topicCounts(img)
	recs, err := m.Replay(img.GroupRecords(), topics, co.clock.Now())
	if err != nil {
		return nil, fmt.Errorf("%w: replaying the groups: %w", ErrNotCoordinator, err)
	}
	for _, part := range splitByGroup(recs) {
		if err := co.write(ctx, part.recs); err != nil {
			return nil, err
		}
	}
	co.m, co.term, co.topics, co.mgen = m, term, topics, gen
	co.c.n.logger.Info("group coordinator loaded", "groups", len(m.Groups()), "term", term)
	return m, nil
}

// write logs records (of one group, or the replay of all); it holds no
// lock. Its caller drops the Machine on failure.
func (co *coordinator) write(ctx context.Context, recs []group.Record) error {
	if len(recs) == 0 {
		return nil
	}
	// The Machine has applied the records already: a caller giving up
	// must not cut the write short.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), co.c.n.cfg.ApplyTimeout)
	defer cancel()
	enc := GroupRecordsToPB(recs)
	if co.c.n.Image().metadataVersion() < MetadataVersionGroupEmptySince {
		dropEmptySince(enc)
	}
	cmd := &pb.Command{Cmd: &pb.Command_GroupRecords{GroupRecords: enc}}
	_, err := co.log.raftApply(ctx, cmd)
	if err != nil {
		if errors.Is(err, ErrUnsupportedVersion) && co.c.levelRising(commandLevel(cmd)) {
			// A new cluster before its controller raised the level: a
			// member that gave up here for good (a KIP-848 client falls
			// back to the classic protocol) would not be served as it
			// asked moments later.
			return fmt.Errorf("%w: the cluster's metadata.version is below %d, which the controller raises once every voter has registered; retry", ErrNotCoordinator, commandLevel(cmd))
		}
		if errors.Is(err, ErrUnsupportedVersion) || errors.Is(err, ErrNotController) {
			return err
		}
		return fmt.Errorf("%w: writing group records: %w", ErrNotCoordinator, err)
	}
	co.lag.countRebalances(recs)
	return nil
}

// refreshTopics gives m the image's topics when they changed, and
// returns the records that follow.
func (co *coordinator) refreshTopics(m *group.Machine) []group.Record {
	topics := topicCounts(co.c.n.Image())
	if maps.Equal(topics, co.topics) {
		return nil
	}
	co.topics = topics
	return m.SetTopics(topics)
}

func topicCounts(img *Image) map[string]int32 {
	out := make(map[string]int32, len(img.topics))
	for name, t := range img.topics {
		out[name] = int32(len(t.Partitions))
	}
	return out
}

// do runs fn on the current Machine, with the topics refreshed, and
// writes the records it returns (see doWrite).
func (co *coordinator) do(ctx context.Context, fn func(m *group.Machine) ([]group.Record, error)) error {
	return co.doGroup(ctx, "", fn)
}

// doGroup is do for a call on group id: it answers once id's earlier
// changes are in the log (groupWrite.group).
func (co *coordinator) doGroup(ctx context.Context, id string, fn func(m *group.Machine) ([]group.Record, error)) error {
	return co.doWrite(ctx, func(m *group.Machine) (groupWrite, error) {
		recs, err := fn(m)
		return groupWrite{group: id, recs: recs}, err
	})
}

// tick expires members past their deadlines and picks up topic changes.
func (co *coordinator) tick(ctx context.Context) {
	err := co.do(ctx, func(m *group.Machine) ([]group.Record, error) {
		return m.Tick(co.clock.Now()), nil
	})
	if err != nil && ctx.Err() == nil && !errors.Is(err, ErrUnsupportedVersion) {
		co.c.n.logger.Warn("group coordinator tick", "error", err)
	}
}

// runTicks ticks until ctx ends (the controller loop's term).
func (co *coordinator) runTicks(ctx context.Context) {
	t := time.NewTicker(co.tickEvery())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		co.tick(ctx)
		co.expire(ctx)
	}
}

// expire deletes the committed offsets of the groups with no members
// whose last commit, and the moment they were left without members, are
// both a retention ago (KIP-211), through DeleteGroup. It also removes,
// as Kafka's cleanup does, the state of a group left without members
// that has no committed offsets, once it has been empty for a session
// timeout (removeEmpty), so that listings do not keep it forever. It
// looks at most once a second.
func (co *coordinator) expire(ctx context.Context) {
	now := co.clock.Now()
	if now.Before(co.nextExpiry) {
		return
	}
	co.nextExpiry = now.Add(time.Second)
	var expired, empties []string
	err := co.do(ctx, func(m *group.Machine) ([]group.Record, error) {
		img := co.c.n.Image()
		for _, l := range m.Groups() {
			co.noteEmpty(l, now)
			_, committed := img.groups[l.Group]
			_, stored := img.groupStates[l.Group]
			if l.Members == 0 && stored && !committed && now.Sub(co.emptySince[l.Group]) >= co.cfg.SessionTimeout {
				empties = append(empties, l.Group)
			}
		}
		for id, topics := range img.groups {
			if m.Size(id) > 0 {
				continue
			}
			last := co.emptySince[id]
			for _, parts := range topics {
				for _, o := range parts {
					last = maxTime(last, time.UnixMilli(o.CommitTimeMs))
				}
			}
			if now.Sub(last) >= co.retention() {
				expired = append(expired, id)
			}
		}
		return nil, nil
	})
	if err != nil {
		return
	}
	for _, id := range expired {
		co.expireGroup(ctx, id, now.Add(-co.retention()))
	}
	for _, id := range empties {
		co.removeEmpty(ctx, id)
	}
}

// noteEmpty keeps emptySince up to date with one group's listing. It is
// called in a turn of the machine (co.mu held).
func (co *coordinator) noteEmpty(l group.Listing, now time.Time) {
	switch _, seen := co.emptySince[l.Group]; {
	case l.Members > 0:
		delete(co.emptySince, l.Group)
	case !l.EmptySince.IsZero():
		co.emptySince[l.Group] = l.EmptySince
	case !seen:
		co.emptySince[l.Group] = now
	}
}

// expireGroup deletes the offsets, then the membership state, of group
// id, whose retention ran out at cutoff (now minus the retention), if it
// is still expired, all judged in one turn of the machine: it still has
// no members, was left without them at or before cutoff (a member that
// joined and left since keeps it), and none of its offsets was committed
// after cutoff. That last check is the FSM's (DeleteGroup's
// committed_before_ms, from metadata.version 5), so a commit the
// controller applies between this look and the deletion, which does not
// wait for the machine, keeps the group's offsets instead of being
// deleted after it was acknowledged. Below level 5 the deletion is
// unguarded.
func (co *coordinator) expireGroup(ctx context.Context, id string, cutoff time.Time) {
	expired := false
	err := co.doWrite(ctx, func(m *group.Machine) (groupWrite, error) {
		if m.Size(id) > 0 {
			return groupWrite{}, nil
		}
		for _, l := range m.Groups() {
			if l.Group == id {
				co.noteEmpty(l, co.clock.Now())
			}
		}
		if since, ok := co.emptySince[id]; ok && since.After(cutoff) {
			return groupWrite{}, nil
		}
		cmd := &pb.DeleteGroup{Group: id}
		if co.c.n.Image().metadataVersion() >= MetadataVersionGuardedGroupDelete {
			cmd.CommittedBeforeMs = cutoff.UnixMilli()
		}
		// The DeleteGroup is written in the group's turn, before the
		// membership's removal; refused (a commit since), the Machine,
		// which removed the group already, is rebuilt from the log.
		w := groupWrite{group: id, before: &pb.Command{Cmd: &pb.Command_DeleteGroup{DeleteGroup: cmd}}}
		expired = true
		if _, stored := co.c.n.Image().groupStates[id]; !stored {
			return w, nil
		}
		var err error
		w.recs, err = m.Delete(id)
		return w, err
	})
	switch {
	case expired && err == nil:
		co.mu.Lock()
		delete(co.emptySince, id)
		co.mu.Unlock()
		co.c.n.logger.Info("expired the offsets of an empty group", "group", id, "retention", co.retention())
	case errors.Is(err, errCommittedSince), errors.Is(err, ErrUnknownGroup):
		// Committed to, or deleted, meanwhile.
		co.c.n.logger.Debug("kept a group's offsets", "group", id, "reason", err)
	case err != nil && ctx.Err() == nil:
		co.c.n.logger.Warn("could not expire a group's offsets", "group", id, "error", err)
	}
}

// removeEmpty removes the state of group id if it still has no members,
// has state and has no committed offsets, all judged in one turn of the
// machine: it writes only the group's GroupDeleted record, never an
// offsets deletion, so a commit that lands meanwhile (a reset of an
// empty group's offsets, say) is kept, and the group is listed by it.
func (co *coordinator) removeEmpty(ctx context.Context, id string) {
	removed := false
	err := co.do(ctx, func(m *group.Machine) ([]group.Record, error) {
		img := co.c.n.Image()
		_, stored := img.groupStates[id]
		_, committed := img.groups[id]
		if m.Size(id) > 0 || !stored || committed {
			return nil, nil // joined, committed or removed meanwhile
		}
		recs, err := m.Delete(id)
		removed = err == nil
		return recs, err
	})
	switch {
	case err == nil && removed:
		co.mu.Lock()
		delete(co.emptySince, id)
		co.mu.Unlock()
		co.c.n.logger.Info("removed an empty group without committed offsets", "group", id)
	case err != nil && ctx.Err() == nil:
		co.c.n.logger.Warn("could not remove an empty group", "group", id, "error", err)
	}
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// ConsumerGroupHeartbeat handles one member's heartbeat (hb.Now is set
// here). The group's errors are group's sentinels; a coordinator that
// could not write the change is ErrNotCoordinator (retriable). Below
// metadata.version 6, which keeps instance ids and classic members'
// session timeouts, members are dynamic, with the coordinator's session
// timeout: those are dropped, and a static member's leave (-2) is a
// leave.
func (c *Controller) ConsumerGroupHeartbeat(ctx context.Context, hb group.Heartbeat) (group.Response, error) {
	var resp group.Response
	err := c.coord.doGroup(ctx, hb.Group, func(m *group.Machine) ([]group.Record, error) {
		if c.n.Image().metadataVersion() < MetadataVersionStaticMembers {
			hb.InstanceID, hb.SessionTimeout = "", 0
			if hb.MemberEpoch == group.StaticLeaveEpoch {
				hb.MemberEpoch = group.LeaveEpoch
			}
		}
		hb.Now = c.coord.clock.Now()
		r, recs, err := m.Heartbeat(hb)
		resp = r
		return recs, err
	})
	if err != nil {
		return group.Response{}, err
	}
	return resp, nil
}

// DescribeGroup describes a group's membership. A group with committed
// offsets and no membership state (manual assignment) is described as
// empty.
func (c *Controller) DescribeGroup(ctx context.Context, id string) (group.Description, error) {
	var d group.Description
	err := c.coord.doGroup(ctx, id, func(m *group.Machine) (recs []group.Record, err error) {
		d, err = m.Describe(id)
		return nil, err
	})
	if errors.Is(err, group.ErrUnknownGroup) && len(c.n.Image().Offsets(id)) > 0 {
		return group.Description{Group: id, State: group.GroupEmpty}, nil
	}
	return d, err
}

// validateCommit fences an offset commit by the group's membership.
func (c *Controller) validateCommit(ctx context.Context, id string, member GroupMember) error {
	if c.n.Image().metadataVersion() < MetadataVersionProducerIDs {
		// No membership before metadata.version 2: every commit is a
		// manual one.
		if member.ID != "" {
			return fmt.Errorf("%w: a commit from a group member needs %s %d", ErrUnsupportedVersion, MetadataVersionFeature, MetadataVersionProducerIDs)
		}
		return nil
	}
	return c.coord.doGroup(ctx, id, func(m *group.Machine) ([]group.Record, error) {
		return nil, m.ValidateCommit(id, member.ID, member.Epoch)
	})
}

// barrier waits until every entry proposed before is applied here.
func (c *Controller) barrier(ctx context.Context) error {
	timeout := c.n.cfg.ApplyTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	return c.leaderErr(c.n.raft.Barrier(timeout).Error(), ErrNotCoordinator)
}

// leaderErr maps the error of a raft call only the leader makes: nil
// stays nil, a lost leadership is notController, a shut-down raft
// ErrShutdown, anything else wrapped in fallback.
func (c *Controller) leaderErr(err, fallback error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost):
		return c.notController()
	case errors.Is(err, raft.ErrRaftShutdown):
		return ErrShutdown
	}
	return fmt.Errorf("%w: %w", fallback, err)
}

// deleteGroupMembership refuses to delete a group with members
// (group.ErrNonEmptyGroup) and removes the state of an empty one.
func (c *Controller) deleteGroupMembership(ctx context.Context, id string) error {
	if c.n.Image().metadataVersion() < MetadataVersionProducerIDs {
		return nil
	}
	return c.coord.doGroup(ctx, id, func(m *group.Machine) ([]group.Record, error) {
		if n := m.Size(id); n > 0 {
			return nil, fmt.Errorf("%w: group %q has %d members", group.ErrNonEmptyGroup, id, n)
		}
		if _, ok := c.n.Image().groupStates[id]; !ok {
			return nil, nil
		}
		return m.Delete(id)
	})
}
