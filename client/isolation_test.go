package client_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/client"
	"github.com/quirelog/quire/record"
	"github.com/quirelog/quire/testcluster"
)

// TestClusterIsolatedLeaderLosesItsClients cuts a partition leader off
// from the other nodes while Go-client producers (acks=all) keep writing
// to every partition, the clients still reaching every node, the cut-off
// one included. The controller fences it after the session timeout and
// elects new leaders; the cut-off broker, not having reached the
// controller for as long, stops taking produces and says its metadata is
// stale, and answers the produces waiting on its followers, so the
// clients move to the new leaders: every partition takes
// acks=all writes again soon after the session timeout (within a minute
// of it, where replica.lag.time.max.ms and the request timeout, which
// would also free them, are minutes), and the cut-off node refuses a
// produce sent straight to it.
func TestClusterIsolatedLeaderLosesItsClients(t *testing.T) {
	t.Parallel()
	// replica.lag.time.max.ms far above the test's bound: the cut-off
	// leader does not try to shrink its ISRs within it, so only its lost
	// session can release the produces waiting on its followers.
	c := testcluster.New(t, 3, testcluster.Config(func(_ int32, cfg *broker.Config) { cfg.ReplicaLagTimeMaxMs = 300000 }))
	ctx := clusterCtx(t, 8*time.Minute)
	// A request timeout far above the bound too: produces waiting on the
	// cut-off leader's acks=all are answered when its session runs out,
	// not when the produce timeout sent with them passes.
	cl := clusterClient(t, c, nil, client.DeliveryTimeout(5*time.Minute), client.RequestTimeout(4*time.Minute),
		client.RecordPartitioner(client.ManualPartitioner()))
	const topic, parts = "isolated", 3
	if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: topic, Partitions: parts, ReplicationFactor: 3,
		Configs: map[string]string{"min.insync.replicas": "2"}}); err != nil {
		t.Fatal(err)
	}
	victim, _ := c.WaitLeader(ctx, topic, 0)
	for p := int32(0); p < parts; p++ {
		c.WaitLeader(ctx, topic, p)
	}

	var mu sync.Mutex
	acked := map[int32][]time.Time{}
	var failures []error
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for p := int32(0); p < parts; p++ {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
				cl.Produce(ctx, &client.Record{Topic: topic, Partition: p, Value: []byte(fmt.Sprintf("%d-%d", p, i))},
					func(_ *client.Record, err error) {
						mu.Lock()
						defer mu.Unlock()
						if err != nil {
							failures = append(failures, err)
							return
						}
						acked[p] = append(acked[p], time.Now())
					})
			}
		})
	}
	// Writes flow everywhere before the cut.
	waitAcks := func(after time.Time) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for {
			mu.Lock()
			ok := true
			for p := int32(0); p < parts; p++ {
				if n := len(acked[p]); n == 0 || !acked[p][n-1].After(after) {
					ok = false
				}
			}
			mu.Unlock()
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("not every partition acknowledged a write after %v", after.Format(time.StampMilli))
			}
			time.Sleep(10 * time.Millisecond) // polling the callbacks' record, not synchronising
		}
	}
	waitAcks(time.Now())

	cut := time.Now()
	c.Partition(victim)
	session := time.Duration(testcluster.SessionTimeoutMs) * time.Millisecond
	// A deadline, not a figure: the writes come back about a second
	// after the session timeout.
	bound := session + time.Minute

	// The cut-off node, once its session is lost, refuses produces and
	// says its metadata is stale.
	direct := quirev1.NewProducerClient(c.Conn(victim))
	meta := quirev1.NewMetadataClient(c.Conn(victim))
	bld := record.NewBuilder(record.None)
	bld.Append(time.Now().UnixMilli(), nil, []byte("direct"), nil)
	batch := bld.Build()
	stale := false
	for !stale && time.Since(cut) < bound {
		md, err := meta.GetMetadata(ctx, &quirev1.GetMetadataRequest{Topics: []string{topic}})
		stale = err == nil && md.GetStale()
		if !stale {
			time.Sleep(20 * time.Millisecond) // polling the node's answer, not synchronising
		}
	}
	if !stale {
		t.Errorf("the cut-off node %d never said its metadata was stale", victim)
	} else {
		resp, err := direct.Produce(ctx, &quirev1.ProduceRequest{OptionalAcks: &quirev1.ProduceRequest_Acks{Acks: 1},
			Partitions: []*quirev1.PartitionRecords{{Topic: topic, Partition: 0, Records: append([]byte(nil), batch...)}}})
		switch {
		case err != nil:
			t.Errorf("produce straight to the cut-off node: %v", err)
		case len(resp.Partitions) != 1 || resp.Partitions[0].GetError().GetCode() != quirev1.ErrorCode_LEADER_NOT_AVAILABLE:
			t.Errorf("the cut-off node answered a produce with %v, want LEADER_NOT_AVAILABLE", resp.Partitions)
		}
	}

	// Every partition takes writes again, within the bound.
	waitAcks(cut.Add(session + time.Second))
	close(stop)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	for p := int32(0); p < parts; p++ {
		first := time.Time{}
		for _, at := range acked[p] {
			if at.After(cut) {
				first = at
				break
			}
		}
		gap := first.Sub(cut)
		t.Logf("partition %d: first acknowledged write %v after the cut", p, gap.Round(time.Millisecond))
		if first.IsZero() || gap > bound {
			t.Errorf("partition %d: no acknowledged write within %v of the cut (first after %v)", p, bound, gap)
		}
	}
	if len(failures) > 0 {
		t.Errorf("%d records failed, first: %v", len(failures), failures[0])
	}
	c.Heal()
}
