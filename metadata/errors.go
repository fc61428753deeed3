package metadata

import (
	"errors"
	"fmt"
)

// Sentinel errors. Rejected commands come back from the FSM as one of these
// (wrapped with detail), so callers test them with errors.Is.
var (
	ErrNotController            = errors.New("metadata: not controller")
	ErrTopicExists              = errors.New("metadata: topic exists")
	ErrUnknownTopic             = errors.New("metadata: unknown topic or partition")
	ErrInvalidPartitions        = errors.New("metadata: invalid partitions")
	ErrInvalidReplicationFactor = errors.New("metadata: invalid replication factor")
	ErrUnknownBroker            = errors.New("metadata: unknown broker")
	ErrFencedBroker             = errors.New("metadata: fenced broker")
	ErrStaleEpoch               = errors.New("metadata: stale epoch")
	ErrNoQuorum                 = errors.New("metadata: no quorum")
	ErrClusterIDMismatch        = errors.New("metadata: cluster id mismatch")
	ErrShutdown                 = errors.New("metadata: node shut down")
	// ErrBrokerNotRemovable: UnregisterBroker of a broker that is alive
	// (unfenced, or heard from within the session timeout) or a voter.
	ErrBrokerNotRemovable = errors.New("metadata: broker cannot be unregistered")
	// ErrInvalidGroupID: a consumer group id that is empty, longer than
	// MaxGroupIDLen bytes or holds a NUL byte.
	ErrInvalidGroupID = errors.New("metadata: invalid group id")
	// ErrInvalidOffsetCommit: an offset commit entry with a negative
	// offset, a leader epoch below -1, metadata over MaxOffsetMetadataLen
	// bytes, or a partition named twice; or a commit of nothing or of
	// more than MaxOffsetCommitEntries entries.
	ErrInvalidOffsetCommit = errors.New("metadata: invalid offset commit")
	// ErrInvalidPartition: a group offset naming a partition below 0 or at
	// or past its topic's partition count: a request that fails the same
	// way however often it is sent (INVALID_REQUEST, as the broker answers
	// for such a partition in produce and fetch), unlike an unknown topic,
	// which may yet be created.
	ErrInvalidPartition = errors.New("metadata: invalid partition")
	// ErrUnknownGroup: a group with no committed offsets.
	ErrUnknownGroup = errors.New("metadata: unknown group")
	// ErrCommittedSince: a DeleteGroup of expired offsets refused because
	// one of them was committed after the retention decision.
	ErrCommittedSince = errors.New("metadata: offsets committed since")
	// ErrUnsupportedVersion: a command that needs a metadata.version above
	// the finalized one, or a broker registering with a range that does
	// not hold the finalized level. The message names the level and the
	// brokers that lack it.
	ErrUnsupportedVersion = errors.New("metadata: unsupported metadata.version")
	// ErrFeatureUpdateFailed: a feature level that cannot be finalized:
	// not above the current one, beyond what the controller supports, or
	// not supported by every registered broker (named in the message).
	ErrFeatureUpdateFailed = errors.New("metadata: feature update failed")
	// ErrUnknownCommand: a command this node's code does not know, written
	// by a newer one. The FSM answers it without applying it.
	ErrUnknownCommand = errors.New("metadata: unknown command")
	// ErrInvalidGroupRecords: a GroupRecords batch that does not fit the
	// groups' state (a coordinator bug or a newer writer's record type).
	ErrInvalidGroupRecords = errors.New("metadata: invalid group records")
	// ErrNotCoordinator: the group coordinator could not write a change
	// (or read the groups back); it rebuilds from the log, and the
	// request may be sent again.
	ErrNotCoordinator = errors.New("metadata: not the group coordinator")
	// ErrPartitionBudget: a topic create or partition increase that would
	// make a broker host more partition replicas than its
	// max.partitions.per.broker (named in the message with the numbers).
	ErrPartitionBudget = errors.New("metadata: partition budget exceeded")
	// ErrGroupSubscribedToTopic: an offset deletion of a partition of a
	// topic some member of the group is subscribed to (Kafka's
	// GROUP_SUBSCRIBED_TO_TOPIC): the member would commit it again.
	ErrGroupSubscribedToTopic = errors.New("metadata: group subscribed to topic")
	// ErrElectionNotNeeded: a preferred leader election of a partition
	// its preferred replica leads already.
	ErrElectionNotNeeded = errors.New("metadata: election not needed")
	// ErrPreferredLeaderNotAvailable: a preferred leader election of a
	// partition whose preferred replica is not alive or not in the ISR.
	ErrPreferredLeaderNotAvailable = errors.New("metadata: preferred leader not available")
	// ErrInvalidReassignment: a reassignment target that names no
	// replica, a broker twice, an unknown, fenced or cordoned broker, fewer
	// replicas than min.insync.replicas, or one that would leave the ISR
	// without enough of the replicas holding the committed records
	// (Kafka's INVALID_REPLICA_ASSIGNMENT). The whole request is refused.
	ErrInvalidReassignment = errors.New("metadata: invalid reassignment")
	// ErrNoReassignmentInProgress: a cancel of a partition that is not
	// being reassigned (Kafka's NO_REASSIGNMENT_IN_PROGRESS).
	ErrNoReassignmentInProgress = errors.New("metadata: no reassignment in progress")
)

// NotControllerError names the current controller, when known (LeaderID -1
// otherwise), so the caller can retry there.
type NotControllerError struct {
	LeaderID   int32
	LeaderAddr string
}

func (e *NotControllerError) Error() string {
	if e.LeaderID < 0 {
		return "metadata: not controller (controller unknown)"
	}
	return fmt.Sprintf("metadata: not controller (controller %d at %s)", e.LeaderID, e.LeaderAddr)
}

// Is makes errors.Is(err, ErrNotController) hold.
func (e *NotControllerError) Is(target error) bool { return target == ErrNotController }
