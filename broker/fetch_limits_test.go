package broker_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/record"
)

// TestFetchLargerThanSendLimitIsCapped: the broker caps what it sends at
// 64 MiB (grpc.MaxSendMsgSize in Start) but takes the request's max_bytes
// as is, so a consumer asking for more than 64 MiB (the Go client allows
// 256 MiB: FetchMaxBytes) gets RESOURCE_EXHAUSTED every time once that
// much data is there, and never makes progress.
func TestFetchLargerThanSendLimitIsCapped(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("produces 72 MiB")
	}
	b, c := start(t)
	createTopic(t, c, "big", 1, nil)
	batch := makeBatch(1000, 1000, "x") // ~1 MiB
	for i := 0; i < 72; i++ {
		resp, err := c.producer.Produce(ctxT(t), &quirev1.ProduceRequest{OptionalAcks: &quirev1.ProduceRequest_Acks{Acks: 1},
			Partitions: []*quirev1.PartitionRecords{{Topic: "big", Partition: 0, Records: append([]byte(nil), batch...)}}})
		if err != nil || resp.Partitions[0].Error != nil {
			t.Fatalf("produce %d: %v %v", i, err, resp.GetPartitions())
		}
	}
	// A client as the Go client dials it: 256 MiB receive limit.
	cc, err := grpc.NewClient(b.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256<<20)))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	// 72 MiB read, encoded and decoded under -race: minutes on a loaded
	// machine, a bound only against a hang.
	fctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	resp, err := quirev1.NewConsumerClient(cc).Fetch(fctx, &quirev1.FetchRequest{
		MaxBytes:   100 << 20,
		Partitions: []*quirev1.FetchPartition{{Topic: "big", Partition: 0, Offset: 0, MaxBytes: 100 << 20}},
	})
	if err != nil {
		t.Fatalf("fetch with max_bytes 100 MiB over 72 MiB of data: %v", err)
	}
	t.Logf("fetched %d bytes", len(resp.Partitions[0].Records))
}

// TestProduceRejectsUnparsableRecords: a batch with a valid CRC and
// record framing but a record whose key length runs past its end is
// acknowledged; FetchRecords on that offset then fails on every call, so
// the partition is stuck for every consumer that decodes on the broker.
func TestProduceRejectsUnparsableRecords(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	createTopic(t, c, "poison", 1, nil)
	bld := record.NewBuilder(record.None)
	bld.Append(1000, []byte("k0"), []byte("v"), nil)
	bld.Append(1000, []byte("k1"), []byte("v"), nil)
	batch := bld.Build()
	r2 := record.HeaderSize + 10 // second record: len, attr, tsDelta, offDelta, keyLen...
	if batch[r2+4] != 4 {
		t.Fatalf("unexpected layout %d", batch[r2+4])
	}
	batch[r2+4] = 100 // key length 50, past the record's end
	crc := record.CRC(batch)
	batch[17], batch[18], batch[19], batch[20] = byte(crc>>24), byte(crc>>16), byte(crc>>8), byte(crc)

	res := produce(t, c, "poison", 0, batch)
	if res.Error != nil {
		t.Logf("rejected as it should be: %v", res.Error)
		return
	}
	produce(t, c, "poison", 0, makeBatch(3, 10, "good"))
	_, err := c.consumer.FetchRecords(ctxT(t), &quirev1.FetchRecordsRequest{Topic: "poison", Partition: 0, Offset: 0})
	t.Fatalf("malformed batch acknowledged at offset %d; FetchRecords from 0 now fails: %v", res.BaseOffset, err)
}
