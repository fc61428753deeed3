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
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/client"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/testcluster"
)

const reassignTopic = "moving"

// reassignLoad is an idempotent acks=all producer sending numbered
// records to every partition of a topic, and what was acknowledged.
type reassignLoad struct {
	t      *testing.T
	cl     *client.Client
	parts  int32
	mu     sync.Mutex
	acked  map[int32]map[int64]int64 // partition -> number -> offset
	ackAt  map[int32][]time.Time     // partition -> when each acknowledgement came
	failed []error
	seq    atomic.Int64
	stop   chan struct{}
	done   chan struct{}
}

func newClusterClient(t *testing.T, c *testcluster.Cluster, opts ...client.Opt) *client.Client {
	t.Helper()
	var addrs []string
	for _, id := range c.Running() {
		addrs = append(addrs, c.Addr(id))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := client.New(ctx, append([]client.Opt{client.SeedBrokers(addrs...), client.RetryBackoff(20 * time.Millisecond),
		client.RequestTimeout(5 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

func startLoad(t *testing.T, ctx context.Context, c *testcluster.Cluster, topic string, parts int32) *reassignLoad {
	l := &reassignLoad{t: t, parts: parts, acked: map[int32]map[int64]int64{}, ackAt: map[int32][]time.Time{}, stop: make(chan struct{}), done: make(chan struct{}),
		cl: newClusterClient(t, c, client.RecordPartitioner(client.ManualPartitioner()), client.DeliveryTimeout(2*time.Minute),
			client.RequiredAcks(client.AllISRAcks), client.Idempotent(true))}
	for p := range parts {
		l.acked[p] = map[int64]int64{}
	}
	go func() {
		defer close(l.done)
		tick := time.NewTicker(2 * time.Millisecond) // pacing, not synchronisation
		defer tick.Stop()
		for {
			select {
			case <-l.stop:
				return
			case <-tick.C:
			}
			s := l.seq.Add(1)
			r := &client.Record{Topic: topic, Partition: int32(s % int64(parts)), Value: []byte(strconv.FormatInt(s, 10))}
			l.cl.Produce(ctx, r, func(r *client.Record, err error) {
				l.mu.Lock()
				defer l.mu.Unlock()
				s, _ := strconv.ParseInt(string(r.Value), 10, 64)
				if err != nil {
					if !errors.Is(err, client.ErrUnknownOutcome) {
						l.failed = append(l.failed, fmt.Errorf("record %d on %d: %w", s, r.Partition, err))
					}
					return
				}
				l.acked[r.Partition][s] = r.Offset
				l.ackAt[r.Partition] = append(l.ackAt[r.Partition], time.Now())
			})
		}
	}()
	t.Cleanup(l.halt)
	return l
}

func (l *reassignLoad) halt() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	<-l.done
}

// ackedSince waits until every partition has want more records
// acknowledged than it had when asked.
func (l *reassignLoad) progress(ctx context.Context, c *testcluster.Cluster, what string, want int) {
	l.mu.Lock()
	base := map[int32]int{}
	for p, m := range l.acked {
		base[p] = len(m)
	}
	l.mu.Unlock()
	c.Eventually(ctx, what, func() error {
		l.mu.Lock()
		defer l.mu.Unlock()
		if len(l.failed) > 0 {
			l.t.Fatalf("produce failed: %v", l.failed[0])
		}
		for p, m := range l.acked {
			if len(m)-base[p] < want {
				return fmt.Errorf("partition %d: %d records acknowledged, want %d", p, len(m)-base[p], want)
			}
		}
		return nil
	})
}

// longestGap is the longest time any partition went without an
// acknowledged write during the window from..to: the longest interval
// between two successive acknowledgements that overlaps it (from the last
// one before from to the first one after to, or up to to when none came
// after).
func (l *reassignLoad) longestGap(from, to time.Time) (gap time.Duration, partition int32, since time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for p := range l.parts {
		prev := from
		for _, at := range l.ackAt[p] { // taken under l.mu: in time order
			if at.Before(from) {
				prev = at
				continue
			}
			if d := at.Sub(prev); d > gap {
				gap, partition, since = d, p, prev
			}
			prev = at
			if at.After(to) {
				break
			}
		}
		if d := to.Sub(prev); d > gap {
			gap, partition, since = d, p, prev
		}
	}
	return gap, partition, since
}

// flush stops the load and waits until every record sent is answered.
func (l *reassignLoad) flush(ctx context.Context) {
	l.halt()
	if err := l.cl.Flush(ctx); err != nil {
		l.t.Fatalf("flush: %v", err)
	}
}

// check reads every partition from the start and finds each acknowledged
// record exactly once, at its acknowledged offset, and no number twice.
func (l *reassignLoad) check(ctx context.Context, c *testcluster.Cluster, topic string) {
	l.t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.failed) > 0 {
		l.t.Fatalf("produce failed: %v", l.failed[0])
	}
	total := 0
	for p := range l.parts {
		seen := map[int64]int64{}
		var offset, end int64
		for _, off := range l.acked[p] {
			end = max(end, off+1)
		}
		// Read up to the last acknowledged record at least: a leader
		// elected moments ago may answer a high watermark behind its
		// predecessor's until its followers fetch again.
		// Past it, to the high watermark: a record written twice would
		// show there.
		for {
			var resp *quirev1.FetchRecordsResponse
			c.Eventually(ctx, fmt.Sprintf("read %s-%d at %d (acknowledged up to %d)", topic, p, offset, end-1), func() error {
				var err error
				resp, err = quirev1.NewConsumerClient(c.Conn(c.Running()[0])).FetchRecords(ctx, &quirev1.FetchRecordsRequest{
					Topic: topic, Partition: p, Offset: offset, MaxBytes: 1 << 20})
				if err == nil && len(resp.Records) == 0 && offset < end {
					return fmt.Errorf("nothing at %d yet (high watermark %d)", offset, resp.GetHighWatermark())
				}
				return err
			})
			if len(resp.Records) == 0 {
				break
			}
			for _, r := range resp.Records {
				v := r.GetValue()
				if v == "" {
					v = string(r.GetValueBytes())
				}
				s, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					l.t.Fatalf("%s-%d offset %d: value %q", topic, p, r.Offset, v)
				}
				if prev, dup := seen[s]; dup {
					l.t.Fatalf("%s-%d: record %d at offsets %d and %d: duplicated", topic, p, s, prev, r.Offset)
				}
				seen[s] = r.Offset
				offset = r.Offset + 1
			}
		}
		for s, off := range l.acked[p] {
			got, ok := seen[s]
			if !ok {
				l.t.Fatalf("%s-%d: acknowledged record %d (offset %d) lost", topic, p, s, off)
			}
			if got != off {
				l.t.Fatalf("%s-%d: record %d acknowledged at %d, read at %d", topic, p, s, off, got)
			}
		}
		total += len(l.acked[p])
	}
	l.t.Logf("%d acknowledged records, each read once at its offset", total)
}

// logBytes is a replica's log as its broker has it on disk: its segment
// files in order, one after the other ("" when it has no log).
func replicaLogBytes(c *testcluster.Cluster, id int32, topic string, p int32) ([]byte, error) {
	files, err := filepath.Glob(filepath.Join(c.Dir(id), fmt.Sprintf("%s-%d", topic, p), "*.log"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files) // base offsets, 20 digits
	var out []byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		out = append(out, b...)
	}
	return out, nil
}

// waitIdentical waits until every replica of every partition holds the
// same log, byte for byte (the load has stopped: the HW is every log's
// end), and no broker outside a partition's replicas has a log of it.
func waitIdentical(ctx context.Context, t *testing.T, c *testcluster.Cluster, topic string, parts int32) {
	t.Helper()
	c.Eventually(ctx, "replicas identical", func() error {
		img := c.Image(c.Running()[0])
		for p := range parts {
			pi, _ := img.Partition(topic, p)
			if pi.Reassigning() || len(pi.ISR) != len(pi.Replicas) {
				return fmt.Errorf("%s-%d: replicas %v isr %v adding %v", topic, p, pi.Replicas, pi.ISR, pi.AddingReplicas)
			}
			var first []byte
			for i, id := range pi.Replicas {
				b, err := replicaLogBytes(c, id, topic, p)
				if err != nil {
					return err
				}
				if len(b) == 0 {
					return fmt.Errorf("%s-%d: broker %d has no data", topic, p, id)
				}
				if i == 0 {
					first = b
				} else if !bytes.Equal(b, first) {
					return fmt.Errorf("%s-%d: broker %d's log (%d bytes) differs from broker %d's (%d bytes)", topic, p, id, len(b), pi.Replicas[0], len(first))
				}
			}
			for _, id := range c.Running() {
				if slices.Contains(pi.Replicas, id) {
					continue
				}
				if _, err := os.Stat(filepath.Join(c.Dir(id), fmt.Sprintf("%s-%d", topic, p))); !os.IsNotExist(err) {
					return fmt.Errorf("%s-%d: broker %d is no replica but still has its log (%v)", topic, p, id, err)
				}
			}
		}
		return nil
	})
}

// balance is a topic's replicas and leaders per broker, for the log.
func balance(img *metadata.Image, topic string) string {
	replicas, leaders := map[int32]int{}, map[int32]int{}
	t, _ := img.Topic(topic)
	for _, p := range t.Partitions {
		for _, id := range p.Replicas {
			replicas[id]++
		}
		leaders[p.Leader]++
	}
	return fmt.Sprintf("replicas per broker %v, leaders per broker %v", replicas, leaders)
}

func waitVersion(ctx context.Context, c *testcluster.Cluster) {
	c.WaitImage(ctx, func(img *metadata.Image) bool { return img.MetadataVersion() >= metadata.MetadataVersionReassignment })
}

// TestClusterReassignOntoNewBroker: a fourth broker joins a three-node
// cluster under an acks=all, idempotent load; a generated plan moves its
// share of replicas (and preferred leaders) onto it. Every acknowledged
// record is read back exactly once at its offset, every replica holds the
// same bytes, and the brokers that gave up a replica deleted its log.
func TestClusterReassignOntoNewBroker(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 3)
	ctx := testCtx(t)
	c.WaitController(ctx)
	waitVersion(ctx, c)
	const parts = 8
	cl := newClusterClient(t, c)
	if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: reassignTopic, Partitions: parts, ReplicationFactor: 3,
		Configs: map[string]string{"min.insync.replicas": "2"}}); err != nil {
		t.Fatal(err)
	}
	load := startLoad(t, ctx, c, reassignTopic, parts)
	load.progress(ctx, c, "records before the new broker", 20)

	n4 := c.Add()
	waitVersion(ctx, c)
	t.Logf("before the plan: %s", balance(c.Image(1), reassignTopic))
	// The plan, as `quire partition reassign --plan` makes it.
	desc, err := cl.DescribeCluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var brokers []metadata.PlanBroker
	for _, b := range desc.Brokers {
		brokers = append(brokers, metadata.PlanBroker{ID: b.ID, Rack: b.Rack, Fenced: b.Fenced, Cordoned: b.Cordoned})
	}
	if len(brokers) != 4 {
		t.Fatalf("brokers %+v", desc.Brokers)
	}
	topics, err := cl.DescribeTopics(ctx, reassignTopic)
	if err != nil {
		t.Fatal(err)
	}
	var current []metadata.PlanPartition
	for _, p := range topics[0].Partitions {
		current = append(current, metadata.PlanPartition{Topic: reassignTopic, Partition: p.Partition, Replicas: p.Replicas})
	}
	moves := metadata.PlanReassignment(brokers, current, metadata.PlanOptions{Balance: true})
	var targets []client.ReassignmentTarget
	onNew := 0
	for _, m := range moves {
		targets = append(targets, client.ReassignmentTarget{Topic: m.Topic, Partition: m.Partition, Replicas: m.Replicas})
		if slices.Contains(m.Replicas, n4) {
			onNew++
		}
	}
	if onNew != parts*3/4 {
		t.Fatalf("the plan puts %d replicas on the new broker, want its share %d: %+v", onNew, parts*3/4, moves)
	}
	// Bad input first: refused as a whole, nothing started.
	bad := slices.Clone(targets)
	bad[len(bad)-1] = client.ReassignmentTarget{Topic: reassignTopic, Partition: bad[len(bad)-1].Partition, Replicas: []int32{1, 2, 9}}
	err = cl.AlterPartitionReassignments(ctx, bad)
	if client.ErrorCode(err) != quirev1.ErrorCode_INVALID_REPLICA_ASSIGNMENT && client.ErrorCode(err) != quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION {
		t.Fatalf("a plan naming an unknown broker: %v", err)
	}
	if !strings.Contains(err.Error(), "9") {
		t.Fatalf("the refusal does not name the broker: %v", err)
	}
	if pending, err := cl.ListPartitionReassignments(ctx, ""); err != nil || len(pending) != 0 {
		t.Fatalf("after a refused plan: %v %v", pending, err)
	}
	movesFrom := time.Now()
	if err := cl.AlterPartitionReassignments(ctx, targets); err != nil {
		t.Fatal(err)
	}
	load.progress(ctx, c, "records during the moves", 20)
	c.Eventually(ctx, "every move completed", func() error {
		pending, err := cl.ListPartitionReassignments(ctx, "")
		if err != nil {
			return err
		}
		if len(pending) > 0 {
			return fmt.Errorf("%d pending: %+v", len(pending), pending)
		}
		return nil
	})
	c.WaitImage(ctx, func(img *metadata.Image) bool { return len(img.Reassignments()) == 0 })
	movesTo := time.Now()
	// Every partition goes on taking writes while it moves: the longest
	// time without an acknowledged write on any partition stays under
	// stallBound. This bounds a hang (a move that stalls produce until
	// the client's 30 s request timeout ends it), not the speed of a move:
	// on a loaded machine an election alone has taken 8 s of the moves
	// (with the 4 s session timeout this bound once was). The figure
	// itself is logged, and measured in BenchmarkReassignProduceP99.
	const stallBound = 30 * time.Second
	load.progress(ctx, c, "records after the moves", 20)
	gap, gapPart, gapFrom := load.longestGap(movesFrom, movesTo)
	session := time.Duration(c.Node(1).Config().BrokerSessionTimeoutMs) * time.Millisecond
	t.Logf("moves took %v; longest time without an acknowledged write: %v (partition %d, from %v into the moves), session timeout %v",
		movesTo.Sub(movesFrom).Round(time.Millisecond), gap.Round(time.Millisecond), gapPart, gapFrom.Sub(movesFrom).Round(time.Millisecond), session)
	if gap > stallBound {
		t.Fatalf("partition %d went %v without an acknowledged write during the moves, over %v: a move stalled produce", gapPart, gap, stallBound)
	}
	load.flush(ctx)
	img := c.Image(1)
	for _, m := range moves {
		p, _ := img.Partition(reassignTopic, m.Partition)
		if !slices.Equal(p.Replicas, m.Replicas) || !slices.Contains(p.Replicas, p.Leader) {
			t.Fatalf("partition %d: replicas %v leader %d, planned %v", m.Partition, p.Replicas, p.Leader, m.Replicas)
		}
	}
	if hosted := img.HostedReplicas(); hosted[n4] != parts*3/4 {
		t.Fatalf("replicas per broker %v", hosted)
	}
	t.Logf("after the plan: %s", balance(img, reassignTopic))
	load.check(ctx, c, reassignTopic)
	waitIdentical(ctx, t, c, reassignTopic, parts)
}

