package broker

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/record"
	"github.com/quirelog/quire/storage"
)

// Broker errors. Wrap them with %w and context (the topic, the partition,
// the bad value); the table below turns any of them, or the storage,
// record and metadata sentinels, into a gRPC status and a quire.v1.Error.
var (
	ErrUnknownTopicOrPartition      = errors.New("broker: unknown topic or partition")
	ErrInvalidTopic                 = errors.New("broker: invalid topic")
	ErrInvalidPartitions            = errors.New("broker: invalid partitions")
	ErrInvalidReplicationFactor     = errors.New("broker: invalid replication factor")
	ErrInvalidConfig                = errors.New("broker: invalid config")
	ErrInvalidRequest               = errors.New("broker: invalid request")
	ErrInvalidRequiredAcks          = errors.New("broker: invalid required acks")
	ErrNotLeader                    = errors.New("broker: not leader or follower")
	ErrLeaderNotAvailable           = errors.New("broker: leader not available")
	ErrNotEnoughReplicas            = errors.New("broker: not enough replicas")
	ErrNotEnoughReplicasAfterAppend = errors.New("broker: not enough replicas after append")
	ErrBrokersNotReady              = errors.New("broker: no live brokers")
	ErrRequestTimedOut              = errors.New("broker: request timed out")
	ErrFencedLeaderEpoch            = errors.New("broker: fenced leader epoch")
	ErrUnknownLeaderEpoch           = errors.New("broker: unknown leader epoch")
	ErrPolicyViolation              = errors.New("broker: policy violation")
	ErrShuttingDown                 = errors.New("broker: shutting down")
	ErrStaleBrokerEpoch             = errors.New("broker: stale broker epoch")
)

// errorMapping is one row of the error table.
type errorMapping struct {
	err       error
	grpc      codes.Code
	code      quirev1.ErrorCode
	retriable bool
}

// errorTable maps internal errors to what clients see. The first row whose
// err matches (errors.Is) wins, so put specific errors before general ones.
var errorTable = []errorMapping{
	// broker
	{ErrUnknownTopicOrPartition, codes.NotFound, quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, true},
	{ErrInvalidTopic, codes.InvalidArgument, quirev1.ErrorCode_INVALID_TOPIC_EXCEPTION, false},
	{ErrInvalidPartitions, codes.InvalidArgument, quirev1.ErrorCode_INVALID_PARTITIONS, false},
	{ErrInvalidReplicationFactor, codes.InvalidArgument, quirev1.ErrorCode_INVALID_REPLICATION_FACTOR, false},
	{ErrInvalidConfig, codes.InvalidArgument, quirev1.ErrorCode_INVALID_CONFIG, false},
	{ErrInvalidRequest, codes.InvalidArgument, quirev1.ErrorCode_INVALID_REQUEST, false},
	{ErrInvalidRequiredAcks, codes.InvalidArgument, quirev1.ErrorCode_INVALID_REQUIRED_ACKS, false},
	{ErrNotLeader, codes.FailedPrecondition, quirev1.ErrorCode_NOT_LEADER_OR_FOLLOWER, true},
	{ErrLeaderNotAvailable, codes.Unavailable, quirev1.ErrorCode_LEADER_NOT_AVAILABLE, true},
	{ErrNotEnoughReplicas, codes.Unavailable, quirev1.ErrorCode_NOT_ENOUGH_REPLICAS, true},
	{ErrNotEnoughReplicasAfterAppend, codes.Unavailable, quirev1.ErrorCode_NOT_ENOUGH_REPLICAS_AFTER_APPEND, true},
	{ErrRequestTimedOut, codes.DeadlineExceeded, quirev1.ErrorCode_REQUEST_TIMED_OUT, true},
	{ErrFencedLeaderEpoch, codes.FailedPrecondition, quirev1.ErrorCode_FENCED_LEADER_EPOCH, true},
	{ErrUnknownLeaderEpoch, codes.FailedPrecondition, quirev1.ErrorCode_UNKNOWN_LEADER_EPOCH, true},
	{ErrPolicyViolation, codes.FailedPrecondition, quirev1.ErrorCode_POLICY_VIOLATION, false},
	{ErrShuttingDown, codes.Unavailable, quirev1.ErrorCode_BROKER_NOT_AVAILABLE, true},
	{ErrStaleBrokerEpoch, codes.FailedPrecondition, quirev1.ErrorCode_STALE_BROKER_EPOCH, true},
	{ErrBrokersNotReady, codes.Unavailable, quirev1.ErrorCode_BROKER_NOT_AVAILABLE, true},

	// storage
	{storage.ErrOffsetOutOfRange, codes.OutOfRange, quirev1.ErrorCode_OFFSET_OUT_OF_RANGE, false},
	{storage.ErrRecordTooLarge, codes.InvalidArgument, quirev1.ErrorCode_MESSAGE_TOO_LARGE, false},
	{storage.ErrCorruptBatch, codes.InvalidArgument, quirev1.ErrorCode_CORRUPT_MESSAGE, false},
	{storage.ErrOffsetGap, codes.Internal, quirev1.ErrorCode_KAFKA_STORAGE_ERROR, true},
	{storage.ErrLogFailed, codes.Internal, quirev1.ErrorCode_KAFKA_STORAGE_ERROR, true},
	{storage.ErrOffsetOverlap, codes.Internal, quirev1.ErrorCode_KAFKA_STORAGE_ERROR, true},
	{storage.ErrClosed, codes.Unavailable, quirev1.ErrorCode_NOT_LEADER_OR_FOLLOWER, true},
	{storage.ErrInvalidConfig, codes.InvalidArgument, quirev1.ErrorCode_INVALID_CONFIG, false},
	// The idempotent producer's sequence rules; none is retriable as sent
	// (as in Kafka): the producer must bump its epoch or start over.
	{storage.ErrOutOfOrderSequence, codes.FailedPrecondition, quirev1.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER, false},
	{storage.ErrInvalidProducerEpoch, codes.FailedPrecondition, quirev1.ErrorCode_INVALID_PRODUCER_EPOCH, false},
	{storage.ErrUnknownProducerID, codes.FailedPrecondition, quirev1.ErrorCode_UNKNOWN_PRODUCER_ID, false},
	{storage.ErrDuplicateSequence, codes.InvalidArgument, quirev1.ErrorCode_DUPLICATE_SEQUENCE_NUMBER, false},

	// record
	{record.ErrCorrupt, codes.InvalidArgument, quirev1.ErrorCode_CORRUPT_MESSAGE, false},

	// metadata
	{metadata.ErrNotController, codes.FailedPrecondition, quirev1.ErrorCode_NOT_CONTROLLER, true},
	{metadata.ErrTopicExists, codes.AlreadyExists, quirev1.ErrorCode_TOPIC_ALREADY_EXISTS, false},
	{metadata.ErrUnknownTopic, codes.NotFound, quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, true},
	{metadata.ErrInvalidPartitions, codes.InvalidArgument, quirev1.ErrorCode_INVALID_PARTITIONS, false},
	{metadata.ErrInvalidReplicationFactor, codes.InvalidArgument, quirev1.ErrorCode_INVALID_REPLICATION_FACTOR, false},
	{metadata.ErrUnknownBroker, codes.NotFound, quirev1.ErrorCode_BROKER_NOT_AVAILABLE, true},
	{metadata.ErrFencedBroker, codes.FailedPrecondition, quirev1.ErrorCode_BROKER_NOT_AVAILABLE, true},
	{metadata.ErrStaleEpoch, codes.FailedPrecondition, quirev1.ErrorCode_STALE_BROKER_EPOCH, true},
	{metadata.ErrNoQuorum, codes.Unavailable, quirev1.ErrorCode_NOT_CONTROLLER, true},
	{metadata.ErrClusterIDMismatch, codes.FailedPrecondition, quirev1.ErrorCode_INVALID_REQUEST, false},
	{metadata.ErrShutdown, codes.Unavailable, quirev1.ErrorCode_BROKER_NOT_AVAILABLE, true},
	{metadata.ErrBrokerNotRemovable, codes.FailedPrecondition, quirev1.ErrorCode_INVALID_REQUEST, false},
	{metadata.ErrInvalidGroupID, codes.InvalidArgument, quirev1.ErrorCode_INVALID_GROUP_ID, false},
	{metadata.ErrInvalidOffsetCommit, codes.InvalidArgument, quirev1.ErrorCode_INVALID_REQUEST, false},
	{metadata.ErrUnknownGroup, codes.NotFound, quirev1.ErrorCode_GROUP_ID_NOT_FOUND, false},

	// context
	{context.DeadlineExceeded, codes.DeadlineExceeded, quirev1.ErrorCode_REQUEST_TIMED_OUT, true},
	{context.Canceled, codes.Canceled, quirev1.ErrorCode_REQUEST_TIMED_OUT, true},
}

