// Package sharegroup is the share coordinator: the runtime around
// share.Partition that serves the share groups (KIP-932 queues) of one
// node. It keeps, in memory, each group's members (their epochs,
// subscriptions and last heartbeats) and one share.Partition per partition
// the group consumes, created at first use at the log's start or end (the
// group's share.auto.offset.reset). It does no I/O of its own: the caller
// passes in a Log to read records from and takes the dead letters out.
//
// Every member of a share group is assigned every partition of the topics
// it subscribes to: the records, not the partitions, are divided.
//
// With a Store (persist.go), each share-partition's state is saved where
// the next leader of its partition finds it, and restored from there when
// this node starts to lead the partition; the members are not: see
// docs/share-groups.md.
package sharegroup

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quirelog/quire/share"
)

// Defaults, named after Kafka's configuration keys.
const (
	// DefaultSessionTimeout is group.share.session.timeout.ms.
	DefaultSessionTimeout = 45 * time.Second
	// DefaultHeartbeatInterval is group.share.heartbeat.interval.ms.
	DefaultHeartbeatInterval = 5 * time.Second
)

// Errors of the share coordinator.
var (
	// ErrUnknownMember: the member is not in the group (never joined,
	// left, or timed out). Kafka's UNKNOWN_MEMBER_ID.
	ErrUnknownMember = errors.New("sharegroup: unknown member")
	// ErrFencedMemberEpoch: the member's epoch is not the group's view of
	// it. Kafka's FENCED_MEMBER_EPOCH.
	ErrFencedMemberEpoch = errors.New("sharegroup: fenced member epoch")
	// ErrInvalidRequest: a malformed heartbeat.
	ErrInvalidRequest = errors.New("sharegroup: invalid request")
	// ErrStateNotSaved: a share-partition's changes were made under a
	// leadership this node has lost (another call's save was refused
	// meanwhile) and will never be saved; the member asks the partition's
	// leader again. Kafka's NOT_LEADER_OR_FOLLOWER.
	ErrStateNotSaved = errors.New("sharegroup: share-partition changed under a lost leadership, not saved")
)

// Config tunes the coordinator.
type Config struct {
	// Partition is every share-partition's configuration unless the group
	// has its own (SetGroupConfig).
	Partition share.Config
	// SessionTimeout: a member silent this long leaves
	// (group.share.session.timeout.ms).
	SessionTimeout time.Duration
	// HeartbeatInterval is what members are told to heartbeat at
	// (group.share.heartbeat.interval.ms).
	HeartbeatInterval time.Duration
	// ResetEarliest starts a new share-partition at the log start offset
	// rather than its end (share.auto.offset.reset=earliest).
	ResetEarliest bool
	// Store saves the share-partitions' state and restores it on a new
	// leader (persist.go); nil keeps it in memory only.
	Store Store
	// Configs holds each group's saved settings (groupconfig.go); nil:
	// only SetGroupConfig's, in memory.
	Configs ConfigSource
	// AdmitFetchers lets the caller admit, with Admit, a member whose
	// heartbeats go to another node (membership.go): on a cluster, a
	// member's heartbeats go to one node and its fetches to each
	// partition's leader, which asks the other nodes whether the group
	// has it. Such a member leaves a node when told it left the group
	// (Forget), or after the session timeout without a fetch there, its
	// records released. Without it a member must heartbeat here.
	AdmitFetchers bool
}

// DefaultConfig is Kafka's defaults.
func DefaultConfig() Config {
	return Config{Partition: share.DefaultConfig(), SessionTimeout: DefaultSessionTimeout, HeartbeatInterval: DefaultHeartbeatInterval}
}

// Validate reports the first setting out of range.
func (c Config) Validate() error {
	if err := c.Partition.Validate(); err != nil {
		return err
	}
	if c.SessionTimeout <= 0 || c.HeartbeatInterval <= 0 {
		return fmt.Errorf("%w: session timeout %v and heartbeat interval %v must be positive", share.ErrInvalidConfig, c.SessionTimeout, c.HeartbeatInterval)
	}
	return nil
}

