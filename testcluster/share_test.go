package testcluster_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/share"
	"github.com/quirelog/quire/testcluster"
)

// shareRecord names a record of the share tests.
type shareRecord struct {
	topic     string
	partition int32
	offset    int64
}

// shareLedger is what the members of a share group saw: every delivery of
// each record with its delivery count, and the delivery count of the one
// whose acceptance the broker confirmed.
type shareLedger struct {
	mu        sync.Mutex
	delivered map[shareRecord]int
	confirmed map[shareRecord]int32 // delivery count of the accepted delivery
	errs      []string
}

// deliver records a delivery, refusing one of a record whose acceptance
// was confirmed, unless it is an earlier delivery seen late: each
// delivery of a record has a higher count than the ones before (counts
// are saved before records are handed out), so a delivery after the
// accepted one has a count at least as high.
func (l *shareLedger) deliver(member int, r *kgo.Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := shareRecord{r.Topic, r.Partition, r.Offset}
	l.delivered[k]++
	if c, ok := l.confirmed[k]; ok && r.DeliveryCount() >= c {
		l.errs = append(l.errs, fmt.Sprintf("member %d: %s-%d@%d delivered again (count %d) after its acceptance at count %d was confirmed",
			member, k.topic, k.partition, k.offset, r.DeliveryCount(), c))
	}
	if want := fmt.Sprintf("%s/%d/%d", r.Topic, r.Partition, r.Offset); string(r.Value) != want {
		l.errs = append(l.errs, fmt.Sprintf("%s-%d@%d has value %q, want %q", k.topic, k.partition, k.offset, r.Value, want))
	}
}

// confirm records the acceptances the broker confirmed.
func (l *shareLedger) confirm(recs []*kgo.Record, failed map[string]bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range recs {
		if failed[fmt.Sprintf("%s-%d", r.Topic, r.Partition)] {
			continue
		}
		k := shareRecord{r.Topic, r.Partition, r.Offset}
		if c, ok := l.confirmed[k]; !ok || r.DeliveryCount() > c {
			l.confirmed[k] = r.DeliveryCount()
		}
	}
}

func (l *shareLedger) counts() (delivered, confirmed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.delivered), len(l.confirmed)
}

// TestClusterShareGroupLeaderKilled: three members of a share group read a
// 6-partition and a 1-partition topic (RF 3) over the Kafka listener, each
// accepting what it polls, while the leader of a partition is killed (it
// leads others too, and may be the group's coordinator). Every record is
// delivered, none whose acceptance the broker confirmed is delivered
// again, and in the end every share-partition the survivors saved in the
// metadata log has finished every record: each was accepted exactly once
// (none reached the delivery count limit).
func TestClusterShareGroupLeaderKilled(t *testing.T) {
	t.Parallel()
	shareGroupKill(t, func(c *testcluster.Cluster, ctx context.Context) int32 {
		l, _ := c.WaitLeader(ctx, "sq6", 0)
		return l
	})
}

// TestClusterShareGroupControllerKilled is the same with the controller
// killed: saves in flight go to the next one.
func TestClusterShareGroupControllerKilled(t *testing.T) {
	t.Parallel()
	shareGroupKill(t, func(c *testcluster.Cluster, ctx context.Context) int32 { return c.WaitController(ctx) })
}

// startShareMembers starts n franz-go share members of group "sg" on sq6
// and sq1, each accepting what it polls and recording in l what it got
// and which acceptances the broker confirmed, until stop.
func startShareMembers(t *testing.T, l *shareLedger, seeds []string, n int, stop context.Context) *sync.WaitGroup {
	var wg sync.WaitGroup
	for m := range n {
		var mu sync.Mutex
		failed := map[string]bool{}
		cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.MetadataMinAge(100*time.Millisecond),
			kgo.ShareGroup("sg"), kgo.ConsumeTopics("sq6", "sq1"), kgo.ShareMaxRecords(10),
			kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
				mu.Lock()
				defer mu.Unlock()
				for _, r := range rs {
					if r.Err != nil {
						failed[fmt.Sprintf("%s-%d", r.Topic, r.Partition)] = true
					}
				}
			}))
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cl.Close()
			for stop.Err() == nil {
				fs := cl.PollFetches(stop)
				recs := fs.Records()
				for _, r := range recs {
					l.deliver(m, r)
				}
				if len(recs) == 0 {
					continue
				}
				mu.Lock()
				clear(failed)
				mu.Unlock()
				cl.MarkAcks(kgo.AckAccept, recs...)
				if err := cl.FlushAcks(stop); err != nil {
					continue // stopping, or the acks' fate unknown
				}
				mu.Lock()
				l.confirm(recs, failed)
				mu.Unlock()
			}
		}()
	}
	return &wg
}

// shareTopics are the share tests' topics and their partition counts,
// each partition holding sharePerPartition records.
var shareTopics = map[string]int32{"sq6": 6, "sq1": 1}

const sharePerPartition = 400

