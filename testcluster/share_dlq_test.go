package testcluster_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/testcluster"
)

// setShareGroupConfig sets a share group's settings over the Kafka
// listener (IncrementalAlterConfigs on the GROUP resource), retrying
// while the cluster's metadata.version is below 16 or a node is failing
// over.
func setShareGroupConfig(t *testing.T, ctx context.Context, c *testcluster.Cluster, addr, group string, kv map[string]string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	c.Eventually(ctx, "the share group's settings saved", func() error {
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		r := kmsg.NewIncrementalAlterConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceType(32), group
		for k, v := range kv {
			op := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			op.Name, op.Value = k, kmsg.StringPtr(v)
			r.Configs = append(r.Configs, op)
		}
		req.Resources = append(req.Resources, r)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.Resources[0].ErrorCode)
	})
}

// describeShareGroupConfig is the share group's settings as a node's
// Kafka listener describes them: key -> value, for those set on the
// group.
func describeShareGroupConfig(ctx context.Context, addr, group string) (map[string]string, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	req := kmsg.NewPtrDescribeConfigsRequest()
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceType(32), group
	req.Resources = append(req.Resources, r)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(resp.Resources[0].ErrorCode); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, e := range resp.Resources[0].Configs {
		if e.Source == kmsg.ConfigSourceGroupConfig && e.Value != nil {
			out[e.Name] = *e.Value
		}
	}
	return out, nil
}