// TopicPartition names a partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Log is what the coordinator reads of a partition's log, implemented by
// the caller over the partition's leader replica.
type Log interface {
	// Bounds is the log start offset and the high watermark.
	Bounds() (start, hw int64, err error)
	// Read returns the records from offset on, below the high watermark,
	// at most about max of them, and the offset after the last batch read
	// (offset itself when nothing was read).
	Read(offset int64, max int) ([]share.Record, int64, error)
}

// TimeLog is a Log that finds offsets by time, for
// share.auto.offset.reset=by_duration (without it, such a group starts
// at the log's end).
type TimeLog interface {
	// OffsetForTime is the first offset whose record's timestamp is at
	// or after t; the high watermark when none is.
	OffsetForTime(t time.Time) (int64, error)
}

// Coordinator serves every share group of a node. Safe for concurrent use.
type Coordinator struct {
	cfg Config

	mu     sync.Mutex
	groups map[string]*group
	nextID int
	// departed are the members that left or timed out here since
	// TakeDepartures, for the caller to tell the other nodes.
	departed []Departure
	// unknown are the members no node had when last asked, until when
	// the caller takes that answer as still true (membership.go).
	unknown map[Departure]time.Time
	// drops counts, per group, the times this node dropped share-
	// partitions of it (its state deleted): a change made before a drop
	// is not saved (PersistSince).
	drops map[string]uint64
	// replaced counts the times a share-partition's state with changes
	// not yet saved was replaced (persist.go): a change made before is
	// gone with it. Taken under partitions' locks, hence atomic.
	replaced atomic.Uint64

	saver saver // persist.go
}

type group struct {
	name string
	// settings are the group's own settings over the node's.
	settings GroupConfig
	// gen and deleted are the saved settings' generations applied
	// (ConfigSource).
	gen, deleted uint64
	epoch        int32
	members      map[string]*member
	parts        map[TopicPartition]*partition
}

type member struct {
	epoch    int32
	topics   []string
	lastSeen time.Time
	// fetcher: known only from its fetches (Config.AdmitFetchers), its
	// heartbeats going to another node; confirmed is until when another
	// node's word that the group has it holds (membership.go).
	fetcher   bool
	confirmed time.Time
}

// partition is a share-partition with its own lock, so that reading one
// log does not hold up the others.
type partition struct {
	group string
	tp    TopicPartition

	mu sync.Mutex
	p  *share.Partition // nil until first used
	// lease is the leadership p was restored or made under (with a
	// Store); version counts the changes worth saving, saved is the
	// version last saved.
	lease          Lease
	version, saved uint64
	// gen is the group's settings generation p's state is saved under.
	gen uint64
	// stored: p.p's state may be in the store, restored from it or sent
	// to it in a save (syncLocked).
	stored bool
	// born is the group's drops count when p was made (PersistSince).
	born uint64
	// era is the coordinator's replaced count when p's state last went
	// with changes not saved (dropped after a refused save, or restored
	// over on a new lease): the changes made before are not in p.p, nor
	// in any state saved from it since.
	era uint64
	// pending are the dead letters not yet known written (deadletters.go).
	pending []pendingDead
	// deadLettered counts the records archived as dead letters since
	// the state was made (saved with it, for describe).
	deadLettered int64
}

// New returns a coordinator with no groups.
func New(cfg Config) (*Coordinator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Coordinator{cfg: cfg, groups: make(map[string]*group), drops: make(map[string]uint64), unknown: make(map[Departure]time.Time)}, nil
}

// GroupConfig is one group's own settings.
type GroupConfig struct {
	// Partition configures the group's share-partitions created from now
	// on (share.key.ordering, the lock duration, the delivery limit).
	Partition share.Config
	// DeadLetterTopic is where the group's dead letters are written
	// (errors.deadletterqueue.topic.name); "": nowhere.
	DeadLetterTopic string
	// DeadLetterCopyRecord writes the record's key and value into its
	// dead letter (errors.deadletterqueue.copy.record.enable); without
	// it a dead letter carries the headers naming the record only.
	DeadLetterCopyRecord bool
	// Reset is where a share-partition with no saved state starts
	// (share.auto.offset.reset); the zero value is the node's.
	Reset Reset
	// ReadCommitted reads only committed records (share.isolation.level
	// read_committed): the caller's Log stops at the last stable offset
	// and leaves aborted transactions' records out.
	ReadCommitted bool
}

