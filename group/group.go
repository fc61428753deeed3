// Package group is the consumer-group state machine, in the manner of
// Kafka's KIP-848: the coordinator computes a target assignment with a
// server-side assignor and every member reconciles toward it by
// heartbeating, giving up revoked partitions before anyone else receives
// them, so that a partition never has two owners.
//
// The package is pure: no network, no raft, no goroutines, no clock. A
// runtime (the coordinator) feeds it inputs and does the I/O:
//
//   - Heartbeat: a member joining (epoch 0), staying, or leaving (epoch -1;
//     -2 for a static member that will be back).
//   - Tick: the time passing; members silent past the session timeout,
//     and members that did not revoke within their rebalance timeout, are
//     removed.
//   - SetTopics: the cluster's topics and their partition counts changed.
//   - Delete: an empty group is deleted.
//
// Each input returns the records that describe the change of state (a
// member's subscription, its current assignment, its removal, a new group
// epoch, a new target assignment). The Machine has already applied them;
// the runtime writes them to the metadata log before it answers, and a new
// coordinator after a failover rebuilds an equal state with Replay (or
// from Snapshot's records), then gives every member one session timeout to
// heartbeat. If writing the records fails, the runtime must throw this
// Machine away and rebuild from what the log holds.
//
// Heartbeats and their deadlines are kept in memory only.
//
// Group states (Describe): empty (no members), assigning (the group epoch
// is ahead of the target assignment's; the next heartbeat computes it),
// reconciling (some member is not yet at the target epoch with its target
// partitions), stable.
//
// Errors map to Kafka's codes: ErrFencedMemberEpoch FENCED_MEMBER_EPOCH,
// ErrUnknownMemberID UNKNOWN_MEMBER_ID, ErrStaleMemberEpoch
// STALE_MEMBER_EPOCH, ErrUnsupportedAssignor UNSUPPORTED_ASSIGNOR,
// ErrInvalidRegex INVALID_REGULAR_EXPRESSION, ErrGroupMaxSizeReached
// GROUP_MAX_SIZE_REACHED, ErrInvalidGroupID INVALID_GROUP_ID,
// ErrInvalidRequest INVALID_REQUEST, ErrUnknownGroup GROUP_ID_NOT_FOUND,
// ErrNonEmptyGroup NON_EMPTY_GROUP, ErrFencedInstanceID
// FENCED_INSTANCE_ID, ErrInvalidSessionTimeout INVALID_SESSION_TIMEOUT.
// None is retriable; a fenced or unknown member drops its partitions and
// joins again with epoch 0, except one fenced by its instance id, which
// another process now is (it stops).
//
// Static membership (KIP-345, KIP-848): a member that names an instance
// id (group.instance.id) is that instance's. A member joining with the
// instance id of another member takes its place: its epoch, assignment
// and target, with no new group epoch (no rebalance) unless it
// subscribes to something else, and the member it replaced is fenced
// (ErrFencedInstanceID), whether it comes back with its instance id or
// without (this last known to the Machine that replaced it, not
// replayed). A static member leaving with epoch -2 keeps its
// place until its session times out, so that a restart within the
// session timeout moves nothing. Kafka refuses such a join while the
// instance's member has not left with -2 (UNRELEASED_INSTANCE_ID); here
// it replaces it, as the classic protocol does, so that an instance
// restarted after a crash does not wait out its old session.
package group

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/quirelog/quire/group/assignor"
)

// Errors of the state machine.
var (
	ErrInvalidConfig         = errors.New("group: invalid config")
	ErrInvalidGroupID        = errors.New("group: invalid group id")
	ErrInvalidRequest        = errors.New("group: invalid request")
	ErrUnknownMemberID       = errors.New("group: unknown member id")
	ErrFencedMemberEpoch     = errors.New("group: fenced member epoch")
	ErrStaleMemberEpoch      = errors.New("group: stale member epoch")
	ErrUnsupportedAssignor   = errors.New("group: unsupported assignor")
	ErrInvalidRegex          = errors.New("group: invalid regular expression")
	ErrGroupMaxSizeReached   = errors.New("group: group max size reached")
	ErrUnknownGroup          = errors.New("group: unknown group")
	ErrNonEmptyGroup         = errors.New("group: group is not empty")
	ErrInvalidRecord         = errors.New("group: invalid record")
	ErrFencedInstanceID      = errors.New("group: fenced instance id")
	ErrInvalidSessionTimeout = errors.New("group: invalid session timeout")
	// ErrIllegalGeneration refuses a transaction's offsets sent as a
	// member at an epoch (generation) not its own, or for a partition
	// it does not own at that epoch (Kafka's TxnOffsetCommit answers
	// ILLEGAL_GENERATION where OffsetCommit says STALE_MEMBER_EPOCH).
	ErrIllegalGeneration = errors.New("group: illegal generation")
)

