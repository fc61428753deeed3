package client

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/internal/errcode"
)

// Sentinel errors of the client.
var (
	ErrClosed          = errors.New("client: closed")
	ErrBufferFull      = errors.New("client: producer buffer full")
	ErrRecordTooLarge  = errors.New("client: record larger than the batch max bytes")
	ErrNoBrokers       = errors.New("client: no seed brokers")
	ErrInvalidOffset   = errors.New("client: invalid start offset")
	ErrNoSuchPartition = errors.New("client: partition out of range")
	// ErrNoCommittedOffset: a partition whose start is AtCommitted with
	// the NoReset fallback (a group consumer with Reset NoReset(), Kafka's
	// auto.offset.reset=none) has no committed offset in its group.
	ErrNoCommittedOffset = errors.New("client: no committed offset")
	// ErrUnknownOutcome: a record was sent and may or may not be in the
	// log; it is not sent again. An idempotent producer reports it when a
	// batch's delivery timeout passes after it was sent with no definite
	// answer, or when a retry of an attempt with no definite answer fails
	// for good. A producer without idempotence reports it as soon as an
	// attempt ends that way (no answer before the stream broke or timed
	// out, or an answer with Error.OutcomeUnknown), since a retry could
	// write the records twice, unless RetryUnknownOutcome lets it retry.
	// The error wraps the failure of the last attempt (match its code
	// with errors.As or ErrorCode).
	ErrUnknownOutcome = errors.New("client: outcome unknown")
)

// Error is a Kafka-style error returned by a broker, for a whole call or for
// one partition of it. Match it with errors.As, or compare its Code.
type Error struct {
	Code    quirev1.ErrorCode
	Message string
	// Retriable is whether the same request may succeed if sent again. It
	// is a property of Code, declared once for the broker and the client
	// alike (Kafka's value for Kafka's codes); only for a code this client
	// does not know is it the flag the broker sent.
	Retriable bool
	// LeaderID is the leader hint of leadership errors, -1 when unknown.
	LeaderID    int32
	LeaderEpoch int32
	// OutcomeUnknown is the broker saying that it appended the records of
	// the attempt this error answers but cannot say whether they are
	// committed (quire.v1.Error.outcome_unknown): they may be read later.
	OutcomeUnknown bool
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

// newError is an error the client reports itself, with no leader hint;
// its retriability is its code's.
func newError(code quirev1.ErrorCode, msg string) *Error {
	return &Error{Code: code, Message: msg, Retriable: errcode.Retriable(code), LeaderID: -1, LeaderEpoch: -1}
}

// fromProto turns an inline per-partition error into an error; nil or NONE
// give nil.
func fromProto(pe *quirev1.Error) error {
	if pe == nil || pe.GetCode() == quirev1.ErrorCode_NONE {
		return nil
	}
	return &Error{Code: pe.GetCode(), Message: pe.GetMessage(), Retriable: errcode.RetriableOr(pe.GetCode(), pe.GetRetriable()),
		LeaderID: pe.GetLeaderId(), LeaderEpoch: pe.GetLeaderEpoch(), OutcomeUnknown: pe.GetOutcomeUnknown()}
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
		return newError(quirev1.ErrorCode_NETWORK_EXCEPTION, st.Message())
	case codes.DeadlineExceeded:
		if errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		return newError(quirev1.ErrorCode_REQUEST_TIMED_OUT, st.Message())
	case codes.Canceled:
		return context.Canceled
	case codes.ResourceExhausted:
		if e := requestRefusedUnread(st.Message()); e != nil {
			return e
		}
	}
	return fmt.Errorf("client: %s: %s", st.Code(), st.Message())
}

// requestRefusedUnread is the error for gRPC's refusal of a message over a
// receive limit ("grpc: received message larger than max (N vs. M)") when
// the limit is not this client's own (maxRecvMsgSize) but a broker's: a
// request more than twice the broker's request limit (2 x
// message.max.bytes + 1 MiB, at least 8 MiB), which its gRPC server
// refuses unread, without the quire.v1.Error it gives a request nearer
// the limit (broker/recvlimit.go). It is that error's MESSAGE_TOO_LARGE,
// naming the key to raise; nil for any other message.
func requestRefusedUnread(msg string) *Error {
	i := strings.LastIndex(msg, "(")
	if !strings.Contains(msg, "received message larger than max") || i < 0 {
		return nil
	}
	var n, most int
	if _, err := fmt.Sscanf(msg[i:], "(%d vs. %d)", &n, &most); err != nil || most == maxRecvMsgSize {
		return nil
	}
	return newError(quirev1.ErrorCode_MESSAGE_TOO_LARGE, fmt.Sprintf(
		"a request of %d bytes is over the broker's limit of %d bytes (2 x message.max.bytes + 1 MiB, at least 8 MiB; gRPC refused it unread at %d): raise message.max.bytes on the brokers, or send smaller requests",
		n, most/2, most))
}

// retriable reports whether err may succeed on retry: an *Error whose code
// is declared retriable (see Error.Retriable). Every retry decision of the
// client starts here; errors without a code (the client's own, a canceled
// context) are not retried.
func retriable(err error) bool {
	var e *Error
	return errors.As(err, &e) && errcode.RetriableOr(e.Code, e.Retriable)
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

// outcomeUnknown reports whether err is a broker's answer that the
// records of the attempt were appended but may not be committed.
func outcomeUnknown(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.OutcomeUnknown
}
