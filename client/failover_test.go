package client_test

import (
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/quirelog/quire/client"
	"github.com/quirelog/quire/testcluster"
)

// TestClientClusterRecordsBeforeLeaderKillAreDelivered: records produced
// (acks=all, idempotent, a 30 s delivery timeout) in the moment before
// their partition's leader is killed, in flight to the dying leader or
// still buffered, are all delivered by the new leader, none failed, and
// each is in the log once at the offset it was acknowledged with.
func TestClientClusterRecordsBeforeLeaderKillAreDelivered(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 3)
	ctx := clusterCtx(t, 3*time.Minute)
	ctl := c.WaitController(ctx)
	cl := clusterClient(t, c, nil, client.RecordPartitioner(client.ManualPartitioner()),
		client.DeliveryTimeout(30*time.Second), client.RequestTimeout(2*time.Second))
	const topic, parts = "before-kill", 3
	if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: topic, Partitions: parts, ReplicationFactor: 3,
		Configs: map[string]string{"min.insync.replicas": "2"}}); err != nil {
		t.Fatal(err)
	}
	part, victim := int32(-1), int32(-1)
	for p := int32(0); p < parts && part < 0; p++ {
		if l, _ := c.WaitLeader(ctx, topic, p); l != ctl {
			part, victim = p, l
		}
	}
	if part < 0 {
		t.Skipf("the controller %d leads every partition", ctl)
	}
	// The client knows the leader and has a stream to it.
	if err := cl.ProduceSync(ctx, &client.Record{Topic: topic, Partition: part, Value: []byte("warm")}); err != nil {
		t.Fatal(err)
	}

	const n = 2000
	var mu sync.Mutex
	offsets := map[string]int64{}
	var failed []error
	var wg sync.WaitGroup
	wg.Add(n)
	var killedAt int
	for i := range n {
		v := strconv.Itoa(i)
		cl.Produce(ctx, &client.Record{Topic: topic, Partition: part, Value: []byte(v)}, func(r *client.Record, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed = append(failed, fmt.Errorf("record %s: %w", v, err))
				return
			}
			offsets[v] = r.Offset
		})
		if i == n/2 {
			mu.Lock()
			answered := len(offsets)
			mu.Unlock()
			killedAt = answered
			c.Kill(victim)
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatalf("not every record was answered: %v", ctx.Err())
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("node %d killed after %d records were produced, %d of them answered", victim, n/2+1, killedAt)
	if killedAt > n/2 {
		t.Fatalf("every record before the kill was already answered: the kill caught none on its way")
	}
	if len(failed) > 0 {
		t.Fatalf("%d records failed, first: %v", len(failed), failed[0])
	}
	var last int64
	for _, o := range offsets {
		last = max(last, o)
	}
	log := readPartition(t, ctx, cl, topic, part, last)
	seen := map[string]int{}
	for _, v := range log {
		seen[v]++
	}
	for v, o := range offsets {
		if log[o] != v {
			t.Fatalf("record %s acknowledged at offset %d, log has %q", v, o, log[o])
		}
		if seen[v] != 1 {
			t.Fatalf("record %s is in the log %d times", v, seen[v])
		}
	}
}
