package broker_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

// Kafka fetches read into pooled buffers and frame their answers in
// pooled buffers, given back once written: fetches on several
// connections at once, each at its own offsets, each get exactly the
// batch stored there (as the gRPC door reads it), whatever buffers the
// others took and gave back in between.
func TestBrokerKafkaFetchAnswersOwnBatches(t *testing.T) {
	t.Parallel()
	b, addr := startKafkaBroker(t)
	c := dial(t, b)
	createTopic(t, c, "pool", 1, nil)
	const batches = 12
	want := make([][]byte, batches)
	for i := range batches {
		produce(t, c, "pool", 0, makeBatch(50+i, 200+i, fmt.Sprintf("b%d", i)))
	}
	offsets := make([]int64, batches)
	var next int64
	for i := range batches {
		offsets[i] = next
		resp, err := c.consumer.Fetch(ctxT(t), &quirev1.FetchRequest{Partitions: []*quirev1.FetchPartition{
			{Topic: "pool", Offset: next, MaxBytes: 1}}})
		if err != nil || resp.Partitions[0].Error != nil {
			t.Fatalf("gRPC fetch at %d: %v %v", next, err, resp.GetPartitions())
		}
		want[i] = resp.Partitions[0].Records
		next += int64(50 + i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const conns, rounds = 4, 30
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for g := range conns {
		cl := kafkaClient(t, addr)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				i := (g*7 + r*5) % batches
				req := kmsg.NewPtrFetchRequest()
				req.Version = 11
				req.ReplicaID, req.MaxBytes, req.SessionEpoch = -1, 1, -1
				rt := kmsg.NewFetchRequestTopic()
				rt.Topic = "pool"
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LastFetchedEpoch = offsets[i], 1, -1, -1
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				resp, err := req.RequestWith(ctx, cl)
				if err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
					errs <- fmt.Errorf("connection %d: fetch at %d: %v", g, offsets[i], err)
					return
				}
				p := resp.Topics[0].Partitions[0]
				if p.ErrorCode != 0 || !bytes.Equal(p.RecordBatches, want[i]) {
					errs <- fmt.Errorf("connection %d: fetch at %d: error %d, %d bytes, want the %d stored there",
						g, offsets[i], p.ErrorCode, len(p.RecordBatches), len(want[i]))
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