// TestClusterShareGroupSettingsAndDeadLetters: a share group's settings
// set over Kafka's protocol (a delivery limit of 2, a dead-letter topic)
// survive the controller's kill and apply on every node; then two
// franz-go share members read a partition, releasing every third record
// each time they get it and accepting the others, while the partition's
// leader is killed: the dead-letter topic ends holding exactly the
// records released past the limit, each once, with delivery count 2,
// and the group's saved state finished with no dead letter pending.
func TestClusterShareGroupSettingsAndDeadLetters(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c, addrs := kafkaCluster(t, 3, func(cfg *broker.Config) { cfg.ShareAutoOffsetReset = "latest" })
	const topic, dlq, group, n = "dq", "dlq.dq", "dg", 90
	createTopic(t, c, 1, topic, 1, 3)
	createTopic(t, c, 1, dlq, 1, 3)
	// The node writes dead letters only to a topic enabled for them.
	c.Eventually(ctx, "enable dead letters on "+dlq, func() error {
		_, err := admin(c, 1).AlterConfigs(ctx, &quirev1.AlterConfigsRequest{Topic: dlq, Set: map[string]string{"errors.deadletterqueue.group.enable": "true"}})
		return err
	})
	want := map[string]string{"share.delivery.count.limit": "2", "errors.deadletterqueue.topic.name": dlq,
		"share.auto.offset.reset": "earliest", "errors.deadletterqueue.copy.record.enable": "true"}
	ctl := c.WaitController(ctx)
	var via int32 = 1
	if ctl == via {
		via = 2
	}
	setShareGroupConfig(t, ctx, c, addrs[via], group, want)
	c.Kill(ctl)
	t.Logf("killed the controller, node %d", ctl)
	for _, id := range c.Running() {
		c.Eventually(ctx, fmt.Sprintf("node %d describes the group's settings", id), func() error {
			got, err := describeShareGroupConfig(ctx, addrs[id], group)
			if err != nil {
				return err
			}
			for k, v := range want {
				if got[k] != v {
					return fmt.Errorf("%s = %q, want %q (all: %v)", k, got[k], v, got)
				}
			}
			return nil
		})
	}
	c.Restart(ctl)
	if err := c.Node(ctl).WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	var seeds []string
	for _, id := range c.Running() {
		a, ok := c.Node(id).ListenerAddr("KAFKA")
		if !ok {
			t.Fatalf("node %d has no KAFKA listener", id)
		}
		seeds = append(seeds, a)
	}

	prod, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	var recs []*kgo.Record
	for o := range n {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: 0, Key: fmt.Appendf(nil, "k%d", o), Value: fmt.Appendf(nil, "v%d", o)})
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	// Two members: every third record released whenever delivered (the
	// poison), the others accepted.
	var mu sync.Mutex
	accepted := map[int64]bool{}
	stop, stopMembers := context.WithCancel(ctx)
	defer stopMembers()
	var wg sync.WaitGroup
	for range 2 {
		cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.MetadataMinAge(100*time.Millisecond),
			kgo.ShareGroup(group), kgo.ConsumeTopics(topic), kgo.ShareMaxRecords(5))
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cl.Close()
			for stop.Err() == nil {
				fs := cl.PollFetches(stop)
				for _, r := range fs.Records() {
					if r.Offset%3 == 0 {
						cl.MarkAcks(kgo.AckRelease, r)
						continue
					}
					cl.MarkAcks(kgo.AckAccept, r)
					mu.Lock()
					accepted[r.Offset] = true
					mu.Unlock()
				}
				_ = cl.FlushAcks(stop)
			}
		}()
	}
	leader, _ := c.WaitLeader(ctx, topic, 0)
	c.Eventually(ctx, "a third of the records accepted before the leader's kill", func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(accepted) < n/3*2/3 {
			return fmt.Errorf("%d accepted", len(accepted))
		}
		return nil
	})
	c.Kill(leader)
	t.Logf("killed the leader of %s-0, node %d", topic, leader)
	live := c.Running()[0]

	c.Eventually(ctx, "every record finished and no dead letter pending in the saved state", func() error {
		st, ok := c.Image(live).ShareState(metadata.ShareKey{Group: group, Topic: topic, Partition: 0})
		if !ok {
			return errors.New("no saved state")
		}
		if st.Start != n || len(st.Runs) != 0 || len(st.DeadLetters) != 0 {
			return fmt.Errorf("saved at start %d with %d runs and %d dead letters pending", st.Start, len(st.Runs), len(st.DeadLetters))
		}
		return nil
	})
	stopMembers()
	wg.Wait()

	// The dead-letter topic holds exactly the poison, once each.
	var liveSeeds []string
	for _, id := range c.Running() {
		if a, ok := c.Node(id).ListenerAddr("KAFKA"); ok {
			liveSeeds = append(liveSeeds, a)
		}
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(liveSeeds...), kgo.ConsumeTopics(dlq), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	adm := kadm.NewClient(cons)
	got := map[int64]int{}
	read := int64(0) // records read, duplicates included
	var wantDead []int64
	for o := int64(0); o < n; o += 3 {
		wantDead = append(wantDead, o)
	}
	c.Eventually(ctx, "the dead letters read back", func() error {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		defer pcancel()
		fs := cons.PollFetches(pctx)
		for _, r := range fs.Records() {
			read++
			h := map[string]string{}
			for _, x := range r.Headers {
				h[x.Key] = string(x.Value)
			}
			off, err := strconv.ParseInt(h["__dlq.errors.offset"], 10, 64)
			if err != nil || h["__dlq.errors.group"] != group || h["__dlq.errors.topic"] != topic || h["__dlq.errors.partition"] != "0" {
				t.Errorf("dead letter at %d with headers %v", r.Offset, h)
				continue
			}
			if h["__dlq.errors.delivery.count"] != "2" || h["__dlq.errors.message"] != "Offset delivery count exceeded the threshold." || string(r.Value) != fmt.Sprintf("v%d", off) {
				t.Errorf("dead letter of %d: value %q, headers %v", off, r.Value, h)
			}
			got[off]++
		}
		if len(got) < len(wantDead) {
			return fmt.Errorf("%d of %d dead letters read", len(got), len(wantDead))
		}
		// Read to the end of every partition, so that a second copy
		// written after the others is counted too.
		ends, err := adm.ListEndOffsets(ctx, dlq)
		if err != nil {
			return err
		}
		total := int64(0)
		ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
		if read < total {
			return fmt.Errorf("%d of the %d records of %s read", read, total, dlq)
		}
		return nil
	})
	var offs []int64
	for o, k := range got {
		if k != 1 {
			t.Errorf("source offset %d dead-lettered %d times", o, k)
		}
		offs = append(offs, o)
	}
	slices.Sort(offs)
	if !slices.Equal(offs, wantDead) {
		t.Errorf("dead letters of %v, want %v", offs, wantDead)
	}
	mu.Lock()
	defer mu.Unlock()
	for o := int64(0); o < n; o++ {
		if o%3 != 0 && !accepted[o] {
			t.Errorf("record %d never accepted", o)
		}
	}
}
