package broker_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// benchTxnSeq makes each benchmark run's topic and transactional id its
// own: b.Run calls a sub-benchmark several times on one broker.
var benchTxnSeq atomic.Int64

func benchKafkaClient(b *testing.B, addr string, opts ...kgo.Opt) *kgo.Client {
	b.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.AllowAutoTopicCreation(), kgo.ProducerLinger(0)}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cl.Close)
	return cl
}

// BenchmarkBrokerKafkaTransactions: franz-go's producer over the Kafka
// listener of one dev broker (acks=all, 100-byte records, one
// partition), writing K = 1, 10 and 100 records at a time:
//
//   - idempotent: K records produced, then a Flush (waits for their acks);
//   - transactional: BeginTransaction, K records, Flush, EndTransaction
//     (commit). commit-p50-ms and commit-p99-ms are EndTransaction's
//     latency alone (the coordinator's prepare, the markers, complete);
//
// write-p50-ms and write-p99-ms are, for both, the K records' latency up
// to the Flush (in a transaction the first also adds the partition to
// it);
//
// so that the ratio of their records/s at one K is what a transaction
// costs at that size. Then read_committed against read_uncommitted: a
// fresh consumer reads a partition of 20,000 records written in
// transactions of 100, one in ten aborted, from the start to its end
// (the last transaction committed);
// records/s counts the log's records read through (the same for both),
// whatever the isolation returns of them.
//
//	go test -run '^$' -bench BrokerKafkaTransactions -benchtime 2000x ./broker/
func BenchmarkBrokerKafkaTransactions(b *testing.B) {
	_, addr := startKafkaBroker(b)
	value := make([]byte, 100)
	for _, k := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("records=%d/idempotent", k), func(b *testing.B) {
			topic := fmt.Sprintf("idem-%d", benchTxnSeq.Add(1))
			cl := benchKafkaClient(b, addr, kgo.DefaultProduceTopic(topic))
			benchWrites(b, k, value, cl, nil)
		})
		b.Run(fmt.Sprintf("records=%d/transactional", k), func(b *testing.B) {
			n := benchTxnSeq.Add(1)
			cl := benchKafkaClient(b, addr, kgo.DefaultProduceTopic(fmt.Sprintf("txn-%d", n)),
				kgo.TransactionalID(fmt.Sprintf("bench-%d", n)), kgo.TransactionTimeout(60*time.Second))
			var commits []time.Duration
			benchWrites(b, k, value, cl, &commits)
			reportQuantiles(b, commits, "commit")
		})
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const txns, perTxn = 200, 100
	prod := benchKafkaClient(b, addr, kgo.DefaultProduceTopic("rc"), kgo.TransactionalID("bench-rc"))
	committed := 0
	for t := range txns {
		if err := prod.BeginTransaction(); err != nil {
			b.Fatal(err)
		}
		for range perTxn {
			prod.Produce(ctx, &kgo.Record{Value: value}, nil)
		}
		if err := prod.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		end := kgo.TryCommit
		if t%10 == 4 {
			end = kgo.TryAbort
		} else {
			committed += perTxn
		}
		if err := prod.EndTransaction(ctx, end); err != nil {
			b.Fatal(err)
		}
	}
	for _, level := range []struct {
		name  string
		level kgo.IsolationLevel
		want  int
	}{
		{"read_uncommitted", kgo.ReadUncommitted(), txns * perTxn},
		{"read_committed", kgo.ReadCommitted(), committed},
	} {
		b.Run("consume/"+level.name, func(b *testing.B) {
			b.SetBytes(int64(txns * perTxn * len(value)))
			b.ResetTimer()
			for range b.N {
				cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.FetchIsolationLevel(level.level),
					kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"rc": {0: kgo.NewOffset().AtStart()}}))
				if err != nil {
					b.Fatal(err)
				}
				got := 0
				for got < level.want {
					fs := cl.PollFetches(ctx)
					if err := ctx.Err(); err != nil {
						b.Fatalf("read %d records: %v", got, err)
					}
					fs.EachError(func(t string, p int32, err error) { b.Fatalf("fetch %s/%d: %v", t, p, err) })
					got += fs.NumRecords()
				}
				if got != level.want {
					b.Fatalf("%s read %d records, want %d", level.name, got, level.want)
				}
				cl.Close()
			}
			b.ReportMetric(float64(b.N*txns*perTxn)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// benchWrites writes b.N records to cl's topic, k at a time: each k in a
// transaction when commits is not nil (each EndTransaction's latency
// appended to it), else with a Flush after them.
func benchWrites(b *testing.B, k int, value []byte, cl *kgo.Client, commits *[]time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// The topic created, and the producer id taken, before the clock.
	if commits != nil {
		if err := cl.BeginTransaction(); err != nil {
			b.Fatal(err)
		}
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
		b.Fatal(err)
	}
	if commits != nil {
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			b.Fatal(err)
		}
	}
	var failed atomic.Pointer[error]
	done := func(_ *kgo.Record, err error) {
		if err != nil {
			failed.CompareAndSwap(nil, &err)
		}
	}
	var writes []time.Duration
	b.SetBytes(int64(len(value)))
	b.ResetTimer()
	for i := 0; i < b.N; i += k {
		start := time.Now()
		if commits != nil {
			if err := cl.BeginTransaction(); err != nil {
				b.Fatal(err)
			}
		}
		for range min(k, b.N-i) {
			cl.Produce(ctx, &kgo.Record{Value: value}, done)
		}
		if err := cl.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		writes = append(writes, time.Since(start))
		if commits != nil {
			start := time.Now()
			if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
				b.Fatal(err)
			}
			*commits = append(*commits, time.Since(start))
		}
	}
	b.StopTimer()
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
	reportQuantiles(b, writes, "write")
}

// reportQuantiles reports the p50 and p99 of ds in milliseconds as
// NAME-p50-ms and NAME-p99-ms.
func reportQuantiles(b *testing.B, ds []time.Duration, name string) {
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	for _, q := range []struct {
		name string
		q    float64
	}{{"p50", 0.50}, {"p99", 0.99}} {
		d := ds[int(q.q*float64(len(ds)-1))]
		b.ReportMetric(float64(d.Microseconds())/1000, name+"-"+q.name+"-ms")
	}
}
