package broker_test

import (
	"math"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/record"
)

func initProducer(t testing.TB, c *clients, id int64, epoch int32) *quirev1.InitProducerIdResponse {
	t.Helper()
	req := &quirev1.InitProducerIdRequest{ProducerEpoch: epoch}
	if id != -2 {
		req.OptionalProducerId = &quirev1.InitProducerIdRequest_ProducerId{ProducerId: id}
	}
	resp, err := c.producer.InitProducerId(ctxT(t), req)
	if err != nil {
		t.Fatalf("InitProducerId(%d, %d): %v", id, epoch, err)
	}
	return resp
}

// idemBatch is a batch of n records of producer id at epoch from seq.
func idemBatch(n int, id int64, epoch int16, seq int32, prefix string) []byte {
	b := record.NewBuilder(record.None)
	b.SetProducer(id, epoch, seq)
	for i := 0; i < n; i++ {
		b.Append(1000, nil, []byte(prefix), nil)
	}
	return b.Build()
}

// InitProducerId hands out new ids at epoch 0 (-1 or no id alike), bumps
// the epoch of an id it handed out, and gives a new id for one it never
// did or whose epoch cannot grow.
func TestProduceInitProducerID(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	a := initProducer(t, c, -1, -1)
	b := initProducer(t, c, -2, 0)
	if a.ProducerEpoch != 0 || b.ProducerEpoch != 0 || a.ProducerId < 0 || b.ProducerId == a.ProducerId {
		t.Fatalf("new producers: %v, %v", a, b)
	}
	bumped := initProducer(t, c, a.ProducerId, a.ProducerEpoch)
	if bumped.ProducerId != a.ProducerId || bumped.ProducerEpoch != 1 {
		t.Fatalf("bump of %v: %v", a, bumped)
	}
	unknown := initProducer(t, c, 1<<40, 3)
	if unknown.ProducerId == 1<<40 || unknown.ProducerEpoch != 0 {
		t.Fatalf("id never handed out: %v", unknown)
	}
	full := initProducer(t, c, a.ProducerId, math.MaxInt16)
	if full.ProducerId == a.ProducerId || full.ProducerEpoch != 0 {
		t.Fatalf("epoch at its maximum: %v", full)
	}
	_, err := c.producer.InitProducerId(ctxT(t), &quirev1.InitProducerIdRequest{
		OptionalProducerId: &quirev1.InitProducerIdRequest_ProducerId{ProducerId: a.ProducerId}, ProducerEpoch: -3})
	wantStatus(t, err, codes.InvalidArgument, quirev1.ErrorCode_INVALID_REQUEST, "epoch -3")
	seen := map[int64]bool{}
	for i := 0; i < 1200; i++ { // past one block of 1000
		r := initProducer(t, c, -1, -1)
		if seen[r.ProducerId] {
			t.Fatalf("producer id %d handed out twice", r.ProducerId)
		}
		seen[r.ProducerId] = true
	}
}

// Producer ids come from blocks committed in the metadata log: a broker
// restarted on the same data never hands out an id it handed out before.
func TestProduceProducerIDsSurviveRestart(t *testing.T) {
	t.Parallel()
	cfg := brokerConfig(t)
	b := startConfig(t, cfg)
	first := initProducer(t, dial(t, b), -1, -1)
	stop(t, b)
	b = startConfig(t, cfg)
	again := initProducer(t, dial(t, b), -1, -1)
	if again.ProducerId <= first.ProducerId {
		t.Fatalf("after a restart: id %d, before: %d", again.ProducerId, first.ProducerId)
	}
}

func TestProduceIdempotentNeedsAcksAll(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	createTopic(t, c, "idem", 1, nil)
	pid := initProducer(t, c, -1, -1)
	resp, err := c.producer.Produce(ctxT(t), &quirev1.ProduceRequest{OptionalAcks: &quirev1.ProduceRequest_Acks{Acks: 1},
		Partitions: []*quirev1.PartitionRecords{{Topic: "idem", Records: idemBatch(2, pid.ProducerId, 0, 0, "x")}}})
	if err != nil {
		t.Fatal(err)
	}
	e := resp.Partitions[0].Error
	wantInline(t, e, quirev1.ErrorCode_INVALID_REQUEST, false)
	if !strings.Contains(e.Message, "acks=-1") {
		t.Fatalf("message %q does not say acks=-1 is needed", e.Message)
	}
	if n := leo(t, c, "idem", 0); n != 0 {
		t.Fatalf("appended %d records", n)
	}
}

// A retried batch gets its original offsets, and the log holds it once;
// the sequence errors reach the client with their Kafka codes.
func TestProduceIdempotentSequenceRules(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	createTopic(t, c, "idem", 1, nil)
	pid := initProducer(t, c, -1, -1)
	id := pid.ProducerId
	first := produce(t, c, "idem", 0, idemBatch(3, id, 0, 0, "a"))
	second := produce(t, c, "idem", 0, idemBatch(2, id, 0, 3, "b"))
	if first.Error != nil || second.Error != nil || first.BaseOffset != 0 || second.BaseOffset != 3 {
		t.Fatalf("first writes: %v, %v", first, second)
	}
	for _, retry := range []struct {
		batch      []byte
		base, last int64
	}{{idemBatch(3, id, 0, 0, "a"), 0, 2}, {idemBatch(2, id, 0, 3, "b"), 3, 4}} {
		res := produce(t, c, "idem", 0, retry.batch)
		if res.Error != nil || res.BaseOffset != retry.base || res.LastOffset != retry.last {
			t.Fatalf("retry: %v, want offsets %d-%d", res, retry.base, retry.last)
		}
	}
	if n := leo(t, c, "idem", 0); n != 5 {
		t.Fatalf("log end %d after retries, want 5", n)
	}
	wantInline(t, produce(t, c, "idem", 0, idemBatch(1, id, 0, 9, "gap")).Error, quirev1.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER, false)
	bumped := initProducer(t, c, id, 0)
	if res := produce(t, c, "idem", 0, idemBatch(1, id, int16(bumped.ProducerEpoch), 0, "new epoch")); res.Error != nil || res.BaseOffset != 5 {
		t.Fatalf("new epoch at sequence 0: %v", res)
	}
	wantInline(t, produce(t, c, "idem", 0, idemBatch(1, id, 0, 5, "old epoch")).Error, quirev1.ErrorCode_INVALID_PRODUCER_EPOCH, false)
	other := initProducer(t, c, -1, -1)
	wantInline(t, produce(t, c, "idem", 0, idemBatch(1, other.ProducerId, 0, 7, "unknown")).Error, quirev1.ErrorCode_UNKNOWN_PRODUCER_ID, false)
	if n := leo(t, c, "idem", 0); n != 6 {
		t.Fatalf("log end %d after refused batches, want 6", n)
	}
}

