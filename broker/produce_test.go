package broker_test

import (
	"errors"
	"io"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/partitioner"
)

func leo(t testing.TB, c *clients, topic string, p int32) int64 {
	t.Helper()
	dr, err := c.admin.DescribeTopics(ctxT(t), &quirev1.DescribeTopicsRequest{Names: []string{topic}})
	if err != nil {
		t.Fatal(err)
	}
	return dr.Topics[0].Partitions[p].LogEndOffset
}

func TestProduceAssignsOffsets(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	createTopic(t, c, "t", 2, nil)
	two := append(makeBatch(3, 10, "a"), makeBatch(2, 10, "b")...)
	for i, want := range []struct{ base, last int64 }{{0, 4}, {5, 9}} {
		res := produce(t, c, "t", 0, append([]byte(nil), two...))
		if res.Error != nil || res.BaseOffset != want.base || res.LastOffset != want.last || res.LogStartOffset != 0 || res.LogAppendTimeMs != -1 {
			t.Fatalf("produce %d: %+v", i, res)
		}
	}
	if n := leo(t, c, "t", 0); n != 10 {
		t.Fatalf("leo %d", n)
	}
	if n := leo(t, c, "t", 1); n != 0 {
		t.Fatalf("partition 1 leo %d", n)
	}
}

func TestProduceAcks(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	ctx := ctxT(t)
	createTopic(t, c, "acks", 1, nil)
	for _, acks := range []int32{1, -1} {
		resp, err := c.producer.Produce(ctx, &quirev1.ProduceRequest{OptionalAcks: &quirev1.ProduceRequest_Acks{Acks: acks}, CorrelationId: 7,
			Partitions: []*quirev1.PartitionRecords{{Topic: "acks", Records: makeBatch(1, 10, "x")}}})
		if err != nil || resp.CorrelationId != 7 || resp.Partitions[0].Error != nil {
			t.Fatalf("acks=%d: %v %v", acks, resp, err)
		}
	}
	resp, err := c.producer.Produce(ctx, &quirev1.ProduceRequest{OptionalAcks: &quirev1.ProduceRequest_Acks{Acks: 0},
		Partitions: []*quirev1.PartitionRecords{{Topic: "acks", Records: makeBatch(1, 10, "x")}}})
	if err != nil || len(resp.Partitions) != 0 {
		t.Fatalf("acks=0: %v %v", resp, err)
	}
	if n := leo(t, c, "acks", 0); n != 3 {
		t.Fatalf("leo %d after three produces", n)
	}
	_, err = c.producer.Produce(ctx, &quirev1.ProduceRequest{OptionalAcks: &quirev1.ProduceRequest_Acks{Acks: 2},
		Partitions: []*quirev1.PartitionRecords{{Topic: "acks", Records: makeBatch(1, 10, "x")}}})
	wantStatus(t, err, codes.InvalidArgument, quirev1.ErrorCode_INVALID_REQUIRED_ACKS, "2")
}

func TestProduceNotEnoughReplicas(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	createTopic(t, c, "isr", 1, map[string]string{"min.insync.replicas": "2"})
	res := produce(t, c, "isr", 0, makeBatch(2, 10, "x"))
	wantInline(t, res.Error, quirev1.ErrorCode_NOT_ENOUGH_REPLICAS, true)
	if n := leo(t, c, "isr", 0); n != 0 {
		t.Fatalf("appended %d records despite NOT_ENOUGH_REPLICAS", n)
	}
	// acks=1 does not need the ISR.
	resp, err := c.producer.Produce(ctxT(t), &quirev1.ProduceRequest{OptionalAcks: &quirev1.ProduceRequest_Acks{Acks: 1},
		Partitions: []*quirev1.PartitionRecords{{Topic: "isr", Records: makeBatch(2, 10, "x")}}})
	if err != nil || resp.Partitions[0].Error != nil {
		t.Fatalf("acks=1: %v %v", resp, err)
	}
}

