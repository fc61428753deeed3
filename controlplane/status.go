package controlplane

import (
	"context"
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/quirelog/quire/api/internalv1"
	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/group"
	"github.com/quirelog/quire/internal/errcode"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/txn"
)

// errorDomain names Quire's controller errors in google.rpc.ErrorInfo.
const errorDomain = "controller.quire"

// errorTable maps each metadata sentinel to the gRPC code and the reason
// carried in the status detail, so the far side gets the sentinel back,
// and to the quire.v1.ErrorCode a client sees for it (through the broker's
// table, which takes these rows from MetadataErrors). Whether that code is
// retriable is errcode's to say, not this table's.
var errorTable = []struct {
	err     error
	code    codes.Code
	errCode quirev1.ErrorCode
	reason  string
}{
	{metadata.ErrNotController, codes.FailedPrecondition, quirev1.ErrorCode_NOT_CONTROLLER, "NOT_CONTROLLER"},
	{metadata.ErrTopicExists, codes.AlreadyExists, quirev1.ErrorCode_TOPIC_ALREADY_EXISTS, "TOPIC_ALREADY_EXISTS"},
	{metadata.ErrUnknownTopic, codes.NotFound, quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, "UNKNOWN_TOPIC_OR_PARTITION"},
	{metadata.ErrInvalidPartitions, codes.InvalidArgument, quirev1.ErrorCode_INVALID_PARTITIONS, "INVALID_PARTITIONS"},
	{metadata.ErrInvalidReplicationFactor, codes.InvalidArgument, quirev1.ErrorCode_INVALID_REPLICATION_FACTOR, "INVALID_REPLICATION_FACTOR"},
	// A broker pushed past its max.partitions.per.broker: the cluster's
	// policy, not a malformed request, and not retriable as it stands.
	{metadata.ErrPartitionBudget, codes.FailedPrecondition, quirev1.ErrorCode_POLICY_VIOLATION, "POLICY_VIOLATION"},
	// An id no broker registered (an assignment naming it, unregistering
	// it): the same answer every time, so not BROKER_NOT_AVAILABLE.
	{metadata.ErrUnknownBroker, codes.NotFound, quirev1.ErrorCode_BROKER_ID_NOT_REGISTERED, "UNKNOWN_BROKER"},
	{metadata.ErrFencedBroker, codes.FailedPrecondition, quirev1.ErrorCode_BROKER_NOT_AVAILABLE, "STALE_BROKER_EPOCH"},
	{metadata.ErrStaleEpoch, codes.FailedPrecondition, quirev1.ErrorCode_STALE_BROKER_EPOCH, "STALE_EPOCH"},
	{metadata.ErrNoQuorum, codes.Unavailable, quirev1.ErrorCode_NOT_CONTROLLER, "NO_QUORUM"},
	{metadata.ErrShutdown, codes.Unavailable, quirev1.ErrorCode_BROKER_NOT_AVAILABLE, "SHUTTING_DOWN"},
	{metadata.ErrClusterIDMismatch, codes.FailedPrecondition, quirev1.ErrorCode_INVALID_REQUEST, "CLUSTER_ID_MISMATCH"},
	{metadata.ErrBrokerNotRemovable, codes.FailedPrecondition, quirev1.ErrorCode_INVALID_REQUEST, "BROKER_NOT_REMOVABLE"},
	{metadata.ErrInvalidGroupID, codes.InvalidArgument, quirev1.ErrorCode_INVALID_GROUP_ID, "INVALID_GROUP_ID"},
	{metadata.ErrInvalidOffsetCommit, codes.InvalidArgument, quirev1.ErrorCode_INVALID_REQUEST, "INVALID_OFFSET_COMMIT"},
	{metadata.ErrInvalidPartition, codes.InvalidArgument, quirev1.ErrorCode_INVALID_REQUEST, "INVALID_PARTITION"},
	{metadata.ErrInvalidShareGroupConfig, codes.InvalidArgument, quirev1.ErrorCode_INVALID_CONFIG, "INVALID_CONFIG"},
	{metadata.ErrUnknownGroup, codes.NotFound, quirev1.ErrorCode_GROUP_ID_NOT_FOUND, "GROUP_ID_NOT_FOUND"},
	{metadata.ErrGroupSubscribedToTopic, codes.FailedPrecondition, quirev1.ErrorCode_GROUP_SUBSCRIBED_TO_TOPIC, "GROUP_SUBSCRIBED_TO_TOPIC"},
	{metadata.ErrElectionNotNeeded, codes.FailedPrecondition, quirev1.ErrorCode_ELECTION_NOT_NEEDED, "ELECTION_NOT_NEEDED"},
	{metadata.ErrPreferredLeaderNotAvailable, codes.Unavailable, quirev1.ErrorCode_PREFERRED_LEADER_NOT_AVAILABLE, "PREFERRED_LEADER_NOT_AVAILABLE"},
	// Partition reassignment: a target the controller refuses, whole.
	{metadata.ErrInvalidReassignment, codes.InvalidArgument, quirev1.ErrorCode_INVALID_REPLICA_ASSIGNMENT, "INVALID_REPLICA_ASSIGNMENT"},
	{metadata.ErrNoReassignmentInProgress, codes.FailedPrecondition, quirev1.ErrorCode_NO_REASSIGNMENT_IN_PROGRESS, "NO_REASSIGNMENT_IN_PROGRESS"},
	// A share-partition's state saved by a node that no longer leads the
	// partition: the member asks the new leader.
	{metadata.ErrShareStateFenced, codes.FailedPrecondition, quirev1.ErrorCode_NOT_LEADER_OR_FOLLOWER, "SHARE_STATE_FENCED"},
	{metadata.ErrUnsupportedVersion, codes.FailedPrecondition, quirev1.ErrorCode_UNSUPPORTED_VERSION, "UNSUPPORTED_VERSION"},
	{metadata.ErrFeatureUpdateFailed, codes.FailedPrecondition, quirev1.ErrorCode_FEATURE_UPDATE_FAILED, "FEATURE_UPDATE_FAILED"},
	// A command this node's code does not know: a version mismatch, not a crash.
	{metadata.ErrUnknownCommand, codes.FailedPrecondition, quirev1.ErrorCode_UNSUPPORTED_VERSION, "UNKNOWN_COMMAND"},
	// A coordinator that could not write (or replay) group records
	// rebuilds from the log; the member sends its heartbeat again.
	{metadata.ErrNotCoordinator, codes.Unavailable, quirev1.ErrorCode_NOT_COORDINATOR, "NOT_COORDINATOR"},
	{metadata.ErrInvalidGroupRecords, codes.Unavailable, quirev1.ErrorCode_NOT_COORDINATOR, "INVALID_GROUP_RECORDS"},
	// SCRAM users and ACLs (metadata/security.go).
	{metadata.ErrUnknownUser, codes.NotFound, quirev1.ErrorCode_RESOURCE_NOT_FOUND, "UNKNOWN_USER"},
	{metadata.ErrInvalidUser, codes.InvalidArgument, quirev1.ErrorCode_INVALID_REQUEST, "INVALID_USER"},
	{metadata.ErrInvalidACL, codes.InvalidArgument, quirev1.ErrorCode_INVALID_REQUEST, "INVALID_ACL"},
	// The consumer group state machine's errors, from the coordinator.
	{group.ErrInvalidGroupID, codes.InvalidArgument, quirev1.ErrorCode_INVALID_GROUP_ID, "GROUP_INVALID_GROUP_ID"},
	{group.ErrInvalidRequest, codes.InvalidArgument, quirev1.ErrorCode_INVALID_REQUEST, "GROUP_INVALID_REQUEST"},
	{group.ErrUnknownMemberID, codes.FailedPrecondition, quirev1.ErrorCode_UNKNOWN_MEMBER_ID, "UNKNOWN_MEMBER_ID"},
	{group.ErrFencedMemberEpoch, codes.FailedPrecondition, quirev1.ErrorCode_FENCED_MEMBER_EPOCH, "FENCED_MEMBER_EPOCH"},
	{group.ErrStaleMemberEpoch, codes.FailedPrecondition, quirev1.ErrorCode_STALE_MEMBER_EPOCH, "STALE_MEMBER_EPOCH"},
	{group.ErrUnsupportedAssignor, codes.InvalidArgument, quirev1.ErrorCode_UNSUPPORTED_ASSIGNOR, "UNSUPPORTED_ASSIGNOR"},
	{group.ErrInvalidRegex, codes.InvalidArgument, quirev1.ErrorCode_INVALID_REGULAR_EXPRESSION, "INVALID_REGULAR_EXPRESSION"},
	{group.ErrGroupMaxSizeReached, codes.ResourceExhausted, quirev1.ErrorCode_GROUP_MAX_SIZE_REACHED, "GROUP_MAX_SIZE_REACHED"},
	{group.ErrUnknownGroup, codes.NotFound, quirev1.ErrorCode_GROUP_ID_NOT_FOUND, "GROUP_UNKNOWN_GROUP"},
	{group.ErrFencedInstanceID, codes.FailedPrecondition, quirev1.ErrorCode_FENCED_INSTANCE_ID, "FENCED_INSTANCE_ID"},
	{group.ErrIllegalGeneration, codes.FailedPrecondition, quirev1.ErrorCode_ILLEGAL_GENERATION, "ILLEGAL_GENERATION"},
	{group.ErrInvalidSessionTimeout, codes.InvalidArgument, quirev1.ErrorCode_INVALID_SESSION_TIMEOUT, "INVALID_SESSION_TIMEOUT"},
	{group.ErrNonEmptyGroup, codes.FailedPrecondition, quirev1.ErrorCode_NON_EMPTY_GROUP, "NON_EMPTY_GROUP"},
	// Only the retention expiry of a group's offsets meets this one (the
	// coordinator keeps the offsets); named so that no path leaves it
	// unnamed.
	{metadata.ErrCommittedSince, codes.FailedPrecondition, quirev1.ErrorCode_NON_EMPTY_GROUP, "OFFSETS_COMMITTED_SINCE"},
	{group.ErrInvalidConfig, codes.InvalidArgument, quirev1.ErrorCode_INVALID_CONFIG, "GROUP_INVALID_CONFIG"},
	{group.ErrInvalidRecord, codes.Unavailable, quirev1.ErrorCode_NOT_COORDINATOR, "GROUP_INVALID_RECORD"},
	// The transaction state machine's errors, from the coordinator.
	// CONCURRENT_TRANSACTIONS goes back to the client, which retries it
	// itself (as Kafka's clients do), not the forwarder.
	{txn.ErrConcurrentTransactions, codes.FailedPrecondition, quirev1.ErrorCode_CONCURRENT_TRANSACTIONS, "CONCURRENT_TRANSACTIONS"},
	{txn.ErrProducerFenced, codes.FailedPrecondition, quirev1.ErrorCode_PRODUCER_FENCED, "PRODUCER_FENCED"},
	{txn.ErrInvalidProducerIDMapping, codes.FailedPrecondition, quirev1.ErrorCode_INVALID_PRODUCER_ID_MAPPING, "INVALID_PRODUCER_ID_MAPPING"},
	{txn.ErrInvalidTxnState, codes.FailedPrecondition, quirev1.ErrorCode_INVALID_TXN_STATE, "INVALID_TXN_STATE"},
	{txn.ErrInvalidTimeout, codes.InvalidArgument, quirev1.ErrorCode_INVALID_TRANSACTION_TIMEOUT, "INVALID_TRANSACTION_TIMEOUT"},
	{txn.ErrInvalidTransactionalID, codes.InvalidArgument, quirev1.ErrorCode_INVALID_REQUEST, "INVALID_TRANSACTIONAL_ID"},
}

