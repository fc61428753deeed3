package service

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/controlplane"
	"github.com/quirelog/quire/internal/errcode"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/record"
	"github.com/quirelog/quire/replica"
	"github.com/quirelog/quire/request"
	"github.com/quirelog/quire/share"
	"github.com/quirelog/quire/sharegroup"
	"github.com/quirelog/quire/storage"
)

// Broker errors. Wrap them with %w and context (the topic, the partition,
// the bad value); the table below turns any of them, or the storage,
// record and metadata sentinels, into a gRPC status and a quire.v1.Error.
// Those the replicas raise too are the replica package's own.
var (
	ErrUnknownTopicOrPartition      = replica.ErrUnknownTopicOrPartition
	ErrInvalidTopic                 = request.ErrInvalidTopic
	ErrInvalidPartitions            = request.ErrInvalidPartitions
	ErrInvalidReplicationFactor     = request.ErrInvalidReplicationFactor
	ErrInvalidConfig                = request.ErrInvalidConfig
	ErrInvalidRequest               = replica.ErrInvalidRequest
	ErrInvalidRequiredAcks          = request.ErrInvalidRequiredAcks
	ErrNotLeader                    = replica.ErrNotLeader
	ErrLeaderNotAvailable           = replica.ErrLeaderNotAvailable
	ErrNotEnoughReplicas            = replica.ErrNotEnoughReplicas
	ErrNotEnoughReplicasAfterAppend = replica.ErrNotEnoughReplicasAfterAppend
	ErrBrokersNotReady              = request.ErrBrokersNotReady
	ErrRequestTimedOut              = replica.ErrRequestTimedOut
	ErrFencedLeaderEpoch            = replica.ErrFencedLeaderEpoch
	ErrUnknownLeaderEpoch           = replica.ErrUnknownLeaderEpoch
	ErrPolicyViolation              = request.ErrPolicyViolation
	ErrShuttingDown                 = errors.New("broker: shutting down")
	ErrStaleBrokerEpoch             = replica.ErrStaleBrokerEpoch
)

// Authentication and authorization errors.
var (
	// ErrAuthenticationFailed: a wrong password, or an unknown or deleted
	// user (the answer does not say which).
	ErrAuthenticationFailed = errors.New("broker: authentication failed")
	// ErrTopicAuthorizationFailed, ErrGroupAuthorizationFailed and
	// ErrClusterAuthorizationFailed: the principal lacks the ACL; the
	// message names principal, operation and resource.
	ErrTopicAuthorizationFailed   = request.ErrTopicAuthorizationFailed
	ErrGroupAuthorizationFailed   = request.ErrGroupAuthorizationFailed
	ErrClusterAuthorizationFailed = request.ErrClusterAuthorizationFailed
)

// errorMapping is one row of the error table; retriable is always the
// retriability errcode declares for code.
type errorMapping struct {
	err       error
	grpc      codes.Code
	code      quirev1.ErrorCode
	retriable bool
}

