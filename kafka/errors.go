package kafka

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/internal/errcode"
	"github.com/quirelog/quire/request"
)

var (
	unsupportedVersion = kerr.UnsupportedVersion.Code
	invalidRequest     = kerr.InvalidRequest.Code
)

// codeOf is the Kafka error code of a quire.v1.Error: the same number,
// but for UNKNOWN_SERVER_ERROR (Kafka's -1) and codes Kafka does not
// have.
func codeOf(e *quirev1.Error) int16 {
	if e == nil || e.Code == quirev1.ErrorCode_NONE {
		return 0
	}
	c := int32(e.Code)
	if e.Code == quirev1.ErrorCode_UNKNOWN_SERVER_ERROR || kerr.ErrorForCode(int16(c)) == kerr.UnknownServerError || c > 32767 {
		return kerr.UnknownServerError.Code
	}
	return int16(c)
}

// kafkaCode is the Kafka error code of a quire.v1 ErrorCode number.
func kafkaCode(code int32) int16 {
	return codeOf(&quirev1.Error{Code: quirev1.ErrorCode(code)})
}

// coreError is the Kafka error code and message of an error of the
// request core, read off its *request.Error; 0 for nil.
func coreError(err error) (int16, string) {
	if err == nil {
		return 0, ""
	}
	var e *request.Error
	if errors.As(err, &e) {
		// Cut as the gRPC door cuts it (a quoted value of a client's, a
		// topic name say, is kept short).
		return kafkaCode(e.Code), errcode.Message(e.Error())
	}
	return callError(err)
}

// callError is the Kafka error code and message of a whole call's error:
// the quire.v1.Error in its status, else one for its gRPC code.
func callError(err error) (int16, string) {
	st, _ := status.FromError(err)
	for _, d := range st.Details() {
		if e, ok := d.(*quirev1.Error); ok {
			return codeOf(e), e.Message
		}
	}
	switch st.Code() {
	case codes.DeadlineExceeded:
		return kerr.RequestTimedOut.Code, st.Message()
	case codes.Unavailable, codes.Canceled:
		// A node stopping (a long poll it ended) or a leader moving: the
		// client looks again.
		return kerr.NotLeaderForPartition.Code, st.Message()
	case codes.InvalidArgument:
		return invalidRequest, st.Message()
	}
	return kerr.UnknownServerError.Code, st.Message()
}

// groupError is callError for a group call: the coordinator out of reach
// for a moment (no controller, an election, a node stopping) is
// COORDINATOR_NOT_AVAILABLE, which group members retry, looking for the
// coordinator again; Kafka's clients take the partition-level codes as
// fatal to a member, which would give up its partitions and rejoin on
// every controller election.
func groupError(err error) (int16, string) {
	code, msg := coreError(err)
	switch code {
	case kerr.NotController.Code, kerr.BrokerNotAvailable.Code, kerr.RequestTimedOut.Code,
		kerr.NotLeaderForPartition.Code, kerr.LeaderNotAvailable.Code:
		return kerr.CoordinatorNotAvailable.Code, msg
	}
	return code, msg
}
