package client_test

import (
	"context"
	"testing"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker/brokertest"
	"github.com/quirelog/quire/client"
)

// DeleteRecords answers each partition in partition order: its new log
// start, or why not; an unknown topic is answered at once, not retried
// until the deadline; nothing to delete is refused by the client.
func TestClientDeleteRecords(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	cl := newClient(t, b.Addr(), client.RecordPartitioner(client.ManualPartitioner()))
	ctx := testCtx(t)
	if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: "del", Partitions: 3}); err != nil {
		t.Fatal(err)
	}
	var rs []*client.Record
	for i := range 9 {
		rs = append(rs, &client.Record{Topic: "del", Partition: int32(i % 3), Value: []byte("v")})
	}
	if err := cl.ProduceSync(ctx, rs...); err != nil {
		t.Fatal(err)
	}
	got, err := cl.DeleteRecords(ctx, "del", map[int32]int64{2: client.DeleteBelowHighWatermark, 0: 1, 1: 7})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].Partition != 0 || got[0].LowWatermark != 1 || got[0].Err != nil ||
		got[1].Partition != 1 || got[1].LowWatermark != -1 || client.ErrorCode(got[1].Err) != quirev1.ErrorCode_OFFSET_OUT_OF_RANGE ||
		got[2].Partition != 2 || got[2].LowWatermark != 3 || got[2].Err != nil {
		t.Fatalf("DeleteRecords: %+v", got)
	}

	tctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	got, err = cl.DeleteRecords(tctx, "missing", map[int32]int64{0: 1})
	if err != nil || len(got) != 1 || client.ErrorCode(got[0].Err) != quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION || tctx.Err() != nil {
		t.Fatalf("DeleteRecords of a missing topic: %+v, %v (ctx %v)", got, err, tctx.Err())
	}
	if _, err := cl.DeleteRecords(ctx, "del", nil); err == nil {
		t.Fatal("DeleteRecords of no partitions succeeded")
	}
}