// brokerErrors, storageErrors and recordErrors say which code each
// sentinel reaches clients as; the metadata rows come from the controller's
// table, so a metadata error reads the same from either. None says whether
// its code is retriable: errcode declares that once per code. A test fails
// when an exported sentinel of these packages has no row.
var brokerErrors = []errcode.Mapping{
	{Err: ErrUnknownTopicOrPartition, GRPC: codes.NotFound, Code: quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION},
	{Err: ErrInvalidTopic, GRPC: codes.InvalidArgument, Code: quirev1.ErrorCode_INVALID_TOPIC_EXCEPTION},
	{Err: ErrInvalidPartitions, GRPC: codes.InvalidArgument, Code: quirev1.ErrorCode_INVALID_PARTITIONS},
	{Err: ErrInvalidReplicationFactor, GRPC: codes.InvalidArgument, Code: quirev1.ErrorCode_INVALID_REPLICATION_FACTOR},
	{Err: ErrInvalidConfig, GRPC: codes.InvalidArgument, Code: quirev1.ErrorCode_INVALID_CONFIG},
	{Err: ErrInvalidRequest, GRPC: codes.InvalidArgument, Code: quirev1.ErrorCode_INVALID_REQUEST},
	{Err: ErrInvalidRequiredAcks, GRPC: codes.InvalidArgument, Code: quirev1.ErrorCode_INVALID_REQUIRED_ACKS},
	{Err: ErrNotLeader, GRPC: codes.FailedPrecondition, Code: quirev1.ErrorCode_NOT_LEADER_OR_FOLLOWER},
	{Err: ErrLeaderNotAvailable, GRPC: codes.Unavailable, Code: quirev1.ErrorCode_LEADER_NOT_AVAILABLE},
	{Err: ErrNotEnoughReplicas, GRPC: codes.Unavailable, Code: quirev1.ErrorCode_NOT_ENOUGH_REPLICAS},
	{Err: ErrNotEnoughReplicasAfterAppend, GRPC: codes.Unavailable, Code: quirev1.ErrorCode_NOT_ENOUGH_REPLICAS_AFTER_APPEND},
	{Err: ErrRequestTimedOut, GRPC: codes.DeadlineExceeded, Code: quirev1.ErrorCode_REQUEST_TIMED_OUT},
	{Err: ErrFencedLeaderEpoch, GRPC: codes.FailedPrecondition, Code: quirev1.ErrorCode_FENCED_LEADER_EPOCH},
	{Err: ErrUnknownLeaderEpoch, GRPC: codes.FailedPrecondition, Code: quirev1.ErrorCode_UNKNOWN_LEADER_EPOCH},
	{Err: ErrPolicyViolation, GRPC: codes.FailedPrecondition, Code: quirev1.ErrorCode_POLICY_VIOLATION},
	{Err: ErrShuttingDown, GRPC: codes.Unavailable, Code: quirev1.ErrorCode_BROKER_NOT_AVAILABLE},
	// A follower fetching with an incarnation the controller no longer
	// has: it must register again, so not retriable (as in Kafka).
	{Err: ErrStaleBrokerEpoch, GRPC: codes.FailedPrecondition, Code: quirev1.ErrorCode_STALE_BROKER_EPOCH},
	{Err: ErrBrokersNotReady, GRPC: codes.Unavailable, Code: quirev1.ErrorCode_BROKER_NOT_AVAILABLE},
	// A partition's leader that the request core could not reach to pass
	// a request on: the client looks for the leader again.
	{Err: request.ErrLeaderUnreachable, GRPC: codes.Unavailable, Code: quirev1.ErrorCode_NOT_LEADER_OR_FOLLOWER},
	// A transactional batch: there is no transaction coordinator, and a
	// retry would be refused the same way.
	{Err: request.ErrTransactionsUnsupported, GRPC: codes.FailedPrecondition, Code: quirev1.ErrorCode_UNSUPPORTED_VERSION},
	{Err: request.ErrTransactionalIDNotFound, GRPC: codes.NotFound, Code: quirev1.ErrorCode_TRANSACTIONAL_ID_NOT_FOUND},
	// Authentication and ACLs (auth.go, authz.go): the same answer every
	// time until an ACL or the credentials change.
	{Err: ErrAuthenticationFailed, GRPC: codes.Unauthenticated, Code: quirev1.ErrorCode_SASL_AUTHENTICATION_FAILED},
	{Err: ErrTopicAuthorizationFailed, GRPC: codes.PermissionDenied, Code: quirev1.ErrorCode_TOPIC_AUTHORIZATION_FAILED},
	{Err: ErrGroupAuthorizationFailed, GRPC: codes.PermissionDenied, Code: quirev1.ErrorCode_GROUP_AUTHORIZATION_FAILED},
	{Err: ErrClusterAuthorizationFailed, GRPC: codes.PermissionDenied, Code: quirev1.ErrorCode_CLUSTER_AUTHORIZATION_FAILED},
	// The controller refused a leader's ISR change: a newer leader or
	// partition epoch took over, so this broker's leadership is moving.
	{Err: replica.ErrOffsetNotAvailable, GRPC: codes.Unavailable, Code: quirev1.ErrorCode_OFFSET_NOT_AVAILABLE},
	{Err: replica.ErrISRRefused, GRPC: codes.FailedPrecondition, Code: quirev1.ErrorCode_NOT_LEADER_OR_FOLLOWER},
	// Share groups (request/share.go): a member the share coordinator
	// does not know must join again; an acknowledgement of a record the
	// member does not hold fails the same way every time.
	{Err: request.ErrShareGroupsDisabled, GRPC: codes.Unimplemented, Code: quirev1.ErrorCode_UNSUPPORTED_VERSION},
	{Err: request.ErrShareGroupNotFound, GRPC: codes.NotFound, Code: quirev1.ErrorCode_GROUP_ID_NOT_FOUND},
	// A share group's settings below metadata.version 16 (a cluster in
	// the middle of an upgrade): the same answer until it is raised.
	{Err: request.ErrShareConfigUnsupported, GRPC: codes.FailedPrecondition, Code: quirev1.ErrorCode_UNSUPPORTED_VERSION},
	{Err: request.ErrShareOffsetsUnsupported, GRPC: codes.FailedPrecondition, Code: quirev1.ErrorCode_UNSUPPORTED_VERSION},
	{Err: sharegroup.ErrUnknownMember, GRPC: codes.NotFound, Code: quirev1.ErrorCode_UNKNOWN_MEMBER_ID},
	// A partition leader could not learn from the other nodes whether a
	// member is in its group: it asks again at the next call.
	{Err: request.ErrShareMemberUnconfirmed, GRPC: codes.Unavailable, Code: quirev1.ErrorCode_COORDINATOR_NOT_AVAILABLE},
	{Err: sharegroup.ErrFencedMemberEpoch, GRPC: codes.FailedPrecondition, Code: quirev1.ErrorCode_FENCED_MEMBER_EPOCH},
	{Err: sharegroup.ErrInvalidRequest, GRPC: codes.InvalidArgument, Code: quirev1.ErrorCode_INVALID_REQUEST},
	{Err: sharegroup.ErrStateNotSaved, GRPC: codes.FailedPrecondition, Code: quirev1.ErrorCode_NOT_LEADER_OR_FOLLOWER},
	{Err: share.ErrInvalidRecordState, GRPC: codes.FailedPrecondition, Code: quirev1.ErrorCode_INVALID_RECORD_STATE},
	{Err: share.ErrInvalidRequest, GRPC: codes.InvalidArgument, Code: quirev1.ErrorCode_INVALID_REQUEST},
	{Err: share.ErrInvalidConfig, GRPC: codes.InvalidArgument, Code: quirev1.ErrorCode_INVALID_CONFIG},
}

