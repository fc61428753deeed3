package service

import (
	"context"
	"fmt"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/txn"
)

// transactionsService implements quire.v1.Transactions over the request
// core (request/transactions.go), as the Kafka door's transaction calls
// do: a gRPC producer speaks transaction version 2 (each transaction's
// end bumps its epoch; partitions and groups join implicitly).
type transactionsService struct {
	quirev1.UnimplementedTransactionsServer
	b *node
}

// defaultTxnTimeoutMs is a transaction's timeout when the producer names
// none (Kafka's transaction.timeout.ms default).
const defaultTxnTimeoutMs = 60000

func producerOf(p *quirev1.TransactionalProducer) txn.Producer {
	return txn.Producer{ID: p.GetTransactionalId(), PID: p.GetProducerId(), Epoch: int16(p.GetProducerEpoch())}
}

func (s *transactionsService) InitTransactions(ctx context.Context, req *quirev1.InitTransactionsRequest) (*quirev1.InitTransactionsResponse, error) {
	timeout := req.TimeoutMs
	if timeout == 0 {
		timeout = defaultTxnTimeoutMs
	}
	t, err := s.b.core.InitTxnProducer(coreContext(ctx), txn.InitRequest{ID: req.TransactionalId, TimeoutMs: timeout,
		ProducerID: -1, ProducerEpoch: -1, BumpPerTransaction: true})
	if err != nil {
		return nil, toStatus(err)
	}
	return &quirev1.InitTransactionsResponse{ProducerId: t.ProducerID, ProducerEpoch: int32(t.ProducerEpoch)}, nil
}

func (s *transactionsService) SendOffsets(ctx context.Context, req *quirev1.SendOffsetsRequest) (*quirev1.SendOffsetsResponse, error) {
	offs := make([]txn.Offset, len(req.Offsets))
	for i, o := range req.Offsets {
		offs[i] = txn.Offset{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset, LeaderEpoch: -1, Metadata: o.Metadata}
		if o.OptionalLeaderEpoch != nil {
			offs[i].LeaderEpoch = o.GetLeaderEpoch()
		}
	}
	member := txn.Member{ID: req.MemberId, InstanceID: req.InstanceId, Epoch: req.MemberEpoch}
	if err := s.b.core.TxnOffsetCommit(coreContext(ctx), producerOf(req.Producer), req.Group, member, offs, true); err != nil {
		return nil, toStatus(err)
	}
	return &quirev1.SendOffsetsResponse{}, nil
}

func (s *transactionsService) EndTransaction(ctx context.Context, req *quirev1.EndTransactionRequest) (*quirev1.EndTransactionResponse, error) {
	t, err := s.b.core.EndTxn(coreContext(ctx), producerOf(req.Producer), req.Commit, true)
	if err != nil {
		return nil, toStatus(err)
	}
	return &quirev1.EndTransactionResponse{ProducerId: t.ProducerID, ProducerEpoch: int32(t.ProducerEpoch)}, nil
}

func describeTxn(t txn.Txn) *quirev1.TransactionDescription {
	d := &quirev1.TransactionDescription{TransactionalId: t.ID, ProducerId: t.ProducerID, ProducerEpoch: int32(t.ProducerEpoch),
		State: t.State.String(), TimeoutMs: t.TimeoutMs}
	if t.State == txn.Ongoing || t.State.Preparing() {
		d.StartTimeMs = t.StartMs
	}
	for _, p := range t.Partitions {
		d.Partitions = append(d.Partitions, &quirev1.TransactionPartition{Topic: p.Topic, Partition: p.Partition})
	}
	for _, g := range t.Groups {
		d.Groups = append(d.Groups, g.Group)
	}
	return d
}

func (s *transactionsService) DescribeTransactions(ctx context.Context, req *quirev1.DescribeTransactionsRequest) (*quirev1.DescribeTransactionsResponse, error) {
	got, err := s.b.core.DescribeTransactions(coreContext(ctx), req.TransactionalIds)
	if err != nil {
		return nil, toStatus(err)
	}
	out := &quirev1.DescribeTransactionsResponse{}
	for _, d := range got {
		if d.Err != nil {
			out.Transactions = append(out.Transactions, &quirev1.TransactionDescription{TransactionalId: d.ID, Error: toError(d.Err)})
			continue
		}
		out.Transactions = append(out.Transactions, describeTxn(d.Txn))
	}
	return out, nil
}

func (s *transactionsService) ListTransactions(ctx context.Context, req *quirev1.ListTransactionsRequest) (*quirev1.ListTransactionsResponse, error) {
	var states []txn.State
	for _, name := range req.States {
		st, ok := txn.ParseState(name)
		if !ok {
			return nil, toStatus(fmt.Errorf("%w: unknown transaction state %q (Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort)",
				ErrInvalidRequest, name))
		}
		states = append(states, st)
	}
	got, err := s.b.core.ListTransactions(coreContext(ctx), states, nil)
	if err != nil {
		return nil, toStatus(err)
	}
	out := &quirev1.ListTransactionsResponse{}
	for _, t := range got {
		out.Transactions = append(out.Transactions, describeTxn(t))
	}
	return out, nil
}

func (s *transactionsService) AbortTransaction(ctx context.Context, req *quirev1.AbortTransactionRequest) (*quirev1.AbortTransactionResponse, error) {
	t, err := s.b.core.AbortTransaction(coreContext(ctx), req.TransactionalId)
	if err != nil {
		return nil, toStatus(err)
	}
	return &quirev1.AbortTransactionResponse{ProducerId: t.ProducerID, ProducerEpoch: int32(t.ProducerEpoch)}, nil
}