// shareSetup starts 3 nodes, creates the topics (RF 3) and fills them; it
// answers the cluster, the Kafka addresses and the records' count.
func shareSetup(t *testing.T, ctx context.Context) (*testcluster.Cluster, []string, int) {
	c, addrs := kafkaCluster(t, 3, func(cfg *broker.Config) {
		cfg.ShareAutoOffsetReset = "earliest"
		cfg.GroupShareRecordLockDurationMs = 5000
	})
	for name, parts := range shareTopics {
		createTopic(t, c, 1, name, parts, 3)
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(addrs[1]), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	total := 0
	for name, parts := range shareTopics {
		var recs []*kgo.Record
		for p := range parts {
			c.WaitLeader(ctx, name, p)
			for o := range sharePerPartition {
				recs = append(recs, &kgo.Record{Topic: name, Partition: p, Key: fmt.Appendf(nil, "k%d", o%7), Value: fmt.Appendf(nil, "%s/%d/%d", name, p, o)})
			}
		}
		if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce to %s: %v", name, err)
		}
		total += len(recs)
	}
	seeds := make([]string, 0, len(addrs))
	for _, a := range addrs {
		seeds = append(seeds, a)
	}
	return c, seeds, total
}

// shareFinished waits until every record is delivered and every
// share-partition node live's image holds has finished every record.
func shareFinished(ctx context.Context, c *testcluster.Cluster, l *shareLedger, total int, live int32) {
	c.Eventually(ctx, "every record delivered and every share-partition finished in the metadata log", func() error {
		if n, _ := l.counts(); n < total {
			return fmt.Errorf("%d of %d records delivered", n, total)
		}
		img := c.Image(live)
		for name, parts := range shareTopics {
			for p := range parts {
				st, ok := img.ShareState(metadata.ShareKey{Group: "sg", Topic: name, Partition: p})
				if !ok {
					return fmt.Errorf("no saved state of %s-%d", name, p)
				}
				if st.Start != sharePerPartition || len(st.Runs) != 0 {
					return fmt.Errorf("%s-%d saved at start %d with %v, want every record of %d finished", name, p, st.Start, st.Runs, sharePerPartition)
				}
			}
		}
		return nil
	})
}

// check reports what the ledger refused and the records delivered often
// enough to have been dead-lettered.
func (l *shareLedger) check(t *testing.T, total int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.errs {
		t.Error(e)
	}
	again := 0
	for k, n := range l.delivered {
		if n > 1 {
			again++
		}
		if n >= share.DefaultDeliveryCountLimit {
			t.Errorf("%s-%d@%d delivered %d times: it may have been dead-lettered", k.topic, k.partition, k.offset, n)
		}
	}
	t.Logf("%d records, %d delivered more than once (in flight at the failure), %d acceptances confirmed", total, again, len(l.confirmed))
}

func newShareLedger() *shareLedger {
	return &shareLedger{delivered: map[shareRecord]int{}, confirmed: map[shareRecord]int32{}}
}

func shareGroupKill(t *testing.T, victim func(*testcluster.Cluster, context.Context) int32) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c, seeds, total := shareSetup(t, ctx)
	l := newShareLedger()
	stop, stopMembers := context.WithCancel(ctx)
	defer stopMembers()
	wg := startShareMembers(t, l, seeds, 3, stop)

	c.Eventually(ctx, "a tenth of the records accepted before the kill", func() error {
		if _, n := l.counts(); n < total/10 {
			return fmt.Errorf("%d of %d accepted", n, total)
		}
		return nil
	})
	dead := victim(c, ctx)
	c.Kill(dead)
	t.Logf("killed node %d", dead)

	shareFinished(ctx, c, l, total, c.Running()[0])
	stopMembers()
	wg.Wait()
	l.check(t, total)
}

// TestClusterShareGroupRestart: a member accepts part of the records and
// stops with some in flight; the whole cluster is stopped and started
// again; a new member of the group reads on: every record is delivered,
// none whose acceptance was confirmed is delivered again, and every
// share-partition ends finished.
func TestClusterShareGroupRestart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c, seeds, total := shareSetup(t, ctx)
	l := newShareLedger()
	stop, stopMember := context.WithCancel(ctx)
	wg := startShareMembers(t, l, seeds, 1, stop)
	c.Eventually(ctx, "a third of the records accepted before the restart", func() error {
		if _, n := l.counts(); n < total/3 {
			return fmt.Errorf("%d of %d accepted", n, total)
		}
		return nil
	})
	stopMember()
	wg.Wait()

	ids := c.Running()
	for _, id := range ids {
		c.Stop(id)
	}
	for _, id := range ids {
		if err := c.TryRestart(id); err != nil {
			t.Fatalf("restart node %d: %v", id, err)
		}
	}
	seeds = seeds[:0]
	for _, id := range ids {
		if err := c.Node(id).WaitReady(ctx); err != nil {
			t.Fatalf("node %d after the restart: %v", id, err)
		}
		// The Kafka listeners bound new ports.
		addr, ok := c.Node(id).ListenerAddr("KAFKA")
		if !ok {
			t.Fatalf("node %d has no KAFKA listener after the restart", id)
		}
		seeds = append(seeds, addr)
	}

	stop, stopMember = context.WithCancel(ctx)
	defer stopMember()
	wg = startShareMembers(t, l, seeds, 1, stop)
	shareFinished(ctx, c, l, total, ids[0])
	stopMember()
	wg.Wait()
	l.check(t, total)
}