func TestProduceBadBatches(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	createTopic(t, c, "bad", 1, map[string]string{"max.message.bytes": "2000"})

	big := makeBatch(30, 100, "big")
	res := produce(t, c, "bad", 0, big)
	wantInline(t, res.Error, quirev1.ErrorCode_MESSAGE_TOO_LARGE, false)

	corrupt := makeBatch(3, 10, "c")
	// A CRC mismatch is CORRUPT_MESSAGE, retriable as in Kafka (a resend
	// may arrive whole); a malformed batch is INVALID_RECORD, permanent.
	corrupt[len(corrupt)-2] ^= 0xff
	res = produce(t, c, "bad", 0, corrupt)
	wantInline(t, res.Error, quirev1.ErrorCode_CORRUPT_MESSAGE, true)
	// One cause, said once: no repeated "corrupt batch" prefixes, one line.
	if m := res.Error.Message; strings.Count(m, "corrupt batch") != 1 || strings.Contains(m, "\n") || !strings.Contains(m, "crc mismatch") {
		t.Errorf("corrupt batch message %q", m)
	}

	// A good batch followed by a corrupt one: nothing of either.
	mixed := append(makeBatch(2, 10, "ok"), corrupt...)
	res = produce(t, c, "bad", 0, mixed)
	wantInline(t, res.Error, quirev1.ErrorCode_CORRUPT_MESSAGE, true)

	truncated := makeBatch(3, 10, "t")
	res = produce(t, c, "bad", 0, truncated[:len(truncated)-5])
	wantInline(t, res.Error, quirev1.ErrorCode_INVALID_RECORD, false)

	res = produce(t, c, "bad", 0, nil)
	wantInline(t, res.Error, quirev1.ErrorCode_INVALID_REQUEST, false)

	if n := leo(t, c, "bad", 0); n != 0 {
		t.Fatalf("bad batches appended %d records", n)
	}
	if res := produce(t, c, "bad", 0, makeBatch(2, 10, "fine")); res.Error != nil || res.BaseOffset != 0 {
		t.Fatalf("good batch after bad ones: %+v", res)
	}
}

