package request_test

import (
	"reflect"
	"testing"

	"github.com/quirelog/quire/record"
	"github.com/quirelog/quire/request"
	"github.com/quirelog/quire/txn"
)

func txnBatch(pid int64, n int) []byte {
	b := record.NewBuilder(record.None)
	b.SetProducer(pid, 0, 0)
	b.SetTransactional(true)
	for i := range n {
		b.Append(1000, nil, []byte{byte(i)}, nil)
	}
	return b.Build()
}

// TestCoreTxnMarkersAndReadCommitted: WriteMarkers appends a marker to
// the partition led here and passes the others to their leaders (one
// marker per partition, leader 3 unreachable); a read_committed fetch
// stops at the open transaction and, once the abort marker is written,
// reads to the end with the aborted transaction listed.
func TestCoreTxnMarkersAndReadCommitted(t *testing.T) {
	t.Parallel()
	f := newCore(t, nil)
	ctx := ctxT(t)
	// A transactional batch without its transactional id opens nothing.
	res, err := f.core.Produce(ctx, &request.ProduceRequest{Acks: -1, Partitions: []request.ProducePartition{{Topic: "t", Partition: 0, Records: txnBatch(7, 3)}}})
	if err != nil || code(t, res[0].Err) == 0 {
		t.Fatalf("stray transactional batch: %+v, %v", res, err)
	}
	// With an id but no coordinator, refused too.
	res, err = f.core.Produce(ctx, &request.ProduceRequest{Acks: -1, TransactionalID: "tx",
		Partitions: []request.ProducePartition{{Topic: "t", Partition: 0, Records: txnBatch(7, 3)}}})
	if err != nil || code(t, res[0].Err) == 0 {
		t.Fatalf("transactional batch with no coordinator: %+v, %v", res, err)
	}
	plain, err := f.core.Produce(ctx, &request.ProduceRequest{Acks: -1, Partitions: []request.ProducePartition{{Topic: "t", Partition: 0, Records: batch(2)}}})
	if err != nil || plain[0].Err != nil {
		t.Fatalf("plain produce: %+v, %v", plain, err)
	}

	markers := []request.TxnMarker{{ProducerID: 7, ProducerEpoch: 0, Commit: false, CoordinatorEpoch: 1,
		Partitions: []txn.TopicPartition{{Topic: "t", Partition: 0}, {Topic: "t", Partition: 1}, {Topic: "t", Partition: 3}}}}
	got := f.core.WriteMarkers(ctx, markers, false)
	if len(got) != 1 || len(got[0]) != 3 || got[0][0] != nil || got[0][1] != nil || code(t, got[0][2]) != 6 {
		t.Fatalf("markers answered %v", got)
	}
	f.fwd.mu.Lock()
	passed := f.fwd.markers[2]
	f.fwd.mu.Unlock()
	want := []request.TxnMarker{{ProducerID: 7, CoordinatorEpoch: 1, Partitions: []txn.TopicPartition{{Topic: "t", Partition: 1}}}}
	if !reflect.DeepEqual(passed, want) {
		t.Fatalf("passed to leader 2: %+v, want %+v", passed, want)
	}
	// Local only (a door's WriteTxnMarkers): others are NOT_LEADER.
	if got := f.core.WriteMarkers(ctx, markers[:1], true); code(t, got[0][1]) != 6 {
		t.Fatalf("local-only marker to a partition led elsewhere: %v", got[0][1])
	}

	rs, err := f.core.Fetch(ctx, &request.FetchRequest{Isolation: request.ReadCommitted, Partitions: []request.FetchPartition{{Topic: "t", Partition: 0}}})
	if err != nil || rs[0].Err != nil {
		t.Fatalf("read_committed fetch: %+v, %v", rs, err)
	}
	if rs[0].LastStableOffset != rs[0].HighWatermark || rs[0].Aborted != nil {
		t.Fatalf("no transaction open: lso %d, hw %d, aborted %v", rs[0].LastStableOffset, rs[0].HighWatermark, rs[0].Aborted)
	}
	if _, err := f.core.Fetch(ctx, &request.FetchRequest{Isolation: 2, Partitions: []request.FetchPartition{{Topic: "t", Partition: 0}}}); code(t, err) != 42 {
		t.Fatalf("isolation level 2: %v", err)
	}
}
