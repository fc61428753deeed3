package testcluster_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	internalv1 "github.com/quirelog/quire/api/internalv1"
	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/testcluster"
)

// createReplicatedTopic creates a one-partition topic on every node with
// min.insync.replicas=2 and waits for its leader.
func createReplicatedTopic(t *testing.T, c *testcluster.Cluster, name string) {
	t.Helper()
	createTopicWith(t, c, 1, name, 1, int32(len(c.IDs())), map[string]string{"min.insync.replicas": "2"})
	c.WaitLeader(testCtx(t), name, 0)
}

// produceAll produces values to partition 0 of topic through its leader
// with acks=all, one request per value, retrying retriable errors; it
// returns the offset each got. It writes as an idempotent producer: a
// retry after an answer that left the outcome open (a timeout, a
// leadership change while the write waited for its replicas) is not
// written twice.
func produceAll(t *testing.T, c *testcluster.Cluster, topic string, values []string) []int64 {
	t.Helper()
	ctx := testCtx(t)
	var pid *quirev1.InitProducerIdResponse
	c.Eventually(ctx, "a producer id", func() error {
		leader, _ := c.WaitLeader(ctx, topic, 0)
		var err error
		pid, err = quirev1.NewProducerClient(c.Conn(leader)).InitProducerId(ctx, &quirev1.InitProducerIdRequest{})
		return err
	})
	offsets := make([]int64, len(values))
	for i, v := range values {
		c.Eventually(ctx, "produce "+v, func() error {
			leader, _ := c.WaitLeader(ctx, topic, 0)
			resp, err := quirev1.NewProducerClient(c.Conn(leader)).ProduceRecords(ctx, &quirev1.ProduceRecordsRequest{
				Topic: topic, OptionalAcks: &quirev1.ProduceRecordsRequest_Acks{Acks: -1}, TimeoutMs: 3000,
				OptionalProducerId: &quirev1.ProduceRecordsRequest_ProducerId{ProducerId: pid.ProducerId},
				ProducerEpoch:      pid.ProducerEpoch, BaseSequence: int32(i),
				Records: []*quirev1.ProduceRecord{{ValueData: &quirev1.ProduceRecord_Value{Value: v}, OptionalPartition: &quirev1.ProduceRecord_Partition{Partition: 0}}},
			})
			if err != nil {
				return err
			}
			r := resp.Results[0]
			if r.Error != nil {
				if !r.Error.Retriable {
					t.Fatalf("produce %q on node %d: %v", v, leader, r.Error)
				}
				return errors.New(r.Error.Message)
			}
			offsets[i] = r.Offset
			return nil
		})
	}
	return offsets
}

// consumeAll reads partition 0 of topic from its start to the HW at its
// leader.
func consumeAll(t *testing.T, c *testcluster.Cluster, topic string) []string {
	t.Helper()
	return consumeFrom(t, c, topic, 0)
}

// consumeFrom reads partition 0 of topic from offset to the HW at its
// leader.
func consumeFrom(t *testing.T, c *testcluster.Cluster, topic string, from int64) []string {
	t.Helper()
	ctx := testCtx(t)
	var values []string
	c.Eventually(ctx, "consume "+topic, func() error {
		values = values[:0]
		leader, _ := c.WaitLeader(ctx, topic, 0)
		cons := quirev1.NewConsumerClient(c.Conn(leader))
		for off := from; ; {
			resp, err := cons.FetchRecords(ctx, &quirev1.FetchRecordsRequest{Topic: topic, Offset: off, MaxRecords: 1000})
			if err != nil {
				return err
			}
			for _, r := range resp.Records {
				values = append(values, r.GetValue())
			}
			off = resp.NextOffset
			if off >= resp.HighWatermark {
				return nil
			}
		}
	})
	return values
}

// describeLog asks node id for its replica of topic-partition.
func describeLog(ctx context.Context, c *testcluster.Cluster, id int32, topic string, partition int32) (*internalv1.LogDescription, error) {
	resp, err := internalv1.NewReplicaServiceClient(c.Conn(id)).DescribeLogs(ctx, &internalv1.DescribeLogsRequest{
		Partitions: []*internalv1.LogPartitionRef{{Topic: topic, Partition: partition}},
	})
	if err != nil {
		return nil, err
	}
	return resp.Logs[0], nil
}

