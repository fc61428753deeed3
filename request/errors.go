package request

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/quirelog/quire/replica"
)

// Errors the core raises of its own. Those the replicas, the logs and the
// metadata raise are their packages' own sentinels, wrapped with %w and
// context as they come.
var (
	ErrInvalidTopic        = errors.New("broker: invalid topic")
	ErrInvalidRequiredAcks = errors.New("broker: invalid required acks")
	// ErrTopicAuthorizationFailed, ErrGroupAuthorizationFailed and
	// ErrClusterAuthorizationFailed: the principal lacks the ACL; the
	// message names principal, operation and resource.
	ErrTopicAuthorizationFailed   = errors.New("broker: topic authorization failed")
	ErrGroupAuthorizationFailed   = errors.New("broker: group authorization failed")
	ErrClusterAuthorizationFailed = errors.New("broker: cluster authorization failed")
	// ErrLeaderUnreachable is what a Forwarder returns when it could
	// not send anything to the leader: the partitions keep their
	// NOT_LEADER_OR_FOLLOWER answer, and the client looks again.
	ErrLeaderUnreachable = errors.New("request: the leader cannot be reached")
)

// Error is every refusal the core answers, for a whole operation or one
// partition of it: the cause (a sentinel of this module, wrapped with
// context) and the code it reaches clients as. Code is a quire.v1
// ErrorCode number, which is Kafka's own number wherever Kafka has the
// code, so each door reads it off as it is: the gRPC door as a
// quire.v1.Error, the Kafka door as Kafka's code.
type Error struct {
	// Code is the quire.v1.ErrorCode (and Kafka error code) number.
	Code int32
	// Err is the cause; nil for an answer another broker gave (a
	// partition passed on to its leader), whose text is Message.
	Err     error
	Message string
	// LeaderID and LeaderEpoch name the leader for NOT_LEADER_OR_FOLLOWER
	// when known; -1 otherwise.
	LeaderID, LeaderEpoch int32
	// OutcomeUnknown: the records were appended, then not known to be
	// committed; they may yet be read, or never.
	OutcomeUnknown bool
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Err.Error()
	}
	if e.Message != "" {
		return e.Message
	}
	return "error code " + strconv.Itoa(int(e.Code))
}

func (e *Error) Unwrap() error { return e.Err }

// Codes says which code an error of the module reaches clients as: the
// broker's one table of errors (it knows the metadata and controller
// sentinels too), given to the core so that every answer carries its
// code from the start.
type Codes func(err error) int32

// asError is err as an *Error with its code; nil for nil. An *Error
// (already coded, or a leader's answer) is kept as it is.
func (c *Core) asError(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	e = &Error{Code: c.codes(err), Err: err, LeaderID: -1, LeaderEpoch: -1}
	var nle *replica.NotLeaderError
	if errors.As(err, &nle) {
		e.LeaderID, e.LeaderEpoch = nle.Leader, nle.Epoch
	}
	return e
}

// fail is asError as an error: nil stays an untyped nil.
func (c *Core) fail(err error) error {
	if e := c.asError(err); e != nil {
		return e
	}
	return nil
}

// MaxTopicNameLen is Kafka's limit on a topic name.
const MaxTopicNameLen = 249

// ValidateTopicName applies Kafka's rule: [a-zA-Z0-9._-], 1 to 249
// characters, not "." or "..".
func ValidateTopicName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: topic name is empty", ErrInvalidTopic)
	case name == "." || name == "..":
		return fmt.Errorf("%w: topic name cannot be %q", ErrInvalidTopic, name)
	case len(name) > MaxTopicNameLen:
		return fmt.Errorf("%w: topic name is %d characters, the limit is %d", ErrInvalidTopic, len(name), MaxTopicNameLen)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: topic name %q has %q; only ASCII letters, digits, '.', '_' and '-' are allowed", ErrInvalidTopic, name, c)
		}
	}
	return nil
}

// MaxCreateRequestIDLen bounds CreateTopic's request id, in bytes.
const MaxCreateRequestIDLen = 64

// ValidateCreateRequestID checks CreateTopic's request id (its
// idempotency key): 1 to MaxCreateRequestIDLen bytes of printable ASCII,
// space to tilde. The error wraps replica.ErrInvalidRequest.
func ValidateCreateRequestID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: request id is empty", replica.ErrInvalidRequest)
	case len(id) > MaxCreateRequestIDLen:
		return fmt.Errorf("%w: request id is %d bytes, the limit is %d", replica.ErrInvalidRequest, len(id), MaxCreateRequestIDLen)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < ' ' || c > '~' {
			return fmt.Errorf("%w: request id %q has byte 0x%02x at %d; only printable ASCII (space to '~') is allowed",
				replica.ErrInvalidRequest, id, c, i)
		}
	}
	return nil
}

// unknownTopic is the error for a topic the metadata does not have:
// UNKNOWN_TOPIC_OR_PARTITION, retriable (it may be being created), unless
// the name is one no topic can have, which is INVALID_TOPIC_EXCEPTION and
// not retriable.
func unknownTopic(topic string) error {
	if err := ValidateTopicName(topic); err != nil {
		return err
	}
	return fmt.Errorf("%w: topic %q does not exist", replica.ErrUnknownTopicOrPartition, topic)
}

// invalidPartition is the error for a partition number outside [0, n) of
// a topic with n partitions in this broker's metadata: a request that
// fails the same way however often it is sent, so INVALID_REQUEST, not
// the retriable UNKNOWN_TOPIC_OR_PARTITION.
func invalidPartition(topic string, p int32, n int) error {
	return fmt.Errorf("%w: partition %d of topic %q (it has %d)", replica.ErrInvalidRequest, p, topic, n)
}