// TestClusterReassignDecommission: a broker is cordoned (no new topic
// places a replica on it) and every replica moves off it; it ends with
// none, and its logs are deleted. A plan that names it then is refused.
func TestClusterReassignDecommission(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 4, testcluster.Voters(3))
	ctx := testCtx(t)
	c.WaitController(ctx)
	waitVersion(ctx, c)
	const parts = 4
	cl := newClusterClient(t, c)
	if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: reassignTopic, Partitions: parts, ReplicationFactor: 3,
		Configs: map[string]string{"min.insync.replicas": "2"}}); err != nil {
		t.Fatal(err)
	}
	load := startLoad(t, ctx, c, reassignTopic, parts)
	load.progress(ctx, c, "records", 20)
	const gone = 4
	if err := cl.CordonBroker(ctx, gone, true); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: "after-cordon", Partitions: 8, ReplicationFactor: 2}); err != nil {
		t.Fatal(err)
	}
	if hosted := c.Image(1).HostedReplicas(); hosted[gone] != 3*parts/4 {
		t.Fatalf("a topic created after the cordon placed replicas on broker %d: %v", gone, hosted)
	}
	err := cl.AlterPartitionReassignments(ctx, []client.ReassignmentTarget{{Topic: "after-cordon", Partition: 0, Replicas: []int32{1, gone}}})
	if client.ErrorCode(err) != quirev1.ErrorCode_INVALID_REPLICA_ASSIGNMENT || !strings.Contains(err.Error(), "cordoned") {
		t.Fatalf("a move onto a cordoned broker: %v", err)
	}
	// The decommission's plan: move replicas off the cordoned broker only.
	desc, err := cl.DescribeCluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var brokers []metadata.PlanBroker
	for _, b := range desc.Brokers {
		// Cordoned now, whether or not the node that answered has applied it.
		brokers = append(brokers, metadata.PlanBroker{ID: b.ID, Rack: b.Rack, Fenced: b.Fenced, Cordoned: b.Cordoned || b.ID == gone})
	}
	topics, err := cl.DescribeTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var current []metadata.PlanPartition
	for _, tp := range topics {
		for _, p := range tp.Partitions {
			current = append(current, metadata.PlanPartition{Topic: tp.Name, Partition: p.Partition, Replicas: p.Replicas})
		}
	}
	var targets []client.ReassignmentTarget
	for _, m := range metadata.PlanReassignment(brokers, current, metadata.PlanOptions{}) {
		targets = append(targets, client.ReassignmentTarget{Topic: m.Topic, Partition: m.Partition, Replicas: m.Replicas})
	}
	if len(targets) != 3*parts/4 {
		t.Fatalf("decommission moves %+v", targets)
	}
	if err := cl.AlterPartitionReassignments(ctx, targets); err != nil {
		t.Fatal(err)
	}
	c.Eventually(ctx, "broker decommissioned", func() error {
		d, err := cl.DescribeCluster(ctx)
		if err != nil {
			return err
		}
		for _, b := range d.Brokers {
			if b.ID == gone && (b.Partitions != 0 || !b.Cordoned) {
				return fmt.Errorf("broker %d hosts %d replicas (cordoned %v)", gone, b.Partitions, b.Cordoned)
			}
		}
		return nil
	})
	load.progress(ctx, c, "records after the decommission", 20)
	load.flush(ctx)
	load.check(ctx, c, reassignTopic)
	waitIdentical(ctx, t, c, reassignTopic, parts)
	c.Eventually(ctx, "the decommissioned broker's logs deleted", func() error {
		entries, err := filepath.Glob(filepath.Join(c.Dir(gone), reassignTopic+"-*"))
		if err != nil || len(entries) > 0 {
			return fmt.Errorf("left on broker %d: %v %v", gone, entries, err)
		}
		return nil
	})
	if err := cl.CordonBroker(ctx, gone, false); err != nil {
		t.Fatal(err)
	}
}