// MetadataErrors is how each metadata sentinel reaches a client: its gRPC
// code and quire.v1.ErrorCode. The broker's error table takes these rows,
// so each metadata sentinel is mapped in this one place.
func MetadataErrors() []errcode.Mapping {
	out := make([]errcode.Mapping, len(errorTable))
	for i, e := range errorTable {
		out[i] = errcode.Mapping{Err: e.err, GRPC: e.code, Code: e.errCode}
	}
	return out
}

// toStatus turns a metadata error into a gRPC status error.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, metadata.ErrNoQuorum) {
		return status.Error(codes.DeadlineExceeded, errcode.Message(err.Error()))
	}
	if errors.Is(err, context.Canceled) && !errors.Is(err, metadata.ErrNoQuorum) {
		return status.Error(codes.Canceled, errcode.Message(err.Error()))
	}
	for _, e := range errorTable {
		if !errors.Is(err, e.err) {
			continue
		}
		st := status.New(e.code, errcode.Message(err.Error()))
		info := &errdetails.ErrorInfo{Reason: e.reason, Domain: errorDomain}
		var withD *status.Status
		var derr error
		var nc *metadata.NotControllerError
		if errors.As(err, &nc) {
			withD, derr = st.WithDetails(info, &pb.NotController{ControllerId: nc.LeaderID, ControllerAddr: nc.LeaderAddr})
		} else {
			withD, derr = st.WithDetails(info)
		}
		if derr == nil {
			st = withD
		}
		return st.Err()
	}
	return status.Error(codes.Internal, errcode.Message(err.Error()))
}

