package testcluster_test

import (
	"context"
	"sync"
	"testing"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/record"
	"github.com/quirelog/quire/testcluster"
)

// benchReplicated produces batches of 1000 x 100-byte records to the
// leader of a one-partition topic of replication factor 3 on a 3-node
// in-process cluster, from 4 goroutines, and reports records/s. With
// acks=all every batch waits until both followers have fetched it. It also
// reports the process's CPU time per record (the three nodes and the
// producing goroutines share the process), which a loaded machine disturbs
// far less than records/s.
func benchReplicated(b *testing.B, acks int32) {
	benchReplicatedBatches(b, acks, 4, 1000)
}

func BenchmarkReplicatedProduceAcksAll(b *testing.B) { benchReplicated(b, -1) }

func BenchmarkReplicatedProduceAcksLeader(b *testing.B) { benchReplicated(b, 1) }

// BenchmarkReplicatedRoundTrip produces one 100-byte record at a time,
// each waiting for acks=all: an operation is one trip of the replication
// path (the append wakes the followers' fetches, each appends and sends
// its next fetch, which moves the HW and answers the produce), so ns/op is
// that latency and cpu-ns/record what the trip costs the three nodes,
// whatever the records/s.
func BenchmarkReplicatedRoundTrip(b *testing.B) { benchReplicatedBatches(b, -1, 1, 1) }

func benchReplicatedBatches(b *testing.B, acks int32, workers, records int) {
	c := testcluster.New(b, 3)
	ctx := context.Background()
	if _, err := admin(c, 1).CreateTopic(ctx, &quirev1.CreateTopicRequest{
		Name: "bench", OptionalPartitions: &quirev1.CreateTopicRequest_Partitions{Partitions: 1}, OptionalReplicationFactor: &quirev1.CreateTopicRequest_ReplicationFactor{ReplicationFactor: 3},
		Configs: map[string]string{"min.insync.replicas": "2"},
	}); err != nil {
		b.Fatal(err)
	}
	leader, _ := c.WaitLeader(ctx, "bench", 0)
	bld := record.NewBuilder(record.None)
	value := make([]byte, 100)
	for range records {
		bld.Append(1, nil, value, nil)
	}
	batch := bld.Build()
	pr := quirev1.NewProducerClient(c.Conn(leader))
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	var next sync.Mutex
	n := b.N
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			own := append([]byte(nil), batch...)
			for {
				next.Lock()
				if n == 0 {
					next.Unlock()
					return
				}
				n--
				next.Unlock()
				resp, err := pr.Produce(ctx, &quirev1.ProduceRequest{OptionalAcks: &quirev1.ProduceRequest_Acks{Acks: acks}, TimeoutMs: 10000,
					Partitions: []*quirev1.PartitionRecords{{Topic: "bench", Records: own}}})
				if err != nil {
					b.Error(err)
					return
				}
				if e := resp.Partitions[0].Error; e != nil {
					b.Error(e.Message)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N*records)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N*records), "cpu-ns/record")
}
