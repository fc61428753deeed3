package client

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

// Sentinel errors of the client.
var (
	ErrClosed          = errors.New("client: closed")
	ErrBufferFull      = errors.New("client: producer buffer full")
	ErrRecordTooLarge  = errors.New("client: record larger than the batch max bytes")
	ErrNoBrokers       = errors.New("client: no seed brokers")
	ErrInvalidOffset   = errors.New("client: invalid start offset")
	ErrNoSuchPartition = errors.New("client: partition out of range")
)

// Error is a Kafka-style error returned by a broker, for a whole call or for
// one partition of it. Match it with errors.As, or compare its Code.
type Error struct {
	Code      quirev1.ErrorCode
	Message   string
	Retriable bool
	// LeaderID is the leader hint of leadership errors, -1 when unknown.
	LeaderID    int32
	LeaderEpoch int32
}

func (e *Error) Error() string {
	if e.Message == "" {
		return e.Code.String()
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Is makes errors.Is(err, &Error{Code: c}) match on the code alone.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// ErrorCode returns the Kafka-style code of err, or NONE when err carries
// none.
func ErrorCode(err error) quirev1.ErrorCode {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return quirev1.ErrorCode_NONE
}

// fromProto turns an inline per-partition error into an error; nil or NONE
// give nil.
func fromProto(pe *quirev1.Error) error {
	if pe == nil || pe.GetCode() == quirev1.ErrorCode_NONE {
		return nil
	}
	return &Error{Code: pe.GetCode(), Message: pe.GetMessage(), Retriable: pe.GetRetriable(),
		LeaderID: pe.GetLeaderId(), LeaderEpoch: pe.GetLeaderEpoch()}
}

// fromStatus converts a failed gRPC call into an *Error when the status
// carries a quire.v1.Error, or else into a network-level error that is
// retriable when the transport (not the server) failed.
func fromStatus(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	for _, d := range st.Details() {
		if pe, ok := d.(*quirev1.Error); ok {
			return fromProto(pe)
		}
	}
	switch st.Code() {
	case codes.Unavailable:
		return &Error{Code: quirev1.ErrorCode_NETWORK_EXCEPTION, Message: st.Message(), Retriable: true, LeaderID: -1}
	case codes.DeadlineExceeded:
		if errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		return &Error{Code: quirev1.ErrorCode_REQUEST_TIMED_OUT, Message: st.Message(), Retriable: true, LeaderID: -1}
	case codes.Canceled:
		return context.Canceled
	}
	return fmt.Errorf("client: %s: %s", st.Code(), st.Message())
}

// retriable reports whether err may succeed on retry.
func retriable(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Retriable
}

// needsMetadata reports whether err means the client's idea of leadership
// is stale.
func needsMetadata(err error) bool {
	switch ErrorCode(err) {
	case quirev1.ErrorCode_NOT_LEADER_OR_FOLLOWER, quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION,
		quirev1.ErrorCode_LEADER_NOT_AVAILABLE, quirev1.ErrorCode_FENCED_LEADER_EPOCH,
		quirev1.ErrorCode_UNKNOWN_LEADER_EPOCH, quirev1.ErrorCode_NETWORK_EXCEPTION,
		quirev1.ErrorCode_BROKER_NOT_AVAILABLE, quirev1.ErrorCode_REPLICA_NOT_AVAILABLE,
		// A leader that does not answer in time may have been cut off and
		// replaced: look again rather than wait on it.
		quirev1.ErrorCode_REQUEST_TIMED_OUT:
		return true
	}
	return false
}
