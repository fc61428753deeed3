package client_test

import (
	"context"
	"testing"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/broker/brokertest"
	"github.com/quirelog/quire/client"
)

// BenchmarkShareConsume reads b.N records of 100 bytes from a
// one-partition topic on an in-process broker, in the same run: with
// FetchRecords (the decoded unary read, 500 records a call, no
// acknowledgement: the baseline), and with a ShareConsumer (a SHARED
// Subscribe stream) accepting every record, its acknowledgements sent
// as ranges with the next Poll (batched; with the default credit of 500
// records held, and with 2000, the share-partition's whole window), or
// waited for after each Poll (flush).
//
//	go test ./client/ -run '^$' -bench 'BenchmarkShareConsume' -benchtime 200000x
func BenchmarkShareConsume(b *testing.B) {
	const topic = "sbench"
	setup := func(b *testing.B) (*broker.Broker, *client.Client) {
		br := brokertest.Start(b, func(c *broker.Config) {
			c.GroupShareEnable, c.ShareAutoOffsetReset = true, "earliest"
		})
		cl := benchClient(b, br.Addr())
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: topic, Partitions: 1}); err != nil {
			b.Fatal(err)
		}
		v := benchValue()
		for i := 0; i < b.N; i++ {
			cl.Produce(ctx, &client.Record{Topic: topic, Value: v}, nil)
		}
		if err := cl.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		return br, cl
	}
	b.Run("fetch-records", func(b *testing.B) {
		br, _ := setup(b)
		cc := bareConn(b, br.Addr())
		cons := quirev1.NewConsumerClient(cc)
		b.SetBytes(benchValueSize)
		b.ResetTimer()
		cpu0 := cpuTime()
		got, next := 0, int64(0)
		for got < b.N {
			resp, err := cons.FetchRecords(context.Background(), &quirev1.FetchRecordsRequest{Topic: topic, Offset: next, MaxRecords: 500, MaxWaitMs: 500})
			if err != nil {
				b.Fatal(err)
			}
			got += len(resp.Records)
			next = resp.NextOffset
		}
		b.StopTimer()
		reportRecords(b, got, cpu0)
	})
	for _, v := range []struct {
		name   string
		credit int
		flush  bool
	}{{"share-batched-acks", 0, false}, {"share-batched-acks-credit-2000", 2000, false}, {"share-flush-each-poll", 0, true}} {
		flush := v.flush
		b.Run(v.name, func(b *testing.B) {
			_, cl := setup(b)
			ctx := context.Background()
			b.SetBytes(benchValueSize)
			b.ResetTimer()
			cpu0 := cpuTime()
			var opts []client.ShareOpt
			if v.credit > 0 {
				opts = append(opts, client.ShareMaxRecords(v.credit))
			}
			sc, err := cl.NewShareConsumer(ctx, "g", []string{topic}, opts...)
			if err != nil {
				b.Fatal(err)
			}
			got := 0
			for got < b.N {
				recs, err := sc.Poll(ctx)
				if err != nil {
					b.Fatal(err)
				}
				for _, r := range recs {
					r.Accept()
				}
				got += len(recs)
				if flush {
					if err := sc.Flush(ctx); err != nil {
						b.Fatal(err)
					}
				}
			}
			if err := sc.Close(ctx); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			reportRecords(b, got, cpu0)
		})
	}
}
