package client_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker/brokertest"
	"github.com/quirelog/quire/client"
	"github.com/quirelog/quire/internal/nullbroker"
	"github.com/quirelog/quire/record"
)

// The client benchmarks move b.N records of 100 bytes (the perf tool's
// default) through the real client, over loopback, against three servers
// in the same run:
//
//   - broker:    an in-process broker (brokertest), the real thing;
//   - null:      a null broker that answers metadata, checks each produced
//     batch's CRC and serves fetches from one pre-built chunk, so the
//     client's own cost shows;
//   - bare-grpc: no client at all, pre-built requests pipelined over a bare
//     gRPC stream (produce) or unary Fetch calls (consume) to the null
//     broker: the transport's ceiling.
//
// Run with a fixed count so that both sides see the same work:
//
//	go test ./client/ -run '^$' -bench 'BenchmarkClient' -benchtime 2000000x
const (
	benchValueSize = 100
	benchTopic     = "bench"
)

func benchValue() []byte {
	v := make([]byte, benchValueSize)
	for i := range v {
		v[i] = byte(i*7 + 1)
	}
	return v
}

// nullBroker is a one-partition broker doing as little as it can.
type nullBroker struct{ addr string }

func startNull(b *testing.B) *nullBroker {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	s := nullbroker.Start(lis, benchTopic, benchValue())
	b.Cleanup(s.Stop)
	return &nullBroker{addr: s.Addr()}
}

func benchClient(b *testing.B, addr string, opts ...client.Opt) *client.Client {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := client.New(ctx, append([]client.Opt{client.SeedBrokers(addr), client.RequiredAcks(client.LeaderAck)}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cl.Close)
	return cl
}

func benchBrokerAddr(b *testing.B) string {
	addr := brokertest.Start(b).Addr()
	cl := benchClient(b, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: benchTopic, Partitions: 1}); err != nil {
		b.Fatal(err)
	}
	return addr
}

// produceN produces n records the way the perf tool does (a pool of
// records, a callback per record) and waits for all of them.
func produceN(b *testing.B, cl *client.Client, n int) {
	v := benchValue()
	pool := sync.Pool{New: func() any { return &client.Record{Topic: benchTopic, Value: v} }}
	var failed atomic.Int64
	var lastErr atomic.Value
	cb := func(r *client.Record, err error) {
		if err != nil {
			failed.Add(1)
			lastErr.Store(err)
		}
		r.Timestamp = time.Time{}
		pool.Put(r)
	}
	ctx := context.Background()
	for i := 0; i < n; i++ {
		cl.Produce(ctx, pool.Get().(*client.Record), cb)
	}
	if err := cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	if f := failed.Load(); f > 0 {
		b.Fatalf("%d records failed, last: %v", f, lastErr.Load())
	}
}

// reportRecords reports records/s and, steadier on a shared machine,
// the process's CPU time (user+system, client and server together) per
// record since cpuStart.
func reportRecords(b *testing.B, n int, cpuStart time.Duration) {
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(cpuTime()-cpuStart)/float64(n), "cpu-ns/record")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkClientProduce(b *testing.B) {
	run := func(b *testing.B, addr string) {
		cl := benchClient(b, addr)
		produceN(b, cl, 1000) // metadata, connection, stream
		b.SetBytes(benchValueSize)
		b.ReportAllocs()
		b.ResetTimer()
		cpu0 := cpuTime()
		produceN(b, cl, b.N)
		b.StopTimer()
		reportRecords(b, b.N, cpu0)
	}
	b.Run("broker", func(b *testing.B) { run(b, benchBrokerAddr(b)) })
	b.Run("null", func(b *testing.B) { run(b, startNull(b).addr) })
	b.Run("bare-grpc", func(b *testing.B) { benchBareProduce(b, startNull(b).addr) })
}