// recordErrors come first among the batch errors: a CRC mismatch is
// CORRUPT_MESSAGE, which a resend can cure (retriable, as in Kafka); any
// other malformed batch is INVALID_RECORD and fails the same way every
// time. storage.ErrCorruptBatch wraps the record error, so the record rows
// decide for it.
var recordErrors = []errcode.Mapping{
	{Err: record.ErrBadCRC, GRPC: codes.InvalidArgument, Code: quirev1.ErrorCode_CORRUPT_MESSAGE},
	{Err: record.ErrCorrupt, GRPC: codes.InvalidArgument, Code: quirev1.ErrorCode_INVALID_RECORD},
}

var storageErrors = []errcode.Mapping{
	{Err: storage.ErrOffsetOutOfRange, GRPC: codes.OutOfRange, Code: quirev1.ErrorCode_OFFSET_OUT_OF_RANGE},
	// The idempotent producer's sequence rules; none is retriable as sent
	// (as in Kafka): the producer must bump its epoch or start over.
	{Err: storage.ErrOutOfOrderSequence, GRPC: codes.FailedPrecondition, Code: quirev1.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER},
	{Err: storage.ErrInvalidProducerEpoch, GRPC: codes.FailedPrecondition, Code: quirev1.ErrorCode_INVALID_PRODUCER_EPOCH},
	{Err: storage.ErrUnknownProducerID, GRPC: codes.FailedPrecondition, Code: quirev1.ErrorCode_UNKNOWN_PRODUCER_ID},
	{Err: storage.ErrDuplicateSequence, GRPC: codes.InvalidArgument, Code: quirev1.ErrorCode_DUPLICATE_SEQUENCE_NUMBER},
	{Err: storage.ErrRecordTooLarge, GRPC: codes.InvalidArgument, Code: quirev1.ErrorCode_MESSAGE_TOO_LARGE},
	{Err: storage.ErrCorruptBatch, GRPC: codes.InvalidArgument, Code: quirev1.ErrorCode_INVALID_RECORD},
	{Err: storage.ErrNoKey, GRPC: codes.InvalidArgument, Code: quirev1.ErrorCode_INVALID_RECORD},
	{Err: storage.ErrLogFailed, GRPC: codes.Internal, Code: quirev1.ErrorCode_KAFKA_STORAGE_ERROR},
	{Err: storage.ErrOffsetOverlap, GRPC: codes.Internal, Code: quirev1.ErrorCode_KAFKA_STORAGE_ERROR},
	{Err: storage.ErrOffsetGap, GRPC: codes.Internal, Code: quirev1.ErrorCode_KAFKA_STORAGE_ERROR},
	{Err: storage.ErrInjected, GRPC: codes.Internal, Code: quirev1.ErrorCode_KAFKA_STORAGE_ERROR},
	{Err: storage.ErrBadCheckpoint, GRPC: codes.Internal, Code: quirev1.ErrorCode_KAFKA_STORAGE_ERROR},
	{Err: storage.ErrBadMetaProperties, GRPC: codes.Internal, Code: quirev1.ErrorCode_KAFKA_STORAGE_ERROR},
	// The log holds batches of a newer leader epoch than this replica
	// leads at: another broker leads now, so the client refreshes its
	// metadata and retries there.
	{Err: storage.ErrStaleEpoch, GRPC: codes.FailedPrecondition, Code: quirev1.ErrorCode_NOT_LEADER_OR_FOLLOWER},
	{Err: storage.ErrClosed, GRPC: codes.Unavailable, Code: quirev1.ErrorCode_NOT_LEADER_OR_FOLLOWER},
	{Err: storage.ErrInvalidConfig, GRPC: codes.InvalidArgument, Code: quirev1.ErrorCode_INVALID_CONFIG},
	// Transactions on a partition leader.
	{Err: storage.ErrInvalidTxnState, GRPC: codes.FailedPrecondition, Code: quirev1.ErrorCode_INVALID_TXN_STATE},
	{Err: storage.ErrCoordinatorFenced, GRPC: codes.FailedPrecondition, Code: quirev1.ErrorCode_TRANSACTION_COORDINATOR_FENCED},
	{Err: storage.ErrOpenTransaction, GRPC: codes.FailedPrecondition, Code: quirev1.ErrorCode_INVALID_TXN_STATE},
}