// waitInSync waits until every running replica of topic-0 has the leader's
// log end offset and the leader's HW is there too.
func waitInSync(t *testing.T, c *testcluster.Cluster, topic string) int64 {
	t.Helper()
	ctx := testCtx(t)
	var leo int64
	c.Eventually(ctx, "replicas of "+topic+" in sync", func() error {
		leader, _ := c.WaitLeader(ctx, topic, 0)
		l, err := describeLog(ctx, c, leader, topic, 0)
		if err != nil {
			return err
		}
		if !l.Leader || l.HighWatermark != l.LogEndOffset {
			return fmt.Errorf("leader %d: hw %d, leo %d", leader, l.HighWatermark, l.LogEndOffset)
		}
		leo = l.LogEndOffset
		for _, id := range c.Running() {
			d, err := describeLog(ctx, c, id, topic, 0)
			if err != nil {
				return err
			}
			if d.LogEndOffset != leo || d.HighWatermark != leo {
				return fmt.Errorf("node %d: leo %d hw %d, leader %d has %d", id, d.LogEndOffset, d.HighWatermark, leader, leo)
			}
		}
		return nil
	})
	return leo
}

// logBytes is every segment of node id's replica of topic-0, in order.
func logBytes(t *testing.T, c *testcluster.Cluster, id int32, topic string) []byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(c.Dir(id), topic+"-0", "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	var all []byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	return all
}

// checkIdenticalLogs checks that every running replica holds the same
// bytes: the same batches at the same offsets with the same epochs.
func checkIdenticalLogs(t *testing.T, c *testcluster.Cluster, topic string) {
	t.Helper()
	ids := c.Running()
	want := logBytes(t, c, ids[0], topic)
	if len(want) == 0 {
		t.Fatalf("node %d has an empty log", ids[0])
	}
	for _, id := range ids[1:] {
		if got := logBytes(t, c, id, topic); !bytes.Equal(got, want) {
			t.Fatalf("node %d's log (%d bytes) differs from node %d's (%d bytes)", id, len(got), ids[0], len(want))
		}
	}
}

func isrOf(c *testcluster.Cluster, id int32, topic string) []int32 {
	p, ok := c.Image(id).Partition(topic, 0)
	if !ok {
		return nil
	}
	isr := slices.Clone(p.ISR)
	slices.Sort(isr)
	return isr
}

func values(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%03d", prefix, i)
	}
	return out
}

// TestReplicationAcksAllCopiesToEveryReplica: acks=all produces succeed
// once every in-sync replica has the record, and the followers' logs end
// up byte for byte the leader's.
func TestReplicationAcksAllCopiesToEveryReplica(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 3)
	createReplicatedTopic(t, c, "rep")
	vals := values("v", 50)
	offsets := produceAll(t, c, "rep", vals)
	for i, off := range offsets {
		if off != int64(i) {
			t.Fatalf("record %d got offset %d", i, off)
		}
	}
	if leo := waitInSync(t, c, "rep"); leo != int64(len(vals)) {
		t.Fatalf("log end offset %d, want %d", leo, len(vals))
	}
	checkIdenticalLogs(t, c, "rep")
	if got := consumeAll(t, c, "rep"); !slices.Equal(got, vals) {
		t.Fatalf("consumed %v", got)
	}
}

// TestReplicationLeaderKillKeepsAcknowledgedRecords: after a kill -9 of
// the leader, the new leader (from the ISR) has every record acknowledged
// with acks=all, takes new ones, and the old leader rejoins as a follower,
// catches up and is added back to the ISR.
func TestReplicationLeaderKillKeepsAcknowledgedRecords(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 3)
	createReplicatedTopic(t, c, "kill")
	before := values("before", 30)
	produceAll(t, c, "kill", before)
	old, oldEpoch := c.WaitLeader(testCtx(t), "kill", 0)
	c.Kill(old)

	ctx := testCtx(t)
	c.Eventually(ctx, "a new leader", func() error {
		leader, epoch := c.WaitLeader(ctx, "kill", 0)
		if leader == old || epoch <= oldEpoch {
			return fmt.Errorf("leader %d epoch %d", leader, epoch)
		}
		return nil
	})
	after := values("after", 20)
	produceAll(t, c, "kill", after)
	want := append(slices.Clone(before), after...)
	if got := consumeAll(t, c, "kill"); !slices.Equal(got, want) {
		t.Fatalf("after the failover the log holds %d records %v, want %d", len(got), got, len(want))
	}

	c.Restart(old)
	waitInSync(t, c, "kill")
	c.Eventually(ctx, "the old leader back in the ISR", func() error {
		for _, id := range c.Running() {
			if isr := isrOf(c, id, "kill"); len(isr) != 3 {
				return fmt.Errorf("node %d sees ISR %v", id, isr)
			}
		}
		return nil
	})
	checkIdenticalLogs(t, c, "kill")
}

