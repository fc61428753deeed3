package controlplane

import (
	"context"

	pb "github.com/quirelog/quire/api/internalv1"
	metapb "github.com/quirelog/quire/api/metapb"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/txn"
)

// The transaction coordinator's calls: served by the controller's
// coordinator (metadata.TxnCoordinator), passed on by any node.

func producerFromPB(p *pb.TxnProducer) txn.Producer {
	return txn.Producer{ID: p.GetTransactionalId(), PID: p.GetProducerId(), Epoch: int16(p.GetProducerEpoch())}
}

func producerToPB(p txn.Producer) *pb.TxnProducer {
	return &pb.TxnProducer{TransactionalId: p.ID, ProducerId: p.PID, ProducerEpoch: int32(p.Epoch)}
}

func (s *Service) InitTxnProducer(ctx context.Context, in *pb.InitTxnProducerRequest) (*pb.InitTxnProducerResponse, error) {
	tc, err := s.node.Ctl().TxnCoordinator(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	t, err := tc.InitProducer(ctx, txn.InitRequest{ID: in.TransactionalId, TimeoutMs: in.TimeoutMs, ProducerID: in.ProducerId,
		ProducerEpoch: int16(in.ProducerEpoch), BumpPerTransaction: in.BumpPerTransaction})
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.InitTxnProducerResponse{ProducerId: t.ProducerID, ProducerEpoch: int32(t.ProducerEpoch)}, nil
}

func (s *Service) AddPartitionsToTxn(ctx context.Context, in *pb.AddPartitionsToTxnRequest) (*pb.AddPartitionsToTxnResponse, error) {
	tc, err := s.node.Ctl().TxnCoordinator(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	parts := make([]txn.TopicPartition, len(in.Partitions))
	for i, p := range in.Partitions {
		parts[i] = txn.TopicPartition{Topic: p.Topic, Partition: p.Partition}
	}
	if err := tc.AddPartitions(ctx, producerFromPB(in.Producer), parts, in.VerifyOnly); err != nil {
		return nil, toStatus(err)
	}
	return &pb.AddPartitionsToTxnResponse{}, nil
}

func (s *Service) AddOffsetsToTxn(ctx context.Context, in *pb.AddOffsetsToTxnRequest) (*pb.AddOffsetsToTxnResponse, error) {
	tc, err := s.node.Ctl().TxnCoordinator(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	if err := tc.AddGroup(ctx, producerFromPB(in.Producer), in.Group); err != nil {
		return nil, toStatus(err)
	}
	return &pb.AddOffsetsToTxnResponse{}, nil
}

func (s *Service) TxnOffsetCommit(ctx context.Context, in *pb.TxnOffsetCommitRequest) (*pb.TxnOffsetCommitResponse, error) {
	tc, err := s.node.Ctl().TxnCoordinator(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	offs := make([]txn.Offset, len(in.Offsets))
	for i, o := range in.Offsets {
		offs[i] = txn.Offset{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata}
	}
	member := txn.Member{ID: in.MemberId, InstanceID: in.InstanceId, Epoch: in.MemberEpoch}
	if err := tc.CommitOffsets(ctx, producerFromPB(in.Producer), in.Group, member, offs, in.AddGroup); err != nil {
		return nil, toStatus(err)
	}
	return &pb.TxnOffsetCommitResponse{}, nil
}

func (s *Service) EndTxn(ctx context.Context, in *pb.EndTxnRequest) (*pb.EndTxnResponse, error) {
	tc, err := s.node.Ctl().TxnCoordinator(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	t, err := tc.End(ctx, producerFromPB(in.Producer), in.Commit, in.BumpEpoch)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.EndTxnResponse{ProducerId: t.ProducerID, ProducerEpoch: int32(t.ProducerEpoch)}, nil
}

// DescribeTransactions answers from the controller's image, where every
// state the coordinator answered is.
func (s *Service) DescribeTransactions(ctx context.Context, in *pb.DescribeTransactionsRequest) (*pb.DescribeTransactionsResponse, error) {
	if _, err := s.node.Ctl().TxnCoordinator(ctx); err != nil {
		return nil, toStatus(err)
	}
	img := s.node.Image()
	out := &pb.DescribeTransactionsResponse{}
	for _, id := range in.TransactionalIds {
		t, ok := img.Transaction(id)
		if !ok {
			out.Transactions = append(out.Transactions, &metapb.TransactionState{TransactionalId: id, State: -1})
			continue
		}
		out.Transactions = append(out.Transactions, metadata.TxnToPB(t))
	}
	return out, nil
}

func (s *Service) ListTransactions(ctx context.Context, _ *pb.ListTransactionsRequest) (*pb.ListTransactionsResponse, error) {
	if _, err := s.node.Ctl().TxnCoordinator(ctx); err != nil {
		return nil, toStatus(err)
	}
	out := &pb.ListTransactionsResponse{}
	for _, t := range s.node.Image().Transactions() {
		out.Transactions = append(out.Transactions, metadata.TxnToPB(t))
	}
	return out, nil
}

// InitTxnProducer passes a transactional InitProducerId to the
// controller's coordinator.
func (f *Forwarder) InitTxnProducer(ctx context.Context, req txn.InitRequest) (txn.Txn, error) {
	resp, err := Call(ctx, f, (*Service).InitTxnProducer, pb.ControllerServiceClient.InitTxnProducer, &pb.InitTxnProducerRequest{
		TransactionalId: req.ID, TimeoutMs: req.TimeoutMs, ProducerId: req.ProducerID, ProducerEpoch: int32(req.ProducerEpoch),
		BumpPerTransaction: req.BumpPerTransaction})
	if err != nil {
		return txn.Txn{}, err
	}
	return txn.Txn{ID: req.ID, ProducerID: resp.ProducerId, ProducerEpoch: int16(resp.ProducerEpoch)}, nil
}

// AddPartitionsToTxn passes AddPartitionsToTxn on.
func (f *Forwarder) AddPartitionsToTxn(ctx context.Context, p txn.Producer, parts []txn.TopicPartition, verifyOnly bool) error {
	in := &pb.AddPartitionsToTxnRequest{Producer: producerToPB(p), VerifyOnly: verifyOnly}
	for _, tp := range parts {
		in.Partitions = append(in.Partitions, &metapb.OffsetPartition{Topic: tp.Topic, Partition: tp.Partition})
	}
	_, err := Call(ctx, f, (*Service).AddPartitionsToTxn, pb.ControllerServiceClient.AddPartitionsToTxn, in)
	return err
}

// AddOffsetsToTxn passes AddOffsetsToTxn on.
func (f *Forwarder) AddOffsetsToTxn(ctx context.Context, p txn.Producer, group string) error {
	_, err := Call(ctx, f, (*Service).AddOffsetsToTxn, pb.ControllerServiceClient.AddOffsetsToTxn,
		&pb.AddOffsetsToTxnRequest{Producer: producerToPB(p), Group: group})
	return err
}

// TxnOffsetCommit passes TxnOffsetCommit on.
func (f *Forwarder) TxnOffsetCommit(ctx context.Context, p txn.Producer, group string, member txn.Member, offsets []txn.Offset, addGroup bool) error {
	in := &pb.TxnOffsetCommitRequest{Producer: producerToPB(p), Group: group, AddGroup: addGroup,
		MemberId: member.ID, InstanceId: member.InstanceID, MemberEpoch: member.Epoch}
	for _, o := range offsets {
		in.Offsets = append(in.Offsets, &metapb.OffsetCommit{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata})
	}
	_, err := Call(ctx, f, (*Service).TxnOffsetCommit, pb.ControllerServiceClient.TxnOffsetCommit, in)
	return err
}

// EndTxn passes EndTxn on.
func (f *Forwarder) EndTxn(ctx context.Context, p txn.Producer, commit, bump bool) (txn.Txn, error) {
	resp, err := Call(ctx, f, (*Service).EndTxn, pb.ControllerServiceClient.EndTxn, &pb.EndTxnRequest{Producer: producerToPB(p), Commit: commit, BumpEpoch: bump})
	if err != nil {
		return txn.Txn{}, err
	}
	return txn.Txn{ID: p.ID, ProducerID: resp.ProducerId, ProducerEpoch: int16(resp.ProducerEpoch)}, nil
}

// DescribeTransactions describes transactional ids from the controller.
func (f *Forwarder) DescribeTransactions(ctx context.Context, ids []string) ([]txn.Txn, []bool, error) {
	resp, err := Call(ctx, f, (*Service).DescribeTransactions, pb.ControllerServiceClient.DescribeTransactions,
		&pb.DescribeTransactionsRequest{TransactionalIds: ids})
	if err != nil {
		return nil, nil, err
	}
	out := make([]txn.Txn, len(resp.Transactions))
	found := make([]bool, len(resp.Transactions))
	for i, r := range resp.Transactions {
		if r.State >= 0 {
			out[i], found[i] = metadata.TxnFromPB(r), true
		}
	}
	return out, found, nil
}

// ListTransactions lists every transactional id's state from the
// controller.
func (f *Forwarder) ListTransactions(ctx context.Context) ([]txn.Txn, error) {
	resp, err := Call(ctx, f, (*Service).ListTransactions, pb.ControllerServiceClient.ListTransactions, &pb.ListTransactionsRequest{})
	if err != nil {
		return nil, err
	}
	out := make([]txn.Txn, len(resp.Transactions))
	for i, r := range resp.Transactions {
		out[i] = metadata.TxnFromPB(r)
	}
	return out, nil
}
