package broker

import (
	"context"

	"github.com/quirelog/quire/kafka"
	"github.com/quirelog/quire/request"
	"github.com/quirelog/quire/service"
	"github.com/quirelog/quire/txn"
)

// The transactional calls of the Kafka door go straight to the request
// core (request/transactions.go), which passes them to the coordinator
// on the controller; so any node can serve a transaction's calls, and
// FindCoordinator names the same one for an id from every node, as for
// groups (coordinatorFor).

func (k kafkaBackend) TxnCoordinator(ctx context.Context, id string) (kafka.Node, error) {
	if err := k.b.core.AuthorizeFindTxnCoordinator(service.CoreContext(ctx), id); err != nil {
		return kafka.Node{}, err
	}
	return k.coordinatorFor(ctx, id)
}

func (k kafkaBackend) InitTxnProducer(ctx context.Context, req txn.InitRequest) (txn.Txn, error) {
	return k.b.core.InitTxnProducer(service.CoreContext(ctx), req)
}

func (k kafkaBackend) AddPartitionsToTxn(ctx context.Context, p txn.Producer, parts []txn.TopicPartition) error {
	return k.b.core.AddPartitionsToTxn(service.CoreContext(ctx), p, parts)
}

func (k kafkaBackend) AddPartitionsToTxnForBroker(ctx context.Context, p txn.Producer, parts []txn.TopicPartition, verifyOnly bool) ([]error, error) {
	return k.b.core.AddPartitionsToTxnForBroker(service.CoreContext(ctx), p, parts, verifyOnly)
}

func (k kafkaBackend) AddOffsetsToTxn(ctx context.Context, p txn.Producer, group string) error {
	return k.b.core.AddOffsetsToTxn(service.CoreContext(ctx), p, group)
}

func (k kafkaBackend) TxnOffsetCommit(ctx context.Context, p txn.Producer, group string, member txn.Member, offsets []txn.Offset, addGroup bool) error {
	return k.b.core.TxnOffsetCommit(service.CoreContext(ctx), p, group, member, offsets, addGroup)
}

func (k kafkaBackend) EndTxn(ctx context.Context, p txn.Producer, commit, bump bool) (txn.Txn, error) {
	return k.b.core.EndTxn(service.CoreContext(ctx), p, commit, bump)
}

func (k kafkaBackend) DescribeTransactions(ctx context.Context, ids []string) ([]request.TxnDescription, error) {
	return k.b.core.DescribeTransactions(service.CoreContext(ctx), ids)
}

func (k kafkaBackend) ListTransactions(ctx context.Context, states []txn.State, producerIDs []int64) ([]txn.Txn, error) {
	return k.b.core.ListTransactions(service.CoreContext(ctx), states, producerIDs)
}

func (k kafkaBackend) WriteTxnMarkers(ctx context.Context, markers []request.TxnMarker) ([][]error, error) {
	return k.b.core.WriteTxnMarkers(service.CoreContext(ctx), markers)
}
