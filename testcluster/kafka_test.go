package testcluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/testcluster"
)

// kafkaCluster starts n nodes, each with its inter-broker listener and a
// KAFKA one that speaks Kafka's protocol, and returns the KAFKA addresses.
func kafkaCluster(t *testing.T, n int, tweaks ...func(*broker.Config)) (*testcluster.Cluster, map[int32]string) {
	t.Helper()
	c := testcluster.New(t, n, testcluster.Config(func(_ int32, cfg *broker.Config) {
		cfg.ListenAddr = "INTERNAL://" + cfg.ListenAddr + ",KAFKA://127.0.0.1:0"
		cfg.AdvertisedAddr = "INTERNAL://" + cfg.AdvertisedAddr
		cfg.InterBrokerListenerName = "INTERNAL"
		cfg.KafkaListenerNames = "KAFKA"
		for _, tweak := range tweaks {
			tweak(cfg)
		}
	}))
	addrs := map[int32]string{}
	for _, id := range c.IDs() {
		addr, ok := c.Node(id).ListenerAddr("KAFKA")
		if !ok {
			t.Fatalf("node %d has no KAFKA listener", id)
		}
		addrs[id] = addr
	}
	return c, addrs
}

// TestClusterKafkaClientFollowsLeaders: franz-go, given one node's Kafka
// address, learns the others' from Metadata, produces with its defaults
// (idempotent, acks=all) to partitions led by every node, goes on through
// the kill of a leader, and reads back every acknowledged record exactly
// once, in order per partition.
func TestClusterKafkaClientFollowsLeaders(t *testing.T) {
	t.Parallel()
	c, addrs := kafkaCluster(t, 3)
	createTopic(t, c, 1, "kt", 3, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for p := range int32(3) {
		c.WaitLeader(ctx, "kt", p)
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(addrs[1]), kgo.DefaultProduceTopic("kt"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	sent := map[int32][]string{}
	send := func(round string) {
		t.Helper()
		var recs []*kgo.Record
		for p := range int32(3) {
			for i := range 100 {
				v := fmt.Sprintf("%s-%d-%d", round, p, i)
				recs = append(recs, &kgo.Record{Partition: p, Value: []byte(v)})
				sent[p] = append(sent[p], v)
			}
		}
		if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", round, err)
		}
	}
	send("before")
	leaders := map[int32]bool{}
	for p := range int32(3) {
		l, _ := c.WaitLeader(ctx, "kt", p)
		leaders[l] = true
	}
	victim, _ := c.WaitLeader(ctx, "kt", 0)
	c.Kill(victim)
	send("after")

	// Read from a live node's Kafka address.
	var seed string
	for id, a := range addrs {
		if id != victim {
			seed = a
			break
		}
	}
	offsets := map[string]map[int32]kgo.Offset{"kt": {}}
	for p := range int32(3) {
		offsets["kt"][p] = kgo.NewOffset().AtStart()
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.ConsumePartitions(offsets), kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	got := map[int32][]string{}
	total := 0
	for total < 600 {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of 600 acknowledged records: %v", total, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			got[r.Partition] = append(got[r.Partition], string(r.Value))
			total++
		})
	}
	for p := range int32(3) {
		if fmt.Sprint(got[p]) != fmt.Sprint(sent[p]) {
			t.Errorf("partition %d: read %d records, sent %d; first differences: read %v", p, len(got[p]), len(sent[p]), got[p][:min(5, len(got[p]))])
		}
	}
	t.Logf("partitions led by %d nodes before the kill of node %d", len(leaders), victim)
}

// roles names the controller of a 3-node cluster and the two others.
func roles(ctx context.Context, c *testcluster.Cluster) (controller, via, other int32) {
	controller = c.WaitController(ctx)
	for _, id := range c.IDs() {
		switch {
		case id == controller:
		case via == 0:
			via = id
		default:
			other = id
		}
	}
	return controller, via, other
}

// TestClusterKafkaConsumerGroupThroughAnyNode: a franz-go group consumer
// (KIP-848) that knows only a node that is not the controller finds its
// coordinator there (the node passes the group's calls on), reads every
// record of a replicated topic and commits; the commits are read back
// over gRPC through a third node.
func TestClusterKafkaConsumerGroupThroughAnyNode(t *testing.T) {
	t.Parallel()
	c, addrs := kafkaCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	controller, via, other := roles(ctx, c)
	createTopic(t, c, via, "kgt", 3, 3)
	for p := range int32(3) {
		c.WaitLeader(ctx, "kgt", p)
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(addrs[via]), kgo.DefaultProduceTopic("kgt"))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	var recs []*kgo.Record
	for i := range 300 {
		recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprint(i))})
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(addrs[via]), kgo.ConsumerGroup("kgt-group"), kgo.ConsumeTopics("kgt"),
		kgo.ServerSideBalancer(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	seen := map[string]bool{}
	for len(seen) < 300 {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("the group member read %d of 300 records", len(seen))
		}
		fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit through node %d (controller %d): %v", via, controller, err)
	}
	offs, err := quirev1.NewGroupsClient(c.Conn(other)).FetchOffsets(ctx, &quirev1.FetchOffsetsRequest{Group: "kgt-group"})
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, o := range offs.Offsets {
		sum += o.Offset
	}
	if sum != 300 {
		t.Fatalf("the group's commits, read through node %d, sum to %d, want 300: %v", other, sum, offs.Offsets)
	}
}

