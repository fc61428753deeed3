package testcluster_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/testcluster"
)

// TestClusterLinkCutHealsAtOnce cuts the link between a partition's
// leader and one follower (neither of them the controller) while records
// are written to the leader, holds the cut until the follower has left
// the ISR, and heals it: the follower's log reaches where the leader's
// was at the heal, and it rejoins the ISR, within a minute (in about a
// second; a connection left dead until TCP gives up on it would take many
// minutes, so the deadline tells the two apart on a loaded machine). The nodes run
// the default follower fetch timings (replica.fetch.wait.max.ms 500,
// replica.fetch.backoff.ms 1000), with which a dead node-to-node
// connection must be replaced by keepalives and reconnects rather than
// waited out. One voter: the controller cannot move onto the cut link
// (an election on a loaded machine), which would fence one of its ends
// instead.
func TestClusterLinkCutHealsAtOnce(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 3, testcluster.Voters(1), testcluster.Config(func(_ int32, cfg *broker.Config) {
		cfg.ReplicaFetchWaitMaxMs = 500
		cfg.ReplicaFetchBackoffMs = 1000
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const topic = "linkcut"
	createTopicWith(t, c, 1, topic, 3, 3, map[string]string{"min.insync.replicas": "2"})
	ctl := c.WaitController(ctx)
	part, leader := int32(-1), int32(-1)
	for p := int32(0); p < 3 && part < 0; p++ {
		if l, _ := c.WaitLeader(ctx, topic, p); l != ctl {
			part, leader = p, l
		}
	}
	if part < 0 {
		t.Skipf("the controller %d leads every partition", ctl)
	}
	follower := int32(-1)
	for _, id := range c.IDs() {
		if id != ctl && id != leader {
			follower = id
		}
	}
	isrHas := func(id int32) bool {
		p, ok := c.Image(ctl).Partition(topic, part)
		return ok && slices.Contains(p.ISR, id)
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var produceErr error
	wg.Go(func() {
		pc := quirev1.NewProducerClient(c.Conn(leader))
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			resp, err := pc.ProduceRecords(ctx, &quirev1.ProduceRecordsRequest{Topic: topic,
				OptionalAcks: &quirev1.ProduceRecordsRequest_Acks{Acks: 1}, TimeoutMs: 2000,
				Records: []*quirev1.ProduceRecord{{ValueData: &quirev1.ProduceRecord_Value{Value: fmt.Sprint(i)},
					OptionalPartition: &quirev1.ProduceRecord_Partition{Partition: part}}}})
			if err == nil && resp.Results[0].Error != nil {
				err = fmt.Errorf("%v", resp.Results[0].Error)
			}
			if err != nil {
				mu.Lock()
				if produceErr == nil {
					produceErr = err
				}
				mu.Unlock()
				time.Sleep(10 * time.Millisecond) // pacing retries, not synchronising
			}
		}
	})
	defer func() {
		close(stop)
		wg.Wait()
	}()
	leo := func(id int32) int64 {
		d, err := describeLog(ctx, c, id, topic, part)
		if err != nil {
			return -1
		}
		return d.LogEndOffset
	}
	c.Eventually(ctx, "records reach the follower", func() error {
		if n := leo(follower); n < 10 {
			return fmt.Errorf("follower %d has %d records", follower, n)
		}
		return nil
	})

	c.Partition(leader, follower)
	c.Eventually(ctx, "the cut-off follower leaves the ISR", func() error {
		if isrHas(follower) {
			mu.Lock()
			defer mu.Unlock()
			return fmt.Errorf("node %d still in the ISR of %s-%d (leader log end %d, follower %d, produce error %v)",
				follower, topic, part, leo(leader), leo(follower), produceErr)
		}
		return nil
	})
	// The producer goes on writing to the leader, which no longer waits
	// for the follower: the follower falls behind before the heal (a
	// loaded machine may take a while to write the next record).
	var target int64
	c.Eventually(ctx, "the cut-off follower falls behind", func() error {
		target = leo(leader)
		if f := leo(follower); target <= f || f < 0 {
			mu.Lock()
			defer mu.Unlock()
			return fmt.Errorf("leader log end %d, follower %d, produce error %v", target, f, produceErr)
		}
		return nil
	})
	c.Heal()
	healed := time.Now()
	var caught, rejoined time.Duration
	for caught == 0 || rejoined == 0 {
		if time.Since(healed) > time.Minute {
			t.Fatalf("after a minute: follower log caught up after %v, back in the ISR after %v (0: not yet)", caught, rejoined)
		}
		if caught == 0 && leo(follower) >= target {
			caught = time.Since(healed)
		}
		if rejoined == 0 && isrHas(follower) {
			rejoined = time.Since(healed)
		}
		time.Sleep(5 * time.Millisecond) // polling the follower's state, not synchronising
	}
	t.Logf("partition %d, leader %d, follower %d: log caught up %v after the heal, back in the ISR after %v",
		part, leader, follower, caught.Round(time.Millisecond), rejoined.Round(time.Millisecond))
	mu.Lock()
	defer mu.Unlock()
	if produceErr != nil {
		t.Logf("an acks=1 produce to the leader failed (retried): %v", produceErr)
	}
}
