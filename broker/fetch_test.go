package broker_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/record"
)

// countRecords walks fetched batches.
func countRecords(t testing.TB, buf []byte) (n int, first, last int64) {
	t.Helper()
	first, last = -1, -1
	err := record.SplitBatches(buf, func(batch []byte, h record.Header) error {
		if first < 0 {
			first = h.BaseOffset
		}
		last = h.LastOffset()
		n += int(h.NumRecords)
		return nil
	})
	if err != nil {
		t.Fatalf("fetched batches do not validate: %v", err)
	}
	return n, first, last
}

func TestFetchManyPartitions(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	ctx := ctxT(t)
	createTopic(t, c, "f", 3, nil)
	produce(t, c, "f", 0, makeBatch(10, 20, "a"))
	produce(t, c, "f", 0, makeBatch(5, 20, "b"))
	produce(t, c, "f", 2, makeBatch(7, 20, "c"))
	resp, err := c.consumer.Fetch(ctx, &quirev1.FetchRequest{Partitions: []*quirev1.FetchPartition{
		{Topic: "f", Partition: 0, Offset: 0},
		{Topic: "f", Partition: 1, Offset: 0},
		{Topic: "f", Partition: 2, Offset: 3},
		{Topic: "f", Partition: 0, Offset: 12},
	}})
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Partitions
	if n, first, last := countRecords(t, p[0].Records); n != 15 || first != 0 || last != 14 || p[0].HighWatermark != 15 || p[0].LogEndOffset != 15 {
		t.Fatalf("partition 0: %d records %d..%d, %+v", n, first, last, p[0])
	}
	if len(p[1].Records) != 0 || p[1].Error != nil || p[1].HighWatermark != 0 {
		t.Fatalf("partition 1: %+v", p[1])
	}
	// The batch holding offset 3 starts before it, as in Kafka.
	if n, first, _ := countRecords(t, p[2].Records); n != 7 || first != 0 {
		t.Fatalf("partition 2 from 3: %d records from %d", n, first)
	}
	if _, first, _ := countRecords(t, p[3].Records); first != 10 {
		t.Fatalf("offset 12 should return the batch from 10, got %d", first)
	}
}