// TestReplicationDivergedLeaderTruncates: a leader cut off from the rest
// keeps taking acks=1 records nobody copies; the others elect a new leader
// and go on. Once the network heals, the old leader finds that its log
// diverged at its last epoch, truncates the records only it had, and ends
// up with the new leader's log.
func TestReplicationDivergedLeaderTruncates(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 3)
	createReplicatedTopic(t, c, "div")
	common := values("common", 10)
	produceAll(t, c, "div", common)
	waitInSync(t, c, "div")

	ctx := testCtx(t)
	old, oldEpoch := c.WaitLeader(ctx, "div", 0)
	c.Partition(old)
	// The cut-off leader still believes it leads until the image says
	// otherwise: acks=1 records land in its log alone.
	lost := 0
	for i := range 5 {
		r, err := produce(ctx, c, old, "div", 0, fmt.Sprintf("lost-%d", i))
		if err == nil && r.Error == nil {
			lost++
		}
	}
	if lost == 0 {
		t.Fatal("the cut-off leader took no acks=1 record: nothing diverged")
	}
	var leader int32
	c.Eventually(ctx, "a leader on the majority side", func() error {
		for _, id := range c.IDs() {
			if id == old {
				continue
			}
			p, ok := c.Image(id).Partition("div", 0)
			if !ok || p.Leader < 0 || p.Leader == old || p.LeaderEpoch <= oldEpoch {
				return fmt.Errorf("node %d sees %+v", id, p)
			}
			leader = p.Leader
		}
		return nil
	})
	later := values("later", 10)
	for _, v := range later {
		c.Eventually(ctx, "produce "+v, func() error {
			resp, err := quirev1.NewProducerClient(c.Conn(leader)).ProduceRecords(ctx, &quirev1.ProduceRecordsRequest{
				Topic: "div", OptionalAcks: &quirev1.ProduceRecordsRequest_Acks{Acks: -1}, TimeoutMs: 3000,
				Records: []*quirev1.ProduceRecord{{ValueData: &quirev1.ProduceRecord_Value{Value: v}, OptionalPartition: &quirev1.ProduceRecord_Partition{Partition: 0}}},
			})
			if err != nil {
				return err
			}
			if e := resp.Results[0].Error; e != nil {
				return errors.New(e.Message)
			}
			return nil
		})
	}
	c.Heal()
	waitInSync(t, c, "div")
	checkIdenticalLogs(t, c, "div")
	got := consumeAll(t, c, "div")
	want := append(slices.Clone(common), later...)
	if !slices.Equal(got, want) {
		t.Fatalf("log holds %v, want %v (the %d records only the cut-off leader took must be gone)", got, want, lost)
	}
	for _, v := range got {
		if strings.HasPrefix(v, "lost-") {
			t.Fatalf("record %q taken by the cut-off leader survived", v)
		}
	}
}

// TestReplicationISRShrinksAndExpands: a follower cut off from the leader
// alone (it still heartbeats to the controller, so it is not fenced) is
// dropped from the ISR by the leader after replica.lag.time.max.ms;
// acks=all goes on with two in-sync replicas; once the link heals the
// follower catches up and the leader adds it back. One voter: the
// controller cannot move to the leader (an election on a loaded machine),
// which would cut the follower off from the controller too and fence it.
func TestReplicationISRShrinksAndExpands(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 3, testcluster.Voters(1))
	ctx := testCtx(t)
	controller := c.WaitController(ctx)
	// Lead from a node that is not the controller, so that cutting a
	// follower off from the leader leaves its controller link up.
	for attempt := 0; attempt < 10; attempt++ {
		name := fmt.Sprintf("isr%d", attempt)
		createReplicatedTopic(t, c, name)
		if leader, _ := c.WaitLeader(ctx, name, 0); leader != controller {
			runISRShrinkExpand(t, c, name, leader, controller)
			return
		}
	}
	t.Fatal("every topic is led by the controller")
}