// TestClusterKafkaGroupMemberThroughControllerFailover: a Kafka group
// member (KIP-848's protocol, and the classic one) that knows only a
// node other than the controller keeps its membership while the
// controller, which runs the group coordinator, is killed: the node
// holds its group calls until a new controller answers them (and one
// that cannot be passed on is COORDINATOR_NOT_AVAILABLE, which the
// client retries: kafka/classic_test.go), so it neither drops its
// partitions nor rejoins. Afterwards it reads and commits new records at
// the same member id and epoch, as the new coordinator tells.
func TestClusterKafkaGroupMemberThroughControllerFailover(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opt  kgo.Opt
	}{
		{"kip848", kgo.ServerSideBalancer()},
		{"classic", kgo.Balancers(kgo.CooperativeStickyBalancer())},
	} {
		t.Run(tc.name, func(t *testing.T) { testKafkaGroupFailover(t, tc.opt) })
	}
}

func testKafkaGroupFailover(t *testing.T, protocol kgo.Opt) {
	c, addrs := kafkaCluster(t, 3, func(cfg *broker.Config) {
		// Heartbeats every 200 ms: many fall in the election.
		cfg.GroupConsumerHeartbeatIntervalMs = 200
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	controller, via, other := roles(ctx, c)
	addr := addrs[via]
	createTopic(t, c, via, "kf", 2, 3)
	for p := range int32(2) {
		c.WaitLeader(ctx, "kf", p)
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("kf"))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	produce := func(from, to int) {
		t.Helper()
		var recs []*kgo.Record
		for i := from; i < to; i++ {
			recs = append(recs, &kgo.Record{Value: []byte(fmt.Sprint(i))})
		}
		if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup("kf-group"), kgo.ConsumeTopics("kf"),
		protocol, kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.HeartbeatInterval(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	seen := map[string]bool{}
	consume := func(want int) {
		t.Helper()
		for len(seen) < want {
			fs := cons.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("the member read %d of %d records", len(seen), want)
			}
			fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
		}
		if err := cons.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatalf("commit: %v", err)
		}
	}
	produce(0, 100)
	consume(100)
	member := func(through int32) *quirev1.GroupMemberDescription {
		t.Helper()
		var m *quirev1.GroupMemberDescription
		c.Eventually(ctx, "describe the group", func() error {
			d, err := quirev1.NewGroupsClient(c.Conn(through)).DescribeGroup(ctx, &quirev1.DescribeGroupRequest{Group: "kf-group"})
			if err != nil {
				return err
			}
			if len(d.Members) != 1 || d.State != "stable" {
				return fmt.Errorf("group %s with %d members", d.State, len(d.Members))
			}
			m = d.Members[0]
			return nil
		})
		return m
	}
	before := member(via)

	c.Kill(controller)
	next := c.WaitController(ctx)
	if next == controller {
		t.Fatalf("node %d still controller after its kill", next)
	}
	// Heartbeats reach the new coordinator (members have a session
	// timeout to come back) before the member reads on.
	produce(100, 200)
	consume(200)
	after := member(other)
	if after.MemberId != before.MemberId || after.MemberEpoch != before.MemberEpoch {
		t.Fatalf("the member was %s at epoch %d before node %d (the controller) was killed, %s at epoch %d after: it rejoined",
			before.MemberId, before.MemberEpoch, controller, after.MemberId, after.MemberEpoch)
	}
}

// TestClusterKafkaGroupListedByItsCoordinator: FindCoordinator names the
// same broker for a group whichever node is asked, and of the nodes'
// ListGroups only that broker's lists it, as a Kafka broker lists the
// groups it coordinates: an admin client that asks every broker and
// merges the answers (librdkafka's list_groups, Java's) lists each group
// once.
func TestClusterKafkaGroupListedByItsCoordinator(t *testing.T) {
	t.Parallel()
	c, addrs := kafkaCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	createTopic(t, c, 1, "klg", 1, 3)
	c.WaitLeader(ctx, "klg", 0)
	groups := []string{"klg-a", "klg-b", "klg-c", "klg-d"}
	// seeds are clients of one node each, which requests sent to their
	// seed broker reach alone.
	seeds := map[int32]*kgo.Client{}
	for _, id := range c.IDs() {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addrs[id]))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		seeds[id] = cl
	}
	seed := func(id int32) *kgo.Client { return seeds[id] }
	for _, g := range groups {
		oc := kmsg.NewPtrOffsetCommitRequest()
		oc.Group, oc.Generation = g, -1
		ot := kmsg.NewOffsetCommitRequestTopic()
		ot.Topic = "klg"
		op := kmsg.NewOffsetCommitRequestTopicPartition()
		op.Offset = 0
		ot.Partitions = append(ot.Partitions, op)
		oc.Topics = append(oc.Topics, ot)
		resp, err := oc.RequestWith(ctx, seed(1))
		if err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("commit for %s: %v %+v", g, err, resp)
		}
	}
	for _, g := range groups {
		c.Eventually(ctx, "group "+g+" listed by its coordinator alone", func() error {
			var coordinators []int32
			for _, id := range c.IDs() {
				fc := kmsg.NewPtrFindCoordinatorRequest()
				// Either form, whichever version the client settles on.
				fc.CoordinatorKey, fc.CoordinatorKeys = g, []string{g}
				r, err := seed(id).SeedBrokers()[0].Request(ctx, fc)
				if err != nil {
					return err
				}
				fr := r.(*kmsg.FindCoordinatorResponse)
				node, code := fr.NodeID, fr.ErrorCode
				if len(fr.Coordinators) == 1 {
					node, code = fr.Coordinators[0].NodeID, fr.Coordinators[0].ErrorCode
				}
				if code != 0 {
					return fmt.Errorf("FindCoordinator at node %d: %v", id, kerr.ErrorForCode(code))
				}
				coordinators = append(coordinators, node)
			}
			if coordinators[0] != coordinators[1] || coordinators[1] != coordinators[2] {
				return fmt.Errorf("the nodes name coordinators %v", coordinators)
			}
			var listers []int32
			for _, id := range c.IDs() {
				r, err := seed(id).SeedBrokers()[0].Request(ctx, kmsg.NewPtrListGroupsRequest())
				if err != nil {
					return err
				}
				for _, lg := range r.(*kmsg.ListGroupsResponse).Groups {
					if lg.Group == g {
						listers = append(listers, id)
					}
				}
			}
			if len(listers) != 1 || listers[0] != coordinators[0] {
				return fmt.Errorf("listed by nodes %v, coordinator %d", listers, coordinators[0])
			}
			return nil
		})
	}
}