var contextErrors = []errcode.Mapping{
	{Err: context.DeadlineExceeded, GRPC: codes.DeadlineExceeded, Code: quirev1.ErrorCode_REQUEST_TIMED_OUT},
	{Err: context.Canceled, GRPC: codes.Canceled, Code: quirev1.ErrorCode_REQUEST_TIMED_OUT},
}

// errorTable maps internal errors to what clients see. The first row whose
// err matches (errors.Is) wins, so specific errors come before general ones.
var errorTable = deriveTable(brokerErrors, recordErrors, storageErrors, controlplane.MetadataErrors(), contextErrors)

func deriveTable(groups ...[]errcode.Mapping) []errorMapping {
	var t []errorMapping
	for _, g := range groups {
		for _, m := range g {
			t = append(t, errorMapping{err: m.Err, grpc: m.GRPC, code: m.Code, retriable: m.Retriable()})
		}
	}
	return t
}

// lookupError finds err's row; unknown errors are internal and not retriable.
func lookupError(err error) errorMapping {
	for _, m := range errorTable {
		if errors.Is(err, m.err) {
			return m
		}
	}
	unknown := quirev1.ErrorCode_UNKNOWN_SERVER_ERROR
	return errorMapping{err: err, grpc: codes.Internal, code: unknown, retriable: errcode.Retriable(unknown)}
}

