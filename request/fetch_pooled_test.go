package request_test

import (
	"testing"

	"github.com/quirelog/quire/request"
)

// TestCorePooledFetchHoldsBuffersByTheData: a pooled fetch (the Kafka
// door's, FetchStream's) of many partitions each holding a little data
// holds pooled buffers in proportion to the records, not a read buffer
// (1 MiB at least) a partition until the answer is sent.
func TestCorePooledFetchHoldsBuffersByTheData(t *testing.T) {
	f := newCore(t, nil)
	ctx := ctxT(t)
	if _, err := f.core.Produce(ctx, &request.ProduceRequest{Acks: -1, Partitions: []request.ProducePartition{{Topic: "t", Partition: 0, Records: batch(1)}}}); err != nil {
		t.Fatal(err)
	}
	const n = 64 // the same partition asked n times stands for n partitions
	req := &request.FetchRequest{MaxBytes: 50 << 20, Pooled: true}
	for range n {
		req.Partitions = append(req.Partitions, request.FetchPartition{Topic: "t", Partition: 0, Offset: 0, MaxBytes: 1 << 20})
	}
	res, err := f.core.Fetch(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	defer request.Release(res)
	data, pinned := 0, 0
	for _, r := range res {
		data += len(r.Records)
		if r.Buf != nil {
			pinned += cap(*r.Buf)
		}
	}
	t.Logf("records %d bytes, pooled buffers held %d bytes", data, pinned)
	if pinned > 4*data+(1<<20) {
		t.Fatalf("a fetch returning %d bytes of records holds %d bytes of buffers (%d partitions)", data, pinned, n)
	}
}
