package broker_test

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	quirev1 "github.com/quirelog/quire/api/quirev1"
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

// A transactional batch is refused UNSUPPORTED_VERSION on both doors,
// with the same message as a transactional InitProducerId, and is not
// appended: with no transaction coordinator nothing would ever end the
// transaction. On the Kafka door a produce naming a transactional id is
// refused the same way.
func TestProduceTransactionalRefused(t *testing.T) {
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
	wantInline(t, e, quirev1.ErrorCode_UNSUPPORTED_VERSION, false)
	if !strings.Contains(e.Message, "transactions are not supported") {
		t.Fatalf("gRPC message %q does not say transactions are not supported", e.Message)
	}

	cl := kafkaClient(t, addr)
	for _, txnID := range []*string{nil, kmsg.StringPtr("my-txn")} {
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis, req.TransactionID = -1, 10_000, txnID
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
		p := kr.Topics[0].Partitions[0]
		if p.ErrorCode != kerr.UnsupportedVersion.Code || p.ErrorMessage == nil || !strings.Contains(*p.ErrorMessage, "transactions are not supported") {
			t.Fatalf("transactional id %v: Kafka answer %d %v, want UNSUPPORTED_VERSION saying transactions are not supported",
				txnID != nil, p.ErrorCode, p.ErrorMessage)
		}
	}
	if n := leo(t, c, "txn", 0); n != 0 {
		t.Fatalf("appended %d records", n)
	}
}