func runISRShrinkExpand(t *testing.T, c *testcluster.Cluster, topic string, leader, controller int32) {
	ctx := testCtx(t)
	produceAll(t, c, topic, values("a", 5))
	var follower int32 // neither the leader nor the controller
	for _, id := range c.IDs() {
		if id != leader && id != controller {
			follower = id
		}
	}
	c.Partition(follower, leader)
	c.Eventually(ctx, "the lagging follower out of the ISR", func() error {
		if isr := isrOf(c, leader, topic); slices.Contains(isr, follower) || len(isr) != 2 {
			return fmt.Errorf("ISR %v", isr)
		}
		return nil
	})
	if b, ok := c.Image(leader).Broker(follower); !ok || b.Fenced {
		t.Fatalf("follower %d was fenced (%+v): the ISR change should come from the leader", follower, b)
	}
	more := values("b", 5)
	produceAll(t, c, topic, more)

	c.Heal()
	c.Eventually(ctx, "the follower back in the ISR", func() error {
		if isr := isrOf(c, leader, topic); len(isr) != 3 {
			return fmt.Errorf("ISR %v", isr)
		}
		return nil
	})
	waitInSync(t, c, topic)
	checkIdenticalLogs(t, c, topic)
}

// waitRejoined waits until node w is back in the ISR of every partition of
// topic, and checks that by then it holds as much as the leader had when
// it was let back in: a wiped node rejoins by copying, never with its
// empty log.
func waitRejoined(t *testing.T, c *testcluster.Cluster, topic string, partitions int32, w int32, incarnation string) {
	t.Helper()
	ctx := testCtx(t)
	for p := range partitions {
		c.Eventually(ctx, fmt.Sprintf("node %d back in the ISR of %s-%d", w, topic, p), func() error {
			// The controller's image, once it has w's new registration
			// (w's own image may still be catching up from before it).
			img := c.Image(c.WaitController(ctx))
			if b, ok := img.Broker(w); !ok || b.Incarnation != incarnation {
				return fmt.Errorf("the controller has not seen node %d's new registration", w)
			}
			info, ok := img.Partition(topic, p)
			if !ok || !slices.Contains(info.ISR, w) {
				return fmt.Errorf("%s-%d: %+v", topic, p, info)
			}
			return nil
		})
		l, err := describeLog(ctx, c, w, topic, p)
		if err != nil {
			t.Fatal(err)
		}
		if l.LogEndOffset < 1 {
			t.Fatalf("node %d is in the ISR of %s-%d with log end offset %d; the partition has a record", w, topic, p, l.LogEndOffset)
		}
	}
}

// acked is a record a produce acknowledged with acks=all.
type acked struct {
	partition int32
	offset    int64
	value     string
}

