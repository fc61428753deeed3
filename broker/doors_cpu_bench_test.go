package broker_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

// nodeEnv makes TestDoorsNode a node for BenchmarkDoorsNodeCPU rather
// than a test.
const nodeEnv = "QUIRE_DOORS_NODE"

// nodeProfileEnv, set to a file's path, has the node write its CPU
// profile there (go tool pprof reads it with this test binary).
const nodeProfileEnv = "QUIRE_DOORS_NODE_CPUPROFILE"

// TestDoorsNode is BenchmarkDoorsNodeCPU's node, run in a process of its
// own (this test binary, started again with nodeEnv set): a dev broker
// with a gRPC and a Kafka listener, whose addresses it prints, serving
// until its standard input closes. Without nodeEnv it is skipped.
func TestDoorsNode(t *testing.T) {
	if os.Getenv(nodeEnv) == "" {
		t.Skip("the node of BenchmarkDoorsNodeCPU; runs only when it starts it")
	}
	b, addr := startKafkaBroker(t)
	if path := os.Getenv(nodeProfileEnv); path != "" {
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = f.Close() }()
		if err := pprof.StartCPUProfile(f); err != nil {
			t.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	fmt.Printf("doors-node grpc=%s kafka=%s\n", b.Addr(), addr)
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// startDoorsNode runs TestDoorsNode in a child process and returns its
// pid and its two listeners' addresses; the node stops at b's cleanup.
func startDoorsNode(b *testing.B) (pid int, grpcAddr, kafkaAddr string) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestDoorsNode$", "-test.count=1")
	cmd.Env = append(os.Environ(), nodeEnv+"=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = stdin.Close()
		if err := cmd.Wait(); err != nil {
			b.Errorf("doors node: %v", err)
		}
	})
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if _, err := fmt.Sscanf(sc.Text(), "doors-node grpc=%s kafka=%s", &grpcAddr, &kafkaAddr); err == nil {
			go func() { _, _ = io.Copy(io.Discard, stdout) }()
			return cmd.Process.Pid, grpcAddr, kafkaAddr
		}
	}
	b.Fatalf("doors node printed no addresses: %v", sc.Err())
	return 0, "", ""
}

