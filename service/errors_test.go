package service

import (
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/storage"
)

// TestNoLeaderIsLeaderNotAvailable: a replica whose partition has no
// leader (an offline partition: its only in-sync replica lost its data)
// answers LEADER_NOT_AVAILABLE, retriable, not NOT_LEADER_OR_FOLLOWER
// naming broker -1; with a leader it names it.
func TestNoLeaderIsLeaderNotAvailable(t *testing.T) {
	t.Parallel()
	none := notLeader("t", 0, -1, 3)
	if !errors.Is(none, ErrLeaderNotAvailable) || errors.Is(none, ErrNotLeader) {
		t.Fatalf("no leader: %v", none)
	}
	e := toError(none)
	if e.Code != quirev1.ErrorCode_LEADER_NOT_AVAILABLE || !e.Retriable || e.LeaderId != -1 || e.LeaderEpoch != 3 {
		t.Fatalf("no leader: %+v", e)
	}
	if st, _ := status.FromError(toStatus(none)); st.Code() != codes.Unavailable {
		t.Fatalf("no leader: status %v", st)
	}
	led := notLeader("t", 0, 2, 3)
	if e := toError(led); e.Code != quirev1.ErrorCode_NOT_LEADER_OR_FOLLOWER || e.LeaderId != 2 || !e.Retriable {
		t.Fatalf("led elsewhere: %+v", e)
	}
}

// TestErrorTableProducerSequenceCodes: the idempotent producer's errors
// from storage, wrapped with detail, reach clients as Kafka's codes, not
// retriable.
func TestErrorTableProducerSequenceCodes(t *testing.T) {
	t.Parallel()
	for err, want := range map[error]quirev1.ErrorCode{
		storage.ErrOutOfOrderSequence:   quirev1.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER,
		storage.ErrInvalidProducerEpoch: quirev1.ErrorCode_INVALID_PRODUCER_EPOCH,
		storage.ErrUnknownProducerID:    quirev1.ErrorCode_UNKNOWN_PRODUCER_ID,
		storage.ErrDuplicateSequence:    quirev1.ErrorCode_DUPLICATE_SEQUENCE_NUMBER,
	} {
		e := toError(fmt.Errorf("partition t-0: %w: producer 7", err))
		if e.Code != want || e.Retriable || e.Message == "" {
			t.Errorf("%v: %+v, want code %v", err, e, want)
		}
	}
}
