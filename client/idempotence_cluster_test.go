package client_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/client"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/testcluster"
)

// TestClientClusterIdempotentExactlyOnce: 3 nodes, replication factor 3,
// min.insync.replicas 2, the idempotent producer (the default) with 5
// requests in flight per partition sending numbered records to every
// partition while the leader of a partition is killed and restarted, three
// times over, with a request timeout short enough that acks=all waits time
// out and writes that did succeed are retried, and requests behind them
// are refused as out of order and sent again. Afterwards each partition holds every acknowledged record
// exactly once, in the order sent, with no gap: nothing but records
// acknowledged (or reported as of unknown outcome) is in the log.
func TestClientClusterIdempotentExactlyOnce(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 3)
	ctx := clusterCtx(t, 5*time.Minute)
	c.WaitController(ctx)
	cl := clusterClient(t, c, nil, client.RecordPartitioner(client.ManualPartitioner()),
		client.RequestTimeout(150*time.Millisecond), client.DeliveryTimeout(100*time.Second),
		client.MaxBufferedBytes(256<<10), client.MaxInFlightPerPartition(5),
		// Small batches fill up while requests wait on a failed leader:
		// the window fills with them.
		client.BatchMaxBytes(1024))
	const topic, parts = "exactly-once", 3
	// Created with the default request timeout: a loaded machine can
	// take longer than 150 ms over every attempt of a create.
	if _, err := clusterClient(t, c, nil).CreateTopic(ctx, client.TopicSpec{Name: topic, Partitions: parts, ReplicationFactor: 3,
		Configs: map[string]string{"min.insync.replicas": "2"}}); err != nil {
		t.Fatal(err)
	}
	c.Eventually(ctx, "the topic in the client's metadata", func() error {
		_, err := cl.PartitionCount(ctx, topic)
		return err
	})
	fullWindow(t, ctx, c)

	var (
		mu      sync.Mutex
		acked   = make([]map[int64]int64, parts) // seq -> offset
		unknown = map[int64]bool{}
		failed  []error
		seq     atomic.Int64
		stop    = make(chan struct{})
		done    = make(chan struct{})
	)
	for p := range acked {
		acked[p] = map[int64]int64{}
	}
	go func() {
		defer close(done)
		tick := time.NewTicker(500 * time.Microsecond) // pacing, not synchronisation
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			s := seq.Add(1)
			r := &client.Record{Topic: topic, Partition: int32(s % parts), Value: []byte(strconv.FormatInt(s, 10))}
			cl.Produce(ctx, r, func(r *client.Record, err error) {
				mu.Lock()
				defer mu.Unlock()
				s, _ := strconv.ParseInt(string(r.Value), 10, 64)
				switch {
				case errors.Is(err, client.ErrUnknownOutcome):
					unknown[s] = true
				case err != nil:
					failed = append(failed, fmt.Errorf("record %d on %d: %w", s, r.Partition, err))
				default:
					acked[r.Partition][s] = r.Offset
				}
			})
		}
	}()
	stopProducing := sync.OnceFunc(func() { close(stop); <-done })
	t.Cleanup(stopProducing)
	ackedAbove := func(from int64, want int) error {
		mu.Lock()
		defer mu.Unlock()
		if len(failed) > 0 {
			t.Fatalf("produce failed: %v", failed[0])
		}
		for p, as := range acked {
			n := 0
			for s := range as {
				if s > from {
					n++
				}
			}
			if n < want {
				return fmt.Errorf("partition %d: %d records acknowledged above %d, want %d", p, n, from, want)
			}
		}
		return nil
	}
	c.Eventually(ctx, "records acknowledged", func() error { return ackedAbove(0, 50) })

	for round := range 3 {
		p := int32(round % parts)
		victim, _ := c.WaitLeader(ctx, topic, p)
		c.Kill(victim)
		from := seq.Load()
		c.Eventually(ctx, "records acknowledged with the leader down", func() error { return ackedAbove(from, 50) })
		c.Restart(victim)
		c.WaitImage(ctx, func(img *metadata.Image) bool {
			tp, ok := img.Topic(topic)
			if !ok {
				return false
			}
			for _, pi := range tp.Partitions {
				if len(pi.ISR) != 3 {
					return false
				}
			}
			return true
		})
		from = seq.Load()
		c.Eventually(ctx, "records acknowledged after the restart", func() error { return ackedAbove(from, 50) })
		t.Logf("round %d: node %d (leader of partition %d) killed and back in every ISR", round, victim, p)
	}
	stopProducing()
	// What follows has deadlines of its own, whatever the rounds above
	// took on a loaded machine, and reads through a client with the
	// ordinary request timeout: the producer's 150 ms one would time out
	// fetches again and again.
	ctx = clusterCtx(t, 3*time.Minute)
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	reader := clusterClient(t, c, nil)

	mu.Lock()
	defer mu.Unlock()
	if len(failed) > 0 {
		t.Fatalf("%d records failed, first: %v", len(failed), failed[0])
	}
	// How full the window got depends on how fast the machine forms
	// batches against how fast they are acknowledged; fullWindow shows
	// it fills. What holds whatever the timing is the limit.
	reqs, batches := client.PeakInFlight(cl)
	if reqs < 1 || reqs > 5 || batches > 5 {
		t.Fatalf("at most %d requests (%d batches) of a partition in flight, want 1 to 5 (at most 5 batches)", reqs, batches)
	}
	t.Logf("up to %d requests, %d batches of a partition in flight", reqs, batches)
	for p := range int32(parts) {
		var last int64 = -1
		for _, off := range acked[p] {
			last = max(last, off)
		}
		log := readPartition(t, ctx, reader, topic, p, last)
		offs := make([]int64, 0, len(log))
		for o := range log {
			offs = append(offs, o)
		}
		slices.Sort(offs)
		prev := int64(-1)
		for _, o := range offs {
			s, err := strconv.ParseInt(log[o], 10, 64)
			if err != nil || s%parts != int64(p) {
				t.Fatalf("partition %d offset %d: %q was never produced to it", p, o, log[o])
			}
			if s <= prev {
				t.Fatalf("partition %d: record %d at offset %d follows record %d: a duplicate or out of order", p, s, o, prev)
			}
			if _, ok := acked[p][s]; !ok && !unknown[s] && o <= last {
				t.Fatalf("partition %d: record %d at offset %d was neither acknowledged nor of unknown outcome", p, s, o)
			}
			prev = s
		}
		for s, off := range acked[p] {
			if log[off] != strconv.FormatInt(s, 10) {
				t.Fatalf("partition %d: record %d acknowledged at offset %d, the log has %q there", p, s, off, log[off])
			}
		}
		// No gap: every record produced to p up to the last one in the
		// log was acknowledged or is of unknown outcome.
		for s := int64(p); s <= prev; s += parts {
			if s == 0 {
				continue
			}
			if _, ok := acked[p][s]; !ok && !unknown[s] {
				t.Fatalf("partition %d: record %d (before %d) neither acknowledged nor of unknown outcome", p, s, prev)
			}
		}
		t.Logf("partition %d: %d records acknowledged, each once and in order in the log", p, len(acked[p]))
	}
	t.Logf("%d records of unknown outcome", len(unknown))

	// Each partition's leader (moved by the kills) knows the producer: one
	// id, whose latest batch ends at the partition's last offset.
	ds, err := reader.DescribeTopics(ctx, topic)
	if err != nil || len(ds) != 1 {
		t.Fatalf("describe %s: %v %v", topic, ds, err)
	}
	lastOffsets := map[int32]int64{}
	for _, pd := range ds[0].Partitions {
		lastOffsets[pd.Partition] = pd.LogEndOffset - 1
	}
	ps, err := reader.DescribeProducers(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	for _, pp := range ps {
		if pp.Err != nil {
			t.Fatalf("describe producers of partition %d: %v", pp.Partition, pp.Err)
		}
		if len(pp.Producers) != 1 || pp.Producers[0].LastOffset != lastOffsets[pp.Partition] {
			t.Fatalf("partition %d (leader %d): producers %+v, want one whose last batch ends at %d", pp.Partition, pp.Leader, pp.Producers, lastOffsets[pp.Partition])
		}
	}
}

