package client_test

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/quirelog/quire/broker/brokertest"
	"github.com/quirelog/quire/client"
	"github.com/quirelog/quire/internal/poll"
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
		cancel()
		poll.Until(b, "the topic "+benchTopic+" with all its partitions", func() error {
			n, cerr := cl.PartitionCount(context.Background(), benchTopic)
			if cerr != nil || n != c.partitions {
				return fmt.Errorf("create topic: %v; partitions %d, %v", err, n, cerr)
			}
			return nil
		})
		// One record into every partition first: the node creates the
		// replicas of a new topic after CreateTopic returns, and that
		// work must be over before the timed run.
		warm := benchClient(b, addr, client.RecordPartitioner(client.ManualPartitioner()))
		ctx, cancel = context.WithTimeout(context.Background(), 120*time.Second)
		for p := int32(0); p < c.partitions; p++ {
			warm.Produce(ctx, &client.Record{Topic: benchTopic, Partition: p, Value: benchValue()}, nil)
		}
		if err := warm.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		cancel()
		produceN(b, cl, 1000) // metadata, connection, stream
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(benchValueSize)
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime()
			stop := startProfile(b, c.name)
			produceN(b, cl, b.N)
			b.StopTimer()
			stop()
			reportRecords(b, b.N, cpu0)
		})
	}
}

// startProfile writes a CPU profile of the timed run alone (the setup of
// 5,000 partitions would swamp -cpuprofile) to $QUIRE_BENCH_CPUPROFILE
// with name appended, when set; it returns the function that stops it.
func startProfile(b *testing.B, name string) func() {
	path := os.Getenv("QUIRE_BENCH_CPUPROFILE")
	if path == "" || b.N == 1 {
		return func() {}
	}
	f, err := os.Create(path + "." + name)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}
}
