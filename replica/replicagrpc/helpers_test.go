package replicagrpc

import (
	"errors"
	"testing"

	"go.uber.org/goleak"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/replica"
	"github.com/quirelog/quire/storage"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testErrors is the error table of the tests: the refusals a leader
// answers a replica fetch with, as the broker's table has them.
var testErrors = []struct {
	err  error
	code quirev1.ErrorCode
}{
	{replica.ErrNotLeader, quirev1.ErrorCode_NOT_LEADER_OR_FOLLOWER},
	{replica.ErrLeaderNotAvailable, quirev1.ErrorCode_LEADER_NOT_AVAILABLE},
	{replica.ErrUnknownTopicOrPartition, quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION},
	{replica.ErrFencedLeaderEpoch, quirev1.ErrorCode_FENCED_LEADER_EPOCH},
	{replica.ErrUnknownLeaderEpoch, quirev1.ErrorCode_UNKNOWN_LEADER_EPOCH},
	{storage.ErrOffsetOutOfRange, quirev1.ErrorCode_OFFSET_OUT_OF_RANGE},
}

func testErrorCode(err error) (quirev1.ErrorCode, string) {
	for _, e := range testErrors {
		if errors.Is(err, e.err) {
			return e.code, err.Error()
		}
	}
	return quirev1.ErrorCode_UNKNOWN_SERVER_ERROR, err.Error()
}

var testCodec = NewCodec(testErrorCode, 64<<20)