// TopicPartition names one partition of a topic.
type TopicPartition = assignor.TopicPartition

// Limits on identifiers.
const (
	MaxGroupIDLen    = 255
	MaxMemberIDLen   = 255
	MaxInstanceIDLen = 249 // Kafka's
)

// Epochs a heartbeat may carry besides a member's own.
const (
	JoinEpoch  int32 = 0
	LeaveEpoch int32 = -1
	// StaticLeaveEpoch leaves a static member's place to its instance's
	// next join until its session times out.
	StaticLeaveEpoch int32 = -2
)

// Config holds the coordinator settings the state machine uses, under
// Kafka's names.
type Config struct {
	// SessionTimeout is group.consumer.session.timeout.ms: a member not
	// heard from for this long is removed. Default 45 s, at least 1 s.
	SessionTimeout time.Duration
	// MinSessionTimeout and MaxSessionTimeout are
	// group.min.session.timeout.ms and group.max.session.timeout.ms, the
	// range of the session timeout a classic member asks for in its join
	// (Heartbeat.SessionTimeout). Default 6 s and 30 min, as Kafka's.
	MinSessionTimeout, MaxSessionTimeout time.Duration
	// HeartbeatInterval is group.consumer.heartbeat.interval.ms, sent to
	// members in every answer. Default 5 s; positive, below the session
	// timeout.
	HeartbeatInterval time.Duration
	// MaxSize is group.max.size, the most members a group may have.
	// Default (as Kafka's) 2147483647.
	MaxSize int
	// Assignors is group.consumer.assignors, the assignors members may
	// ask for; the first is the default. Default uniform, range, roundrobin.
	Assignors []string
}

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{
		SessionTimeout:    45 * time.Second,
		MinSessionTimeout: 6 * time.Second,
		MaxSessionTimeout: 30 * time.Minute,
		HeartbeatInterval: 5 * time.Second,
		MaxSize:           math.MaxInt32,
		Assignors:         assignor.Names(),
	}
}

// Validate checks the settings.
func (c Config) Validate() error {
	switch {
	case c.SessionTimeout < time.Second:
		return fmt.Errorf("%w: group.consumer.session.timeout.ms is %v, the least is 1s", ErrInvalidConfig, c.SessionTimeout)
	case c.MinSessionTimeout <= 0 || c.MaxSessionTimeout < c.MinSessionTimeout:
		return fmt.Errorf("%w: group.min.session.timeout.ms %v and group.max.session.timeout.ms %v: the least must be positive and not above the most", ErrInvalidConfig, c.MinSessionTimeout, c.MaxSessionTimeout)
	case c.HeartbeatInterval <= 0 || c.HeartbeatInterval >= c.SessionTimeout:
		return fmt.Errorf("%w: group.consumer.heartbeat.interval.ms is %v, it must be positive and below the session timeout %v", ErrInvalidConfig, c.HeartbeatInterval, c.SessionTimeout)
	case c.MaxSize < 1:
		return fmt.Errorf("%w: group.max.size is %d, the least is 1", ErrInvalidConfig, c.MaxSize)
	case len(c.Assignors) == 0:
		return fmt.Errorf("%w: group.consumer.assignors is empty", ErrInvalidConfig)
	}
	for i, name := range c.Assignors {
		if _, err := assignor.Lookup(name); err != nil {
			return fmt.Errorf("%w: group.consumer.assignors: %w", ErrInvalidConfig, err)
		}
		if slices.Index(c.Assignors, name) != i {
			return fmt.Errorf("%w: group.consumer.assignors names %q twice", ErrInvalidConfig, name)
		}
	}
	return nil
}

// MemberState is where a member is in its reconciliation. The values are
// written to the metadata log (MemberAssignment): never renumber them.
type MemberState int8

const (
	// MemberStable: the member has its target partitions at the target
	// epoch, or nothing is left to do.
	MemberStable MemberState = iota
	// MemberUnrevokedPartitions: the member must stop using some
	// partitions; it stays at its epoch until its heartbeat no longer
	// lists them.
	MemberUnrevokedPartitions
	// MemberUnreleasedPartitions: the member is at the target epoch but
	// some of its target partitions are still owned by other members.
	MemberUnreleasedPartitions
)