// lookupError finds err's row; unknown errors are internal and not retriable.
func lookupError(err error) errorMapping {
	for _, m := range errorTable {
		if errors.Is(err, m.err) {
			return m
		}
	}
	return errorMapping{err: err, grpc: codes.Internal, code: quirev1.ErrorCode_UNKNOWN_SERVER_ERROR}
}

// toError is the inline form, for one partition of a response; nil for nil.
func toError(err error) *quirev1.Error {
	if err == nil {
		return nil
	}
	m := lookupError(err)
	e := &quirev1.Error{Code: m.code, Message: err.Error(), Retriable: m.retriable, LeaderId: -1, LeaderEpoch: -1}
	var nle *notLeaderError
	if errors.As(err, &nle) {
		e.LeaderId, e.LeaderEpoch = nle.leader, nle.epoch
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
	m := lookupError(err)
	st := status.New(m.grpc, err.Error())
	if d, derr := st.WithDetails(toError(err)); derr == nil {
		st = d
	}
	return st.Err()
}

// notLeaderError says which broker leads, when this one does not. With
// no leader (-1: an election pending, or the partition offline because its
// only in-sync replica lost its data) it is ErrLeaderNotAvailable, as in
// Kafka: retriable, and the client refreshes metadata rather than chase a
// leader that does not exist.
type notLeaderError struct {
	topic     string
	partition int32
	leader    int32
	epoch     int32
}

func (e *notLeaderError) Error() string {
	if e.leader < 0 {
		return fmt.Sprintf("%v: %s-%d has no leader (epoch %d)", ErrLeaderNotAvailable, e.topic, e.partition, e.epoch)
	}
	return fmt.Sprintf("%v: %s-%d is led by broker %d (epoch %d)", ErrNotLeader, e.topic, e.partition, e.leader, e.epoch)
}

func (e *notLeaderError) Unwrap() error {
	if e.leader < 0 {
		return ErrLeaderNotAvailable
	}
	return ErrNotLeader
}

func unknownPartition(topic string, p int32) error {
	return fmt.Errorf("%w: %s-%d", ErrUnknownTopicOrPartition, topic, p)
}

func unknownTopic(topic string) error {
	return fmt.Errorf("%w: topic %q does not exist", ErrUnknownTopicOrPartition, topic)
}