func recordsRequest(topic string, p int32, id int64, epoch, seq int32, values ...string) *quirev1.ProduceRecordsRequest {
	req := &quirev1.ProduceRecordsRequest{Topic: topic, ProducerEpoch: epoch, BaseSequence: seq,
		OptionalProducerId: &quirev1.ProduceRecordsRequest_ProducerId{ProducerId: id}}
	for _, v := range values {
		req.Records = append(req.Records, &quirev1.ProduceRecord{ValueData: &quirev1.ProduceRecord_Value{Value: v},
			OptionalPartition: &quirev1.ProduceRecord_Partition{Partition: p}})
	}
	return req
}

// ProduceRecords with a producer id: the same request twice is written
// once and both answers carry the same offsets.
func TestProduceRecordsIdempotentRetry(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	createTopic(t, c, "plain", 2, nil)
	pid := initProducer(t, c, -1, -1)
	var offsets [][]int64
	for try := 0; try < 3; try++ {
		resp, err := c.producer.ProduceRecords(ctxT(t), recordsRequest("plain", 1, pid.ProducerId, 0, 0, "a", "b", "c"))
		if err != nil {
			t.Fatal(err)
		}
		var got []int64
		for _, r := range resp.Results {
			if r.Error != nil {
				t.Fatalf("try %d: %v", try, r.Error)
			}
			got = append(got, r.Offset)
		}
		offsets = append(offsets, got)
	}
	for _, o := range offsets {
		if len(o) != 3 || o[0] != 0 || o[2] != 2 {
			t.Fatalf("offsets of the tries: %v", offsets)
		}
	}
	resp, err := c.producer.ProduceRecords(ctxT(t), recordsRequest("plain", 1, pid.ProducerId, 0, 3, "d"))
	if err != nil || resp.Results[0].Error != nil || resp.Results[0].Offset != 3 {
		t.Fatalf("next sequence: %v %v", resp, err)
	}
	if n := leo(t, c, "plain", 1); n != 4 {
		t.Fatalf("log end %d, want 4", n)
	}
	resp, err = c.producer.ProduceRecords(ctxT(t), recordsRequest("plain", 1, pid.ProducerId, 0, 9, "gap"))
	if err != nil {
		t.Fatal(err)
	}
	wantInline(t, resp.Results[0].Error, quirev1.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER, false)

	noPart := recordsRequest("plain", 1, pid.ProducerId, 0, 4, "x")
	noPart.Records[0].OptionalPartition = nil
	_, err = c.producer.ProduceRecords(ctxT(t), noPart)
	wantStatus(t, err, codes.InvalidArgument, quirev1.ErrorCode_INVALID_REQUEST, "explicit partition")
	two := recordsRequest("plain", 1, pid.ProducerId, 0, 4, "x", "y")
	two.Records[1].OptionalPartition = &quirev1.ProduceRecord_Partition{Partition: 0}
	_, err = c.producer.ProduceRecords(ctxT(t), two)
	wantStatus(t, err, codes.InvalidArgument, quirev1.ErrorCode_INVALID_REQUEST, "same explicit partition")
	acks1 := recordsRequest("plain", 1, pid.ProducerId, 0, 4, "x")
	acks1.OptionalAcks = &quirev1.ProduceRecordsRequest_Acks{Acks: 1}
	_, err = c.producer.ProduceRecords(ctxT(t), acks1)
	wantStatus(t, err, codes.InvalidArgument, quirev1.ErrorCode_INVALID_REQUEST, "acks=-1")
}

// With a producer id, a ProduceRecords request may take at most the 5
// batches a partition remembers of a producer, so that a retry of it is
// always recognised.
func TestProduceRecordsIdempotentBatchLimit(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	createTopic(t, c, "small", 1, map[string]string{"max.message.bytes": "2000"})
	pid := initProducer(t, c, -1, -1)
	var values []string
	for i := 0; i < 40; i++ {
		values = append(values, strings.Repeat("v", 300))
	}
	_, err := c.producer.ProduceRecords(ctxT(t), recordsRequest("small", 0, pid.ProducerId, 0, 0, values...))
	wantStatus(t, err, codes.InvalidArgument, quirev1.ErrorCode_INVALID_REQUEST, "at most 5")
	if n := leo(t, c, "small", 0); n != 0 {
		t.Fatalf("appended %d records", n)
	}
	resp, err := c.producer.ProduceRecords(ctxT(t), recordsRequest("small", 0, pid.ProducerId, 0, 0, values[:20]...))
	if err != nil || resp.Results[19].Error != nil || resp.Results[19].Offset != 19 {
		t.Fatalf("20 records in 5 batches or fewer: %v %v", resp, err)
	}
}