// toError is the inline form, for one partition of a response; nil for nil.
func toError(err error) *quirev1.Error {
	if err == nil {
		return nil
	}
	var re *request.Error
	if errors.As(err, &re) && re.Err == nil {
		// A leader's answer passed on: its code as it gave it.
		code := quirev1.ErrorCode(re.Code)
		return &quirev1.Error{Code: code, Message: errcode.Message(re.Message), Retriable: errcode.Retriable(code),
			LeaderId: re.LeaderID, LeaderEpoch: re.LeaderEpoch, OutcomeUnknown: re.OutcomeUnknown}
	}
	m := lookupError(err)
	e := &quirev1.Error{Code: m.code, Message: errcode.Message(err.Error()), Retriable: m.retriable, LeaderId: -1, LeaderEpoch: -1}
	if re != nil {
		e.OutcomeUnknown = re.OutcomeUnknown
	}
	var nle *replica.NotLeaderError
	if errors.As(err, &nle) {
		e.LeaderId, e.LeaderEpoch = nle.Leader, nle.Epoch
	}
	var nce *metadata.NotControllerError
	if errors.As(err, &nce) {
		e.LeaderId = nce.LeaderID
	}
	return e
}

// toStatus is the whole-call form: a gRPC status with the Error in its
// details. A status error passes through unchanged.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	// A status made here passes through; one wrapped inside another error
	// (a peer's transport failure under a forwarded write) does not: the
	// table decides what the client sees.
	if _, ok := err.(interface{ GRPCStatus() *status.Status }); ok {
		return err
	}
	return errcode.Status(grpcCode(err), toError(err))
}

// grpcCode is the status code of a whole call failed with err: the
// table's, or for a leader's answer passed on, the table's for its code.
func grpcCode(err error) codes.Code {
	var re *request.Error
	if errors.As(err, &re) && re.Err == nil {
		for _, m := range errorTable {
			if int32(m.code) == re.Code {
				return m.grpc
			}
		}
		return codes.Internal
	}
	return lookupError(err).grpc
}

// notLeader says which broker leads topic-p, when this one does not (see
// replica.NotLeaderError).
func notLeader(topic string, p, leader, epoch int32) error {
	return &replica.NotLeaderError{Topic: topic, Partition: p, Leader: leader, Epoch: epoch}
}

// Status is err as a whole call's gRPC status, with its quire.v1.Error
// in the details (a status error passes through).
func Status(err error) error { return toStatus(err) }

// ErrorOf is err as an inline quire.v1.Error, its code from the error
// table; nil for nil.
func ErrorOf(err error) *quirev1.Error { return toError(err) }

// FromError is the inverse of ErrorOf for a call passed on to another
// node: that node's inline error as the request core's, its code and
// leader hint kept as they came; nil for nil.
func FromError(e *quirev1.Error) error {
	if e == nil {
		return nil
	}
	return &request.Error{Code: int32(e.Code), Message: e.Message, LeaderID: e.LeaderId, LeaderEpoch: e.LeaderEpoch, OutcomeUnknown: e.OutcomeUnknown}
}

// Code is the code err reaches clients as (its row of the error table;
// UNKNOWN_SERVER_ERROR for none).
func Code(err error) quirev1.ErrorCode { return lookupError(err).code }
