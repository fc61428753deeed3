package client_test

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
	c := testcluster.New(t, 3)
	ctx := clusterCtx(t, 150*time.Second)
	c.WaitController(ctx)
	cl := clusterClient(t, c, nil, client.RecordPartitioner(client.ManualPartitioner()),
		client.RequestTimeout(150*time.Millisecond), client.DeliveryTimeout(100*time.Second),
		client.MaxBufferedBytes(256<<10), client.MaxInFlightPerPartition(5),
		// Small batches fill up while requests wait on a failed leader:
		// the window fills with them.
		client.BatchMaxBytes(1024))
	const topic, parts = "exactly-once", 3
	// Created with the default request timeout: a create that outlives
	// 150 ms would be retried and answered TOPIC_ALREADY_EXISTS.
	if _, err := clusterClient(t, c, nil).CreateTopic(ctx, client.TopicSpec{Name: topic, Partitions: parts, ReplicationFactor: 3,
		Configs: map[string]string{"min.insync.replicas": "2"}}); err != nil {
		t.Fatal(err)
	}
	c.Eventually(ctx, "the topic in the client's metadata", func() error {
		_, err := cl.PartitionCount(ctx, topic)
		return err
	})

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
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(failed) > 0 {
		t.Fatalf("%d records failed, first: %v", len(failed), failed[0])
	}
	reqs, batches := client.PeakInFlight(cl)
	if reqs != 5 || batches > 5 {
		t.Fatalf("at most %d requests (%d batches) of a partition in flight, want 5 (at most 5 batches)", reqs, batches)
	}
	t.Logf("up to %d requests, %d batches of a partition in flight", reqs, batches)
	for p := range int32(parts) {
		var last int64 = -1
		for _, off := range acked[p] {
			last = max(last, off)
		}
		log := readPartition(t, ctx, cl, topic, p, last)
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
	ds, err := cl.DescribeTopics(ctx, topic)
	if err != nil || len(ds) != 1 {
		t.Fatalf("describe %s: %v %v", topic, ds, err)
	}
	lastOffsets := map[int32]int64{}
	for _, pd := range ds[0].Partitions {
		lastOffsets[pd.Partition] = pd.LogEndOffset - 1
	}
	ps, err := cl.DescribeProducers(ctx, topic)
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
