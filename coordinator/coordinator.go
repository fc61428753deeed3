package coordinator

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	pb "github.com/quirelog/quire/api/metapb"
	"github.com/quirelog/quire/group"
	"github.com/quirelog/quire/internal/clock"
	"github.com/quirelog/quire/metadata"
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

// Log is the metadata log as the coordinator reads and writes it: the
// controller's (metadata.GroupLog). It is the coordinator's one way to the
// rest of the cluster, but for the partition leaders it asks about lag
// (Config.Logs).
type Log interface {
	// Active waits until this node is the active controller.
	Active(ctx context.Context) error
	// Term is the leadership term of the running controller.
	Term() uint64
	// Barrier waits until every entry proposed before is applied here.
	Barrier(ctx context.Context) error
	// Image is this node's metadata image.
	Image() *metadata.Image
	// Apply writes cmd to the log and returns the FSM's answer.
	Apply(ctx context.Context, cmd *pb.Command) (any, error)
	// LevelRising tells which metadata.version cmd needs, and whether the
	// controller will raise the cluster to it on its own.
	LevelRising(cmd *pb.Command) (int32, bool)
}

// Config configures a Coordinator.
type Config struct {
	// Groups configures the groups (group.consumer.session.timeout.ms
	// and the rest); the zero value is group.DefaultConfig.
	Groups group.Config
	// Clock drives the deadlines; nil is the system clock.
	Clock clock.Clock
	// Logs asks partition leaders for the high watermarks and record
	// timestamps of consumer group lag (lag.go); nil: lag unknown.
	Logs metadata.LogReader
	// LagRefresh is how often the coordinator asks them
	// (group.lag.refresh.ms); zero is DefaultLagRefresh.
	LagRefresh time.Duration
	// OffsetsRetention is how long the committed offsets of a group with
	// no members are kept after its last commit, or after the coordinator
	// saw its last member go, whichever is later
	// (offsets.retention.minutes); 0 is DefaultOffsetsRetention.
	OffsetsRetention time.Duration
	// WriteTimeout bounds a write to the log (0: 10s).
	WriteTimeout time.Duration
	// Logger logs the coordinator's events; nil discards them.
	Logger hclog.Logger
}

// DefaultOffsetsRetention is Kafka's offsets.retention.minutes default, 7
// days.
const DefaultOffsetsRetention = 7 * 24 * time.Hour

// Coordinator is the consumer group coordinator of one node
// (metadata.GroupCoordinator): it serves while the node is the
// controller.
type Coordinator struct {
	log    Log
	cfg    group.Config
	clock  clock.Clock
	logger hclog.Logger

	logs         metadata.LogReader // nil: no lag figures
	lagRefresh   time.Duration
	lag          lagState // lag.go
	retention    time.Duration
	writeTimeout time.Duration

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

// New returns a coordinator writing through log.
func New(log Log, cfg Config) (*Coordinator, error) {
	gc := cfg.Groups
	if gc.Assignors == nil && gc.SessionTimeout == 0 {
		gc = group.DefaultConfig()
	}
	if err := gc.Validate(); err != nil {
		return nil, err
	}
	co := &Coordinator{log: log, cfg: gc, clock: cfg.Clock, logger: cfg.Logger, logs: cfg.Logs,
		lagRefresh: cfg.LagRefresh, retention: cfg.OffsetsRetention, writeTimeout: cfg.WriteTimeout,
		emptySince: map[string]time.Time{}}
	if co.clock == nil {
		co.clock = clock.System{}
	}
	if co.logger == nil {
		co.logger = hclog.NewNullLogger()
	}
	if co.lagRefresh <= 0 {
		co.lagRefresh = DefaultLagRefresh
	}
	if co.retention <= 0 {
		co.retention = DefaultOffsetsRetention
	}
	if co.writeTimeout <= 0 {
		co.writeTimeout = 10 * time.Second
	}
	co.turns.init()
	return co, nil
}

// RunTerm runs the coordinator's timers for one leadership term, until
// ctx ends: the groups' deadlines and topics, and the lag figures.
func (co *Coordinator) RunTerm(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { co.runTicks(ctx) })
	wg.Go(func() { co.runLag(ctx) })
	wg.Wait()
}

