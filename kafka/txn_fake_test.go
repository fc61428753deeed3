package kafka

import (
	"context"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/request"
	"github.com/quirelog/quire/txn"
)

// noTxns is the transactional calls of a core without a transaction
// coordinator: every one refused UNSUPPORTED_VERSION.
type noTxns struct{}

func errNoTxns() error {
	return &request.Error{Code: int32(quirev1.ErrorCode_UNSUPPORTED_VERSION), Message: request.ErrTransactionsUnsupported.Error(), LeaderID: -1, LeaderEpoch: -1}
}

func (noTxns) TxnCoordinator(context.Context, string) (Node, error) {
	return Node{}, errNoTxns()
}
func (noTxns) InitTxnProducer(context.Context, txn.InitRequest) (txn.Txn, error) {
	return txn.Txn{}, errNoTxns()
}
func (noTxns) AddPartitionsToTxn(context.Context, txn.Producer, []txn.TopicPartition) error {
	return errNoTxns()
}
func (noTxns) AddPartitionsToTxnForBroker(context.Context, txn.Producer, []txn.TopicPartition, bool) ([]error, error) {
	return nil, errNoTxns()
}
func (noTxns) AddOffsetsToTxn(context.Context, txn.Producer, string) error { return errNoTxns() }
func (noTxns) TxnOffsetCommit(context.Context, txn.Producer, string, txn.Member, []txn.Offset, bool) error {
	return errNoTxns()
}
func (noTxns) EndTxn(context.Context, txn.Producer, bool, bool) (txn.Txn, error) {
	return txn.Txn{}, errNoTxns()
}
func (noTxns) DescribeTransactions(context.Context, []string) ([]request.TxnDescription, error) {
	return nil, errNoTxns()
}
func (noTxns) ListTransactions(context.Context, []txn.State, []int64) ([]txn.Txn, error) {
	return nil, errNoTxns()
}
func (noTxns) WriteTxnMarkers(context.Context, []request.TxnMarker) ([][]error, error) {
	return nil, errNoTxns()
}
