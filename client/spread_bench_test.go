package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/quirelog/quire/broker/brokertest"
	"github.com/quirelog/quire/client"
)

// BenchmarkClientProduceSpread produces b.N records of 100 bytes at
// acks=1 into an in-process broker, the way `quire perf produce` does
// (the default partitioner: keyless records stick to a partition for a
// batch's worth of bytes), into a topic of one partition and into one of
// 5,000, in the same run: the spread case should cost about what the
// single partition does. cpu-ns/record is the whole process's CPU time
// (client and node) per record.
//
//	go test ./client/ -run '^$' -bench 'BenchmarkClientProduceSpread' -benchtime 1000000x
func BenchmarkClientProduceSpread(b *testing.B) {
	for _, c := range []struct {
		name       string
		partitions int32
	}{{"one", 1}, {"spread5000", 5000}} {
		// Set up once, outside b.Run (which runs its function twice):
		// creating 5,000 partitions takes seconds.
		addr := brokertest.Start(b).Addr()
		cl := benchClient(b, addr)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		// On a loaded machine creating 5,000 partitions may outlast the
		// client's attempt, whose retry then finds the topic made.
		_, err := cl.CreateTopic(ctx, client.TopicSpec{Name: benchTopic, Partitions: c.partitions})
		if n, cerr := cl.PartitionCount(ctx, benchTopic); cerr != nil || n != c.partitions {
			b.Fatalf("create topic: %v; partitions %d, %v", err, n, cerr)
		}
		cancel()
		produceN(b, cl, 1000) // metadata, connection, stream
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(benchValueSize)
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime()
			produceN(b, cl, b.N)
			b.StopTimer()
			reportRecords(b, b.N, cpu0)
		})
	}
}
