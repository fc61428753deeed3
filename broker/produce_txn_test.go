package broker_test

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker/brokertest"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/record"
)

// txnBatch is a batch of one record with the transactional attribute, of
// producer id at epoch 0.
func txnBatch(id int64) []byte {
	b := record.NewBuilder(record.None)
	b.SetProducer(id, 0, 0)
	b.SetTransactional(true)
	b.Append(1000, nil, []byte("txn"), nil)
	return b.Build()
}

// A transactional batch that belongs to no transaction the coordinator
// knows is refused on both doors and not appended (KIP-890: it would open
// a transaction no marker ever ends): without its transactional id
// INVALID_TXN_STATE, with an id the coordinator does not have
// INVALID_PRODUCER_ID_MAPPING.
func TestProduceStrayTransactionalBatchRefused(t *testing.T) {
	t.Parallel()
	b, addr := startKafkaBroker(t)
	c := dial(t, b)
	createTopic(t, c, "txn", 1, nil)
	pid := initProducer(t, c, -1, -1)

	resp, err := c.producer.Produce(ctxT(t), &quirev1.ProduceRequest{OptionalAcks: &quirev1.ProduceRequest_Acks{Acks: -1},
		Partitions: []*quirev1.PartitionRecords{{Topic: "txn", Records: txnBatch(pid.ProducerId)}}})
	if err != nil {
		t.Fatal(err)
	}
	e := resp.Partitions[0].Error
	wantInline(t, e, quirev1.ErrorCode_INVALID_TXN_STATE, false)
	if !strings.Contains(e.Message, "without its transactional id") {
		t.Fatalf("gRPC message %q does not say the transactional id is missing", e.Message)
	}

	cl := kafkaClient(t, addr)
	for _, tc := range []struct {
		id   *string
		code int16
	}{{nil, kerr.InvalidTxnState.Code}, {kmsg.StringPtr("my-txn"), kerr.InvalidProducerIDMapping.Code}} {
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis, req.TransactionID = -1, 10_000, tc.id
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "txn"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = txnBatch(pid.ProducerId)
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		kr, err := req.RequestWith(ctxT(t), cl)
		if err != nil {
			t.Fatal(err)
		}
		if p := kr.Topics[0].Partitions[0]; p.ErrorCode != tc.code {
			t.Fatalf("transactional id %v: Kafka answer %d %v, want %d", tc.id != nil, p.ErrorCode, p.ErrorMessage, tc.code)
		}
	}
	if n := leo(t, c, "txn", 0); n != 0 {
		t.Fatalf("appended %d records", n)
	}
}

// A transactional batch at a newer producer epoch than the transaction
// the producer has open in the partition is not taken into that
// transaction: the coordinator is asked about it first (here it knows
// no such epoch: refused), and nothing is appended. With KIP-890's
// epoch bump at every transaction's end, such a batch is the next
// transaction's, written while the previous one's marker is still to
// come; joined to it, it would share that transaction's fate (the fault
// suite saw a committed transaction's records aborted so, with its
// group's offsets committed). Once the previous transaction's marker is
// written, the next batch begins a transaction of its own.
func TestProduceTransactionalBatchOfNewerEpochNotJoined(t *testing.T) {
	t.Parallel()
	b, c := start(t)
	brokertest.WaitMetadataVersion(t, b, metadata.MetadataVersionTransactions)
	createTopic(t, c, "txn", 1, nil)
	tc := quirev1.NewTransactionsClient(c.conn)
	init, err := tc.InitTransactions(ctxT(t), &quirev1.InitTransactionsRequest{TransactionalId: "tid", TimeoutMs: 60_000})
	if err != nil {
		t.Fatal(err)
	}
	produce := func(epoch int16) *quirev1.Error {
		t.Helper()
		b := record.NewBuilder(record.None)
		b.SetProducer(init.ProducerId, epoch, 0)
		b.SetTransactional(true)
		b.Append(1000, nil, []byte("v"), nil)
		resp, err := c.producer.Produce(ctxT(t), &quirev1.ProduceRequest{OptionalAcks: &quirev1.ProduceRequest_Acks{Acks: -1},
			TransactionalId: "tid", Partitions: []*quirev1.PartitionRecords{{Topic: "txn", Records: b.Build()}}})
		if err != nil {
			t.Fatal(err)
		}
		if e := resp.Partitions[0].Error; e.GetCode() != quirev1.ErrorCode_NONE {
			return e
		}
		return nil
	}
	epoch := int16(init.ProducerEpoch)
	if e := produce(epoch); e != nil {
		t.Fatalf("the transaction's first batch: %v", e)
	}
	if e := produce(epoch + 1); e == nil {
		t.Fatalf("a batch at epoch %d was taken into the transaction open at epoch %d", epoch+1, epoch)
	}
	if n := leo(t, c, "txn", 0); n != 1 {
		t.Fatalf("log end %d, want 1: the batch of the newer epoch was appended", n)
	}
	end, err := tc.EndTransaction(ctxT(t), &quirev1.EndTransactionRequest{Commit: false,
		Producer: &quirev1.TransactionalProducer{TransactionalId: "tid", ProducerId: init.ProducerId, ProducerEpoch: init.ProducerEpoch}})
	if err != nil {
		t.Fatal(err)
	}
	if e := produce(int16(end.ProducerEpoch)); e != nil {
		t.Fatalf("the next transaction's first batch, at epoch %d: %v", end.ProducerEpoch, e)
	}
	if n := leo(t, c, "txn", 0); n != 3 {
		t.Fatalf("log end %d, want 3 (a batch, the abort marker, the next transaction's batch)", n)
	}
}