// TestClusterReassignControllerKilledMidMove: the controller is killed
// while a move waits for its new replica (held back by a one-byte-a-second
// throttle), with the move's leader on the controller's node; a new
// controller carries on from the log, the broker being added is killed
// and restarted too, the throttle is lifted, and the move completes with
// nothing acknowledged lost; the old controller, restarted, deletes the
// log it no longer hosts.
func TestClusterReassignControllerKilledMidMove(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 4, testcluster.Voters(3))
	ctx := testCtx(t)
	ctl := c.WaitController(ctx)
	waitVersion(ctx, c)
	cl := newClusterClient(t, c)
	others := []int32{}
	for _, id := range []int32{1, 2, 3} {
		if id != ctl {
			others = append(others, id)
		}
	}
	// The partition is first moved onto the three voters, led by the
	// controller; then it moves off the controller onto broker 4.
	from := []int32{ctl, others[0], others[1]}
	if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: reassignTopic, Partitions: 1, ReplicationFactor: 3,
		Configs: map[string]string{"min.insync.replicas": "2"}}); err != nil {
		t.Fatal(err)
	}
	if err := cl.AlterPartitionReassignments(ctx, []client.ReassignmentTarget{{Topic: reassignTopic, Partition: 0, Replicas: from}}); err != nil {
		t.Fatal(err)
	}
	c.Eventually(ctx, "the controller leads the partition", func() error {
		p, _ := c.Image(ctl).Partition(reassignTopic, 0)
		if p.Reassigning() || !slices.Equal(p.Replicas, from) {
			return fmt.Errorf("replicas %v adding %v", p.Replicas, p.AddingReplicas)
		}
		if p.Leader != ctl {
			if _, err := cl.ElectLeaders(ctx, reassignTopic); err != nil {
				return err
			}
			return fmt.Errorf("leader %d", p.Leader)
		}
		return nil
	})
	load := startLoad(t, ctx, c, reassignTopic, 1)
	load.progress(ctx, c, "records", 30)
	if err := cl.SetReassignmentThrottle(ctx, 1, false, 4); err != nil {
		t.Fatal(err)
	}
	to := []int32{others[0], others[1], 4}
	if err := cl.AlterPartitionReassignments(ctx, []client.ReassignmentTarget{{Topic: reassignTopic, Partition: 0, Replicas: to}}); err != nil {
		t.Fatal(err)
	}
	pending, err := cl.ListPartitionReassignments(ctx, reassignTopic)
	if err != nil || len(pending) != 1 || !slices.Equal(pending[0].AddingReplicas, []int32{4}) || !slices.Equal(pending[0].RemovingReplicas, []int32{ctl}) {
		t.Fatalf("pending %+v %v", pending, err)
	}
	c.Eventually(ctx, "the move in DescribeTopics", func() error {
		ds, err := cl.DescribeTopics(ctx, reassignTopic)
		if err != nil {
			return err
		}
		if p := ds[0].Partitions[0]; !slices.Equal(p.AddingReplicas, []int32{4}) || !slices.Equal(p.RemovingReplicas, []int32{ctl}) {
			return fmt.Errorf("described %+v", p)
		}
		return nil
	})
	c.Kill(ctl)
	next := c.WaitController(ctx)
	if next == ctl {
		t.Fatal("no new controller")
	}
	load.progress(ctx, c, "records with a new controller", 20)
	// At a byte a second, broker 4 is still far behind: the throttle
	// holds the move back, normal replication goes on.
	if p, _ := c.Image(next).Partition(reassignTopic, 0); !p.Reassigning() || slices.Contains(p.ISR, 4) {
		t.Fatalf("a move throttled to a byte a second completed: %+v", p)
	}
	// The broker being added restarts mid-move: it keeps its replica and
	// its throttle (both in the metadata log) and carries on.
	c.Kill(4)
	c.Restart(4)
	load.progress(ctx, c, "records with broker 4 back", 20)
	if p, _ := c.Image(4).Partition(reassignTopic, 0); !p.Reassigning() || !slices.Contains(p.AddingReplicas, 4) {
		t.Fatalf("after broker 4's restart: %+v", p)
	}
	if err := cl.SetReassignmentThrottle(ctx, 0, true); err != nil {
		t.Fatal(err)
	}
	c.WaitImage(ctx, func(img *metadata.Image) bool {
		p, _ := img.Partition(reassignTopic, 0)
		return !p.Reassigning() && slices.Equal(p.Replicas, to)
	})
	load.progress(ctx, c, "records after the move", 20)
	load.flush(ctx)
	c.Restart(ctl)
	load.check(ctx, c, reassignTopic)
	waitIdentical(ctx, t, c, reassignTopic, 1)
}

