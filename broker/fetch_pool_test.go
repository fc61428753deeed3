package broker_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

// gRPC's unary Fetch reads into pooled buffers and sends the records from
// there, the buffers given back once the answer is written: fetches on
// several connections at once, each at its own offsets, each get exactly
// the batch stored there, whatever buffers the others took and gave back
// in between. The batches (over 256 KiB each) fill enough of a read
// buffer to be sent from it rather than copied out.
func TestBrokerFetchAnswersOwnBatches(t *testing.T) {
	t.Parallel()
	b, _ := startKafkaBroker(t)
	c := dial(t, b)
	createTopic(t, c, "pool", 1, nil)
	const batches = 8
	offsets := make([]int64, batches)
	var next int64
	for i := range batches {
		offsets[i] = next
		n := 1500 + i
		produce(t, c, "pool", 0, makeBatch(n, 200+i, fmt.Sprintf("b%d", i)))
		next += int64(n)
	}
	// What each offset holds, read one at a time.
	want := make([][]byte, batches)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := range batches {
		resp, err := c.consumer.Fetch(ctx, &quirev1.FetchRequest{Partitions: []*quirev1.FetchPartition{
			{Topic: "pool", Offset: offsets[i], MaxBytes: 1}}})
		if err != nil || resp.Partitions[0].Error != nil {
			t.Fatalf("fetch at %d: %v %v", offsets[i], err, resp.GetPartitions())
		}
		want[i] = bytes.Clone(resp.Partitions[0].Records)
		if len(want[i]) < 300_000 {
			t.Fatalf("fetch at %d: %d bytes, want the whole batch of over 300,000", offsets[i], len(want[i]))
		}
	}
	const conns, rounds = 4, 20
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for g := range conns {
		cc, err := grpc.NewClient(b.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cc.Close() })
		cl := quirev1.NewConsumerClient(cc)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				i := (g*3 + r*5) % batches
				resp, err := cl.Fetch(ctx, &quirev1.FetchRequest{Partitions: []*quirev1.FetchPartition{
					{Topic: "pool", Offset: offsets[i], MaxBytes: 1}}})
				if err != nil || len(resp.Partitions) != 1 || resp.Partitions[0].Error != nil {
					errs <- fmt.Errorf("connection %d: fetch at %d: %v %v", g, offsets[i], err, resp.GetPartitions())
					return
				}
				if got := resp.Partitions[0].Records; !bytes.Equal(got, want[i]) {
					errs <- fmt.Errorf("connection %d: fetch at %d: %d bytes unlike the %d stored there",
						g, offsets[i], len(got), len(want[i]))
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
