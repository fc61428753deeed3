package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkBrokerKafkaFetch is BenchmarkFetch over the Kafka listener:
// the same batches of 1000 100-byte records, one partition and one batch
// a fetch, asked with Kafka's Fetch request, so that the cost a fetched
// record has on each door can be set side by side.
func BenchmarkBrokerKafkaFetch(b *testing.B) {
	br, addr := startKafkaBroker(b)
	c := dial(b, br)
	createTopic(b, c, "bench", 1, nil)
	const batches = 64
	for range batches {
		produce(b, c, "bench", 0, benchBatch())
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	size := int32(len(benchBatch()))
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU()
	for i := range b.N {
		off := int64(i%batches) * benchRecords
		req := kmsg.NewPtrFetchRequest()
		req.Version = 11
		req.ReplicaID, req.MaxBytes, req.SessionEpoch = -1, size, -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "bench"
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LastFetchedEpoch = off, size, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			b.Fatalf("fetch at %d: %v", off, err)
		}
		if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || int32(len(p.RecordBatches)) != size {
			b.Fatalf("fetch at %d: error %d, %d bytes, want %d", off, p.ErrorCode, len(p.RecordBatches), size)
		}
	}
	b.ReportMetric(float64(b.N*benchRecords)/b.Elapsed().Seconds(), "records/s")
	reportCPUPerRecord(b, cpu, b.N*benchRecords)
}
