// Package errcode declares, once, what each quire.v1.ErrorCode tells the
// one who receives it: whether the same request may succeed if sent again.
//
// Kafka's codes keep Kafka's numbers and Kafka's retriability (as franz-go's
// kerr lists them); a test holds the declaration to that list. Everything
// that reports or acts on an error takes retriability from here: the
// broker's table of internal errors (broker/errors.go), the metadata rows
// the controller shares with it (controlplane/status.go) and the Go
// client's retry decisions (client/errors.go). The tables say which code an
// error is; they never say again whether that code is retriable.
//
// Status (message.go) builds the gRPC status of every refusal a client
// receives, with the quire.v1.Error in its details and its message cut
// short enough for any client's header limit.
//
// The package imports nothing of this module but the generated API, so
// the client may use it too.
package errcode

import (
	"errors"

	"google.golang.org/grpc/codes"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

// declared is the retriability of every code. A code missing here is a
// bug, and a test fails on it.
var declared = map[quirev1.ErrorCode]bool{
	quirev1.ErrorCode_NONE:                             false,
	quirev1.ErrorCode_OFFSET_OUT_OF_RANGE:              false,
	quirev1.ErrorCode_CORRUPT_MESSAGE:                  true,
	quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION:       true,
	quirev1.ErrorCode_INVALID_FETCH_SIZE:               false,
	quirev1.ErrorCode_LEADER_NOT_AVAILABLE:             true,
	quirev1.ErrorCode_NOT_LEADER_OR_FOLLOWER:           true,
	quirev1.ErrorCode_REQUEST_TIMED_OUT:                true,
	quirev1.ErrorCode_BROKER_NOT_AVAILABLE:             true,
	quirev1.ErrorCode_REPLICA_NOT_AVAILABLE:            true,
	quirev1.ErrorCode_MESSAGE_TOO_LARGE:                false,
	quirev1.ErrorCode_NETWORK_EXCEPTION:                true,
	quirev1.ErrorCode_COORDINATOR_LOAD_IN_PROGRESS:     true,
	quirev1.ErrorCode_COORDINATOR_NOT_AVAILABLE:        true,
	quirev1.ErrorCode_NOT_COORDINATOR:                  true,
	quirev1.ErrorCode_INVALID_TOPIC_EXCEPTION:          false,
	quirev1.ErrorCode_RECORD_LIST_TOO_LARGE:            false,
	quirev1.ErrorCode_NOT_ENOUGH_REPLICAS:              true,
	quirev1.ErrorCode_NOT_ENOUGH_REPLICAS_AFTER_APPEND: true,
	quirev1.ErrorCode_INVALID_REQUIRED_ACKS:            false,
	quirev1.ErrorCode_ILLEGAL_GENERATION:               false,
	quirev1.ErrorCode_INCONSISTENT_GROUP_PROTOCOL:      false,
	quirev1.ErrorCode_INVALID_GROUP_ID:                 false,
	quirev1.ErrorCode_UNKNOWN_MEMBER_ID:                false,
	quirev1.ErrorCode_INVALID_SESSION_TIMEOUT:          false,
	quirev1.ErrorCode_REBALANCE_IN_PROGRESS:            false,
	quirev1.ErrorCode_INVALID_COMMIT_OFFSET_SIZE:       false,
	quirev1.ErrorCode_INVALID_TIMESTAMP:                false,
	quirev1.ErrorCode_UNSUPPORTED_VERSION:              false,
	quirev1.ErrorCode_TOPIC_ALREADY_EXISTS:             false,
	quirev1.ErrorCode_INVALID_PARTITIONS:               false,
	quirev1.ErrorCode_INVALID_REPLICATION_FACTOR:       false,
	quirev1.ErrorCode_INVALID_REPLICA_ASSIGNMENT:       false,
	quirev1.ErrorCode_INVALID_CONFIG:                   false,
	quirev1.ErrorCode_TOPIC_AUTHORIZATION_FAILED:       false,
	quirev1.ErrorCode_GROUP_AUTHORIZATION_FAILED:       false,
	quirev1.ErrorCode_CLUSTER_AUTHORIZATION_FAILED:     false,
	quirev1.ErrorCode_SASL_AUTHENTICATION_FAILED:       false,
	quirev1.ErrorCode_RESOURCE_NOT_FOUND:               false,
	quirev1.ErrorCode_NOT_CONTROLLER:                   true,
	quirev1.ErrorCode_INVALID_REQUEST:                  false,
	quirev1.ErrorCode_POLICY_VIOLATION:                 false,
	quirev1.ErrorCode_KAFKA_STORAGE_ERROR:              true,
	quirev1.ErrorCode_NON_EMPTY_GROUP:                  false,
	quirev1.ErrorCode_GROUP_ID_NOT_FOUND:               false,
	quirev1.ErrorCode_FENCED_LEADER_EPOCH:              true,
	quirev1.ErrorCode_UNKNOWN_LEADER_EPOCH:             true,
	quirev1.ErrorCode_STALE_BROKER_EPOCH:               false,
	quirev1.ErrorCode_OFFSET_NOT_AVAILABLE:             true,
	quirev1.ErrorCode_MEMBER_ID_REQUIRED:               false,
	quirev1.ErrorCode_GROUP_MAX_SIZE_REACHED:           false,
	quirev1.ErrorCode_FENCED_INSTANCE_ID:               false,
	quirev1.ErrorCode_PREFERRED_LEADER_NOT_AVAILABLE:   true,
	quirev1.ErrorCode_ELECTION_NOT_NEEDED:              true,
	quirev1.ErrorCode_NO_REASSIGNMENT_IN_PROGRESS:      false,
	quirev1.ErrorCode_GROUP_SUBSCRIBED_TO_TOPIC:        false,
	quirev1.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER:     false,
	quirev1.ErrorCode_DUPLICATE_SEQUENCE_NUMBER:        false,
	quirev1.ErrorCode_INVALID_PRODUCER_EPOCH:           false,
	quirev1.ErrorCode_UNKNOWN_PRODUCER_ID:              false,
	quirev1.ErrorCode_INVALID_RECORD:                   false,
	quirev1.ErrorCode_FEATURE_UPDATE_FAILED:            false,
	quirev1.ErrorCode_BROKER_ID_NOT_REGISTERED:         false,
	quirev1.ErrorCode_FENCED_MEMBER_EPOCH:              false,
	quirev1.ErrorCode_UNSUPPORTED_ASSIGNOR:             false,
	quirev1.ErrorCode_STALE_MEMBER_EPOCH:               false,
	quirev1.ErrorCode_INVALID_RECORD_STATE:             false,
	quirev1.ErrorCode_INVALID_REGULAR_EXPRESSION:       false,
	quirev1.ErrorCode_UNKNOWN_SERVER_ERROR:             false,
	// Transactions.
	quirev1.ErrorCode_INVALID_TXN_STATE:                     false,
	quirev1.ErrorCode_INVALID_PRODUCER_ID_MAPPING:           false,
	quirev1.ErrorCode_INVALID_TRANSACTION_TIMEOUT:           false,
	quirev1.ErrorCode_CONCURRENT_TRANSACTIONS:               false,
	quirev1.ErrorCode_TRANSACTION_COORDINATOR_FENCED:        false,
	quirev1.ErrorCode_TRANSACTIONAL_ID_AUTHORIZATION_FAILED: false,
	quirev1.ErrorCode_PRODUCER_FENCED:                       false,
	quirev1.ErrorCode_TRANSACTIONAL_ID_NOT_FOUND:            false,
}

// Retriable reports whether a request that failed with code may succeed if
// sent again (after a metadata refresh, for leadership codes). A code this
// build does not know is not retriable; see RetriableOr.
func Retriable(code quirev1.ErrorCode) bool {
	return declared[code]
}

// Known reports whether code is declared here.
func Known(code quirev1.ErrorCode) bool {
	_, ok := declared[code]
	return ok
}

// RetriableOr is Retriable for a known code and sent (the flag that came
// with the code over the wire) for one a newer server added.
func RetriableOr(code quirev1.ErrorCode, sent bool) bool {
	if r, ok := declared[code]; ok {
		return r
	}
	return sent
}

// Mapping says how one internal error reaches a caller: the gRPC status
// code of a whole failed call and the quire.v1.ErrorCode it carries.
// Whether it is retriable follows from Code.
type Mapping struct {
	Err  error
	GRPC codes.Code
	Code quirev1.ErrorCode
}

// Retriable is the retriability declared for m.Code.
func (m Mapping) Retriable() bool { return Retriable(m.Code) }

// Find returns the first mapping whose Err matches err (errors.Is), so a
// table lists specific errors before the general ones they wrap.
func Find(table []Mapping, err error) (Mapping, bool) {
	for _, m := range table {
		if errors.Is(err, m.Err) {
			return m, true
		}
	}
	return Mapping{}, false
}