func TestFetchErrors(t *testing.T) {
	t.Parallel()
	_, c := start(t, noAutoCreate)
	ctx := ctxT(t)
	createTopic(t, c, "e", 1, nil)
	produce(t, c, "e", 0, makeBatch(3, 10, "x"))
	resp, err := c.consumer.Fetch(ctx, &quirev1.FetchRequest{Partitions: []*quirev1.FetchPartition{
		{Topic: "e", Partition: 0, Offset: 100},
		{Topic: "e", Partition: 0, Offset: -1},
		{Topic: "e", Partition: 4},
		{Topic: "nope"},
		{Topic: "e", Partition: 0, Offset: 3},
		{Topic: "e", Partition: 0, OptionalCurrentLeaderEpoch: &quirev1.FetchPartition_CurrentLeaderEpoch{CurrentLeaderEpoch: 99}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Partitions
	wantInline(t, p[0].Error, quirev1.ErrorCode_OFFSET_OUT_OF_RANGE, false)
	if p[0].HighWatermark != 3 || p[0].LogStartOffset != 0 {
		t.Errorf("out-of-range answer should still carry offsets: %+v", p[0])
	}
	wantInline(t, p[1].Error, quirev1.ErrorCode_OFFSET_OUT_OF_RANGE, false)
	// A partition past the count can never be fetched; an unknown topic
	// may yet be created.
	wantInline(t, p[2].Error, quirev1.ErrorCode_INVALID_REQUEST, false)
	wantInline(t, p[3].Error, quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, true)
	if p[4].Error != nil || len(p[4].Records) != 0 {
		t.Errorf("fetch at the HW: %+v", p[4])
	}
	wantInline(t, p[5].Error, quirev1.ErrorCode_UNKNOWN_LEADER_EPOCH, true)

	_, err = c.consumer.Fetch(ctx, &quirev1.FetchRequest{})
	wantStatus(t, err, codes.InvalidArgument, quirev1.ErrorCode_INVALID_REQUEST)
	_, err = c.consumer.FetchRecords(ctx, &quirev1.FetchRecordsRequest{Topic: "e", Partition: 2})
	wantStatus(t, err, codes.InvalidArgument, quirev1.ErrorCode_INVALID_REQUEST, "e")
	_, err = c.consumer.FetchRecords(ctx, &quirev1.FetchRecordsRequest{Topic: "nope"})
	wantStatus(t, err, codes.NotFound, quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, "nope")
	_, err = c.consumer.FetchRecords(ctx, &quirev1.FetchRecordsRequest{Topic: "e", Offset: 50})
	wantStatus(t, err, codes.OutOfRange, quirev1.ErrorCode_OFFSET_OUT_OF_RANGE, "valid offsets are")
	// An empty or malformed name is what every other call says it is.
	_, err = c.consumer.FetchRecords(ctx, &quirev1.FetchRecordsRequest{})
	wantStatus(t, err, codes.InvalidArgument, quirev1.ErrorCode_INVALID_TOPIC_EXCEPTION, "topic name is empty")
}

func TestFetchLongPollReturnsWhenDataArrives(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	createTopic(t, c, "lp", 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	type result struct {
		resp *quirev1.FetchResponse
		err  error
		took time.Duration
	}
	done := make(chan result, 1)
	begin := time.Now()
	go func() {
		resp, err := c.consumer.Fetch(ctx, &quirev1.FetchRequest{MaxWaitMs: 120000, MinBytes: 1,
			Partitions: []*quirev1.FetchPartition{{Topic: "lp", Partition: 0}, {Topic: "lp", Partition: 1}}})
		done <- result{resp, err, time.Since(begin)}
	}()
	// Whether the produce lands before or after the fetch starts waiting,
	// the fetch must answer with it long before max wait.
	produce(t, c, "lp", 1, makeBatch(4, 10, "x"))
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.took > 60*time.Second {
		t.Fatalf("long poll took %v after data arrived: it waited out its max wait", r.took)
	}
	if n, _, _ := countRecords(t, r.resp.Partitions[1].Records); n != 4 {
		t.Fatalf("got %d records", n)
	}
}

func TestFetchLongPollWaitsForMinBytes(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	createTopic(t, c, "mb", 1, nil)
	produce(t, c, "mb", 0, makeBatch(1, 10, "x"))

	// Nothing new: the call returns after max wait, empty.
	begin := time.Now()
	resp, err := c.consumer.Fetch(ctxT(t), &quirev1.FetchRequest{MaxWaitMs: 300, MinBytes: 1,
		Partitions: []*quirev1.FetchPartition{{Topic: "mb", Offset: 1}}})
	took := time.Since(begin)
	if err != nil {
		t.Fatal(err)
	}
	if took < 250*time.Millisecond {
		t.Fatalf("empty long poll took %v, want at least its 300ms max wait", took)
	}
	if len(resp.Partitions[0].Records) != 0 {
		t.Fatalf("records past the end: %d bytes", len(resp.Partitions[0].Records))
	}

	// Data below min_bytes: wait the whole max wait, then return what there is.
	begin = time.Now()
	resp, err = c.consumer.Fetch(ctxT(t), &quirev1.FetchRequest{MaxWaitMs: 300, MinBytes: 1 << 20,
		Partitions: []*quirev1.FetchPartition{{Topic: "mb", Offset: 0}}})
	took = time.Since(begin)
	if err != nil {
		t.Fatal(err)
	}
	if took < 250*time.Millisecond {
		t.Fatalf("returned after %v without min_bytes", took)
	}
	if n, _, _ := countRecords(t, resp.Partitions[0].Records); n != 1 {
		t.Fatalf("got %d records", n)
	}

	// max_wait 0 answers at once.
	begin = time.Now()
	if _, err := c.consumer.Fetch(ctxT(t), &quirev1.FetchRequest{MinBytes: 1 << 20,
		Partitions: []*quirev1.FetchPartition{{Topic: "mb", Offset: 1}}}); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(begin); took > 30*time.Second {
		t.Fatalf("max_wait 0 took %v: it waited for min_bytes", took)
	}
}

func TestFetchMaxBytes(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	createTopic(t, c, "mx", 2, nil)
	for i := 0; i < 5; i++ {
		produce(t, c, "mx", 0, makeBatch(10, 100, "x"))
		produce(t, c, "mx", 1, makeBatch(10, 100, "y"))
	}
	batchSize := len(makeBatch(10, 100, "x"))
	resp, err := c.consumer.Fetch(ctxT(t), &quirev1.FetchRequest{Partitions: []*quirev1.FetchPartition{
		{Topic: "mx", Partition: 0, MaxBytes: int32(2*batchSize + 10)},
		{Topic: "mx", Partition: 1, MaxBytes: 1}, // at least one batch
	}})
	if err != nil {
		t.Fatal(err)
	}
	if n, _, _ := countRecords(t, resp.Partitions[0].Records); n != 20 {
		t.Fatalf("partition cap: %d records", n)
	}
	if n, _, _ := countRecords(t, resp.Partitions[1].Records); n != 0 && n != 10 {
		t.Fatalf("tiny partition cap: %d records", n)
	}
	// The response cap: the first partition gets at least one batch.
	resp, err = c.consumer.Fetch(ctxT(t), &quirev1.FetchRequest{MaxBytes: 1, Partitions: []*quirev1.FetchPartition{
		{Topic: "mx", Partition: 0}, {Topic: "mx", Partition: 1},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if n, _, _ := countRecords(t, resp.Partitions[0].Records); n != 10 {
		t.Fatalf("first partition under a 1-byte response cap: %d records", n)
	}
	if len(resp.Partitions[1].Records) != 0 {
		t.Fatalf("second partition should be cut by the response cap")
	}
}

func TestFetchRecordsDecoded(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	ctx := ctxT(t)
	createTopic(t, c, "d", 1, nil)
	produce(t, c, "d", 0, makeBatch(10, 8, "v"))
	fr, err := c.consumer.FetchRecords(ctx, &quirev1.FetchRecordsRequest{Topic: "d", Offset: 3, MaxRecords: 4})
	if err != nil {
		t.Fatal(err)
	}
	if len(fr.Records) != 4 || fr.Records[0].Offset != 3 || fr.NextOffset != 7 || fr.HighWatermark != 10 {
		t.Fatalf("decoded: %d records, next %d, hw %d", len(fr.Records), fr.NextOffset, fr.HighWatermark)
	}
	r := fr.Records[0]
	if r.GetKey() != "k3" || r.Topic != "d" || r.TimestampMs <= 0 || r.LeaderEpoch < 0 {
		t.Fatalf("record: %+v", r)
	}
	fr, err = c.consumer.FetchRecords(ctx, &quirev1.FetchRecordsRequest{Topic: "d", Offset: 7})
	if err != nil || len(fr.Records) != 3 || fr.NextOffset != 10 {
		t.Fatalf("rest: %v %v", fr, err)
	}
	// At the end with a wait: returns once a record arrives.
	done := make(chan *quirev1.FetchRecordsResponse, 1)
	go func() {
		fr, _ := c.consumer.FetchRecords(ctx, &quirev1.FetchRecordsRequest{Topic: "d", Offset: 10, MaxWaitMs: 120000})
		done <- fr
	}()
	begin := time.Now()
	produce(t, c, "d", 0, makeBatch(1, 8, "late"))
	fr = <-done
	if fr == nil || len(fr.Records) != 1 || fr.Records[0].Offset != 10 || time.Since(begin) > 60*time.Second {
		t.Fatalf("waiting fetch: %v after %v (a wait of 120 s)", fr, time.Since(begin))
	}
}

func TestFetchListOffsets(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	ctx := ctxT(t)
	createTopic(t, c, "lo", 1, nil)
	mk := func(ts int64, n int) []byte {
		b := record.NewBuilder(record.None)
		for i := 0; i < n; i++ {
			b.Append(ts, nil, []byte("v"), nil)
		}
		return b.Build()
	}
	produce(t, c, "lo", 0, mk(1000, 3))
	produce(t, c, "lo", 0, mk(2000, 2))
	produce(t, c, "lo", 0, mk(3000, 4))
	resp, err := c.consumer.ListOffsets(ctx, &quirev1.ListOffsetsRequest{Partitions: []*quirev1.ListOffsetsPartition{
		{Topic: "lo", TimestampMs: -2},
		{Topic: "lo", TimestampMs: -1},
		{Topic: "lo", TimestampMs: 1500},
		{Topic: "lo", TimestampMs: 3000},
		{Topic: "lo", TimestampMs: 9999},
		{Topic: "lo", Partition: 3, TimestampMs: -1},
		{Topic: "lo", TimestampMs: -7},
	}})
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Partitions
	want := []int64{0, 9, 3, 5, -1}
	for i, w := range want {
		if p[i].Error != nil || p[i].Offset != w {
			t.Errorf("query %d: offset %d (%v), want %d", i, p[i].Offset, p[i].Error, w)
		}
	}
	if p[2].TimestampMs != 2000 {
		t.Errorf("timestamp lookup found ts %d, want 2000", p[2].TimestampMs)
	}
	wantInline(t, p[5].Error, quirev1.ErrorCode_INVALID_REQUEST, false)
	wantInline(t, p[6].Error, quirev1.ErrorCode_INVALID_REQUEST, false)
	_, err = c.consumer.ListOffsets(ctx, &quirev1.ListOffsetsRequest{})
	wantStatus(t, err, codes.InvalidArgument, quirev1.ErrorCode_INVALID_REQUEST)
}

func TestBrokerRestartKeepsRecords(t *testing.T) {
	t.Parallel()
	cfg := brokerConfig(t)
	b := startConfig(t, cfg)
	c := dial(t, b)
	createTopic(t, c, "keep", 2, nil)
	produce(t, c, "keep", 0, makeBatch(5, 10, "x"))
	produce(t, c, "keep", 1, makeBatch(3, 10, "y"))
	stop(t, b)
	if _, err := os.Stat(filepath.Join(cfg.DataDir, ".quire_cleanshutdown")); err != nil {
		t.Fatalf("no clean-shutdown marker after Shutdown: %v", err)
	}

	b = startConfig(t, cfg)
	c = dial(t, b)
	resp, err := c.consumer.Fetch(ctxT(t), &quirev1.FetchRequest{Partitions: []*quirev1.FetchPartition{{Topic: "keep", Partition: 0}, {Topic: "keep", Partition: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if n, _, _ := countRecords(t, resp.Partitions[0].Records); n != 5 {
		t.Fatalf("partition 0 after restart: %d records", n)
	}
	if n, _, _ := countRecords(t, resp.Partitions[1].Records); n != 3 {
		t.Fatalf("partition 1 after restart: %d records", n)
	}
	if res := produce(t, c, "keep", 0, makeBatch(1, 10, "z")); res.BaseOffset != 5 {
		t.Fatalf("offsets after restart: %+v", res)
	}
}

func TestBrokerRetentionLoop(t *testing.T) {
	t.Parallel()
	_, c := start(t, func(cfg *broker.Config) { cfg.LogRetentionCheckIntervalMs = 20 })
	createTopic(t, c, "ret", 1, map[string]string{"segment.bytes": "1024", "retention.ms": "1"})
	for i := 0; i < 5; i++ {
		produce(t, c, "ret", 0, makeBatch(10, 100, "old"))
	}
	// Poll, with a deadline, until retention has removed the old segments.
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		dr, err := c.admin.DescribeTopics(ctxT(t), &quirev1.DescribeTopicsRequest{Names: []string{"ret"}})
		if err != nil {
			t.Fatal(err)
		}
		if p := dr.Topics[0].Partitions[0]; p.LogStartOffset > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("retention never advanced the log start offset")
		}
		<-tick.C
	}
	resp, err := c.consumer.Fetch(ctxT(t), &quirev1.FetchRequest{Partitions: []*quirev1.FetchPartition{{Topic: "ret", Offset: 0}}})
	if err != nil {
		t.Fatal(err)
	}
	wantInline(t, resp.Partitions[0].Error, quirev1.ErrorCode_OFFSET_OUT_OF_RANGE, false)
}
