package broker_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/broker/brokertest"
)

// franz-go's share consumer (KIP-932), three members of one share group
// with per-key ordering, reads a partition over the Kafka listener: every
// record comes exactly once, and each member sees the records of a key in
// offset order.
func TestBrokerKafkaShareGroup(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, func(c *broker.Config) {
		c.ListenAddr = "PLAINTEXT://127.0.0.1:0,KAFKA://127.0.0.1:0"
		c.KafkaListenerNames = "kafka"
		c.ShareAutoOffsetReset = "earliest"
		c.ShareKeyOrdering = true
	})
	addr, ok := b.ListenerAddr("KAFKA")
	if !ok {
		t.Fatal("no KAFKA listener")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	prod := kafkaClient(t, addr, kgo.DefaultProduceTopic("sq"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	const n, keys = 60, 5
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Partition: 0, Key: fmt.Appendf(nil, "k%d", i%keys), Value: fmt.Appendf(nil, "v%d", i)})
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}

	var mu sync.Mutex
	seen := map[int64]int{}
	// Polls end once every record is seen; each member acknowledges what
	// it polled before it polls again.
	pollCtx, allSeen := context.WithCancel(ctx)
	defer allSeen()
	var wg sync.WaitGroup
	for m := range 3 {
		cl := kafkaClient(t, addr, kgo.ShareGroup("sg"), kgo.ConsumeTopics("sq"), kgo.ShareMaxRecords(4))
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := map[string]int64{}
			for {
				fs := cl.PollFetches(pollCtx)
				fs.EachError(func(topic string, p int32, err error) {
					if pollCtx.Err() == nil {
						t.Errorf("member %d: %s/%d: %v", m, topic, p, err)
					}
				})
				mu.Lock()
				for _, r := range fs.Records() {
					seen[r.Offset]++
					if string(r.Value) != fmt.Sprintf("v%d", r.Offset) {
						t.Errorf("offset %d has value %q", r.Offset, r.Value)
					}
					if prev, ok := last[string(r.Key)]; ok && r.Offset <= prev {
						t.Errorf("member %d saw key %s at %d after %d", m, r.Key, r.Offset, prev)
					}
					last[string(r.Key)] = r.Offset
				}
				all := len(seen) == n
				mu.Unlock()
				cl.MarkAcks(kgo.AckAccept, fs.Records()...)
				if err := cl.FlushAcks(ctx); err != nil {
					t.Errorf("member %d: acknowledging: %v", m, err)
				}
				if all {
					allSeen()
				}
				if pollCtx.Err() != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatal("the share group did not read every record in time")
	}
	mu.Lock()
	defer mu.Unlock()
	for o := range int64(n) {
		if seen[o] != 1 {
			t.Errorf("offset %d delivered %d times", o, seen[o])
		}
	}
}

// A share consumer renews its locks (ShareAcknowledge v2, KIP-1222), then
// accepts and rejects: the broker answers each acknowledgement without an
// error.
func TestBrokerKafkaShareRenew(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, func(c *broker.Config) {
		c.ListenAddr = "PLAINTEXT://127.0.0.1:0,KAFKA://127.0.0.1:0"
		c.KafkaListenerNames = "kafka"
		c.ShareAutoOffsetReset = "earliest"
	})
	addr, ok := b.ListenerAddr("KAFKA")
	if !ok {
		t.Fatal("no KAFKA listener")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	prod := kafkaClient(t, addr, kgo.DefaultProduceTopic("sr"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte("a")}, &kgo.Record{Value: []byte("b")}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	var mu sync.Mutex
	var results []kgo.ShareAckResult
	cl := kafkaClient(t, addr, kgo.ShareGroup("sgr"), kgo.ConsumeTopics("sr"),
		kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
			mu.Lock()
			results = append(results, rs...)
			mu.Unlock()
		}))
	var recs []*kgo.Record
	for len(recs) < 2 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("polled %d of 2 records: %v", len(recs), ctx.Err())
		}
		recs = append(recs, fs.Records()...)
	}
	check := func(what string) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		if len(results) == 0 {
			t.Fatalf("%s: no acknowledgement results", what)
		}
		for _, r := range results {
			if r.Err != nil {
				t.Fatalf("%s: %s/%d: %v", what, r.Topic, r.Partition, r.Err)
			}
		}
		results = nil
	}
	cl.MarkAcks(kgo.AckRenew, recs...)
	if err := cl.FlushAcks(ctx); err != nil {
		t.Fatal(err)
	}
	check("renew")
	cl.MarkAcks(kgo.AckAccept, recs[0])
	cl.MarkAcks(kgo.AckReject, recs[1])
	if err := cl.FlushAcks(ctx); err != nil {
		t.Fatal(err)
	}
	check("accept and reject")
}
