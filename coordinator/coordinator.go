package coordinator

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	pb "github.com/quirelog/quire/api/metapb"
	"github.com/quirelog/quire/group"
	"github.com/quirelog/quire/internal/clock"
	"github.com/quirelog/quire/metadata"
)

// The consumer group coordinator runs on the controller, where the
// committed offsets are. It runs one group.Machine per group, each under
// its own lock, built for each leadership term from the image (Replay of
// the group's records, which gives every member one session timeout to
// heartbeat to the new coordinator), and fed by heartbeats, by a ticker
// (session and rebalance timeouts) and by the image's topics (SetTopics).
// Every state change is written to the metadata log, one GroupRecords
// command per change, before the answer goes out, with no lock held
// across the write and each group's changes in order (write.go); if a
// write fails the group's Machine is thrown away and rebuilt from the
// log, so what members are told is always what the log holds. A slow
// group (a stuck write, a long rebuild) holds up no other group's
// heartbeats: the groups share only a map, under a lock held for a
// lookup (docs/locking.md).

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

// LogReader asks a partition leader about its logs, for consumer group
// lag: the coordinator's one way to the brokers (the broker implements it
// with DescribeLogs).
type LogReader interface {
	// ReadPositions asks broker b for the high watermark of each
	// partition it leads among qs and the timestamps of the records at
	// the offsets asked; one Position per query, in order.
	ReadPositions(ctx context.Context, b metadata.BrokerInfo, qs []metadata.PositionQuery) ([]metadata.Position, error)
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
	Logs LogReader
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

	logs         LogReader // nil: no lag figures
	lagRefresh   time.Duration
	lag          lagState // lag.go
	retention    time.Duration
	writeTimeout time.Duration

	// loadMu serialises the loads of a term's groups (load): it is held
	// across a barrier, never with a group's lock.
	loadMu sync.Mutex
	// mu guards the map of groups and the term it was loaded for; it is
	// held only to look up, add or remove a group (a leaf).
	mu     sync.RWMutex
	term   uint64 // the term whose groups are loaded; 0 none
	groups map[string]*groupRun

	// topics caches the partition counts of one image, which every
	// group's refresh compares its own with (read only).
	topics atomic.Pointer[imageTopics]

	nextExpiry time.Time // the ticker's own
}

// groupRun is one group on the coordinator: its Machine and what orders
// its writes.
type groupRun struct {
	id string

	// mu guards the fields below: it is held while the Machine computes,
	// never across a metadata write but while the Machine is built (its
	// barrier and replayed records: nothing of the group can be served
	// before).
	mu      sync.Mutex
	m       *group.Machine // nil until built for term
	term    uint64
	mgen    uint64           // turns.gen when m was built: m is stale once it moves
	topics  map[string]int32 // as last given to m
	removed bool             // taken out of the map: look the group up again
	// emptySince is since when the group has had no members (seenEmpty):
	// its offsets expire a retention after that or after their last
	// commit, whichever is later (a group that never had members: after
	// the last commit). It is the time the group's records stamp
	// (group.Listing.EmptySince: the leave or expiry of the last member,
	// in the metadata log from metadata.version 4), so every controller
	// counts from the same moment; for a group whose records carry none
	// (it emptied below level 4), when this coordinator first saw it
	// empty.
	emptySince time.Time
	seenEmpty  bool

	turns groupTurns // write.go
}

type imageTopics struct {
	img    *metadata.Image
	counts map[string]int32
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
		groups: map[string]*groupRun{}}
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

