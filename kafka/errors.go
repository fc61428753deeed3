package kafka

import (
	"context"
	"errors"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/quirelog/quire/internal/errmsg"
	"github.com/quirelog/quire/request"
)

var (
	unsupportedVersion = kerr.UnsupportedVersion.Code
	invalidRequest     = kerr.InvalidRequest.Code
)

// coreUnknownServerError is the request core's UNKNOWN_SERVER_ERROR
// (quire.v1's 1000), which Kafka numbers -1.
const coreUnknownServerError = 1000

// kafkaCode is the Kafka error code of a request.Error's code: the same
// number, but for UNKNOWN_SERVER_ERROR (Kafka's -1) and codes Kafka does
// not have.
func kafkaCode(code int32) int16 {
	switch {
	case code == 0:
		return 0
	case code == coreUnknownServerError, code > math.MaxInt16, code < math.MinInt16,
		kerr.ErrorForCode(int16(code)) == kerr.UnknownServerError:
		return kerr.UnknownServerError.Code
	}
	return int16(code)
}

// coreError is the Kafka error code and message of an error of the
// request core, read off its *request.Error; 0 for nil. An error the
// core did not code is a call cut short (the connection's context
// ended, the node stopping: the client looks again), a leader out of
// reach (the same), or UNKNOWN_SERVER_ERROR.
func coreError(err error) (int16, string) {
	if err == nil {
		return 0, ""
	}
	var e *request.Error
	if errors.As(err, &e) {
		// Cut as the gRPC door cuts it (a quoted value of a client's, a
		// topic name say, is kept short).
		return kafkaCode(e.Code), errmsg.Message(e.Error())
	}
	msg := errmsg.Message(err.Error())
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return kerr.RequestTimedOut.Code, msg
	case errors.Is(err, context.Canceled), errors.Is(err, request.ErrLeaderUnreachable):
		return kerr.NotLeaderForPartition.Code, msg
	}
	return kerr.UnknownServerError.Code, msg
}

// groupError is coreError for a call to a group or transaction
// coordinator: the coordinator out of reach for a moment (no controller,
// an election, a node stopping) is COORDINATOR_NOT_AVAILABLE, which
// clients retry, looking for the coordinator again. Kafka's clients take
// the partition-level codes as fatal to a group member, which would give
// up its partitions and rejoin on every controller election, and return
// them from EndTxn to the application, whose transaction then cannot go
// on although a retry would have ended it.
func groupError(err error) (int16, string) {
	code, msg := coreError(err)
	switch code {
	case kerr.NotController.Code, kerr.BrokerNotAvailable.Code, kerr.RequestTimedOut.Code,
		kerr.NotLeaderForPartition.Code, kerr.LeaderNotAvailable.Code:
		return kerr.CoordinatorNotAvailable.Code, msg
	}
	return code, msg
}
