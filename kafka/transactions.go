package kafka

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/quirelog/quire/request"
	"github.com/quirelog/quire/txn"
)

// Transactions (transaction version 1, as a Kafka 3 cluster serves them):
// the coordinator runs on the controller and any node takes its calls,
// so FindCoordinator of a transactional id names the node asked, as for
// groups. A producer adds each partition (AddPartitionsToTxn) and group
// (AddOffsetsToTxn) before writing to it; a partition leader checks the
// partition was added on the producer's first batch there (KIP-890
// part 1), so no stray batch opens a transaction no marker ends.

// TxnBackend is the transactional calls of the request core
// (request/transactions.go).
type TxnBackend interface {
	// TxnCoordinator is this node on the connection's listener, for a
	// transactional id the caller may describe.
	TxnCoordinator(ctx context.Context, id string) (Node, error)
	InitTxnProducer(ctx context.Context, req txn.InitRequest) (txn.Txn, error)
	AddPartitionsToTxn(ctx context.Context, p txn.Producer, parts []txn.TopicPartition) error
	// AddPartitionsToTxnForBroker is AddPartitionsToTxn v4+: ClusterAction,
	// an answer per partition, verify-only or not.
	AddPartitionsToTxnForBroker(ctx context.Context, p txn.Producer, parts []txn.TopicPartition, verifyOnly bool) ([]error, error)
	AddOffsetsToTxn(ctx context.Context, p txn.Producer, group string) error
	TxnOffsetCommit(ctx context.Context, p txn.Producer, group string, member txn.Member, offsets []txn.Offset, addGroup bool) error
	// bump: EndTxn 5, transaction version 2.
	EndTxn(ctx context.Context, p txn.Producer, commit, bump bool) (txn.Txn, error)
	DescribeTransactions(ctx context.Context, ids []string) ([]request.TxnDescription, error)
	ListTransactions(ctx context.Context, states []txn.State, producerIDs []int64) ([]txn.Txn, error)
	WriteTxnMarkers(ctx context.Context, markers []request.TxnMarker) ([][]error, error)
}

// initTxnProducer is InitProducerId with a transactional id.
func initTxnProducer(ctx context.Context, b Backend, req *kmsg.InitProducerIDRequest) *kmsg.InitProducerIDResponse {
	resp := kmsg.NewPtrInitProducerIDResponse()
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	in := txn.InitRequest{ID: *req.TransactionalID, TimeoutMs: req.TransactionTimeoutMillis, ProducerID: -1, ProducerEpoch: -1}
	if req.Version >= 3 && req.ProducerID >= 0 {
		in.ProducerID, in.ProducerEpoch = req.ProducerID, req.ProducerEpoch
	}
	out, err := b.InitTxnProducer(ctx, in)
	if err != nil {
		resp.ErrorCode, _ = groupError(err)
		return resp
	}
	resp.ProducerID, resp.ProducerEpoch = out.ProducerID, out.ProducerEpoch
	return resp
}