// TestReplicationNoAcknowledgedRecordLostAcrossFailovers produces with
// acks=all without pause while the leaders of a 2-partition topic are
// killed (kill -9 as far as peers can tell) and restarted, three times
// over; then every acknowledged record must be in the final log at the
// offset it was acknowledged with, and every replica's log the same.
func TestReplicationNoAcknowledgedRecordLostAcrossFailovers(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 3)
	// Six failovers under one deadline took over 90 s with the machine's
	// two cores busy: ctx only stops a hang (the writer lives as long),
	// and each wait has its own deadline (step).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	step := func() context.Context {
		sctx, cancel := context.WithTimeout(ctx, testcluster.WaitTimeout)
		t.Cleanup(cancel)
		return sctx
	}
	const topic = "chaos"
	_, err := admin(c, 1).CreateTopic(step(), &quirev1.CreateTopicRequest{
		Name: topic, OptionalPartitions: &quirev1.CreateTopicRequest_Partitions{Partitions: 2}, OptionalReplicationFactor: &quirev1.CreateTopicRequest_ReplicationFactor{ReplicationFactor: 3},
		Configs: map[string]string{"min.insync.replicas": "2"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for p := range int32(2) {
		c.WaitLeader(step(), topic, p)
	}

	var (
		mu   sync.Mutex
		acks []acked
	)
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acks)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			p := int32(i % 2)
			leader := int32(-1)
			for _, id := range c.Running() {
				if b := c.Node(id); b != nil {
					if info, ok := b.Metadata().Image().Partition(topic, p); ok {
						leader = info.Leader
						break
					}
				}
			}
			if leader < 1 {
				continue
			}
			v := fmt.Sprintf("r%05d", i)
			pctx, pcancel := context.WithTimeout(ctx, 3*time.Second)
			resp, err := quirev1.NewProducerClient(c.Conn(leader)).ProduceRecords(pctx, &quirev1.ProduceRecordsRequest{
				Topic: topic, OptionalAcks: &quirev1.ProduceRecordsRequest_Acks{Acks: -1}, TimeoutMs: 2000,
				Records: []*quirev1.ProduceRecord{{ValueData: &quirev1.ProduceRecord_Value{Value: v}, OptionalPartition: &quirev1.ProduceRecord_Partition{Partition: p}}},
			})
			pcancel()
			if err != nil || resp.Results[0].Error != nil {
				continue // not acknowledged: may or may not be in the log
			}
			mu.Lock()
			acks = append(acks, acked{p, resp.Results[0].Offset, v})
			mu.Unlock()
		}
	}()
	progress := func(what string) {
		t.Helper()
		from := count()
		c.Eventually(step(), what, func() error {
			if n := count(); n < from+30 {
				return fmt.Errorf("%d records acknowledged since", n-from)
			}
			return nil
		})
	}

	progress("acks before any failure")
	for round := range 3 {
		p := int32(round % 2)
		leader, _ := c.WaitLeader(step(), topic, p)
		c.Kill(leader)
		progress(fmt.Sprintf("round %d: acks after killing node %d", round, leader))
		c.Restart(leader)
		c.Eventually(step(), fmt.Sprintf("round %d: node %d back in every ISR", round, leader), func() error {
			for q := range int32(2) {
				info, ok := c.Image(leader).Partition(topic, q)
				if !ok || len(info.ISR) != 3 {
					return fmt.Errorf("%s-%d: %+v", topic, q, info)
				}
			}
			return nil
		})
		progress(fmt.Sprintf("round %d: acks with node %d back", round, leader))
	}
	close(stop)
	<-done

	// Every acknowledged record is where it was acknowledged.
	mu.Lock()
	defer mu.Unlock()
	for p := range int32(2) {
		rctx := step()
		leader, _ := c.WaitLeader(rctx, topic, p)
		logged := map[int64]string{}
		cons := quirev1.NewConsumerClient(c.Conn(leader))
		for off := int64(0); ; {
			resp, err := cons.FetchRecords(rctx, &quirev1.FetchRecordsRequest{Topic: topic, Partition: p, Offset: off, MaxRecords: 1000})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range resp.Records {
				logged[r.Offset] = r.GetValue()
			}
			off = resp.NextOffset
			if off >= resp.HighWatermark {
				break
			}
		}
		n := 0
		for _, a := range acks {
			if a.partition != p {
				continue
			}
			n++
			if got, ok := logged[a.offset]; !ok || got != a.value {
				t.Errorf("%s-%d offset %d: acknowledged %q, log has %q (present %v)", topic, p, a.offset, a.value, got, ok)
			}
		}
		t.Logf("%s-%d: %d acknowledged records checked, %d in the log", topic, p, n, len(logged))
	}
	for p := range int32(2) {
		sctx := step()
		c.Eventually(sctx, "replicas in sync", func() error {
			var leo []int64
			for _, id := range c.Running() {
				l, err := describeLog(sctx, c, id, topic, p)
				if err != nil {
					return err
				}
				leo = append(leo, l.LogEndOffset)
			}
			if slices.Min(leo) != slices.Max(leo) {
				return fmt.Errorf("log end offsets %v", leo)
			}
			return nil
		})
	}
}

