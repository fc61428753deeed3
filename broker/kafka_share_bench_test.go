package broker_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/broker/brokertest"
	"github.com/quirelog/quire/internal/poll"
	"github.com/quirelog/quire/metadata"
)

// BenchmarkBrokerKafkaShareAccept: franz-go share members read a
// partition over the Kafka listener and accept every record, with the
// share-partition state saved in the metadata log (metadata.version 15)
// and without (a node capped at 14 keeps it in memory), each fetch
// taking up to 10 or 500 records (each fetch round is one save). One op
// is one record delivered and accepted.
func BenchmarkBrokerKafkaShareAccept(b *testing.B) {
	for _, members := range []int{1, 3} {
		for _, perFetch := range []int32{10, 500} {
			for _, saved := range []bool{true, false} {
				b.Run(fmt.Sprintf("members=%d/fetch=%d/saved=%v", members, perFetch, saved), func(b *testing.B) {
					benchShareAccept(b, members, perFetch, saved)
				})
			}
		}
	}
}

func benchShareAccept(b *testing.B, members int, perFetch int32, saved bool) {
	level := metadata.LatestMetadataVersion
	node := brokertest.Start(b, func(c *broker.Config) {
		c.ListenAddr = "PLAINTEXT://127.0.0.1:0,KAFKA://127.0.0.1:0"
		c.KafkaListenerNames = "kafka"
		c.ShareAutoOffsetReset = "earliest"
		if !saved {
			level = metadata.MetadataVersionShareState - 1
			c.MetadataVersions = metadata.VersionRange{Min: metadata.MetadataVersionBaseline, Max: level}
		}
	})
	poll.True(b, fmt.Sprintf("metadata.version %d finalized", level), func() bool {
		return node.Metadata().Image().MetadataVersion() == level
	})
	addr, _ := node.ListenerAddr("KAFKA")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	prod, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("sbench"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		b.Fatal(err)
	}
	defer prod.Close()
	value := make([]byte, 100)
	for sent := 0; sent < b.N; {
		var recs []*kgo.Record
		for ; sent < b.N && len(recs) < 1000; sent++ {
			recs = append(recs, &kgo.Record{Value: value})
		}
		if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			b.Fatal(err)
		}
	}
	var seen atomic.Int64
	runCtx, done := context.WithCancel(ctx)
	defer done()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for range members {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ShareGroup("sbench"), kgo.ConsumeTopics("sbench"), kgo.ShareMaxRecords(perFetch))
		if err != nil {
			b.Fatal(err)
		}
		defer cl.Close()
		wg.Go(func() {
			for runCtx.Err() == nil {
				fs := cl.PollFetches(runCtx)
				recs := fs.Records()
				cl.MarkAcks(kgo.AckAccept, recs...)
				if seen.Add(int64(len(recs))) >= int64(b.N) {
					_ = cl.FlushAcks(ctx)
					done()
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if ctx.Err() != nil {
		b.Fatalf("%d of %d records in time", seen.Load(), b.N)
	}
	b.ReportMetric(float64(seen.Load())/time.Since(start).Seconds(), "records/s")
	if saved {
		// The saves reached the metadata log.
		poll.True(b, "the share-partition saved with every record accepted", func() bool {
			st, ok := node.Metadata().Image().ShareState(metadata.ShareKey{Group: "sbench", Topic: "sbench", Partition: 0})
			return ok && st.Start == int64(b.N)
		})
	}
}