// load makes the groups of term known, once per term: after a barrier
// (every entry an earlier controller wrote is applied here), every group
// with state in the image gets its place in the map, so that the ticker
// builds its Machine and its members' sessions run. Each group's Machine
// is rebuilt from the image on its next use in the new term.
func (co *Coordinator) load(ctx context.Context, term uint64) error {
	co.mu.RLock()
	loaded := co.term == term
	co.mu.RUnlock()
	if loaded {
		return nil
	}
	co.loadMu.Lock()
	defer co.loadMu.Unlock()
	co.mu.RLock()
	loaded = co.term == term
	co.mu.RUnlock()
	if loaded {
		return nil
	}
	if err := co.log.Barrier(ctx); err != nil {
		return err
	}
	ids := co.log.Image().GroupStateIDs()
	co.mu.Lock()
	for _, id := range ids {
		if co.groups[id] == nil {
			co.groups[id] = newGroupRun(id)
		}
	}
	co.term = term
	co.mu.Unlock()
	co.logger.Info("group coordinator loaded", "groups", len(ids), "term", term)
	return nil
}

func newGroupRun(id string) *groupRun {
	g := &groupRun{id: id}
	g.turns.init()
	return g
}

// lock returns group id locked, adding it to the map if need be.
func (co *Coordinator) lock(id string) *groupRun {
	for {
		co.mu.RLock()
		g := co.groups[id]
		co.mu.RUnlock()
		if g == nil {
			co.mu.Lock()
			if g = co.groups[id]; g == nil {
				g = newGroupRun(id)
				co.groups[id] = g
			}
			co.mu.Unlock()
		}
		g.mu.Lock()
		if !g.removed {
			return g
		}
		g.mu.Unlock()
	}
}

// ids returns the groups in the map, sorted.
func (co *Coordinator) ids() []string {
	co.mu.RLock()
	defer co.mu.RUnlock()
	return slices.Sorted(maps.Keys(co.groups))
}

// prune takes g (locked) out of the map if its Machine, current, has no
// group and no change of it is under way: an unknown group looked at, or
// a group deleted. A group whose write failed stays until rebuilt, so
// that its rebuild waits for a barrier.
func (co *Coordinator) prune(g *groupRun) {
	if g.m == nil || g.mgen != g.turns.gen.Load() || g.turns.failed.Load() || len(g.m.Groups()) > 0 || !g.turns.idle() {
		return
	}
	g.removed = true
	co.mu.Lock()
	if co.groups[g.id] == g {
		delete(co.groups, g.id)
	}
	co.mu.Unlock()
}

// machine returns g's Machine for term, building it if need be. It is
// called with g.mu held. Building is the one time a group's lock is held
// across metadata writes (a barrier after a failed write, and the
// replayed records): nothing of the group can be served before its
// Machine exists. It first drops every change computed on the Machine
// before (turns.gen) and waits for the group's writes under way, so that
// the image it replays holds all they wrote.
func (co *Coordinator) machine(ctx context.Context, g *groupRun, term uint64) (*group.Machine, error) {
	if g.m != nil && g.term == term && g.mgen == g.turns.gen.Load() {
		return g.m, nil
	}
	g.m = nil
	gen := g.turns.gen.Add(1)
	g.turns.waitIdle()
	if g.turns.failed.Load() {
		// A write of the group failed, and may still be applied: the
		// image is read once everything proposed before is. (The term's
		// load did so for the writes before it.)
		if err := co.log.Barrier(ctx); err != nil {
			return nil, err
		}
		g.turns.failed.Store(false)
	}
	m, err := group.New(co.cfg)
	if err != nil {
		return nil, err
	}
	img := co.log.Image()
	topics := co.topicCounts(img)
	recs, err := m.Replay(img.GroupMembers(g.id), topics, co.clock.Now())
	if err != nil {
		return nil, fmt.Errorf("%w: replaying group %q: %w", metadata.ErrNotCoordinator, g.id, err)
	}
	if err := co.write(ctx, recs); err != nil {
		g.turns.failed.Store(true)
		return nil, err
	}
	g.m, g.term, g.topics, g.mgen = m, term, topics, gen
	return m, nil
}

// write logs records of one group; it holds no lock but while a Machine
// is built. Its caller drops the Machine on failure.
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

// topicCounts returns img's partition counts, computed once per image.
func (co *Coordinator) topicCounts(img *metadata.Image) map[string]int32 {
	if t := co.topics.Load(); t != nil && t.img == img {
		return t.counts
	}
	counts := img.PartitionCounts()
	co.topics.Store(&imageTopics{img: img, counts: counts})
	return counts
}

