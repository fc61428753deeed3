package testcluster_test

import (
	"context"
	"strings"
	"testing"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/testcluster"
)

// BenchmarkClusterSharedRouted reads b.N records of 100 bytes from a
// one-partition topic of a 2-node cluster with one SHARED Subscribe
// stream accepting each batch as it comes (500 records held at most),
// the stream opened on the partition's leader, then on the other node,
// whose fetches and acknowledgements are passed on to the leader.
//
//	go test ./testcluster/ -run '^$' -bench BenchmarkClusterSharedRouted -benchtime 50000x
func BenchmarkClusterSharedRouted(b *testing.B) {
	for _, onLeader := range []bool{true, false} {
		name := "via-other-node"
		if onLeader {
			name = "on-leader"
		}
		b.Run(name, func(b *testing.B) {
			c := testcluster.New(b, 2, testcluster.Config(func(_ int32, cfg *broker.Config) {
				cfg.GroupShareEnable = true
				cfg.ShareAutoOffsetReset = "earliest"
			}))
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			ctl := c.WaitController(ctx)
			if _, err := admin(c, ctl).CreateTopic(ctx, &quirev1.CreateTopicRequest{Name: "sb",
				OptionalPartitions: &quirev1.CreateTopicRequest_Partitions{Partitions: 1}, OptionalReplicationFactor: &quirev1.CreateTopicRequest_ReplicationFactor{ReplicationFactor: 1}}); err != nil {
				b.Fatal(err)
			}
			leader, _ := c.WaitLeader(ctx, "sb", 0)
			via := leader
			if !onLeader {
				for _, id := range c.Running() {
					if id != leader {
						via = id
					}
				}
			}
			value := strings.Repeat("v", 100)
			for done := 0; done < b.N; {
				req := &quirev1.ProduceRecordsRequest{Topic: "sb", OptionalAcks: &quirev1.ProduceRecordsRequest_Acks{Acks: 1}}
				for i := 0; i < 1000 && done < b.N; i++ {
					req.Records = append(req.Records, &quirev1.ProduceRecord{ValueData: &quirev1.ProduceRecord_Value{Value: value}})
					done++
				}
				if _, err := quirev1.NewProducerClient(c.Conn(leader)).ProduceRecords(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(100)
			b.ResetTimer()
			cpu0 := processCPU()
			stream, err := groups(c, via).Subscribe(ctx)
			if err != nil {
				b.Fatal(err)
			}
			start := &quirev1.SubscribeStart{Group: "g", Subscription: &quirev1.GroupSubscription{Topics: []string{"sb"}},
				Mode: quirev1.SubscribeMode_SHARED, Format: quirev1.RecordFormat_RECORD_FORMAT_BYTES}
			if err := stream.Send(&quirev1.SubscribeRequest{Request: &quirev1.SubscribeRequest_Start{Start: start}}); err != nil {
				b.Fatal(err)
			}
			var id int64
			for got := 0; got < b.N; {
				resp, err := stream.Recv()
				if err != nil {
					b.Fatal(err)
				}
				batch := resp.GetBatch()
				if batch == nil {
					continue
				}
				got += len(batch.Records)
				id++
				acks := &quirev1.ShareAcks{Id: id}
				first := batch.Records[0].Offset
				for i, r := range batch.Records {
					if i == len(batch.Records)-1 || batch.Records[i+1].Offset != r.Offset+1 {
						acks.Ranges = append(acks.Ranges, &quirev1.ShareAckRange{Topic: "sb", FirstOffset: first, LastOffset: r.Offset, Type: quirev1.ShareAckType_SHARE_ACCEPT})
						if i+1 < len(batch.Records) {
							first = batch.Records[i+1].Offset
						}
					}
				}
				if err := stream.Send(&quirev1.SubscribeRequest{Request: &quirev1.SubscribeRequest_ShareAcks{ShareAcks: acks}}); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			cpu := processCPU() - cpu0
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "CPU-us/record")
			_ = stream.CloseSend()
		})
	}
}