func TestProduceUnknownTopicOrPartition(t *testing.T) {
	t.Parallel()
	_, c := start(t, noAutoCreate)
	createTopic(t, c, "known", 1, nil)
	resp, err := c.producer.Produce(ctxT(t), &quirev1.ProduceRequest{Partitions: []*quirev1.PartitionRecords{
		{Topic: "unknown", Records: makeBatch(1, 10, "x")},
		{Topic: "known", Partition: 5, Records: makeBatch(1, 10, "x")},
		{Topic: "known", Partition: 0, Records: makeBatch(1, 10, "x")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	wantInline(t, resp.Partitions[0].Error, quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, true)
	wantInline(t, resp.Partitions[1].Error, quirev1.ErrorCode_INVALID_REQUEST, false)
	if resp.Partitions[2].Error != nil {
		t.Fatalf("good partition failed: %v", resp.Partitions[2].Error)
	}
	_, err = c.producer.ProduceRecords(ctxT(t), &quirev1.ProduceRecordsRequest{Topic: "unknown", Records: []*quirev1.ProduceRecord{{ValueData: &quirev1.ProduceRecord_Value{Value: "v"}}}})
	wantStatus(t, err, codes.NotFound, quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, "unknown")
}

func TestProduceAutoCreatesTopic(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	res := produce(t, c, "auto", 0, makeBatch(2, 10, "x"))
	if res.Error != nil || res.LastOffset != 1 {
		t.Fatalf("auto-create produce: %+v", res)
	}
	res = produce(t, c, "bad name!", 0, makeBatch(2, 10, "x"))
	wantInline(t, res.Error, quirev1.ErrorCode_INVALID_TOPIC_EXCEPTION, false)
}

func TestProduceStream(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	createTopic(t, c, "s", 2, nil)
	stream, err := c.producer.ProduceStream(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	const n = 50
	go func() {
		for i := 0; i < n; i++ {
			acks := int32(-1)
			if i%10 == 9 {
				acks = 0 // no response for these
			}
			_ = stream.Send(&quirev1.ProduceRequest{OptionalAcks: &quirev1.ProduceRequest_Acks{Acks: acks}, CorrelationId: int64(i),
				Partitions: []*quirev1.PartitionRecords{{Topic: "s", Partition: int32(i % 2), Records: makeBatch(2, 10, "x")}}})
		}
		_ = stream.CloseSend()
	}()
	seen := map[int64]bool{}
	lastBase := map[int32]int64{0: -1, 1: -1}
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if seen[resp.CorrelationId] || resp.CorrelationId%10 == 9 {
			t.Fatalf("unexpected or repeated correlation id %d", resp.CorrelationId)
		}
		seen[resp.CorrelationId] = true
		r := resp.Partitions[0]
		if r.Error != nil || r.BaseOffset <= lastBase[r.Partition] {
			t.Fatalf("response %d: %+v (previous base %d)", resp.CorrelationId, r, lastBase[r.Partition])
		}
		lastBase[r.Partition] = r.BaseOffset
	}
	if len(seen) != n-n/10 {
		t.Fatalf("got %d responses, want %d", len(seen), n-n/10)
	}
	if got := leo(t, c, "s", 0) + leo(t, c, "s", 1); got != 2*n {
		t.Fatalf("%d records in all, want %d", got, 2*n)
	}

	// A bad acks value ends the stream with a status.
	stream, err = c.producer.ProduceStream(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	_ = stream.Send(&quirev1.ProduceRequest{OptionalAcks: &quirev1.ProduceRequest_Acks{Acks: 5}})
	_, err = stream.Recv()
	wantStatus(t, err, codes.InvalidArgument, quirev1.ErrorCode_INVALID_REQUIRED_ACKS)
}

func TestProduceRecordsPartitioning(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	ctx := ctxT(t)
	createTopic(t, c, "pr", 4, nil)
	keys := []string{"alpha", "beta", "gamma", "delta", "epsilon"}
	var recs []*quirev1.ProduceRecord
	for _, k := range keys {
		recs = append(recs, &quirev1.ProduceRecord{KeyData: &quirev1.ProduceRecord_Key{Key: k}, ValueData: &quirev1.ProduceRecord_Value{Value: "v-" + k}})
	}
	recs = append(recs,
		&quirev1.ProduceRecord{ValueData: &quirev1.ProduceRecord_Value{Value: "explicit"}, OptionalPartition: &quirev1.ProduceRecord_Partition{Partition: 3}, Headers: []*quirev1.RecordHeader{{Key: "h", Value: []byte("hv")}}},
		&quirev1.ProduceRecord{ValueData: &quirev1.ProduceRecord_Value{Value: "sticky1"}},
		&quirev1.ProduceRecord{ValueData: &quirev1.ProduceRecord_Value{Value: "sticky2"}},
		&quirev1.ProduceRecord{KeyData: &quirev1.ProduceRecord_KeyBytes{KeyBytes: []byte{0xff, 0xfe}}, ValueData: &quirev1.ProduceRecord_ValueBytes{ValueBytes: []byte{0, 1, 2}}, TimestampMs: 1234},
	)
	resp, err := c.producer.ProduceRecords(ctx, &quirev1.ProduceRecordsRequest{Topic: "pr", Records: recs})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Results) != len(recs) {
		t.Fatalf("%d results for %d records", len(resp.Results), len(recs))
	}
	for i, k := range keys {
		if want := partitioner.KeyPartition([]byte(k), 4); resp.Results[i].Partition != want {
			t.Errorf("key %s on partition %d, want %d (murmur2)", k, resp.Results[i].Partition, want)
		}
	}
	if resp.Results[5].Partition != 3 {
		t.Errorf("explicit partition ignored: %+v", resp.Results[5])
	}
	if resp.Results[6].Partition != resp.Results[7].Partition {
		t.Errorf("keyless records of one request split: %d and %d", resp.Results[6].Partition, resp.Results[7].Partition)
	}
	if resp.Results[8].TimestampMs != 1234 {
		t.Errorf("timestamp %d", resp.Results[8].TimestampMs)
	}
	// Offsets per partition run 0, 1, 2… in request order.
	next := map[int32]int64{}
	for i, r := range resp.Results {
		if r.Error != nil || r.Offset != next[r.Partition] {
			t.Fatalf("record %d: %+v, want offset %d", i, r, next[r.Partition])
		}
		next[r.Partition]++
	}
	// The records read back as written.
	fr, err := c.consumer.FetchRecords(ctx, &quirev1.FetchRecordsRequest{Topic: "pr", Partition: 3})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range fr.Records {
		if r.GetValue() == "explicit" {
			found = len(r.Headers) == 1 && r.Headers[0].Key == "h" && string(r.Headers[0].Value) == "hv" && r.KeyData == nil
		}
	}
	if !found {
		t.Fatalf("explicit record not found with its header: %v", fr.Records)
	}
	p8 := resp.Results[8]
	fr, err = c.consumer.FetchRecords(ctx, &quirev1.FetchRecordsRequest{Topic: "pr", Partition: p8.Partition, Offset: p8.Offset, MaxRecords: 1})
	if err != nil || len(fr.Records) != 1 {
		t.Fatalf("fetch binary record: %v %v", fr, err)
	}
	// A value of valid UTF-8 comes back as text (RECORD_FORMAT_AUTO).
	if r := fr.Records[0]; string(r.GetKeyBytes()) != "\xff\xfe" || r.GetValue() != "\x00\x01\x02" || r.TimestampMs != 1234 {
		t.Fatalf("binary record read back as %+v", r)
	}

	_, err = c.producer.ProduceRecords(ctx, &quirev1.ProduceRecordsRequest{Topic: "pr", Records: []*quirev1.ProduceRecord{{ValueData: &quirev1.ProduceRecord_Value{Value: "x"}, OptionalPartition: &quirev1.ProduceRecord_Partition{Partition: 9}}}})
	wantStatus(t, err, codes.InvalidArgument, quirev1.ErrorCode_INVALID_REQUEST, "partition 9")
	_, err = c.producer.ProduceRecords(ctx, &quirev1.ProduceRecordsRequest{Topic: "pr"})
	wantStatus(t, err, codes.InvalidArgument, quirev1.ErrorCode_INVALID_REQUEST, "no records")
}

func TestProduceRecordsTooLarge(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	createTopic(t, c, "small", 1, map[string]string{"max.message.bytes": "200"})
	resp, err := c.producer.ProduceRecords(ctxT(t), &quirev1.ProduceRecordsRequest{Topic: "small",
		Records: []*quirev1.ProduceRecord{{ValueData: &quirev1.ProduceRecord_Value{Value: string(make([]byte, 500))}}}})
	if err != nil {
		t.Fatal(err)
	}
	wantInline(t, resp.Results[0].Error, quirev1.ErrorCode_MESSAGE_TOO_LARGE, false)
	if resp.Results[0].Offset != -1 {
		t.Fatalf("offset %d for a rejected record", resp.Results[0].Offset)
	}
}

func TestProduceConcurrentOffsetsAreContiguous(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	createTopic(t, c, "conc", 1, nil)
	const writers, each, per = 4, 25, 3
	type span struct{ base, last int64 }
	spans := make(chan span, writers*each)
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		go func() {
			for i := 0; i < each; i++ {
				resp, err := c.producer.Produce(ctxT(t), &quirev1.ProduceRequest{
					Partitions: []*quirev1.PartitionRecords{{Topic: "conc", Records: makeBatch(per, 10, "c")}}})
				if err != nil {
					errs <- err
					return
				}
				r := resp.Partitions[0]
				spans <- span{r.BaseOffset, r.LastOffset}
			}
			errs <- nil
		}()
	}
	for w := 0; w < writers; w++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	close(spans)
	seen := map[int64]bool{}
	for s := range spans {
		if s.last-s.base != per-1 || s.base%per != 0 || seen[s.base] {
			t.Fatalf("bad span %+v", s)
		}
		seen[s.base] = true
	}
	resp, err := c.consumer.Fetch(ctxT(t), &quirev1.FetchRequest{Partitions: []*quirev1.FetchPartition{{Topic: "conc", MaxBytes: 10 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	if n, first, last := countRecords(t, resp.Partitions[0].Records); n != writers*each*per || first != 0 || last != int64(n-1) {
		t.Fatalf("fetched %d records %d..%d", n, first, last)
	}
}

// TestProduceRecordsSplitsBatches: records that together exceed the
// topic's max.message.bytes go in as several batches, all acknowledged
// with contiguous offsets; a record too large for any batch fails alone.
func TestProduceRecordsSplitsBatches(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	ctx := ctxT(t)
	createTopic(t, c, "split", 1, map[string]string{"max.message.bytes": "4096"})
	value := strings.Repeat("v", 100)
	var recs []*quirev1.ProduceRecord
	for i := 0; i < 2000; i++ {
		recs = append(recs, &quirev1.ProduceRecord{ValueData: &quirev1.ProduceRecord_Value{Value: value}, OptionalPartition: &quirev1.ProduceRecord_Partition{Partition: 0}})
	}
	big := &quirev1.ProduceRecord{ValueData: &quirev1.ProduceRecord_Value{Value: strings.Repeat("b", 5000)}, OptionalPartition: &quirev1.ProduceRecord_Partition{Partition: 0}}
	recs = append(recs[:1000], append([]*quirev1.ProduceRecord{big}, recs[1000:]...)...)
	resp, err := c.producer.ProduceRecords(ctx, &quirev1.ProduceRecordsRequest{Topic: "split", Records: recs})
	if err != nil {
		t.Fatal(err)
	}
	next := int64(0)
	for i, r := range resp.Results {
		if i == 1000 {
			if r.Error == nil || r.Error.Code != quirev1.ErrorCode_MESSAGE_TOO_LARGE || !strings.Contains(r.Error.Message, "max.message.bytes 4096") {
				t.Fatalf("oversized record: %+v", r)
			}
			continue
		}
		if r.Error != nil || r.Offset != next {
			t.Fatalf("record %d: %+v, want offset %d", i, r, next)
		}
		next++
	}
	if n := leo(t, c, "split", 0); n != 2000 {
		t.Fatalf("log end %d, want 2000", n)
	}
}