// tickEvery is how often the controller loop checks the groups' deadlines
// and the topics: a tenth of the shortest session timeout a member may
// have (the group's, or the least a classic member may ask for), within
// 50ms and 1s.
func (co *Coordinator) tickEvery() time.Duration {
	return min(max(min(co.cfg.SessionTimeout, co.cfg.MinSessionTimeout)/10, 50*time.Millisecond), time.Second)
}

// machine returns the Machine of the current term, building it if need
// be. It is called with co.mu held, after c.active succeeded. Building
// is the one time co.mu is held across metadata writes (a barrier and
// the replayed records): nothing can be served before the Machine exists.
// It first drops every change computed on the Machine before (turns.gen)
// and waits for the writes under way, so that the image it replays holds
// all they wrote.
func (co *Coordinator) machine(ctx context.Context) (*group.Machine, error) {
	term := co.log.Term()
	if co.m != nil && co.term == term && co.mgen == co.turns.gen.Load() {
		return co.m, nil
	}
	co.m = nil
	gen := co.turns.gen.Add(1)
	co.turns.waitIdle()
	// Everything proposed before (by this term's writes that failed, or
	// an earlier term's) is applied here before the image is read.
	if err := co.log.Barrier(ctx); err != nil {
		return nil, err
	}
	m, err := group.New(co.cfg)
	if err != nil {
		return nil, err
	}
	img := co.log.Image()
	topics := img.PartitionCounts()
	recs, err := m.Replay(img.GroupRecords(), topics, co.clock.Now())
	if err != nil {
		return nil, fmt.Errorf("%w: replaying the groups: %w", metadata.ErrNotCoordinator, err)
	}
	for _, part := range splitByGroup(recs) {
		if err := co.write(ctx, part.recs); err != nil {
			return nil, err
		}
	}
	co.m, co.term, co.topics, co.mgen = m, term, topics, gen
	co.logger.Info("group coordinator loaded", "groups", len(m.Groups()), "term", term)
	return m, nil
}

// write logs records (of one group, or the replay of all); it holds no
// lock. Its caller drops the Machine on failure.
func (co *Coordinator) write(ctx context.Context, recs []group.Record) error {
	if len(recs) == 0 {
		return nil
	}
	// The Machine has applied the records already: a caller giving up
	// must not cut the write short.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), co.writeTimeout)
	defer cancel()
	cmd := metadata.GroupRecordsCommand(recs, co.log.Image().MetadataVersion())
	_, err := co.log.Apply(ctx, cmd)
	if err != nil {
		if level, rising := co.log.LevelRising(cmd); errors.Is(err, metadata.ErrUnsupportedVersion) && rising {
			// A new cluster before its controller raised the level: a
			// member that gave up here for good (a KIP-848 client falls
			// back to the classic protocol) would not be served as it
			// asked moments later.
			return fmt.Errorf("%w: the cluster's metadata.version is below %d, which the controller raises once every voter has registered; retry", metadata.ErrNotCoordinator, level)
		}
		if errors.Is(err, metadata.ErrUnsupportedVersion) || errors.Is(err, metadata.ErrNotController) {
			return err
		}
		return fmt.Errorf("%w: writing group records: %w", metadata.ErrNotCoordinator, err)
	}
	co.lag.countRebalances(recs)
	return nil
}

// refreshTopics gives m the image's topics when they changed, and
// returns the records that follow.
func (co *Coordinator) refreshTopics(m *group.Machine) []group.Record {
	topics := co.log.Image().PartitionCounts()
	if maps.Equal(topics, co.topics) {
		return nil
	}
	co.topics = topics
	return m.SetTopics(topics)
}

// do runs fn on the current Machine, with the topics refreshed, and
// writes the records it returns (see doWrite).
func (co *Coordinator) do(ctx context.Context, fn func(m *group.Machine) ([]group.Record, error)) error {
	return co.doGroup(ctx, "", fn)
}

// doGroup is do for a call on group id: it answers once id's earlier
// changes are in the log (groupWrite.group).
func (co *Coordinator) doGroup(ctx context.Context, id string, fn func(m *group.Machine) ([]group.Record, error)) error {
	return co.doWrite(ctx, func(m *group.Machine) (groupWrite, error) {
		recs, err := fn(m)
		return groupWrite{group: id, recs: recs}, err
	})
}