// refreshTopics gives g's Machine the image's topics when they changed,
// and returns the records that follow.
func (co *Coordinator) refreshTopics(g *groupRun) []group.Record {
	topics := co.topicCounts(co.log.Image())
	if maps.Equal(topics, g.topics) {
		return nil
	}
	g.topics = topics
	return g.m.SetTopics(topics)
}

// doGroup runs fn on group id's Machine, with the topics refreshed, and
// writes the records it returns; it answers once id's earlier changes
// are in the log.
func (co *Coordinator) doGroup(ctx context.Context, id string, fn func(m *group.Machine) ([]group.Record, error)) error {
	return co.doWrite(ctx, id, func(g *groupRun) (groupWrite, error) {
		recs, err := fn(g.m)
		return groupWrite{recs: recs}, err
	})
}

// tick expires members past their deadlines and picks up topic changes,
// group by group; the changes are written at once, each in its group's
// turn.
func (co *Coordinator) tick(ctx context.Context) {
	term, err := co.begin(ctx)
	if err != nil {
		if ctx.Err() == nil && !errors.Is(err, metadata.ErrUnsupportedVersion) {
			co.logger.Warn("group coordinator tick", "error", err)
		}
		return
	}
	now := co.clock.Now()
	var writes []*pendingWrite
	for _, id := range co.ids() {
		p, _, err := co.compute(ctx, id, term, false, func(g *groupRun) (groupWrite, error) {
			recs := g.m.Tick(now)
			co.prune(g)
			return groupWrite{recs: recs}, nil
		})
		switch {
		case err != nil && ctx.Err() == nil:
			co.logger.Warn("group coordinator tick", "group", id, "error", err)
		case p != nil:
			writes = append(writes, p)
		}
	}
	var wg sync.WaitGroup
	for _, p := range writes {
		wg.Go(func() {
			if err := co.finish(ctx, p); err != nil && ctx.Err() == nil && !errors.Is(err, metadata.ErrUnsupportedVersion) {
				co.logger.Warn("group coordinator tick", "group", p.g.id, "error", err)
			}
		})
	}
	wg.Wait()
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
	term, err := co.begin(ctx)
	if err != nil {
		return
	}
	type look struct {
		members    int
		emptySince time.Time
	}
	seen := map[string]look{}
	var expired, empties []string
	for _, id := range co.ids() {
		err := co.look(ctx, id, term, func(g *groupRun) {
			img := co.log.Image()
			for _, l := range g.m.Groups() {
				co.noteEmpty(g, l, now)
				if l.Members == 0 && img.HasGroupState(l.Group) && !img.HasOffsets(l.Group) && now.Sub(g.emptySince) >= co.cfg.SessionTimeout {
					empties = append(empties, l.Group)
				}
			}
			seen[id] = look{members: g.m.Size(id), emptySince: g.emptySince}
		})
		if err != nil {
			return
		}
	}
	img := co.log.Image()
	for _, id := range img.Groups() {
		l := seen[id]
		if l.members > 0 {
			continue
		}
		last := l.emptySince
		for _, o := range img.Offsets(id) {
			last = maxTime(last, time.UnixMilli(o.CommitTimeMs))
		}
		if now.Sub(last) >= co.retention {
			expired = append(expired, id)
		}
	}
	for _, id := range expired {
		co.expireGroup(ctx, id, now.Add(-co.retention))
	}
	for _, id := range empties {
		co.removeEmpty(ctx, id)
	}
}

// look runs fn on group id's Machine for term, under the group's lock,
// and writes the records of the topics' refresh that come first, if any,
// in the group's turn: a look at a group that need not wait for the
// group's earlier changes.
func (co *Coordinator) look(ctx context.Context, id string, term uint64, fn func(g *groupRun)) error {
	p, _, err := co.compute(ctx, id, term, false, func(g *groupRun) (groupWrite, error) {
		fn(g)
		return groupWrite{}, nil
	})
	if err != nil || p == nil {
		return err
	}
	return co.finish(ctx, p)
}

