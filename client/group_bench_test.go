package client_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/broker/brokertest"
	"github.com/quirelog/quire/client"
	"github.com/quirelog/quire/record"
)

// BenchmarkGroupConsume reads b.N records of 100 bytes from a 3-partition
// topic on an in-process broker, in the same run, with the partition
// consumer (the baseline: PollFunc, and Poll, which returns records as
// GroupConsumer.Poll does), one GroupConsumer (PollFunc, and Poll), and
// one Subscribe stream (the broker as the member, acknowledging each
// message as it comes).
// The timer and the CPU count start when the reader owns the 3
// partitions (a group member once its assignment came), so records/s and
// cpu-ns/record are those of reading, and join-ms is how long a lone
// member took from joining to owning every partition (with the 100ms
// heartbeat interval of the test). Fetches are up to 4 MiB per partition:
// with fewer than a million records a run is a handful of fetches.
//
//	go test ./client/ -run '^$' -bench 'BenchmarkGroupConsume' -benchtime 1000000x -count 3
//
// (-count repeats each variant in turn; to interleave them, as the
// figures in docs/testing.md are, run it with -count 1 several times.)
func BenchmarkGroupConsume(b *testing.B) {
	const topic = "gbench"
	setup := func(b *testing.B) (*broker.Broker, *client.Client) { return groupBenchSetup(b, topic, false) }
	partitionConsumer := func(withPoll bool) func(b *testing.B) {
		return func(b *testing.B) {
			_, cl := setup(b)
			b.SetBytes(benchValueSize)
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime()
			cons, err := cl.NewConsumer(map[string]map[int32]client.Offset{topic: {0: client.AtStart(), 1: client.AtStart(), 2: client.AtStart()}})
			if err != nil {
				b.Fatal(err)
			}
			defer cons.Close()
			got := 0
			for got < b.N {
				var n int
				if withPoll {
					var recs []*client.Record
					recs, err = cons.Poll(context.Background())
					n = len(recs)
				} else {
					n, err = cons.PollFunc(context.Background(), func(*client.Record) {})
				}
				if err != nil {
					b.Fatal(err)
				}
				got += n
			}
			b.StopTimer()
			reportRecords(b, got, cpu0)
		}
	}
	b.Run("partition-consumer", partitionConsumer(false))
	b.Run("partition-consumer-poll", partitionConsumer(true))
	groupConsumer := func(withPoll bool) func(b *testing.B) {
		return func(b *testing.B) {
			_, cl := setup(b)
			b.SetBytes(benchValueSize)
			b.ReportAllocs()
			joined := time.Now()
			g, err := cl.NewGroupConsumer(client.GroupConfig{Group: fmt.Sprint("gb-", b.N), Topics: []string{topic}})
			if err != nil {
				b.Fatal(err)
			}
			defer g.Close(context.Background())
			for deadline := time.Now().Add(time.Minute); len(g.Assignment()) < 3; {
				if time.Now().After(deadline) {
					b.Fatal("the member does not own the 3 partitions")
				}
				time.Sleep(time.Millisecond) // polling the assignment
			}
			joinMs := float64(time.Since(joined).Microseconds()) / 1000
			b.ResetTimer()
			cpu0 := cpuTime()
			got := 0
			for got < b.N {
				var n int
				if withPoll {
					var recs []*client.Record
					recs, err = g.Poll(context.Background())
					n = len(recs)
				} else {
					n, err = g.PollFunc(context.Background(), func(*client.Record) {})
				}
				if err != nil {
					b.Fatal(err)
				}
				got += n
			}
			b.StopTimer()
			reportRecords(b, got, cpu0)
			b.ReportMetric(joinMs, "join-ms")
		}
	}
	b.Run("group-consumer-pollfunc", groupConsumer(false))
	b.Run("group-consumer", groupConsumer(true))
	// subscribe reads through one Subscribe stream, acknowledging each
	// message as it comes: in the recommended form (batches: each
	// SubscribeBatch acknowledged whole with its next_offset) decoded
	// with the generated code, or walked in place (wire,
	// subscribe_bench_test.go), or in the form of streams that predate
	// batches (SubscribeRecords, each record acknowledged by offset), or
	// as stored batches (raw: SubscribeRawBatch decoded with the generated
	// code, its RecordBatch v2 bytes then as the partition consumer's
	// PollFunc decodes a Fetch's, record.SplitBatches and ForEachRecord,
	// each acknowledged whole with its next_offset). Each reads
	// read_committed, the default; subscribe-uncommitted is subscribe
	// reading read_uncommitted, the cost of the last stable offset and
	// the aborted transactions' look-up (none here) being the difference.
	type subscribeMode int
	const (
		batches subscribeMode = iota
		batchesWire
		records
		raw
		batchesUncommitted
	)
	subscribe := func(mode subscribeMode) func(b *testing.B) {
		return func(b *testing.B) {
			br, _ := setup(b)
			b.SetBytes(benchValueSize)
			b.ResetTimer()
			var cpu0 time.Duration
			joined := time.Now()
			stream, err := quirev1.NewGroupsClient(bareConn(b, br.Addr())).Subscribe(context.Background(), grpc.ForceCodecV2(rawCodec{}))
			if err != nil {
				b.Fatal(err)
			}
			start := &quirev1.SubscribeStart{
				Group: fmt.Sprint("sb-", b.N), Subscription: &quirev1.GroupSubscription{Topics: []string{topic}}, Batches: mode != records, RawBatches: mode == raw,
				MaxOutstandingRecords: 5000, MaxOutstandingBytes: 8 << 20, Format: quirev1.RecordFormat_RECORD_FORMAT_BYTES}
			if mode == batchesUncommitted {
				start.OptionalIsolationLevel = &quirev1.SubscribeStart_IsolationLevel{IsolationLevel: quirev1.IsolationLevel_READ_UNCOMMITTED}
			}
			if err := stream.Send(&quirev1.SubscribeRequest{Request: &quirev1.SubscribeRequest_Start{Start: start}}); err != nil {
				b.Fatal(err)
			}
			got := 0
			var joinMs float64
			onAssignment := func(a *quirev1.SubscribeAssignment) {
				if joinMs == 0 && len(a.Owned.GetTopics()) == 1 && len(a.Owned.Topics[0].Partitions) == 3 {
					joinMs = float64(time.Since(joined).Microseconds()) / 1000
					b.ResetTimer()
					cpu0 = cpuTime()
				}
			}
			var ack *quirev1.SubscribeAck
			ackBatch := func(topic string, p int32, next int64) {
				ack = &quirev1.SubscribeAck{Partitions: []*quirev1.AckedOffsets{{Topic: topic, Partition: p, NextOffset: next}}}
			}
			var rawMsg rawMessage
			var rec client.Record
			for got < b.N {
				ack = nil
				if mode == batchesWire {
					if err := stream.RecvMsg(&rawMsg); err != nil {
						b.Fatal(err)
					}
					a, err := walkSubscribeResponse(rawMsg.b, func(*wireRecord) { got++ }, ackBatch)
					if err != nil {
						b.Fatal(err)
					}
					if a != nil {
						onAssignment(a)
					}
				} else {
					resp, err := stream.Recv()
					if err != nil {
						b.Fatal(err)
					}
					switch ev := resp.Event.(type) {
					case *quirev1.SubscribeResponse_Assignment:
						onAssignment(ev.Assignment)
					case *quirev1.SubscribeResponse_RawBatch:
						rb := ev.RawBatch
						err := decodeRawBatch(rb, &rec, func() { got++ })
						if err != nil {
							b.Fatal(err)
						}
						ackBatch(rb.Topic, rb.Partition, rb.NextOffset)
					case *quirev1.SubscribeResponse_Batch:
						got += len(ev.Batch.Records)
						ackBatch(ev.Batch.Topic, ev.Batch.Partition, ev.Batch.NextOffset)
					case *quirev1.SubscribeResponse_Records:
						ack = &quirev1.SubscribeAck{}
						byPart := map[int32]*quirev1.AckedOffsets{}
						for _, r := range ev.Records.Records {
							a := byPart[r.Partition]
							if a == nil {
								a = &quirev1.AckedOffsets{Topic: r.Topic, Partition: r.Partition}
								byPart[r.Partition] = a
								ack.Partitions = append(ack.Partitions, a)
							}
							a.Offsets = append(a.Offsets, r.Offset)
						}
						got += len(ev.Records.Records)
					}
				}
				if ack == nil {
					continue
				}
				if err := stream.Send(&quirev1.SubscribeRequest{Request: &quirev1.SubscribeRequest_Ack{Ack: ack}}); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			reportRecords(b, got, cpu0)
			b.ReportMetric(joinMs, "join-ms")
			// A clean close, the stream read to its end: the member
			// commits and leaves while the broker is up.
			_ = stream.CloseSend()
			for {
				if err := stream.RecvMsg(&rawMsg); err != nil {
					break
				}
			}
		}
	}
	b.Run("subscribe", subscribe(batches))
	b.Run("subscribe-uncommitted", subscribe(batchesUncommitted))
	b.Run("subscribe-wire", subscribe(batchesWire))
	b.Run("subscribe-records", subscribe(records))
	b.Run("subscribe-raw", subscribe(raw))
}

// decodeRawBatch decodes a SubscribeRawBatch's batches as the partition
// consumer's PollFunc decodes a Fetch's (record.SplitBatches and
// ForEachRecord), filling rec and calling each for each record at or past
// its start offset; control batches are skipped.
func decodeRawBatch(rb *quirev1.SubscribeRawBatch, rec *client.Record, each func()) error {
	rec.Topic, rec.Partition = rb.Topic, rb.Partition
	return record.SplitBatches(rb.Records, func(batch []byte, h record.Header) error {
		if h.Control() || h.NextOffset() <= rb.StartOffset {
			return nil
		}
		rec.LeaderEpoch = h.PartitionLeaderEpoch
		return record.ForEachRecord(batch, func(r *record.Record) error {
			if r.Offset < rb.StartOffset {
				return nil
			}
			rec.Offset, rec.Timestamp, rec.Key, rec.Value, rec.Headers = r.Offset, time.UnixMilli(r.Timestamp), r.Key, r.Value, nil
			if len(r.Headers) > 0 {
				rec.Headers = append([]client.RecordHeader(nil), r.Headers...)
			}
			each()
			return nil
		})
	})
}

// groupBenchSetup starts an in-process broker (the tests' 100ms heartbeat
// interval) and fills a 3-partition topic with b.N records of 100 bytes:
// spread by the default partitioner (sticky for keyless records, a
// producer batch to one partition), or, with even, a third to each
// partition (record i to partition i%3) so that readers owning one
// partition each have the same to read.
func groupBenchSetup(b *testing.B, topic string, even bool) (*broker.Broker, *client.Client) {
	br := brokertest.Start(b, func(c *broker.Config) {
		c.GroupConsumerSessionTimeoutMs, c.GroupConsumerHeartbeatIntervalMs = 3000, 100
	})
	var opts []client.Opt
	if even {
		opts = append(opts, client.RecordPartitioner(client.ManualPartitioner()))
	}
	cl := benchClient(b, br.Addr(), opts...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	brokertest.WaitMetadataVersion(b, br, 2)
	if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: topic, Partitions: 3}); err != nil {
		b.Fatal(err)
	}
	v := benchValue()
	for i := 0; i < b.N; i++ {
		cl.Produce(ctx, &client.Record{Topic: topic, Partition: int32(i % 3), Value: v}, nil)
	}
	if err := cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	return br, cl
}

