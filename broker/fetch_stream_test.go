package broker_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker"
)

// TestFetchStream checks that the stream moves each partition on past the
// batches it sent, answers new records as they arrive, and ends after a
// partition error.
func TestFetchStream(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	createTopic(t, c, "s", 2, nil)
	produce(t, c, "s", 0, makeBatch(10, 20, "a"))
	produce(t, c, "s", 0, makeBatch(5, 20, "b"))
	produce(t, c, "s", 1, makeBatch(3, 20, "c"))
	// Small partition caps: one batch per response.
	st, err := c.consumer.FetchStream(ctx, &quirev1.FetchRequest{MaxWaitMs: 5000, Partitions: []*quirev1.FetchPartition{
		{Topic: "s", Partition: 0, Offset: 0, MaxBytes: 1},
		{Topic: "s", Partition: 1, Offset: 0, MaxBytes: 1},
	}})
	if err != nil {
		t.Fatal(err)
	}
	recv := func() *quirev1.FetchResponse {
		t.Helper()
		resp, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	r := recv()
	if n, first, _ := countRecords(t, r.Partitions[0].Records); n != 10 || first != 0 {
		t.Fatalf("first response, partition 0: %d records from %d", n, first)
	}
	if n, _, _ := countRecords(t, r.Partitions[1].Records); n != 3 {
		t.Fatalf("first response, partition 1: %d records", n)
	}
	r = recv()
	if n, first, _ := countRecords(t, r.Partitions[0].Records); n != 5 || first != 10 {
		t.Fatalf("second response, partition 0: %d records from %d", n, first)
	}
	if len(r.Partitions[1].Records) != 0 {
		t.Fatalf("second response, partition 1: %d bytes", len(r.Partitions[1].Records))
	}
	// Caught up: the next response waits (long-polls) for new records.
	produce(t, c, "s", 1, makeBatch(2, 20, "d"))
	r = recv()
	if n, first, _ := countRecords(t, r.Partitions[1].Records); n != 2 || first != 3 || len(r.Partitions[0].Records) != 0 {
		t.Fatalf("third response: partition 1 %d records from %d, partition 0 %d bytes", n, first, len(r.Partitions[0].Records))
	}

	// A partition error: the response carries it, then the stream ends.
	st, err = c.consumer.FetchStream(ctx, &quirev1.FetchRequest{Partitions: []*quirev1.FetchPartition{
		{Topic: "s", Partition: 0, Offset: 100},
	}})
	if err != nil {
		t.Fatal(err)
	}
	r = recv()
	wantInline(t, r.Partitions[0].Error, quirev1.ErrorCode_OFFSET_OUT_OF_RANGE, false)
	if _, err := st.Recv(); err == nil {
		t.Fatal("stream went on after a partition error")
	}
}

// TestFetchStreamShutdown checks that a waiting stream ends when the
// broker shuts down rather than holding up its graceful stop.
func TestFetchStreamShutdown(t *testing.T) {
	t.Parallel()
	b, c := start(t)
	createTopic(t, c, "s", 1, nil)
	st, err := c.consumer.FetchStream(ctxT(t), &quirev1.FetchRequest{MaxWaitMs: 60000, Partitions: []*quirev1.FetchPartition{{Topic: "s"}}})
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	stop(t, b)
	// The stream waits up to 60 s: a shutdown that waited it out would
	// take that long.
	if d := time.Since(began); d > 30*time.Second {
		t.Fatalf("shutdown took %s: it waited for the stream's max wait", d)
	}
	_, err = st.Recv()
	t.Logf("recv after %s: %v", time.Since(began), err)
	wantStatus(t, err, codes.Unavailable, quirev1.ErrorCode_BROKER_NOT_AVAILABLE)
	_ = broker.ErrShuttingDown
}
