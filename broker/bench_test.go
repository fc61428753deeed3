package broker_test

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/record"
)

// The benchmarks send batches of 1000 records of 100 bytes, through the
// broker and through a bare gRPC server doing only a CRC check (the
// baseline the broker is measured against, in the same run).
const (
	benchRecords = 1000
	benchValue   = 100
)

func benchBatch() []byte { return makeBatch(benchRecords, benchValue, "bench") }

// bareProducer answers Produce after validating the batches, as cheaply as
// a server can while still looking at the bytes.
type bareProducer struct {
	quirev1.UnimplementedProducerServer
}

func (bareProducer) validate(req *quirev1.ProduceRequest) *quirev1.ProduceResponse {
	resp := &quirev1.ProduceResponse{CorrelationId: req.CorrelationId}
	for _, p := range req.Partitions {
		res := &quirev1.PartitionProduceResult{Topic: p.Topic, Partition: p.Partition}
		if err := record.SplitBatches(p.Records, func([]byte, record.Header) error { return nil }); err != nil {
			res.Error = &quirev1.Error{Message: err.Error()}
		}
		resp.Partitions = append(resp.Partitions, res)
	}
	return resp
}

func (s bareProducer) Produce(_ context.Context, req *quirev1.ProduceRequest) (*quirev1.ProduceResponse, error) {
	return s.validate(req), nil
}

func (s bareProducer) ProduceStream(stream quirev1.Producer_ProduceStreamServer) error {
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := stream.Send(s.validate(req)); err != nil {
			return err
		}
	}
}

// bareConsumer answers every Fetch with the same batch.
type bareConsumer struct {
	quirev1.UnimplementedConsumerServer
	batch []byte
}

func (s bareConsumer) Fetch(_ context.Context, req *quirev1.FetchRequest) (*quirev1.FetchResponse, error) {
	p := req.Partitions[0]
	return &quirev1.FetchResponse{Partitions: []*quirev1.FetchPartitionResult{{Topic: p.Topic, Partition: p.Partition, Records: s.batch}}}, nil
}

func startBare(b *testing.B, batch []byte) *grpc.ClientConn {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	s := grpc.NewServer(grpc.MaxRecvMsgSize(64 << 20))
	quirev1.RegisterProducerServer(s, bareProducer{})
	quirev1.RegisterConsumerServer(s, bareConsumer{batch: batch})
	go func() { _ = s.Serve(lis) }()
	b.Cleanup(s.Stop)
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cc.Close() })
	return cc
}

func benchUnary(b *testing.B, p quirev1.ProducerClient, acks int32) {
	batch := benchBatch()
	req := &quirev1.ProduceRequest{OptionalAcks: &quirev1.ProduceRequest_Acks{Acks: acks}, Partitions: []*quirev1.PartitionRecords{{Topic: "bench", Records: batch}}}
	ctx := context.Background()
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		resp, err := p.Produce(ctx, req)
		if err != nil || resp.Partitions[0].Error != nil {
			b.Fatalf("produce: %v %v", err, resp)
		}
	}
	b.ReportMetric(float64(b.N*benchRecords)/b.Elapsed().Seconds(), "records/s")
}

func benchStream(b *testing.B, p quirev1.ProducerClient, acks int32) {
	batch := benchBatch()
	stream, err := p.ProduceStream(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	b.ResetTimer()
	sendErr := make(chan error, 1)
	go func() {
		for i := 0; i < b.N; i++ {
			req := &quirev1.ProduceRequest{OptionalAcks: &quirev1.ProduceRequest_Acks{Acks: acks}, CorrelationId: int64(i),
				Partitions: []*quirev1.PartitionRecords{{Topic: "bench", Records: batch}}}
			if err := stream.Send(req); err != nil {
				sendErr <- err
				return
			}
		}
		sendErr <- stream.CloseSend()
	}()
	for i := 0; i < b.N; i++ {
		resp, err := stream.Recv()
		if err != nil || resp.Partitions[0].Error != nil {
			b.Fatalf("stream recv %d: %v %v", i, err, resp)
		}
	}
	if err := <-sendErr; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N*benchRecords)/b.Elapsed().Seconds(), "records/s")
}

func benchBroker(b *testing.B) *clients {
	_, c := start(b)
	createTopic(b, c, "bench", 1, nil)
	return c
}

func BenchmarkProduceUnary(b *testing.B) { benchUnary(b, benchBroker(b).producer, 1) }

func BenchmarkProduceUnaryAcksAll(b *testing.B) { benchUnary(b, benchBroker(b).producer, -1) }

func BenchmarkProduceStream(b *testing.B) { benchStream(b, benchBroker(b).producer, 1) }

func BenchmarkProduceBareGRPCUnary(b *testing.B) {
	benchUnary(b, quirev1.NewProducerClient(startBare(b, nil)), 1)
}

func BenchmarkProduceBareGRPCStream(b *testing.B) {
	benchStream(b, quirev1.NewProducerClient(startBare(b, nil)), 1)
}

func benchFetch(b *testing.B, c quirev1.ConsumerClient, batches int64, perBatch int64) {
	ctx := context.Background()
	size := int64(len(benchBatch()))
	b.SetBytes(size)
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU()
	for i := 0; i < b.N; i++ {
		off := (int64(i) % batches) * perBatch
		resp, err := c.Fetch(ctx, &quirev1.FetchRequest{Partitions: []*quirev1.FetchPartition{
			{Topic: "bench", Offset: off, MaxBytes: int32(size)}}})
		if err != nil || resp.Partitions[0].Error != nil || int64(len(resp.Partitions[0].Records)) != size {
			b.Fatalf("fetch at %d: %v %v", off, err, resp.GetPartitions())
		}
	}
	b.ReportMetric(float64(b.N*benchRecords)/b.Elapsed().Seconds(), "records/s")
	reportCPUPerRecord(b, cpu, b.N*benchRecords)
}

// reportCPUPerRecord reports the CPU time the process (client and node
// alike) used since cpu, per record fetched: on a shared machine it
// drifts far less than the time per operation, so the two doors' fetches
// can be set side by side.
func reportCPUPerRecord(b *testing.B, cpu time.Duration, records int) {
	if used := processCPU() - cpu; used > 0 && records > 0 {
		b.ReportMetric(float64(used.Nanoseconds())/float64(records), "cpu-ns/record")
	}
}

func BenchmarkFetch(b *testing.B) {
	c := benchBroker(b)
	const batches = 64
	for i := 0; i < batches; i++ {
		produce(b, c, "bench", 0, benchBatch())
	}
	benchFetch(b, c.consumer, batches, benchRecords)
}

func BenchmarkFetchBareGRPC(b *testing.B) {
	benchFetch(b, quirev1.NewConsumerClient(startBare(b, benchBatch())), 1, 0)
}