// BenchmarkGroupJoinToStable measures, with the heartbeat interval of the
// tests (100ms) and the default (5s), how long a first member takes from
// NewGroupConsumer to owning all 6 partitions of a topic (join-ms), and
// how long after a second member joins until the two own 3 each
// (rebalance-ms), against an in-process broker:
//
//	go test ./client/ -run '^$' -bench 'BenchmarkGroupJoinToStable' -benchtime 1x
func BenchmarkGroupJoinToStable(b *testing.B) {
	for _, hb := range []int64{100, 5000} {
		b.Run(fmt.Sprintf("heartbeat-%dms", hb), func(b *testing.B) {
			br := brokertest.Start(b, func(c *broker.Config) { c.GroupConsumerHeartbeatIntervalMs = hb })
			cl := benchClient(b, br.Addr())
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			brokertest.WaitMetadataVersion(b, br, 2)
			if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: "stable", Partitions: 6}); err != nil {
				b.Fatal(err)
			}
			var join, rebalance time.Duration
			for i := 0; i < b.N; i++ {
				group := fmt.Sprint("stable-", hb, "-", i)
				waitOwn := func(want []int, gs ...*client.GroupConsumer) {
					for {
						ok := true
						for j, g := range gs {
							ok = ok && len(g.Assignment()) == want[j]
						}
						if ok {
							return
						}
						if ctx.Err() != nil {
							b.Fatalf("members do not own %v", want)
						}
						time.Sleep(time.Millisecond) // polling the assignments
					}
				}
				t0 := time.Now()
				a, err := cl.NewGroupConsumer(client.GroupConfig{Group: group, Topics: []string{"stable"}})
				if err != nil {
					b.Fatal(err)
				}
				waitOwn([]int{6}, a)
				join += time.Since(t0)
				t1 := time.Now()
				c, err := cl.NewGroupConsumer(client.GroupConfig{Group: group, Topics: []string{"stable"}})
				if err != nil {
					b.Fatal(err)
				}
				waitOwn([]int{3, 3}, a, c)
				rebalance += time.Since(t1)
				_ = a.Close(ctx)
				_ = c.Close(ctx)
			}
			b.ReportMetric(float64(join.Milliseconds())/float64(b.N), "join-ms")
			b.ReportMetric(float64(rebalance.Milliseconds())/float64(b.N), "rebalance-ms")
		})
	}
}