// tick expires members past their deadlines and picks up topic changes.
func (co *Coordinator) tick(ctx context.Context) {
	err := co.do(ctx, func(m *group.Machine) ([]group.Record, error) {
		return m.Tick(co.clock.Now()), nil
	})
	if err != nil && ctx.Err() == nil && !errors.Is(err, metadata.ErrUnsupportedVersion) {
		co.logger.Warn("group coordinator tick", "error", err)
	}
}

// runTicks ticks until ctx ends (the controller loop's term).
func (co *Coordinator) runTicks(ctx context.Context) {
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
func (co *Coordinator) expire(ctx context.Context) {
	now := co.clock.Now()
	if now.Before(co.nextExpiry) {
		return
	}
	co.nextExpiry = now.Add(time.Second)
	var expired, empties []string
	err := co.do(ctx, func(m *group.Machine) ([]group.Record, error) {
		img := co.log.Image()
		for _, l := range m.Groups() {
			co.noteEmpty(l, now)
			committed := img.HasOffsets(l.Group)
			stored := img.HasGroupState(l.Group)
			if l.Members == 0 && stored && !committed && now.Sub(co.emptySince[l.Group]) >= co.cfg.SessionTimeout {
				empties = append(empties, l.Group)
			}
		}
		for _, id := range img.Groups() {
			if m.Size(id) > 0 {
				continue
			}
			last := co.emptySince[id]
			for _, o := range img.Offsets(id) {
				last = maxTime(last, time.UnixMilli(o.CommitTimeMs))
			}
			if now.Sub(last) >= co.retention {
				expired = append(expired, id)
			}
		}
		return nil, nil
	})
	if err != nil {
		return
	}
	for _, id := range expired {
		co.expireGroup(ctx, id, now.Add(-co.retention))
	}
	for _, id := range empties {
		co.removeEmpty(ctx, id)
	}
}

// noteEmpty keeps emptySince up to date with one group's listing. It is
// called in a turn of the machine (co.mu held).
func (co *Coordinator) noteEmpty(l group.Listing, now time.Time) {
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
func (co *Coordinator) expireGroup(ctx context.Context, id string, cutoff time.Time) {
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
		if co.log.Image().MetadataVersion() >= metadata.MetadataVersionGuardedGroupDelete {
			cmd.CommittedBeforeMs = cutoff.UnixMilli()
		}
		// The DeleteGroup is written in the group's turn, before the
		// membership's removal; refused (a commit since), the Machine,
		// which removed the group already, is rebuilt from the log.
		w := groupWrite{group: id, before: &pb.Command{Cmd: &pb.Command_DeleteGroup{DeleteGroup: cmd}}}
		expired = true
		if !co.log.Image().HasGroupState(id) {
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
		co.logger.Info("expired the offsets of an empty group", "group", id, "retention", co.retention)
	case errors.Is(err, metadata.ErrCommittedSince), errors.Is(err, metadata.ErrUnknownGroup):
		// Committed to, or deleted, meanwhile.
		co.logger.Debug("kept a group's offsets", "group", id, "reason", err)
	case err != nil && ctx.Err() == nil:
		co.logger.Warn("could not expire a group's offsets", "group", id, "error", err)
	}
}

// removeEmpty removes the state of group id if it still has no members,
// has state and has no committed offsets, all judged in one turn of the
// machine: it writes only the group's GroupDeleted record, never an
// offsets deletion, so a commit that lands meanwhile (a reset of an
// empty group's offsets, say) is kept, and the group is listed by it.
func (co *Coordinator) removeEmpty(ctx context.Context, id string) {
	removed := false
	err := co.do(ctx, func(m *group.Machine) ([]group.Record, error) {
		img := co.log.Image()
		stored := img.HasGroupState(id)
		committed := img.HasOffsets(id)
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
		co.logger.Info("removed an empty group without committed offsets", "group", id)
	case err != nil && ctx.Err() == nil:
		co.logger.Warn("could not remove an empty group", "group", id, "error", err)
	}
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