// TestReplicaFetchRefusesStrangers: the follower fetch is on the same port
// as clients, so the leader takes a fetch only from the registered process
// of the replica it names; anything else could move the HW without a copy.
func TestReplicaFetchRefusesStrangers(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 3)
	createReplicatedTopic(t, c, "guard")
	ctx := testCtx(t)
	leader, epoch := c.WaitLeader(ctx, "guard", 0)
	follower := leader%3 + 1
	cl := internalv1.NewReplicaServiceClient(c.Conn(leader))
	part := []*internalv1.ReplicaFetchPartition{{Topic: "guard", CurrentLeaderEpoch: epoch, LastFetchedEpoch: -1}}
	for _, tc := range []struct {
		name string
		req  *internalv1.ReplicaFetchRequest
		want quirev1.ErrorCode
	}{
		{"no incarnation", &internalv1.ReplicaFetchRequest{ReplicaId: follower, Partitions: part}, quirev1.ErrorCode_STALE_BROKER_EPOCH},
		{"wrong incarnation", &internalv1.ReplicaFetchRequest{ReplicaId: follower, Incarnation: "0123456789abcdef", Partitions: part}, quirev1.ErrorCode_STALE_BROKER_EPOCH},
		{"unknown broker", &internalv1.ReplicaFetchRequest{ReplicaId: 9, Partitions: part}, quirev1.ErrorCode_STALE_BROKER_EPOCH},
		{"the leader itself", &internalv1.ReplicaFetchRequest{ReplicaId: leader, Partitions: part}, quirev1.ErrorCode_INVALID_REQUEST},
		{"no partitions", &internalv1.ReplicaFetchRequest{ReplicaId: follower}, quirev1.ErrorCode_INVALID_REQUEST},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := cl.ReplicaFetch(ctx, tc.req)
			if e := errorDetail(err); e == nil || e.Code != tc.want || e.Message == "" {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

// TestReplicationCatchUpOfManyPartitions: a follower back after missing
// megabytes on many partitions catches up in fetch responses above gRPC's
// default 4 MiB message limit (replica.fetch.response.max.bytes is 10 MiB;
// here replica.fetch.max.bytes is raised to 8 MiB so that one partition
// alone fills a response past it).
func TestReplicationCatchUpOfManyPartitions(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 3, testcluster.Config(func(_ int32, cfg *broker.Config) {
		cfg.ReplicaFetchMaxBytes = 8 << 20
	}))
	ctx := testCtx(t)
	const topic, parts = "bulk", 4
	createTopic(t, c, 1, topic, parts, 3)
	ctl := c.WaitController(ctx)
	lagger := ctl%3 + 1
	for p := range int32(parts) {
		c.WaitLeader(ctx, topic, p)
	}
	c.Stop(lagger)
	value := make([]byte, 256<<10)
	for p := range int32(parts) {
		c.Eventually(ctx, fmt.Sprintf("fill %s-%d", topic, p), func() error {
			leader, _ := c.WaitLeader(ctx, topic, p)
			pr := quirev1.NewProducerClient(c.Conn(leader))
			for range 24 { // 6 MiB per partition, in batches under max.message.bytes
				resp, err := pr.ProduceRecords(ctx, &quirev1.ProduceRecordsRequest{Topic: topic, OptionalAcks: &quirev1.ProduceRecordsRequest_Acks{Acks: 1},
					Records: []*quirev1.ProduceRecord{{ValueData: &quirev1.ProduceRecord_ValueBytes{ValueBytes: value}, OptionalPartition: &quirev1.ProduceRecord_Partition{Partition: p}}}})
				if err != nil {
					return err
				}
				if e := resp.Results[0].Error; e != nil {
					return errors.New(e.Message)
				}
			}
			return nil
		})
	}
	c.Restart(lagger)
	c.Eventually(ctx, "the restarted follower has every partition", func() error {
		for p := range int32(parts) {
			l, err := describeLog(ctx, c, lagger, topic, p)
			if err != nil {
				return err
			}
			if l.LogEndOffset < 24 {
				return fmt.Errorf("node %d has %s-%d up to %d", lagger, topic, p, l.LogEndOffset)
			}
		}
		return nil
	})
}
