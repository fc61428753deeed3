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

// BenchmarkBrokerKafkaShareScale: franz-go consumers read one partition
// of 100-byte records over one node's Kafka listener, in one run: a
// consumer group of one member (a partition has one reader) against
// share groups of 1, 3 and 6 members accepting every record, then 6
// members with share.key.ordering on, the records spread over 10, 1,000
// and 100,000 keys. The share-partition state is saved in the metadata
// log (metadata.version 15). One op is one record read (and, in a share
// group, accepted); cpu-us/record is the process's CPU (node and
// clients: they share it) over the reading, divided by the records.
// Run it with a fixed count (-benchtime=100000x) so each case reads the
// same records and every key occurs.
func BenchmarkBrokerKafkaShareScale(b *testing.B) {
	b.Run("group/members=1", func(b *testing.B) { benchShareScale(b, 0, 0) })
	for _, members := range []int{1, 3, 6} {
		b.Run(fmt.Sprintf("share/members=%d", members), func(b *testing.B) { benchShareScale(b, members, 0) })
	}
	for _, keys := range []int{10, 1000, 100000} {
		b.Run(fmt.Sprintf("share-keyed/members=6/keys=%d", keys), func(b *testing.B) { benchShareScale(b, 6, keys) })
	}
}

// benchShareScale reads b.N records with a share group of members (0: a
// consumer group of one), per-key ordering on with keys distinct keys
// (0: no keys, no ordering).
func benchShareScale(b *testing.B, members, keys int) {
	node := brokertest.Start(b, func(c *broker.Config) {
		c.ListenAddr = "PLAINTEXT://127.0.0.1:0,KAFKA://127.0.0.1:0"
		c.KafkaListenerNames = "kafka"
		c.ShareAutoOffsetReset = "earliest"
		c.ShareKeyOrdering = keys > 0
	})
	poll.True(b, fmt.Sprintf("metadata.version %d finalized", metadata.MetadataVersionShareState), func() bool {
		return node.Metadata().Image().MetadataVersion() >= metadata.MetadataVersionShareState
	})
	addr, _ := node.ListenerAddr("KAFKA")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	prod, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("scale"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		b.Fatal(err)
	}
	defer prod.Close()
	value := make([]byte, 100)
	for sent := 0; sent < b.N; {
		var recs []*kgo.Record
		for ; sent < b.N && len(recs) < 1000; sent++ {
			r := &kgo.Record{Value: value}
			if keys > 0 {
				r.Key = fmt.Appendf(nil, "k%d", sent%keys)
			}
			recs = append(recs, r)
		}
		if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			b.Fatal(err)
		}
	}
	var seen atomic.Int64
	runCtx, done := context.WithCancel(ctx)
	defer done()
	var clients []*kgo.Client
	if members == 0 {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup("scale-group"), kgo.ConsumeTopics("scale"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			b.Fatal(err)
		}
		clients = append(clients, cl)
	}
	for range members {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ShareGroup("scale-share"), kgo.ConsumeTopics("scale"))
		if err != nil {
			b.Fatal(err)
		}
		clients = append(clients, cl)
	}
	b.ResetTimer()
	start, cpu0 := time.Now(), processCPU()
	var wg sync.WaitGroup
	for _, cl := range clients {
		defer cl.Close()
		wg.Go(func() {
			for runCtx.Err() == nil {
				recs := cl.PollFetches(runCtx).Records()
				if members > 0 {
					cl.MarkAcks(kgo.AckAccept, recs...)
				}
				if seen.Add(int64(len(recs))) >= int64(b.N) {
					if members > 0 {
						_ = cl.FlushAcks(ctx)
					}
					done()
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	elapsed, cpu := time.Since(start), processCPU()-cpu0
	if ctx.Err() != nil {
		b.Fatalf("%d of %d records in time", seen.Load(), b.N)
	}
	if members > 0 && seen.Load() != int64(b.N) {
		b.Fatalf("%d records delivered for %d produced: some twice", seen.Load(), b.N)
	}
	b.ReportMetric(float64(seen.Load())/elapsed.Seconds(), "records/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(seen.Load()), "cpu-us/record")
}