// TestClusterKafkaPartitionReassignments: Kafka's AlterPartitionReassignments
// and ListPartitionReassignments on the Kafka listener, advertised by
// ApiVersions, answered partition by partition as Kafka does: a bad
// partition is refused with Kafka's code while a good one beside it
// moves, a cancel of nothing is NO_REASSIGNMENT_IN_PROGRESS, v1 refuses
// a replication factor change it does not allow, and kadm's cancel of two
// partitions, one of them done moving, cancels the other's move.
func TestClusterKafkaPartitionReassignments(t *testing.T) {
	t.Parallel()
	c, addrs := kafkaCluster(t, 3)
	ctx := testCtx(t)
	waitVersion(ctx, c)
	createTopic(t, c, 1, "kr", 2, 2)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs[1]))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	versions, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	advertised := map[int16]bool{}
	for _, k := range versions.ApiKeys {
		advertised[k.ApiKey] = true
	}
	if !advertised[45] || !advertised[46] {
		t.Fatalf("ApiVersions lacks AlterPartitionReassignments (45) or ListPartitionReassignments (46): %v", versions.ApiKeys)
	}
	alter := func(version int16, allowRF bool, parts ...kmsg.AlterPartitionAssignmentsRequestTopicPartition) *kmsg.AlterPartitionAssignmentsResponse {
		t.Helper()
		req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
		req.Version, req.AllowReplicationFactorChange = version, allowRF
		rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
		rt.Topic, rt.Partitions = "kr", parts
		req.Topics = []kmsg.AlterPartitionAssignmentsRequestTopic{rt}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	part := func(p int32, replicas []int32) kmsg.AlterPartitionAssignmentsRequestTopicPartition {
		rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
		rp.Partition, rp.Replicas = p, replicas
		return rp
	}
	p0, _ := c.Image(1).Partition("kr", 0)
	var spare int32
	for _, id := range c.IDs() {
		if !slices.Contains(p0.Replicas, id) {
			spare = id
		}
	}
	target := []int32{spare, p0.Replicas[0]}
	p1, _ := c.Image(1).Partition("kr", 1)
	var spare1 int32
	for _, id := range c.IDs() {
		if !slices.Contains(p1.Replicas, id) {
			spare1 = id
		}
	}
	// Partition 0 fine, partition 1 naming an unknown broker: as Kafka
	// answers, partition 1 alone is refused and partition 0 moves.
	resp := alter(0, true, part(0, target), part(1, []int32{1, 9}))
	if resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].ErrorCode != 0 ||
		resp.Topics[0].Partitions[1].ErrorCode != kerr.InvalidReplicaAssignment.Code ||
		resp.Topics[0].Partitions[1].ErrorMessage == nil || !strings.Contains(*resp.Topics[0].Partitions[1].ErrorMessage, "broker 9") {
		t.Fatalf("a request with one bad partition: %+v", resp)
	}
	list := kmsg.NewPtrListPartitionReassignmentsRequest()
	c.Eventually(ctx, "the move completed", func() error {
		listed, err := list.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		if len(listed.Topics) > 0 {
			return fmt.Errorf("pending %+v", listed.Topics)
		}
		if p, _ := c.Image(1).Partition("kr", 0); !slices.Equal(p.Replicas, target) {
			return fmt.Errorf("replicas %v", p.Replicas)
		}
		if p, _ := c.Image(1).Partition("kr", 1); !slices.Equal(p.Replicas, p1.Replicas) {
			return fmt.Errorf("the refused partition moved: replicas %v", p.Replicas)
		}
		return nil
	})
	if resp := alter(0, true, part(0, nil)); resp.Topics[0].Partitions[0].ErrorCode != kerr.NoReassignmentInProgress.Code {
		t.Fatalf("a cancel of nothing: %+v", resp)
	}
	if resp := alter(1, false, part(0, []int32{1, 2, 3})); resp.Topics[0].Partitions[0].ErrorCode != kerr.InvalidReplicationFactor.Code {
		t.Fatalf("a replication factor change v1 does not allow: %+v", resp)
	}

	// Partition 1 moves slowly (records to copy, a byte a second onto
	// the broker added); a cancel of both partitions, partition 0's move
	// having finished, cancels partition 1's and answers partition 0's
	// NO_REASSIGNMENT_IN_PROGRESS.
	pcl, err := kgo.NewClient(kgo.SeedBrokers(addrs[1]), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer pcl.Close()
	for i := range 30 {
		r := &kgo.Record{Topic: "kr", Partition: 1, Value: bytes.Repeat([]byte{byte(i)}, 1000)}
		if err := pcl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := newClusterClient(t, c).SetReassignmentThrottle(ctx, 1, false, spare1); err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	var move kadm.AlterPartitionAssignmentsReq
	move.Assign("kr", 1, []int32{spare1, p1.Replicas[0]})
	moved, err := adm.AlterPartitionAssignments(ctx, move)
	if err != nil || moved["kr"][1].Err != nil {
		t.Fatalf("kadm move of kr-1: %+v %v", moved, err)
	}
	pending, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{"kr": {0: {}, 1: {}}})
	if err != nil || len(pending["kr"]) != 1 || !slices.Equal(pending["kr"][1].AddingReplicas, []int32{spare1}) {
		t.Fatalf("pending %+v %v", pending, err)
	}
	var cancelBoth kadm.AlterPartitionAssignmentsReq
	cancelBoth.Assign("kr", 0, nil)
	cancelBoth.Assign("kr", 1, nil)
	cancelled, err := adm.AlterPartitionAssignments(ctx, cancelBoth)
	if err != nil {
		t.Fatalf("kadm cancel of kr-0 and kr-1: %v", err)
	}
	if r := cancelled["kr"][0]; !errors.Is(r.Err, kerr.NoReassignmentInProgress) || !strings.Contains(r.ErrMessage, "kr-0") {
		t.Fatalf("kr-0, its move finished: %+v", r)
	}
	if r := cancelled["kr"][1]; r.Err != nil {
		t.Fatalf("kr-1, moving: %+v", r)
	}
	c.WaitImage(ctx, func(img *metadata.Image) bool {
		p, _ := img.Partition("kr", 1)
		return !p.Reassigning() && slices.Equal(p.Replicas, p1.Replicas)
	})
}