// benchBareProduce pipelines pre-built 1 MiB requests (what the client
// sends with its default batch size) over one ProduceStream, at most 4 in
// flight.
func benchBareProduce(b *testing.B, addr string) {
	cc := bareConn(b, addr)
	v := benchValue()
	bld := record.NewBuilder(record.None)
	ts := time.Now().UnixMilli()
	for bld.EstimatedSize()+benchValueSize+30 < 1<<20 {
		bld.Append(ts, nil, v, nil)
	}
	batch, perReq := bld.Build(), bld.Len()
	stream, err := quirev1.NewProducerClient(cc).ProduceStream(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	reqs := (b.N + perReq - 1) / perReq
	b.SetBytes(benchValueSize)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	window := make(chan struct{}, 4)
	sendErr := make(chan error, 1)
	go func() {
		acks := int32(1)
		for i := 0; i < reqs; i++ {
			window <- struct{}{}
			req := &quirev1.ProduceRequest{OptionalAcks: &quirev1.ProduceRequest_Acks{Acks: acks}, CorrelationId: int64(i),
				Partitions: []*quirev1.PartitionRecords{{Topic: benchTopic, Records: batch}}}
			if err := stream.Send(req); err != nil {
				sendErr <- err
				return
			}
		}
		sendErr <- stream.CloseSend()
	}()
	for i := 0; i < reqs; i++ {
		resp, err := stream.Recv()
		if err != nil || resp.Partitions[0].Error != nil {
			b.Fatalf("recv %d: %v %v", i, err, resp)
		}
		<-window
	}
	if err := <-sendErr; err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	reportRecords(b, reqs*perReq, cpu0)
}

func bareConn(b *testing.B, addr string) *grpc.ClientConn {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cc.Close() })
	return cc
}

func BenchmarkClientConsume(b *testing.B) {
	run := func(b *testing.B, addr string, prefill bool) {
		cl := benchClient(b, addr)
		if prefill {
			produceN(b, cl, b.N)
		}
		b.SetBytes(benchValueSize)
		b.ReportAllocs()
		b.ResetTimer()
		cpu0 := cpuTime()
		cons, err := cl.NewConsumer(map[string]map[int32]client.Offset{benchTopic: {0: client.AtStart()}})
		if err != nil {
			b.Fatal(err)
		}
		defer cons.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		got := 0
		for got < b.N {
			if _, err := cons.PollFunc(ctx, func(r *client.Record) {
				if len(r.Value) != benchValueSize {
					b.Errorf("value of %d bytes", len(r.Value))
				}
				got++
			}); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		reportRecords(b, got, cpu0)
	}
	b.Run("broker", func(b *testing.B) { run(b, benchBrokerAddr(b), true) })
	b.Run("null", func(b *testing.B) { run(b, startNull(b).addr, false) })
	b.Run("bare-grpc", func(b *testing.B) {
		nb := startNull(b)
		c := quirev1.NewConsumerClient(bareConn(b, nb.addr))
		b.SetBytes(benchValueSize)
		b.ReportAllocs()
		b.ResetTimer()
		cpu0 := cpuTime()
		var off int64
		for off < int64(b.N) {
			resp, err := c.Fetch(context.Background(), &quirev1.FetchRequest{
				Partitions: []*quirev1.FetchPartition{{Topic: benchTopic, Offset: off, MaxBytes: 4 << 20}}})
			if err != nil {
				b.Fatal(err)
			}
			if err := record.SplitBatches(resp.Partitions[0].Records, func(_ []byte, h record.Header) error {
				off = h.NextOffset()
				return nil
			}); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		reportRecords(b, int(off), cpu0)
	})
}

// BenchmarkClientProduceIdempotence compares the producer with and without
// idempotence against an in-process broker, both with acks=all (which
// idempotence needs), in the same run:
//
//	go test ./client/ -run '^$' -bench 'BenchmarkClientProduceIdempotence' -benchtime 500000x -count 3
func BenchmarkClientProduceIdempotence(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("idempotent=%v", on), func(b *testing.B) {
			cl := benchClient(b, benchBrokerAddr(b), client.RequiredAcks(client.AllISRAcks), client.Idempotent(on))
			produceN(b, cl, 1000) // metadata, connection, stream, producer id
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
