package client_test

import (
	"encoding/binary"
	"slices"
	"testing"
	"time"

	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/client"
	"github.com/quirelog/quire/replica"
	"github.com/quirelog/quire/testcluster"
)

// endToEnd produces n records at a low fixed rate to a topic of
// replication factor 3 created just before, with acks=all, and consumes
// them from its end: every record waits for both followers' fetches and
// the HW before its acknowledgement and its delivery. The nodes keep the
// default replica fetch timings (500 ms wait, 1 s backoff), so a step on
// that path that is not woken at once (a follower backing off, a long poll
// running out its max wait) shows at its full size in the figures. It
// returns each record's time from just before its Produce to its delivery,
// sorted, and the leaders' stage histograms of the same appends. It fails
// tb when a record is lost, repeated or out of order.
func endToEnd(tb testing.TB, n, rate int) ([]time.Duration, [replica.NumStages]replica.Histogram) {
	tb.Helper()
	def := broker.DefaultConfig()
	c := testcluster.New(tb, 3, testcluster.Config(func(_ int32, cfg *broker.Config) {
		cfg.ReplicaFetchWaitMaxMs = def.ReplicaFetchWaitMaxMs
		cfg.ReplicaFetchBackoffMs = def.ReplicaFetchBackoffMs
	}))
	ctx := clusterCtx(tb, 60*time.Second+time.Duration(n/rate)*time.Second)
	cl := clusterClient(tb, c, nil, client.FetchMaxWait(500*time.Millisecond), client.RecordPartitioner(client.ManualPartitioner()))
	const topic, parts = "latency", 3
	if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: topic, Partitions: parts, ReplicationFactor: 3,
		Configs: map[string]string{"min.insync.replicas": "2"}}); err != nil {
		tb.Fatal(err)
	}
	ends, err := cl.ListOffsets(ctx, topic, client.AtEnd())
	if err != nil {
		tb.Fatal(err)
	}
	assign := map[int32]client.Offset{}
	for p, o := range ends {
		assign[p] = client.At(o)
	}
	cons, err := cl.NewConsumer(map[string]map[int32]client.Offset{topic: assign})
	if err != nil {
		tb.Fatal(err)
	}
	defer cons.Close()
	// The topic is new: until one record per partition has gone the
	// whole way, what is timed is its leaders settling and the
	// producer's first metadata, not the path.
	var warm []*client.Record
	for p := range int32(parts) {
		warm = append(warm, &client.Record{Topic: topic, Partition: p, Value: make([]byte, 16)})
	}
	if err := cl.ProduceSync(ctx, warm...); err != nil {
		tb.Fatal(err)
	}
	for got := 0; got < len(warm); {
		recs, err := cons.Poll(ctx)
		if err != nil {
			tb.Fatalf("poll of the first records: %v", err)
		}
		got += len(recs)
	}
	// The figures count from the warm-up's end.
	base := sumStages(c)

	// Each value holds the record's sequence number and the time just
	// before its Produce.
	produceErr := make(chan error, n)
	go func() {
		tick := time.NewTicker(time.Second / time.Duration(rate))
		defer tick.Stop()
		for i := 0; i < n && ctx.Err() == nil; i++ {
			<-tick.C
			v := make([]byte, 100)
			binary.BigEndian.PutUint64(v, uint64(i))
			binary.BigEndian.PutUint64(v[8:], uint64(time.Now().UnixNano()))
			cl.Produce(ctx, &client.Record{Topic: topic, Partition: int32(i % parts), Value: v}, func(_ *client.Record, err error) {
				if err != nil {
					produceErr <- err
				}
			})
		}
	}()
	lat := make([]time.Duration, 0, n)
	next := map[int32]int{0: 0, 1: 1, 2: 2} // the sequence number each partition delivers next
	for len(lat) < n {
		select {
		case err := <-produceErr:
			tb.Fatalf("produce: %v", err)
		default:
		}
		recs, err := cons.Poll(ctx)
		if err != nil {
			tb.Fatalf("poll after %d records: %v", len(lat), err)
		}
		now := time.Now()
		for _, r := range recs {
			seq := int(binary.BigEndian.Uint64(r.Value))
			if seq != next[r.Partition] {
				tb.Fatalf("partition %d delivered record %d at offset %d, want %d (lost, repeated or reordered)", r.Partition, seq, r.Offset, next[r.Partition])
			}
			next[r.Partition] += parts
			lat = append(lat, now.Sub(time.Unix(0, int64(binary.BigEndian.Uint64(r.Value[8:])))))
		}
	}
	slices.Sort(lat)
	stages := sumStages(c)
	for s := range stages {
		stages[s] = stages[s].Sub(base[s])
	}
	return lat, stages
}

// sumStages adds up the stage histograms of every node's appends.
func sumStages(c *testcluster.Cluster) [replica.NumStages]replica.Histogram {
	var stages [replica.NumStages]replica.Histogram
	for _, id := range c.IDs() {
		for s, h := range c.Node(id).StageLatencies() {
			for i := range h.Counts {
				stages[s].Counts[i] += h.Counts[i]
			}
			stages[s].Sum += h.Sum
		}
	}
	return stages
}

// TestClusterEndToEndDelivery checks the acks=all path end to end at a
// low rate: every record produced reaches the consumer once and in order,
// and the leaders time every stage of the appends. How long the path takes
// is BenchmarkClusterEndToEndLatency's figure, not asserted here: a busy
// machine stretches it without anything being wrong.
func TestClusterEndToEndDelivery(t *testing.T) {
	t.Parallel()
	const n, rate = 150, 200 // records, records/s
	lat, stages := endToEnd(t, n, rate)
	t.Logf("end-to-end over %d records at %d/s, RF 3, acks=all: p50 %v, p99 %v, max %v",
		n, rate, lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1])
	t.Logf("stages from the leaders' appends: %s", replica.FormatStages(stages))
	for _, st := range replica.Stages() {
		if stages[st].Count() == 0 {
			t.Errorf("stage %v timed no append", st)
		}
	}
}

// BenchmarkClusterEndToEndLatency produces b.N records at 200/s to a
// 3-node cluster (RF 3, acks=all, default replica fetch timings) and
// reports the time from produce to delivery (p50, p99, max) and from the
// append to the HW passing it (the leaders' replicated stage, p99), in
// milliseconds. ns/op is the producer's pace, not a figure. Run it with a
// fixed count, e.g. -benchtime 400x: each run starts its own cluster.
func BenchmarkClusterEndToEndLatency(b *testing.B) {
	const rate = 200
	n := max(b.N, 10)
	lat, stages := endToEnd(b, n, rate)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
	b.ReportMetric(ms(lat[len(lat)*99/100]), "p99-ms")
	b.ReportMetric(ms(lat[len(lat)-1]), "max-ms")
	b.ReportMetric(ms(stages[replica.StageReplicated].Quantile(0.99)), "replicated-p99-ms")
	b.Logf("stages from the leaders' appends: %s", replica.FormatStages(stages))
}