// TestClusterBalancer: with balancer.enable, a broker uncordoned into a
// cluster gets its share of the replicas without a plan from anyone, a
// few moves at a time, and every replica ends identical.
func TestClusterBalancer(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 4, testcluster.Voters(3), testcluster.Config(func(_ int32, cfg *broker.Config) {
		cfg.BalancerEnable = true
		cfg.BalancerIntervalSecs = 1
		cfg.BalancerMaxPartitionMoves = 2
	}))
	ctx := testCtx(t)
	c.WaitController(ctx)
	waitVersion(ctx, c)
	cl := newClusterClient(t, c)
	if err := cl.CordonBroker(ctx, 4, true); err != nil {
		t.Fatal(err)
	}
	const parts = 4
	if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: reassignTopic, Partitions: parts, ReplicationFactor: 3,
		Configs: map[string]string{"min.insync.replicas": "2"}}); err != nil {
		t.Fatal(err)
	}
	load := startLoad(t, ctx, c, reassignTopic, parts)
	load.progress(ctx, c, "records", 20)
	if hosted := c.Image(1).HostedReplicas(); hosted[4] != 0 {
		t.Fatalf("replicas on the cordoned broker: %v", hosted)
	}
	if err := cl.CordonBroker(ctx, 4, false); err != nil {
		t.Fatal(err)
	}
	c.WaitImage(ctx, func(img *metadata.Image) bool {
		return img.HostedReplicas()[4] == parts*3/4 && len(img.Reassignments()) == 0
	})
	load.progress(ctx, c, "records after balancing", 20)
	load.flush(ctx)
	load.check(ctx, c, reassignTopic)
	waitIdentical(ctx, t, c, reassignTopic, parts)
}
