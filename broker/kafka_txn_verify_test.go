package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestBrokerKafkaAddPartitionsToTxnVerify: AddPartitionsToTxn v4+ with
// verify_only, as a Kafka broker asks it of the coordinator (franz-go
// negotiates the version, 5), against a dev broker: while franz-go's
// producer has a transaction open with a record in ktxv-0, that
// partition is in it and ktxv-1 is not, ktxv-2 does not exist; nothing is added by asking; once
// the transaction has committed neither is.
func TestBrokerKafkaAddPartitionsToTxnVerify(t *testing.T) {
	t.Parallel()
	_, addr := startKafkaBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin := kafkaClient(t, addr)
	creq := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "ktxv", 2, 1
	creq.Topics = append(creq.Topics, ct)
	if cresp, err := creq.RequestWith(ctx, admin); err != nil || cresp.Topics[0].ErrorCode != 0 {
		t.Fatalf("CreateTopics: %+v, %v", cresp, err)
	}
	prod := kafkaClient(t, addr, kgo.TransactionalID("txv"), kgo.DefaultProduceTopic("ktxv"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(30*time.Second))
	if err := prod.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := prod.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	dreq := kmsg.NewPtrDescribeTransactionsRequest()
	dreq.TransactionalIDs = []string{"txv"}
	dresp, err := dreq.RequestWith(ctx, admin)
	if err != nil || len(dresp.TransactionStates) != 1 || dresp.TransactionStates[0].State != "Ongoing" {
		t.Fatalf("DescribeTransactions: %+v, %v", dresp, err)
	}
	st := dresp.TransactionStates[0]
	verify := func() []int16 {
		t.Helper()
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
		tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly = "txv", st.ProducerID, st.ProducerEpoch, true
		tt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
		tt.Topic, tt.Partitions = "ktxv", []int32{0, 1, 2}
		tx.Topics = append(tx.Topics, tt)
		req.Transactions = append(req.Transactions, tx)
		resp, err := req.RequestWith(ctx, admin)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Version < 4 || resp.ErrorCode != 0 || len(resp.Transactions) != 1 || len(resp.Transactions[0].Topics) != 1 {
			t.Fatalf("AddPartitionsToTxn v%d: %+v", resp.Version, resp)
		}
		var out []int16
		for _, p := range resp.Transactions[0].Topics[0].Partitions {
			out = append(out, p.ErrorCode)
		}
		return out
	}
	if got := verify(); len(got) != 3 || got[0] != 0 || got[1] != kerr.InvalidTxnState.Code || got[2] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("verify during the transaction: %v, want [0 %d %d]", got, kerr.InvalidTxnState.Code, kerr.UnknownTopicOrPartition.Code)
	}
	dresp, err = dreq.RequestWith(ctx, admin)
	if err != nil || len(dresp.TransactionStates[0].Topics) != 1 || len(dresp.TransactionStates[0].Topics[0].Partitions) != 1 {
		t.Fatalf("after verifying, the transaction's partitions: %+v, %v", dresp, err)
	}
	if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if got := verify(); len(got) != 3 || got[0] != kerr.InvalidTxnState.Code || got[1] != kerr.InvalidTxnState.Code {
		t.Fatalf("verify after the commit: %v, want ktxv-0 and ktxv-1 INVALID_TXN_STATE", got)
	}
}
