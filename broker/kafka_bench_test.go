package broker_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkBrokerKafkaProduce: franz-go's producer (acks=1, not
// idempotent, 100-byte records, its default batching) into a dev broker
// over the Kafka listener, to set beside client's BenchmarkClientProduce
// (the same over gRPC with the Go client).
func BenchmarkBrokerKafkaProduce(b *testing.B) {
	_, addr := startKafkaBroker(b)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("kbench"),
		kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(), kgo.ProducerLinger(0))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	value := make([]byte, 100)
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	done := func(_ *kgo.Record, err error) {
		if err != nil {
			mu.Lock()
			if firstErr == nil {
				firstErr = err
			}
			mu.Unlock()
		}
		wg.Done()
	}
	b.SetBytes(int64(len(value)))
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Value: value}, done)
	}
	wg.Wait()
	b.StopTimer()
	if firstErr != nil {
		b.Fatal(firstErr)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
}