// fullWindow: on the cluster, an idempotent producer has 5 requests of a
// partition in flight at once, and the leader takes them in order, each
// record once. It holds by construction rather than by timing: while the
// client's produce answers are held back (answerGate), records that fill a
// batch each (700 bytes in 1 KiB batches, which go only when full) are
// produced one at a time, each once the batch before has gone out, so
// that every request carries one batch and none is answered before the
// fifth is sent.
func fullWindow(t *testing.T, ctx context.Context, c *testcluster.Cluster) {
	t.Helper()
	const topic, n = "window", 6
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	gate := newAnswerGate()
	defer gate.release() // also when the test fails
	cl := clusterClient(t, c, nil, gate.opt(), client.BatchMaxBytes(1024), client.Linger(time.Hour))
	if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: topic, Partitions: 1, ReplicationFactor: 3,
		Configs: map[string]string{"min.insync.replicas": "2"}}); err != nil {
		t.Fatal(err)
	}
	gate.hold()
	var mu sync.Mutex
	offsets := make([]int64, n)
	errs := make([]error, n)
	pad := strings.Repeat(".", 700)
	for i := range n {
		cl.Produce(ctx, &client.Record{Topic: topic, Value: []byte(fmt.Sprintf("w%d%s", i, pad))}, func(r *client.Record, err error) {
			mu.Lock()
			offsets[i], errs[i] = r.Offset, err
			mu.Unlock()
		})
		if i == 0 {
			continue // its batch lingers until the next record seals it
		}
		// Record i seals record i-1's batch, which goes out alone in
		// request i; record n-1's stays open until the flush.
		c.Eventually(ctx, fmt.Sprintf("request %d in flight", i), func() error {
			if reqs, _ := client.PeakInFlight(cl); reqs < i {
				return fmt.Errorf("%d requests in flight", reqs)
			}
			return nil
		})
	}
	reqs, batches := client.PeakInFlight(cl)
	gate.release()
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if reqs != 5 || batches != 5 {
		t.Fatalf("%d requests (%d batches) in flight with the answers held, want 5 (5 batches)", reqs, batches)
	}
	mu.Lock()
	defer mu.Unlock()
	for i := range n {
		if errs[i] != nil || offsets[i] != int64(i) {
			t.Fatalf("record %d: offset %d, %v; want offset %d", i, offsets[i], errs[i], i)
		}
	}
	log := readPartition(t, ctx, cl, topic, 0, n-1)
	for i := range n {
		if v := log[int64(i)]; !strings.HasPrefix(v, fmt.Sprintf("w%d.", i)) {
			t.Fatalf("offset %d holds %.8q..., want record %d", i, v, i)
		}
	}
	if len(log) != n {
		t.Fatalf("the log holds %d records, want %d", len(log), n)
	}
}

// answerGate holds back the answers of a client's produce streams while
// held: requests still go out, the broker still answers, but the client
// reads no answer until release.
type answerGate struct {
	mu   sync.Mutex
	open chan struct{} // closed while answers flow
}

func newAnswerGate() *answerGate {
	g := &answerGate{open: make(chan struct{})}
	close(g.open)
	return g
}

func (g *answerGate) hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open = make(chan struct{})
}

func (g *answerGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
	default:
		close(g.open)
	}
}

func (g *answerGate) opt() client.Opt {
	return client.DialOptions(grpc.WithChainStreamInterceptor(
		func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			cs, err := streamer(ctx, desc, cc, method, opts...)
			if err != nil || method != quirev1.Producer_ProduceStream_FullMethodName {
				return cs, err
			}
			return &gatedStream{ClientStream: cs, g: g}, nil
		}))
}

// gatedStream is a produce stream whose answers wait for the gate.
type gatedStream struct {
	grpc.ClientStream
	g *answerGate
}

func (s *gatedStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err != nil {
		return err
	}
	s.g.mu.Lock()
	open := s.g.open
	s.g.mu.Unlock()
	select {
	case <-open:
	case <-s.Context().Done():
	}
	return nil
}