// SetGroupConfig sets group's own settings.
func (c *Coordinator) SetGroupConfig(name string, cfg GroupConfig) error {
	if err := cfg.Partition.Validate(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if cfg.Reset == (Reset{}) {
		cfg.Reset = c.nodeReset()
	}
	g := c.groupLocked(name)
	g.settings = cfg
	return nil
}

// GroupConfig returns group's settings: its own, or the defaults.
func (c *Coordinator) GroupConfig(name string) GroupConfig {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g := c.groups[name]; g != nil {
		c.syncLocked(name, g)
		return g.settings
	}
	if c.cfg.Configs != nil {
		kv, _, _, _ := c.cfg.Configs.ShareGroupConfig(name)
		if cfg, err := ApplyGroupConfigs(c.DefaultGroupConfig(), kv); err == nil {
			return cfg
		}
	}
	return c.DefaultGroupConfig()
}

// DeadLetterTopic is the group's dead-letter topic; "" for none.
func (c *Coordinator) DeadLetterTopic(name string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g := c.groups[name]; g != nil {
		c.syncLocked(name, g)
		return g.settings.DeadLetterTopic
	}
	return ""
}

func (c *Coordinator) groupLocked(name string) *group {
	g := c.groups[name]
	if g == nil {
		g = &group{name: name, settings: c.DefaultGroupConfig(), members: make(map[string]*member), parts: make(map[TopicPartition]*partition)}
		c.groups[name] = g
	}
	c.syncLocked(name, g)
	return g
}

// Heartbeat is a member's ShareGroupHeartbeat.
type Heartbeat struct {
	Group string
	// MemberID is the member's id; "" with epoch 0 has one made.
	MemberID string
	// Epoch: 0 joins, -1 leaves, else the epoch last received.
	Epoch int32
	// Topics is the subscription; nil when unchanged.
	Topics []string
}

// HeartbeatResult is the answer to a heartbeat: the member's id and epoch
// and the topics whose partitions are all its own to fetch from.
type HeartbeatResult struct {
	MemberID string
	Epoch    int32
	Interval time.Duration
	Topics   []string
}

// Heartbeat admits, keeps or removes a member. A leaving member's records
// are released at once.
func (c *Coordinator) Heartbeat(now time.Time, hb Heartbeat) (HeartbeatResult, error) {
	if hb.Group == "" {
		return HeartbeatResult{}, fmt.Errorf("%w: empty group id", ErrInvalidRequest)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groupLocked(hb.Group)
	c.expireLocked(now, g)
	switch {
	case hb.Epoch == -1:
		if _, ok := g.members[hb.MemberID]; !ok {
			return HeartbeatResult{}, fmt.Errorf("%w: %q is not in share group %q", ErrUnknownMember, hb.MemberID, hb.Group)
		}
		c.leaveLocked(now, g, hb.MemberID)
		return HeartbeatResult{MemberID: hb.MemberID, Epoch: -1}, nil
	case hb.Epoch == 0:
		if hb.Topics == nil {
			return HeartbeatResult{}, fmt.Errorf("%w: a joining member must name its topics", ErrInvalidRequest)
		}
		id := hb.MemberID
		if id == "" {
			c.nextID++
			id = fmt.Sprintf("%s-%d-%d", hb.Group, now.UnixNano(), c.nextID)
		}
		if m, ok := g.members[id]; ok && !m.fetcher {
			// A rejoin: what it held is released first.
			c.leaveLocked(now, g, id)
		}
		g.epoch++
		g.members[id] = &member{epoch: g.epoch, topics: slices.Clone(hb.Topics), lastSeen: now}
		delete(c.unknown, Departure{Group: hb.Group, MemberID: id})
		return HeartbeatResult{MemberID: id, Epoch: g.epoch, Interval: c.cfg.HeartbeatInterval, Topics: slices.Clone(hb.Topics)}, nil
	case hb.Epoch < -1:
		return HeartbeatResult{}, fmt.Errorf("%w: member epoch %d", ErrInvalidRequest, hb.Epoch)
	}
	m, ok := g.members[hb.MemberID]
	if !ok || m.fetcher {
		// A member known here only from its fetches joins here first.
		return HeartbeatResult{}, fmt.Errorf("%w: %q is not in share group %q", ErrUnknownMember, hb.MemberID, hb.Group)
	}
	if hb.Epoch != m.epoch {
		return HeartbeatResult{}, fmt.Errorf("%w: %q sent epoch %d, the group has %d", ErrFencedMemberEpoch, hb.MemberID, hb.Epoch, m.epoch)
	}
	m.lastSeen = now
	if hb.Topics != nil && !slices.Equal(hb.Topics, m.topics) {
		g.epoch++
		m.epoch, m.topics = g.epoch, slices.Clone(hb.Topics)
	}
	return HeartbeatResult{MemberID: hb.MemberID, Epoch: m.epoch, Interval: c.cfg.HeartbeatInterval, Topics: slices.Clone(m.topics)}, nil
}

// expireLocked removes the members of g silent past the session timeout.
func (c *Coordinator) expireLocked(now time.Time, g *group) {
	for id, m := range g.members {
		if now.Sub(m.lastSeen) >= c.cfg.SessionTimeout {
			c.leaveLocked(now, g, id)
		}
	}
}

// leaveLocked removes member id and releases what it holds everywhere;
// a record released past the delivery limit is a dead letter archived at
// now. It takes each partition's lock under c.mu: partition locks are
// never held while taking c.mu.
func (c *Coordinator) leaveLocked(now time.Time, g *group, id string) {
	if m, ok := g.members[id]; ok && !m.fetcher {
		c.departed = append(c.departed, Departure{Group: g.name, MemberID: id})
	}
	delete(g.members, id)
	for _, p := range g.parts {
		p.mu.Lock()
		if p.p != nil && p.p.Held(id) > 0 {
			p.p.Leave(id)
			p.version++
			// Taken now, not at the next call: a state replaced
			// before it (a restore, a refused save, a settings
			// change) would lose them, uncounted and unwritten.
			p.addPending(now, g.settings.DeadLetterTopic, p.p.TakeDeadLetters())
		}
		p.mu.Unlock()
	}
}

// partition checks that id is in the group, and
// returns the group's share-partition for it.
func (c *Coordinator) partition(now time.Time, groupName, id string, tp TopicPartition) (*partition, GroupConfig, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g, ok := c.groups[groupName]
	if !ok {
		return nil, GroupConfig{}, fmt.Errorf("%w: %q: share group %q has no members", ErrUnknownMember, id, groupName)
	}
	c.syncLocked(groupName, g)
	c.expireLocked(now, g)
	m, ok := g.members[id]
	if !ok {
		return nil, GroupConfig{}, fmt.Errorf("%w: %q is not in share group %q", ErrUnknownMember, id, groupName)
	}
	m.lastSeen = now // a fetch keeps the member's records alive too
	p := g.parts[tp]
	if p == nil {
		p = &partition{group: groupName, tp: tp, gen: g.gen, born: c.drops[groupName]}
		g.parts[tp] = p
	}
	return p, g.settings, nil
}

// Fetched is what Acquire hands a member from one partition.
type Fetched struct {
	Acquired []share.AcquiredRange
	// DeadLetters are records archived meanwhile (expired past the
	// delivery limit), for the caller to write to the dead-letter topic.
	DeadLetters []share.DeadLetter
}

// Acquire takes in what the log has past the partition's end, then locks
// up to maxRecords records to the member.
func (c *Coordinator) Acquire(now time.Time, groupName, id string, tp TopicPartition, maxRecords int, log Log) (Fetched, error) {
	p, v, err := c.partition(now, groupName, id, tp)
	if err != nil {
		return Fetched{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	hw, err := c.open(now, p, v, log)
	if err != nil {
		return Fetched{}, err
	}
	start := p.p.Start()
	// A start set past the log's end (AlterShareGroupOffsets) waits for
	// the log to get there.
	if room := p.p.Room(); room > 0 && p.p.End() < hw {
		recs, next, err := log.Read(p.p.End(), room)
		if err != nil {
			return Fetched{}, err
		}
		if _, err := p.p.Offer(recs, next); err != nil {
			return Fetched{}, err
		}
	}
	got, err := p.p.Acquire(now, id, maxRecords)
	if err != nil {
		return Fetched{}, err
	}
	dead := p.p.TakeDeadLetters()
	if len(got) > 0 || len(dead) > 0 || p.p.Start() != start {
		p.version++
	}
	p.addPending(now, v.DeadLetterTopic, dead)
	return Fetched{Acquired: got, DeadLetters: dead}, nil
}

// open creates the share-partition at first use, restored from its saved
// state or new at the log's start or end, and follows the log's start
// offset. It returns the log's high watermark.
func (c *Coordinator) open(now time.Time, p *partition, v GroupConfig, log Log) (int64, error) {
	start, hw, err := log.Bounds()
	if err != nil {
		return 0, err
	}
	if err := c.restore(p, v.Partition); err != nil {
		return 0, err
	}
	if p.p == nil {
		at := hw
		switch {
		case v.Reset.Earliest:
			at = start
		case v.Reset.ByDuration > 0:
			if tl, ok := log.(TimeLog); ok {
				off, err := tl.OffsetForTime(now.Add(-v.Reset.ByDuration))
				if err != nil {
					return 0, err
				}
				at = min(max(off, start), hw)
			}
		}
		if p.p, err = share.New(v.Partition, at); err != nil {
			return 0, err
		}
		p.stored = false
		// Saved before anything is delivered from it, so that a next
		// leader starts where this one did.
		p.version++
	}
	if s := p.p.Start(); start > s {
		p.p.SetLogStart(start)
		p.version++
	}
	return hw, nil
}

// Acknowledge applies a member's acknowledgements to one partition and
// returns the dead letters they made.
func (c *Coordinator) Acknowledge(now time.Time, groupName, id string, tp TopicPartition, acks []share.Ack) ([]share.DeadLetter, error) {
	p, v, err := c.partition(now, groupName, id, tp)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := c.restore(p, v.Partition); err != nil {
		return nil, err
	}
	if p.p == nil {
		return nil, fmt.Errorf("%w: nothing acquired from %s-%d yet", share.ErrInvalidRecordState, tp.Topic, tp.Partition)
	}
	err = p.p.Acknowledge(now, id, acks)
	dead := p.p.TakeDeadLetters()
	if err == nil || len(dead) > 0 {
		p.version++
	}
	p.addPending(now, v.DeadLetterTopic, dead)
	return dead, err
}

// PartitionState describes one share-partition of a group.
type PartitionState struct {
	TopicPartition
	Start, End int64
	Records    []share.RecordState
	// DeadLettered counts the records archived as dead letters since
	// the state was made.
	DeadLettered int64
}

// Describe returns the group's members and share-partitions.
func (c *Coordinator) Describe(groupName string) (members []string, parts []PartitionState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g, ok := c.groups[groupName]
	if !ok {
		return nil, nil
	}
	c.syncLocked(groupName, g)
	for id := range g.members {
		members = append(members, id)
	}
	slices.Sort(members)
	for tp, p := range g.parts {
		p.mu.Lock()
		if p.p != nil {
			parts = append(parts, PartitionState{TopicPartition: tp, Start: p.p.Start(), End: p.p.End(), Records: p.p.Records(), DeadLettered: p.deadLettered})
		}
		p.mu.Unlock()
	}
	slices.SortFunc(parts, func(a, b PartitionState) int {
		if a.Topic != b.Topic {
			if a.Topic < b.Topic {
				return -1
			}
			return 1
		}
		return int(a.Partition - b.Partition)
	})
	return members, parts
}
