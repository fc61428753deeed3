package broker_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

func produceValues(t *testing.T, c *clients, topic string, p int32, values ...string) {
	t.Helper()
	var recs []*quirev1.ProduceRecord
	for _, v := range values {
		recs = append(recs, &quirev1.ProduceRecord{ValueData: &quirev1.ProduceRecord_Value{Value: v}, OptionalPartition: &quirev1.ProduceRecord_Partition{Partition: p}})
	}
	resp, err := c.producer.ProduceRecords(ctxT(t), &quirev1.ProduceRecordsRequest{Topic: topic, Records: recs})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range resp.Results {
		if r.Error != nil {
			t.Fatalf("produce %s-%d: %v", topic, p, r.Error)
		}
	}
}

func multiValues(a *quirev1.FetchRecordsPartitionResult) []string {
	var out []string
	for _, r := range a.Records {
		out = append(out, r.GetValue())
	}
	return out
}

// Several partitions of two topics in one call, each answered in request
// order with its own records, offsets and errors.
func TestFetchRecordsMultiPartitions(t *testing.T) {
	t.Parallel()
	_, c := start(t, noAutoCreate)
	ctx := ctxT(t)
	createTopic(t, c, "ma", 2, nil)
	createTopic(t, c, "mb", 1, nil)
	produceValues(t, c, "ma", 0, "a0", "a1", "a2")
	produceValues(t, c, "ma", 1, "b0")
	produceValues(t, c, "mb", 0, "c0", "c1")

	resp, err := c.consumer.FetchRecordsMulti(ctx, &quirev1.FetchRecordsMultiRequest{Partitions: []*quirev1.FetchRecordsPartition{
		{Topic: "mb", Partition: 0, Offset: 1},
		{Topic: "ma", Partition: 0, Offset: 1},
		{Topic: "ma", Partition: 1},
		{Topic: "ma", Partition: 5},
		{Topic: "nope", Partition: 0},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Partitions) != 5 {
		t.Fatalf("%d answers for 5 partitions", len(resp.Partitions))
	}
	want := []struct {
		topic  string
		values []string
		next   int64
		hw     int64
	}{{"mb", []string{"c1"}, 2, 2}, {"ma", []string{"a1", "a2"}, 3, 3}, {"ma", []string{"b0"}, 1, 1}}
	for i, w := range want {
		a := resp.Partitions[i]
		if a.Error != nil || a.Topic != w.topic || !equalStrings(multiValues(a), w.values) || a.NextOffset != w.next || a.HighWatermark != w.hw {
			t.Errorf("partition %d: %+v, want %v next %d hw %d", i, a, w.values, w.next, w.hw)
		}
		for _, r := range a.Records {
			if r.Topic != a.Topic || r.Partition != a.Partition {
				t.Errorf("record %+v in the answer for %s-%d", r, a.Topic, a.Partition)
			}
		}
	}
	// A partition past the count is an invalid request (see errors.proto).
	wantInline(t, resp.Partitions[3].Error, quirev1.ErrorCode_INVALID_REQUEST, false)
	wantInline(t, resp.Partitions[4].Error, quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, true)
	if a := resp.Partitions[4]; a.Topic != "nope" || len(a.Records) != 0 || a.HighWatermark != -1 {
		t.Errorf("unknown topic answered %+v", a)
	}

	// An offset past the end is that partition's error; the others still
	// come back.
	resp, err = c.consumer.FetchRecordsMulti(ctx, &quirev1.FetchRecordsMultiRequest{Partitions: []*quirev1.FetchRecordsPartition{
		{Topic: "ma", Partition: 0, Offset: 100}, {Topic: "mb", Partition: 0},
	}})
	if err != nil {
		t.Fatal(err)
	}
	wantInline(t, resp.Partitions[0].Error, quirev1.ErrorCode_OFFSET_OUT_OF_RANGE, false)
	if got := multiValues(resp.Partitions[1]); !equalStrings(got, []string{"c0", "c1"}) {
		t.Errorf("beside an out-of-range partition: %v", got)
	}

	// max_records counts across partitions, in request order; a partition
	// cut short resumes at its first record not returned.
	resp, err = c.consumer.FetchRecordsMulti(ctx, &quirev1.FetchRecordsMultiRequest{MaxRecords: 3, Partitions: []*quirev1.FetchRecordsPartition{
		{Topic: "mb", Partition: 0}, {Topic: "ma", Partition: 0}, {Topic: "ma", Partition: 1},
	}})
	if err != nil {
		t.Fatal(err)
	}
	got := [][]string{multiValues(resp.Partitions[0]), multiValues(resp.Partitions[1]), multiValues(resp.Partitions[2])}
	if !equalStrings(got[0], []string{"c0", "c1"}) || !equalStrings(got[1], []string{"a0"}) || len(got[2]) != 0 {
		t.Fatalf("max_records 3: %v", got)
	}
	if resp.Partitions[1].NextOffset != 1 || resp.Partitions[2].NextOffset != 0 {
		t.Fatalf("next offsets after a cut: %d, %d", resp.Partitions[1].NextOffset, resp.Partitions[2].NextOffset)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A long poll over partitions with nothing new answers when a record is
// appended to any of them, well before max_wait_ms; with nothing appended
// it answers empty at max_wait_ms, offsets unchanged.
func TestFetchRecordsMultiLongPollWakesOnAppend(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	createTopic(t, c, "lp", 3, nil)
	produceValues(t, c, "lp", 0, "old")
	req := &quirev1.FetchRecordsMultiRequest{MaxWaitMs: 120_000, Partitions: []*quirev1.FetchRecordsPartition{
		{Topic: "lp", Partition: 0, Offset: 1}, {Topic: "lp", Partition: 1}, {Topic: "lp", Partition: 2},
	}}

	short, err := c.consumer.FetchRecordsMulti(ctxT(t), &quirev1.FetchRecordsMultiRequest{MaxWaitMs: 20, Partitions: req.Partitions})
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range short.Partitions {
		if a.Error != nil || len(a.Records) != 0 || a.NextOffset != req.Partitions[i].Offset {
			t.Fatalf("empty poll, partition %d: %+v", i, a)
		}
	}

	// The caller gives up long before max_wait_ms: only an append can
	// answer in time.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type answer struct {
		resp *quirev1.FetchRecordsMultiResponse
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		resp, err := c.consumer.FetchRecordsMulti(ctx, req)
		done <- answer{resp, err}
	}()
	produceValues(t, c, "lp", 2, "new")
	a := <-done
	if a.err != nil {
		t.Fatalf("long poll not woken by the append: %v", a.err)
	}
	if got := multiValues(a.resp.Partitions[2]); !equalStrings(got, []string{"new"}) || a.resp.Partitions[2].NextOffset != 1 {
		t.Fatalf("woken with %+v", a.resp.Partitions[2])
	}
}

func TestFetchRecordsMultiBadRequests(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	ctx := ctxT(t)
	createTopic(t, c, "mbad", 1, nil)
	p := &quirev1.FetchRecordsPartition{Topic: "mbad"}
	for _, tc := range []struct {
		req     *quirev1.FetchRecordsMultiRequest
		mention string
	}{
		{&quirev1.FetchRecordsMultiRequest{}, "no partitions"},
		{&quirev1.FetchRecordsMultiRequest{Partitions: []*quirev1.FetchRecordsPartition{p, p}}, "mbad-0 named twice"},
		{&quirev1.FetchRecordsMultiRequest{Partitions: []*quirev1.FetchRecordsPartition{p}, Format: 9}, "record format 9"},
		{&quirev1.FetchRecordsMultiRequest{Partitions: []*quirev1.FetchRecordsPartition{p}, MaxWaitMs: -1}, "negative"},
	} {
		_, err := c.consumer.FetchRecordsMulti(ctx, tc.req)
		wantStatus(t, err, codes.InvalidArgument, quirev1.ErrorCode_INVALID_REQUEST, tc.mention)
	}
}