func (s MemberState) String() string {
	switch s {
	case MemberStable:
		return "stable"
	case MemberUnrevokedPartitions:
		return "unrevoked_partitions"
	case MemberUnreleasedPartitions:
		return "unreleased_partitions"
	}
	return fmt.Sprintf("MemberState(%d)", int8(s))
}

// GroupState is a group's state as Describe shows it.
type GroupState int8

const (
	GroupEmpty GroupState = iota
	GroupAssigning
	GroupReconciling
	GroupStable
)

func (s GroupState) String() string {
	switch s {
	case GroupEmpty:
		return "empty"
	case GroupAssigning:
		return "assigning"
	case GroupReconciling:
		return "reconciling"
	case GroupStable:
		return "stable"
	}
	return fmt.Sprintf("GroupState(%d)", int8(s))
}

// Machine is the state of every consumer group of one coordinator. It is
// not safe for concurrent use: the runtime calls it from one goroutine.
type Machine struct {
	cfg       Config
	assignors map[string]assignor.Assignor
	topics    map[string]int32 // every topic of the cluster
	groups    map[string]*group
	regexes   map[string]*regexp.Regexp // compiled, at most maxRegexes
	// matches caches the topics each expression matches, until the
	// topics change.
	matches map[string][]string
}

const maxRegexes = 4096

// New returns a Machine with no groups and no topics.
func New(cfg Config) (*Machine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Assignors = slices.Clone(cfg.Assignors)
	m := &Machine{
		cfg:       cfg,
		assignors: map[string]assignor.Assignor{},
		topics:    map[string]int32{},
		groups:    map[string]*group{},
		regexes:   map[string]*regexp.Regexp{},
		matches:   map[string][]string{},
	}
	for _, name := range cfg.Assignors {
		a, _ := assignor.Lookup(name) // checked by Validate
		m.assignors[name] = a
	}
	return m, nil
}

// ValidateGroupID checks a group id: 1 to MaxGroupIDLen bytes, no NUL.
func ValidateGroupID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: the group id is empty", ErrInvalidGroupID)
	case len(id) > MaxGroupIDLen:
		return fmt.Errorf("%w: the group id is %d bytes, the limit is %d", ErrInvalidGroupID, len(id), MaxGroupIDLen)
	case strings.IndexByte(id, 0) >= 0:
		return fmt.Errorf("%w: the group id %q holds a NUL byte", ErrInvalidGroupID, id)
	}
	return nil
}

func validateMemberID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: the member id is empty", ErrInvalidRequest)
	case len(id) > MaxMemberIDLen:
		return fmt.Errorf("%w: the member id is %d bytes, the limit is %d", ErrInvalidRequest, len(id), MaxMemberIDLen)
	case strings.IndexByte(id, 0) >= 0:
		return fmt.Errorf("%w: the member id %q holds a NUL byte", ErrInvalidRequest, id)
	}
	return nil
}

// validateInstanceID checks an instance id as Kafka checks
// group.instance.id: "" (a dynamic member), or 1 to MaxInstanceIDLen of
// ASCII letters, digits, '.', '_' and '-', neither "." nor "..".
func validateInstanceID(id string) error {
	switch {
	case len(id) > MaxInstanceIDLen:
		return fmt.Errorf("%w: the instance id is %d bytes, the limit is %d", ErrInvalidRequest, len(id), MaxInstanceIDLen)
	case id == "." || id == "..":
		return fmt.Errorf("%w: the instance id cannot be %q", ErrInvalidRequest, id)
	}
	for _, c := range []byte(id) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: the instance id %q holds %q: it may hold ASCII letters, digits, '.', '_' and '-'", ErrInvalidRequest, id, c)
		}
	}
	return nil
}

// regex compiles a subscription's regular expression (RE2 syntax),
// anchored to match whole topic names.
func (m *Machine) regex(expr string) (*regexp.Regexp, error) {
	if re, ok := m.regexes[expr]; ok {
		return re, nil
	}
	if _, err := regexp.Compile(expr); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidRegex, err)
	}
	re, err := regexp.Compile(`^(?:` + expr + `)$`)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %w", ErrInvalidRegex, expr, err)
	}
	if len(m.regexes) >= maxRegexes {
		clear(m.regexes)
	}
	m.regexes[expr] = re
	return re, nil
}