func addPartitionsToTxn(ctx context.Context, b Backend, req *kmsg.AddPartitionsToTxnRequest) *kmsg.AddPartitionsToTxnResponse {
	if req.Version >= 4 {
		return addPartitionsToTxns(ctx, b, req)
	}
	resp := kmsg.NewPtrAddPartitionsToTxnResponse()
	var parts []txn.TopicPartition
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			parts = append(parts, txn.TopicPartition{Topic: t.Topic, Partition: p})
		}
	}
	err := b.AddPartitionsToTxn(ctx, txn.Producer{ID: req.TransactionalID, PID: req.ProducerID, Epoch: req.ProducerEpoch}, parts)
	code, _ := groupError(err)
	for _, t := range req.Topics {
		rt := kmsg.NewAddPartitionsToTxnResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// addPartitionsToTxns is AddPartitionsToTxn v4 and v5, as brokers send
// it: a batch of transactions, each answered per partition. With
// verify_only (KIP-890 part 1) a partition is answered NONE when it is in
// the producer's ongoing transaction and INVALID_TXN_STATE when not,
// nothing added; without, the partitions are added (what a partition
// leader does for a producer of transaction version 2, KIP-890 part 2).
// v5 differs from v4 only in allowing TRANSACTION_ABORTABLE in the
// answers, which the coordinator never gives: the same answer serves
// both. A caller without ClusterAction on the cluster is refused whole
// (the top-level CLUSTER_AUTHORIZATION_FAILED), as Kafka refuses it.
func addPartitionsToTxns(ctx context.Context, b Backend, req *kmsg.AddPartitionsToTxnRequest) *kmsg.AddPartitionsToTxnResponse {
	resp := kmsg.NewPtrAddPartitionsToTxnResponse()
	for _, tx := range req.Transactions {
		var parts []txn.TopicPartition
		for _, t := range tx.Topics {
			for _, p := range t.Partitions {
				parts = append(parts, txn.TopicPartition{Topic: t.Topic, Partition: p})
			}
		}
		errs, err := b.AddPartitionsToTxnForBroker(ctx, txn.Producer{ID: tx.TransactionalID, PID: tx.ProducerID, Epoch: tx.ProducerEpoch}, parts, tx.VerifyOnly)
		if err != nil {
			code, _ := groupError(err)
			if code == kerr.ClusterAuthorizationFailed.Code {
				resp.ErrorCode, resp.Transactions = code, nil
				return resp
			}
			errs = make([]error, len(parts))
			for i := range errs {
				errs[i] = err
			}
		}
		rtx := kmsg.NewAddPartitionsToTxnResponseTransaction()
		rtx.TransactionalID = tx.TransactionalID
		k := 0
		for _, t := range tx.Topics {
			rt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
				rp.Partition = p
				if k < len(errs) {
					rp.ErrorCode, _ = groupError(errs[k])
				}
				k++
				rt.Partitions = append(rt.Partitions, rp)
			}
			rtx.Topics = append(rtx.Topics, rt)
		}
		resp.Transactions = append(resp.Transactions, rtx)
	}
	return resp
}

func addOffsetsToTxn(ctx context.Context, b Backend, req *kmsg.AddOffsetsToTxnRequest) *kmsg.AddOffsetsToTxnResponse {
	resp := kmsg.NewPtrAddOffsetsToTxnResponse()
	err := b.AddOffsetsToTxn(ctx, txn.Producer{ID: req.TransactionalID, PID: req.ProducerID, Epoch: req.ProducerEpoch}, req.Group)
	resp.ErrorCode, _ = groupError(err)
	return resp
}

func txnOffsetCommit(ctx context.Context, b Backend, req *kmsg.TxnOffsetCommitRequest) *kmsg.TxnOffsetCommitResponse {
	resp := kmsg.NewPtrTxnOffsetCommitResponse()
	var offs []txn.Offset
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			o := txn.Offset{Topic: t.Topic, Partition: p.Partition, Offset: p.Offset, LeaderEpoch: -1}
			if req.Version >= 2 {
				o.LeaderEpoch = p.LeaderEpoch
			}
			if p.Metadata != nil {
				o.Metadata = *p.Metadata
			}
			offs = append(offs, o)
		}
	}
	// From v3 the offsets are sent as the consumer's group member, which
	// the coordinator checks: in the group at its generation (the member
	// epoch), owning each partition.
	var member txn.Member
	if req.Version >= 3 {
		member = txn.Member{ID: req.MemberID, InstanceID: deref(req.InstanceID), Epoch: req.Generation}
	}
	// TxnOffsetCommit 5 is transaction version 2's: the group joins the
	// transaction with its first commit.
	err := b.TxnOffsetCommit(ctx, txn.Producer{ID: req.TransactionalID, PID: req.ProducerID, Epoch: req.ProducerEpoch}, req.Group, member, offs, req.Version >= 5)
	code, _ := groupError(err)
	for _, t := range req.Topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func endTxn(ctx context.Context, b Backend, req *kmsg.EndTxnRequest) *kmsg.EndTxnResponse {
	resp := kmsg.NewPtrEndTxnResponse()
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	out, err := b.EndTxn(ctx, txn.Producer{ID: req.TransactionalID, PID: req.ProducerID, Epoch: req.ProducerEpoch}, req.Commit, req.Version >= 5)
	if err != nil {
		resp.ErrorCode, _ = groupError(err)
		return resp
	}
	resp.ProducerID, resp.ProducerEpoch = out.ProducerID, out.ProducerEpoch
	return resp
}

