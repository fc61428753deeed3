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

// TestClusterEndToEndLatency produces at a low fixed rate to a topic of
// replication factor 3 created just before, with acks=all, and consumes
// from its end: every record waits for both followers' fetches and the HW
// before its acknowledgement and its delivery, so a step on that path
// that is not woken at once (a follower backing off, a long poll running
// out its max wait) shows as hundreds of milliseconds. The nodes keep the
// default replica fetch timings (500 ms wait, 1 s backoff), where such a
// stall shows at its full size (p99 946 ms when followers backed off the
// full second). The bound is far above the milliseconds the path takes
// (p99 4-40 ms here under -race), so it holds on a busy machine.
func TestClusterEndToEndLatency(t *testing.T) {
	def := broker.DefaultConfig()
	c := testcluster.New(t, 3, testcluster.Config(func(_ int32, cfg *broker.Config) {
		cfg.ReplicaFetchWaitMaxMs = def.ReplicaFetchWaitMaxMs
		cfg.ReplicaFetchBackoffMs = def.ReplicaFetchBackoffMs
	}))
	ctx := clusterCtx(t, 60*time.Second)
	cl := clusterClient(t, c, nil, client.FetchMaxWait(500*time.Millisecond))
	const topic = "latency"
	if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: topic, Partitions: 3, ReplicationFactor: 3,
		Configs: map[string]string{"min.insync.replicas": "2"}}); err != nil {
		t.Fatal(err)
	}
	ends, err := cl.ListOffsets(ctx, topic, client.AtEnd())
	if err != nil {
		t.Fatal(err)
	}
	assign := map[int32]client.Offset{}
	for p, o := range ends {
		assign[p] = client.At(o)
	}
	cons, err := cl.NewConsumer(map[string]map[int32]client.Offset{topic: assign})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	// The topic is new: until one record per partition has gone the
	// whole way, what is timed is its leaders settling and the
	// producer's first metadata, not the path.
	var warm []*client.Record
	for p := range int32(3) {
		warm = append(warm, &client.Record{Topic: topic, Partition: p, Value: make([]byte, 8)})
	}
	if err := cl.ProduceSync(ctx, warm...); err != nil {
		t.Fatal(err)
	}
	for got := 0; got < len(warm); {
		recs, err := cons.Poll(ctx)
		if err != nil {
			t.Fatalf("poll of the first records: %v", err)
		}
		got += len(recs)
	}

	const rate, n = 200, 400 // records/s, records
	produceErr := make(chan error, n)
	go func() {
		tick := time.NewTicker(time.Second / rate)
		defer tick.Stop()
		for i := 0; i < n && ctx.Err() == nil; i++ {
			<-tick.C
			v := make([]byte, 100)
			binary.BigEndian.PutUint64(v, uint64(time.Now().UnixNano()))
			cl.Produce(ctx, &client.Record{Topic: topic, Partition: int32(i % 3), Value: v}, func(_ *client.Record, err error) {
				if err != nil {
					produceErr <- err
				}
			})
		}
	}()
	var lat []time.Duration
	for len(lat) < n {
		select {
		case err := <-produceErr:
			t.Fatalf("produce: %v", err)
		default:
		}
		recs, err := cons.Poll(ctx)
		if err != nil {
			t.Fatalf("poll after %d records: %v", len(lat), err)
		}
		now := time.Now()
		for _, r := range recs {
			lat = append(lat, now.Sub(time.Unix(0, int64(binary.BigEndian.Uint64(r.Value)))))
		}
	}
	slices.Sort(lat)
	p50, p99, worst := lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1]
	t.Logf("end-to-end latency over %d records at %d/s, RF 3, acks=all: p50 %v, p99 %v, max %v", len(lat), rate, p50, p99, worst)
	if limit := 300 * time.Millisecond; p99 > limit {
		t.Errorf("p99 end-to-end latency %v, want under %v (p50 %v, max %v)", p99, limit, p50, worst)
	}
	// The leaders timed the same appends through each stage: where a
	// record waited shows there.
	var stages [replica.NumStages]replica.Histogram
	for _, id := range c.IDs() {
		for s, h := range c.Node(id).StageLatencies() {
			for i := range h.Counts {
				stages[s].Counts[i] += h.Counts[i]
			}
			stages[s].Sum += h.Sum
		}
	}
	t.Logf("stages from the leaders' appends: %s", replica.FormatStages(stages))
	for _, st := range replica.Stages() {
		if stages[st].Count() == 0 {
			t.Errorf("stage %v timed no append", st)
		}
	}
	if q := stages[replica.StageReplicated].Quantile(0.99); q > 300*time.Millisecond {
		t.Errorf("p99 from append to the HW passing it %v, want under 300ms", q)
	}
}