// noteEmpty keeps g's emptySince up to date with its listing l. It is
// called with g.mu held.
func (co *Coordinator) noteEmpty(g *groupRun, l group.Listing, now time.Time) {
	switch {
	case l.Members > 0:
		g.emptySince, g.seenEmpty = time.Time{}, false
	case !l.EmptySince.IsZero():
		g.emptySince, g.seenEmpty = l.EmptySince, true
	case !g.seenEmpty:
		g.emptySince, g.seenEmpty = now, true
	}
}

// forgetEmpty forgets since when group id has been empty: it was removed.
func (co *Coordinator) forgetEmpty(id string) {
	co.mu.RLock()
	g := co.groups[id]
	co.mu.RUnlock()
	if g == nil {
		return
	}
	g.mu.Lock()
	g.emptySince, g.seenEmpty = time.Time{}, false
	g.mu.Unlock()
}

// expireGroup deletes the offsets, then the membership state, of group
// id, whose retention ran out at cutoff (now minus the retention), if it
// is still expired, all judged in one turn of the group's Machine: it
// still has no members, was left without them at or before cutoff (a
// member that joined and left since keeps it), and none of its offsets
// was committed after cutoff. That last check is the FSM's (DeleteGroup's
// committed_before_ms, from metadata.version 5), so a commit the
// controller applies between this look and the deletion, which does not
// wait for the machine, keeps the group's offsets instead of being
// deleted after it was acknowledged. Below level 5 the deletion is
// unguarded.
func (co *Coordinator) expireGroup(ctx context.Context, id string, cutoff time.Time) {
	expired := false
	err := co.doWrite(ctx, id, func(g *groupRun) (groupWrite, error) {
		m := g.m
		if m.Size(id) > 0 {
			return groupWrite{}, nil
		}
		for _, l := range m.Groups() {
			co.noteEmpty(g, l, co.clock.Now())
		}
		if g.seenEmpty && g.emptySince.After(cutoff) {
			return groupWrite{}, nil
		}
		cmd := &pb.DeleteGroup{Group: id}
		if co.log.Image().MetadataVersion() >= metadata.MetadataVersionGuardedGroupDelete {
			cmd.CommittedBeforeMs = cutoff.UnixMilli()
		}
		// The DeleteGroup is written in the group's turn, before the
		// membership's removal; refused (a commit since), the Machine,
		// which removed the group already, is rebuilt from the log.
		w := groupWrite{before: &pb.Command{Cmd: &pb.Command_DeleteGroup{DeleteGroup: cmd}}}
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
		co.forgetEmpty(id)
		co.logger.Info("expired the offsets of an empty group", "group", id, "retention", co.retention)
	case errors.Is(err, metadata.ErrCommittedSince), errors.Is(err, metadata.ErrUnknownGroup):
		// Committed to, or deleted, meanwhile.
		co.logger.Debug("kept a group's offsets", "group", id, "reason", err)
	case err != nil && ctx.Err() == nil:
		co.logger.Warn("could not expire a group's offsets", "group", id, "error", err)
	}
}

// removeEmpty removes the state of group id if it still has no members,
// has state and has no committed offsets, all judged in one turn of its
// Machine: it writes only the group's GroupDeleted record, never an
// offsets deletion, so a commit that lands meanwhile (a reset of an
// empty group's offsets, say) is kept, and the group is listed by it.
func (co *Coordinator) removeEmpty(ctx context.Context, id string) {
	removed := false
	err := co.doGroup(ctx, id, func(m *group.Machine) ([]group.Record, error) {
		img := co.log.Image()
		if m.Size(id) > 0 || !img.HasGroupState(id) || img.HasOffsets(id) {
			return nil, nil // joined, committed or removed meanwhile
		}
		recs, err := m.Delete(id)
		removed = err == nil
		return recs, err
	})
	switch {
	case err == nil && removed:
		co.forgetEmpty(id)
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
