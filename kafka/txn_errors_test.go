package kafka

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/request"
	"github.com/quirelog/quire/txn"
)

// quorumLost is a backend whose transaction coordinator is out of reach:
// every transactional call fails as the core fails it mid-election.
type quorumLost struct{ fakeBackend }

func errQuorumLost() error {
	return &request.Error{Code: int32(quirev1.ErrorCode_NOT_CONTROLLER), Message: "metadata: not controller", LeaderID: -1, LeaderEpoch: -1}
}

func (*quorumLost) InitTxnProducer(context.Context, txn.InitRequest) (txn.Txn, error) {
	return txn.Txn{}, errQuorumLost()
}
func (*quorumLost) AddPartitionsToTxn(context.Context, txn.Producer, []txn.TopicPartition) error {
	return errQuorumLost()
}
func (*quorumLost) AddOffsetsToTxn(context.Context, txn.Producer, string) error {
	return errQuorumLost()
}
func (*quorumLost) TxnOffsetCommit(context.Context, txn.Producer, string, txn.Member, []txn.Offset, bool) error {
	return errQuorumLost()
}
func (*quorumLost) EndTxn(context.Context, txn.Producer, bool, bool) (txn.Txn, error) {
	return txn.Txn{}, errQuorumLost()
}

// TestKafkaTxnCoordinatorOutOfReach: a transactional call that meets a
// controller election is answered COORDINATOR_NOT_AVAILABLE, which
// Kafka's clients retry after looking for the coordinator again, not
// NOT_CONTROLLER, which EndTxn hands to the application with its
// transaction left open.
func TestKafkaTxnCoordinatorOutOfReach(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := &quorumLost{}
	want := kerr.CoordinatorNotAvailable.Code
	id := "tx"

	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID = &id
	if got := initTxnProducer(ctx, b, init).ErrorCode; got != want {
		t.Errorf("InitProducerId: %d, want %d", got, want)
	}
	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.TransactionalID = id
	at := kmsg.NewAddPartitionsToTxnRequestTopic()
	at.Topic, at.Partitions = "t", []int32{0}
	add.Topics = append(add.Topics, at)
	if got := addPartitionsToTxn(ctx, b, add).Topics[0].Partitions[0].ErrorCode; got != want {
		t.Errorf("AddPartitionsToTxn: %d, want %d", got, want)
	}
	offs := kmsg.NewPtrAddOffsetsToTxnRequest()
	offs.TransactionalID, offs.Group = id, "g"
	if got := addOffsetsToTxn(ctx, b, offs).ErrorCode; got != want {
		t.Errorf("AddOffsetsToTxn: %d, want %d", got, want)
	}
	commit := kmsg.NewPtrTxnOffsetCommitRequest()
	commit.TransactionalID, commit.Group = id, "g"
	ct := kmsg.NewTxnOffsetCommitRequestTopic()
	ct.Topic = "t"
	ct.Partitions = append(ct.Partitions, kmsg.NewTxnOffsetCommitRequestTopicPartition())
	commit.Topics = append(commit.Topics, ct)
	if got := txnOffsetCommit(ctx, b, commit).Topics[0].Partitions[0].ErrorCode; got != want {
		t.Errorf("TxnOffsetCommit: %d, want %d", got, want)
	}
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.Commit = id, true
	if got := endTxn(ctx, b, end).ErrorCode; got != want {
		t.Errorf("EndTxn: %d, want %d", got, want)
	}
}