// BenchmarkDoorsNodeCPU sets the node's CPU per record on its two doors
// side by side, the node in a process of its own so that the clients'
// work is not counted: fetches of one batch of 1000 100-byte records
// (as BenchmarkFetch and BenchmarkBrokerKafkaFetch) and produces of one
// such batch with acks=1 (as BenchmarkProduceUnary), over gRPC (Fetch,
// and FetchStream too) and over the Kafka listener (Kafka's Fetch and Produce sent by franz-go's kmsg,
// the batch's bytes the same). node-cpu-ns/record is the node process's
// user and system time, from /proc, over the records.
func BenchmarkDoorsNodeCPU(b *testing.B) {
	pid, grpcAddr, kafkaAddr := startDoorsNode(b)
	if _, err := nodeCPU(pid); err != nil {
		b.Skipf("node CPU not readable: %v", err)
	}
	cc, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = cc.Close() }()
	c := &clients{admin: quirev1.NewAdminClient(cc), producer: quirev1.NewProducerClient(cc), consumer: quirev1.NewConsumerClient(cc)}
	createTopic(b, c, "bench", 1, nil)
	createTopic(b, c, "pbench", 1, nil)
	const batches = 64
	batch := benchBatch()
	for range batches {
		produce(b, c, "bench", 0, batch)
	}
	kc, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddr))
	if err != nil {
		b.Fatal(err)
	}
	defer kc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	size := int32(len(batch))

	b.Run("fetch/grpc", func(b *testing.B) {
		measureNode(b, pid, func(i int) error {
			off := int64(i%batches) * benchRecords
			resp, err := c.consumer.Fetch(ctx, &quirev1.FetchRequest{Partitions: []*quirev1.FetchPartition{
				{Topic: "bench", Offset: off, MaxBytes: size}}})
			if err != nil || resp.Partitions[0].Error != nil || int32(len(resp.Partitions[0].Records)) != size {
				return fmt.Errorf("fetch at %d: %v %v", off, err, resp.GetPartitions())
			}
			return nil
		})
	})
	// FetchStream, the gRPC door's pooled fetch: one stream reads the 64
	// batches, one a message, then the next starts over.
	b.Run("fetch/grpcstream", func(b *testing.B) {
		var st quirev1.Consumer_FetchStreamClient
		stop := func() {}
		defer func() { stop() }()
		measureNode(b, pid, func(i int) error {
			if i%batches == 0 {
				stop()
				sctx, cancel := context.WithCancel(ctx)
				stop = cancel
				var err error
				if st, err = c.consumer.FetchStream(sctx, &quirev1.FetchRequest{MaxWaitMs: 5000,
					Partitions: []*quirev1.FetchPartition{{Topic: "bench", MaxBytes: size}}}); err != nil {
					return err
				}
			}
			resp, err := st.Recv()
			if err != nil || resp.Partitions[0].Error != nil || int32(len(resp.Partitions[0].Records)) != size {
				return fmt.Errorf("fetch stream, message %d: %v %v", i%batches, err, resp.GetPartitions())
			}
			return nil
		})
	})
	b.Run("fetch/kafka", func(b *testing.B) {
		measureNode(b, pid, func(i int) error {
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
			resp, err := req.RequestWith(ctx, kc)
			if err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
				return fmt.Errorf("fetch at %d: %v", off, err)
			}
			if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || int32(len(p.RecordBatches)) != size {
				return fmt.Errorf("fetch at %d: error %d, %d bytes, want %d", off, p.ErrorCode, len(p.RecordBatches), size)
			}
			return nil
		})
	})
	// Fetches of 8 batches (880 KB) at once: enough to fill a pooled read
	// buffer's quarter, so that the records are sent from it rather than
	// copied out (request.keepPooled).
	const many = 8
	b.Run("fetch8/grpc", func(b *testing.B) {
		measureNodeRecords(b, pid, many, func(i int) error {
			off := int64(i%(batches/many)) * many * benchRecords
			resp, err := c.consumer.Fetch(ctx, &quirev1.FetchRequest{MaxBytes: many * size, Partitions: []*quirev1.FetchPartition{
				{Topic: "bench", Offset: off, MaxBytes: many * size}}})
			if err != nil || resp.Partitions[0].Error != nil || int32(len(resp.Partitions[0].Records)) != many*size {
				return fmt.Errorf("fetch at %d: %v %v", off, err, resp.GetPartitions())
			}
			return nil
		})
	})
	b.Run("fetch8/kafka", func(b *testing.B) {
		measureNodeRecords(b, pid, many, func(i int) error {
			off := int64(i%(batches/many)) * many * benchRecords
			req := kmsg.NewPtrFetchRequest()
			req.Version = 11
			req.ReplicaID, req.MaxBytes, req.SessionEpoch = -1, many*size, -1
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = "bench"
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LastFetchedEpoch = off, many*size, -1, -1
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, kc)
			if err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
				return fmt.Errorf("fetch at %d: %v", off, err)
			}
			if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || int32(len(p.RecordBatches)) != many*size {
				return fmt.Errorf("fetch at %d: error %d, %d bytes, want %d", off, p.ErrorCode, len(p.RecordBatches), many*size)
			}
			return nil
		})
	})
	b.Run("produce/grpc", func(b *testing.B) {
		req := &quirev1.ProduceRequest{OptionalAcks: &quirev1.ProduceRequest_Acks{Acks: 1},
			Partitions: []*quirev1.PartitionRecords{{Topic: "pbench", Records: batch}}}
		measureNode(b, pid, func(int) error {
			resp, err := c.producer.Produce(ctx, req)
			if err != nil || resp.Partitions[0].Error != nil {
				return fmt.Errorf("produce: %v %v", err, resp.GetPartitions())
			}
			return nil
		})
	})
	b.Run("produce/kafka", func(b *testing.B) {
		measureNode(b, pid, func(int) error {
			req := kmsg.NewPtrProduceRequest()
			req.Acks, req.TimeoutMillis = 1, 30000
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = "pbench"
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Records = batch
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, kc)
			if err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
				return fmt.Errorf("produce: %v", err)
			}
			if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 {
				return fmt.Errorf("produce: error %d", p.ErrorCode)
			}
			return nil
		})
	})
}

// measureNode runs op b.N times and reports the node's CPU per record
// (benchRecords each op) and the records a second.
func measureNode(b *testing.B, pid int, op func(i int) error) { measureNodeRecords(b, pid, 1, op) }

// measureNodeRecords is measureNode for ops of n batches each.
func measureNodeRecords(b *testing.B, pid int, n int, op func(i int) error) {
	b.SetBytes(int64(n * len(benchBatch())))
	b.ResetTimer()
	before, err := nodeCPU(pid)
	if err != nil {
		b.Fatal(err)
	}
	for i := range b.N {
		if err := op(i); err != nil {
			b.Fatal(err)
		}
	}
	after, err := nodeCPU(pid)
	if err != nil {
		b.Fatal(err)
	}
	records := float64(b.N * n * benchRecords)
	b.ReportMetric(float64((after-before).Nanoseconds())/records, "node-cpu-ns/record")
	b.ReportMetric(records/b.Elapsed().Seconds(), "records/s")
}

// nodeCPU is the user and system time process pid has used, from
// /proc/pid/stat (in clock ticks, taken as 100 a second: Linux's
// USER_HZ).
func nodeCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name, in parentheses, may hold spaces: the fields
	// counted are those after it (state is field 3, utime 14, stime 15).
	s := string(data)
	end := strings.LastIndexByte(s, ')')
	if end < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(s[end+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	var utime, stime int64
	if _, err := fmt.Sscan(f[11], &utime); err != nil {
		return 0, err
	}
	if _, err := fmt.Sscan(f[12], &stime); err != nil {
		return 0, err
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}