func describeTransactions(ctx context.Context, b Backend, req *kmsg.DescribeTransactionsRequest) *kmsg.DescribeTransactionsResponse {
	resp := kmsg.NewPtrDescribeTransactionsResponse()
	got, err := b.DescribeTransactions(ctx, req.TransactionalIDs)
	code, _ := coreError(err)
	for i, id := range req.TransactionalIDs {
		s := kmsg.NewDescribeTransactionsResponseTransactionState()
		s.TransactionalID, s.ProducerID, s.ProducerEpoch, s.StartTimestamp = id, -1, -1, -1
		switch {
		case code != 0:
			s.ErrorCode = code
		case i >= len(got):
			s.ErrorCode = kerr.UnknownServerError.Code
		case got[i].Err != nil:
			s.ErrorCode, _ = coreError(got[i].Err)
		default:
			t := got[i].Txn
			s.State, s.TimeoutMillis, s.ProducerID, s.ProducerEpoch = t.State.String(), t.TimeoutMs, t.ProducerID, t.ProducerEpoch
			if t.State == txn.Ongoing || t.State.Preparing() {
				s.StartTimestamp = t.StartMs
			}
			for _, p := range t.Partitions {
				if n := len(s.Topics); n > 0 && s.Topics[n-1].Topic == p.Topic {
					s.Topics[n-1].Partitions = append(s.Topics[n-1].Partitions, p.Partition)
					continue
				}
				st := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
				st.Topic, st.Partitions = p.Topic, []int32{p.Partition}
				s.Topics = append(s.Topics, st)
			}
		}
		resp.TransactionStates = append(resp.TransactionStates, s)
	}
	return resp
}

func listTransactions(ctx context.Context, b Backend, req *kmsg.ListTransactionsRequest) *kmsg.ListTransactionsResponse {
	resp := kmsg.NewPtrListTransactionsResponse()
	var states []txn.State
	for _, name := range req.StateFilters {
		s, ok := txn.ParseState(name)
		if !ok {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, name)
			continue
		}
		states = append(states, s)
	}
	if len(req.StateFilters) > 0 && len(states) == 0 {
		return resp // only unknown states: none matches
	}
	got, err := b.ListTransactions(ctx, states, req.ProducerIDFilters)
	if err != nil {
		resp.ErrorCode, _ = coreError(err)
		return resp
	}
	now := time.Now().UnixMilli()
	for _, t := range got {
		if req.Version >= 1 && req.DurationFilterMillis >= 0 {
			// Only transactions running longer than the filter.
			if (t.State != txn.Ongoing && !t.State.Preparing()) || now-t.StartMs <= req.DurationFilterMillis {
				continue
			}
		}
		s := kmsg.NewListTransactionsResponseTransactionState()
		s.TransactionalID, s.ProducerID, s.TransactionState = t.ID, t.ProducerID, t.State.String()
		resp.TransactionStates = append(resp.TransactionStates, s)
	}
	return resp
}

func writeTxnMarkers(ctx context.Context, b Backend, req *kmsg.WriteTxnMarkersRequest) *kmsg.WriteTxnMarkersResponse {
	resp := kmsg.NewPtrWriteTxnMarkersResponse()
	markers := make([]request.TxnMarker, len(req.Markers))
	for i, m := range req.Markers {
		tm := request.TxnMarker{ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch, Commit: m.Committed, CoordinatorEpoch: m.CoordinatorEpoch}
		for _, t := range m.Topics {
			for _, p := range t.Partitions {
				tm.Partitions = append(tm.Partitions, txn.TopicPartition{Topic: t.Topic, Partition: p})
			}
		}
		markers[i] = tm
	}
	got, err := b.WriteTxnMarkers(ctx, markers)
	code, _ := coreError(err)
	for i, m := range req.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		k := 0
		for _, t := range m.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition, rp.ErrorCode = p, code
				if code == 0 && i < len(got) && k < len(got[i]) {
					rp.ErrorCode, _ = coreError(got[i][k])
				}
				k++
				rt.Partitions = append(rt.Partitions, rp)
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	return resp
}