// remoteError is a metadata error that came back over gRPC: it reads as
// the far side's message and unwraps to the sentinel.
type remoteError struct {
	msg      string
	sentinel error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.sentinel }

// fromStatus turns a gRPC error from ControllerService back into the
// metadata error it stood for; transport errors are returned as they are.
func fromStatus(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	var reason string
	var nc *pb.NotController
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			if d.Domain == errorDomain {
				reason = d.Reason
			}
		case *pb.NotController:
			nc = d
		}
	}
	if nc != nil {
		return &metadata.NotControllerError{LeaderID: nc.ControllerId, LeaderAddr: nc.ControllerAddr}
	}
	for _, e := range errorTable {
		if e.reason == reason {
			return &remoteError{msg: st.Message(), sentinel: e.err}
		}
	}
	return err
}

// retriable reports whether the forwarder should send a call again, to
// whichever node leads by then: the controller moved or is being elected,
// or the node could not be reached. It is narrower than the retriability of
// the error's code (errcode), which says whether the caller may try again
// later: an unknown topic's code is retriable, yet the forwarder answers it
// at once. A test holds every error retried here to a retriable code.
func retriable(err error) bool {
	if errors.Is(err, metadata.ErrNotController) || errors.Is(err, metadata.ErrNoQuorum) || errors.Is(err, metadata.ErrShutdown) {
		return true
	}
	var re *remoteError
	if errors.As(err, &re) {
		return false
	}
	if st, ok := status.FromError(err); ok {
		switch st.Code() {
		case codes.Unavailable, codes.Unknown, codes.Aborted:
			return true
		}
	}
	return false
}
