package testcluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/client"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/testcluster"
)

// TestClusterKafkaTransactionsSurviveLeaderKill: consume-transform-
// produce with franz-go's GroupTransactSession over three nodes' Kafka
// listeners, one transaction aborted on purpose, and the leader of an
// output partition killed halfway through. Every input record is exactly
// once among the committed output, and a read_committed reader sees no
// record of an aborted transaction (they would be duplicates).
func TestClusterKafkaTransactionsSurviveLeaderKill(t *testing.T) {
	t.Parallel()
	c, addrs := kafkaCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c.WaitMetadataVersion(ctx, metadata.MetadataVersionTransactions)
	createTopic(t, c, 1, "tin", 3, 3)
	createTopic(t, c, 1, "tout", 3, 3)
	for p := range int32(3) {
		c.WaitLeader(ctx, "tin", p)
		c.WaitLeader(ctx, "tout", p)
	}
	var seeds []string
	for _, a := range addrs {
		seeds = append(seeds, a)
	}
	const n = 300
	in, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic("tin"), kgo.MetadataMinAge(100*time.Millisecond),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Partition: int32(i % 3), Value: []byte(fmt.Sprint(i))})
	}
	if err := in.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(seeds...), kgo.MetadataMinAge(100*time.Millisecond),
		kgo.TransactionalID("ctp"), kgo.ConsumerGroup("ctp-group"), kgo.ConsumeTopics("tin"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.DefaultProduceTopic("tout"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	done, aborted, killed := 0, false, int32(0)
	for done < n {
		fs := sess.PollRecords(ctx, 20)
		if err := ctx.Err(); err != nil {
			t.Fatalf("transformed %d of %d: %v", done, n, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch %s/%d: %v", topic, p, err) })
		got := fs.Records()
		if len(got) == 0 {
			continue
		}
		if killed == 0 && done >= n/2 {
			killed, _ = c.WaitLeader(ctx, "tout", 0)
			t.Logf("killing node %d, leader of tout-0 (the controller is node %d)", killed, c.WaitController(ctx))
			c.Kill(killed)
		}
		if err := sess.Begin(); err != nil {
			t.Fatal(err)
		}
		for _, r := range got {
			sess.Produce(ctx, &kgo.Record{Partition: r.Partition, Value: []byte("out-" + string(r.Value))}, nil)
		}
		abort := !aborted && done >= n/4
		committed, err := sess.End(ctx, kgo.TransactionEndTry(!abort))
		switch {
		case err != nil:
			t.Logf("end of a transaction of %d records: %v", len(got), err)
		case abort:
			aborted = true
		case committed:
			done += len(got)
		}
	}
	if !aborted || killed == 0 {
		t.Fatalf("aborted %v, killed %d", aborted, killed)
	}

	var live []string
	for id, a := range addrs {
		if id != killed {
			live = append(live, a)
		}
	}
	offsets := map[string]map[int32]kgo.Offset{"tout": {}}
	for p := range int32(3) {
		offsets["tout"][p] = kgo.NewOffset().AtStart()
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(live...), kgo.ConsumePartitions(offsets), kgo.MetadataMinAge(100*time.Millisecond),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	seen := map[string]int{}
	total := 0
	for total < n {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d committed records: %v", total, n, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			seen[string(r.Value)]++
			total++
		})
	}
	for i := range n {
		if k := seen[fmt.Sprintf("out-%d", i)]; k != 1 {
			t.Errorf("input %d is %d times in the committed output", i, k)
		}
	}
	if total != n {
		t.Errorf("committed output holds %d records, want %d", total, n)
	}
}

// ctpApp is one instance of a consume-transform-produce application on
// the Go client: its Transaction, and a consumer of the input started
// at the group's committed offsets, with what it read but has not
// processed yet.
type ctpApp struct {
	t    *testing.T
	cl   *client.Client
	tx   *client.Transaction
	cons *client.Consumer
	buf  []*client.Record
}

const (
	ctpIn, ctpOut, ctpGroup, ctpID = "ctp-in", "ctp-out", "ctp-g", "ctp-app"
	ctpParts                       = 3
)

// startCTP starts an instance: a new client, a Transaction with the
// application's id (fencing any earlier instance and aborting its open
// transaction), and the input read from the group's offsets.
// ctpStepTimeout bounds each step of the consume-transform-produce test
// and is its transactions' timeout.
const ctpStepTimeout = 2 * time.Minute

func startCTP(t *testing.T, ctx context.Context, c *testcluster.Cluster) *ctpApp {
	t.Helper()
	var seeds []string
	for _, id := range c.Running() {
		seeds = append(seeds, c.Addr(id))
	}
	cl, err := client.New(ctx, client.SeedBrokers(seeds...), client.RequestTimeout(10*time.Second), client.RetryBackoff(50*time.Millisecond),
		client.FetchMaxWait(250*time.Millisecond), client.RecordPartitioner(client.ManualPartitioner()), client.ReadCommitted())
	if err != nil {
		t.Fatal(err)
	}
	a := &ctpApp{t: t, cl: cl}
	a.restart(ctx)
	return a
}

// restart makes a new Transaction on the instance's client and reads
// the input again from the group's committed offsets: after a commit of
// unknown outcome, which the new Transaction settles first.
func (a *ctpApp) restart(ctx context.Context) {
	a.t.Helper()
	// A transaction open past its timeout is aborted by the coordinator,
	// which fences the instance with a new epoch (as Kafka's does); at
	// 30 s a step of a run slowed throughout by load (25 on 2 cores) was
	// aborted so. No step is meant to run into it: the timeout is the
	// steps' own deadline.
	tx, err := a.cl.NewTransaction(ctx, ctpID, ctpStepTimeout)
	if err != nil {
		a.t.Fatalf("init the transactional producer: %v", err)
	}
	a.tx = tx
	a.rewind(ctx)
}

// rewind reads the input again from the group's committed offsets.
func (a *ctpApp) rewind(ctx context.Context) {
	a.t.Helper()
	if a.cons != nil {
		a.cons.Close()
	}
	a.buf = nil
	var tps []client.TopicPartition
	for p := range int32(ctpParts) {
		tps = append(tps, client.TopicPartition{Topic: ctpIn, Partition: p})
	}
	offs, err := a.cl.FetchOffsets(ctx, ctpGroup, tps...)
	if err != nil {
		a.t.Fatalf("the group's offsets: %v", err)
	}
	assign := map[int32]client.Offset{}
	for _, o := range offs {
		assign[o.Partition] = client.At(max(o.Offset, 0))
	}
	if a.cons, err = a.cl.NewConsumer(map[string]map[int32]client.Offset{ctpIn: assign}); err != nil {
		a.t.Fatal(err)
	}
}

// committed is how many inputs the group's offsets say were processed.
func (a *ctpApp) committed(ctx context.Context) int64 {
	a.t.Helper()
	offs, err := a.cl.FetchOffsets(ctx, ctpGroup)
	if err != nil {
		a.t.Fatalf("the group's offsets: %v", err)
	}
	var n int64
	for _, o := range offs {
		n += max(o.Offset, 0)
	}
	return n
}

// next returns up to k input records not processed yet, polling for
// more when none are left.
func (a *ctpApp) next(ctx context.Context, k int) []*client.Record {
	a.t.Helper()
	for len(a.buf) == 0 {
		recs, err := a.cons.Poll(ctx)
		if ctx.Err() != nil {
			a.t.Fatalf("read the input: %v (last: %v)", ctx.Err(), err)
		}
		a.buf = append(a.buf, recs...)
	}
	k = min(k, len(a.buf))
	out := a.buf[:k]
	a.buf = a.buf[k:]
	return out
}

// transform begins a transaction, writes "out-<input>" for each input
// record to the output partition its offset picks (so one transaction
// spans partitions) and sends the group's next offsets with it; between
// the writes of two partitions it calls between, if not nil.
func (a *ctpApp) transform(ctx context.Context, batch []*client.Record, between func()) error {
	if err := a.tx.Begin(); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	out := map[int32][]*client.Record{}
	next := map[int32]int64{}
	for _, r := range batch {
		p := int32(r.Offset % ctpParts)
		out[p] = append(out[p], &client.Record{Value: []byte("out-" + string(r.Value))})
		next[r.Partition] = r.Offset + 1
	}
	for p := range int32(ctpParts) {
		if len(out[p]) == 0 {
			continue
		}
		if _, err := a.tx.Produce(ctx, ctpOut, p, out[p]...); err != nil {
			return fmt.Errorf("produce to %s-%d: %w", ctpOut, p, err)
		}
		if between != nil {
			between()
			between = nil
		}
	}
	var offs []client.OffsetCommit
	for p, o := range next {
		offs = append(offs, client.OffsetCommit{Topic: ctpIn, Partition: p, Offset: o, LeaderEpoch: -1})
	}
	if err := a.tx.SendOffsets(ctx, ctpGroup, offs...); err != nil {
		return fmt.Errorf("send the group's offsets: %w", err)
	}
	return nil
}

func (a *ctpApp) close() {
	if a.cons != nil {
		a.cons.Close()
	}
	a.cl.Close()
}

// TestClusterTransactionsSurviveControllerAndApplicationKill: consume-
// transform-produce with the Go client's Transaction over three nodes
// (RF 3), input topic to output topic with the group's offsets in each
// transaction, while one transaction is aborted on purpose, the
// application dies in the middle of one (its instance is dropped with
// the transaction open: a new instance with the same transactional id
// takes over, aborts it and fences the old one, whose next write is
// refused), the controller is killed between a transaction's writes and
// its commit, and after its restart the leader of an output partition is
// killed between two writes of a transaction. Every input record is
// exactly once among the committed output, read_committed sees none of
// the aborted records that read_uncommitted does, and the group's
// committed offsets are at the input's end.
func TestClusterTransactionsSurviveControllerAndApplicationKill(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c.WaitMetadataVersion(ctx, metadata.MetadataVersionTransactions)
	createTopic(t, c, 1, ctpIn, ctpParts, 3)
	createTopic(t, c, 1, ctpOut, ctpParts, 3)
	for p := range int32(ctpParts) {
		c.WaitLeader(ctx, ctpIn, p)
		c.WaitLeader(ctx, ctpOut, p)
	}
	const n, per = 300, 20
	app := startCTP(t, ctx, c)
	defer func() { app.close() }()
	var in []*client.Record
	for i := range n {
		in = append(in, &client.Record{Topic: ctpIn, Partition: int32(i % ctpParts), Value: []byte(fmt.Sprint(i))})
	}
	if err := app.cl.ProduceSync(ctx, in...); err != nil {
		t.Fatal(err)
	}

	done := app.committed(ctx)
	aborted := 0 // output records of transactions that never committed
	var controller, leader int32
	// Each step has a deadline of its own, far above what one takes on
	// a loaded machine: a step that hangs fails as that step, while a
	// run that is slow throughout (metadata elections under load, three
	// kills each waiting out a session) is not cut short by one budget
	// for the whole test.
	maxSteps := 3 * n / per // every step but the few planned failures commits a batch
	for step := 1; done < n; step++ {
		if step > maxSteps {
			t.Fatalf("%d steps, and the group's offsets say %d of %d inputs are processed", maxSteps, done, n)
		}
		func() {
			ctx, cancel := context.WithTimeout(context.Background(), ctpStepTimeout)
			defer cancel()
			batch := app.next(ctx, per)
			var between func()
			if step == 9 {
				// Restart the controller killed at step 6, then kill the
				// leader of an output partition in the middle of a
				// transaction: its next write goes to the new leader.
				c.Restart(controller)
				between = func() {
					leader, _ = c.WaitLeader(ctx, ctpOut, 2)
					t.Logf("killing node %d, leader of %s-2, in the middle of a transaction", leader, ctpOut)
					c.Kill(leader)
				}
			}
			if err := app.transform(ctx, batch, between); err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
			switch step {
			case 2:
				if err := app.tx.Abort(ctx); err != nil {
					t.Fatalf("abort: %v", err)
				}
				aborted += len(batch)
				app.rewind(ctx)
				return
			case 4:
				// The application dies with the transaction open; a new
				// instance takes over.
				zombie := app
				app = startCTP(t, ctx, c)
				_, err := zombie.tx.Produce(ctx, ctpOut, 0, &client.Record{Value: []byte("zombie")})
				if code := client.ErrorCode(err); code != quirev1.ErrorCode_PRODUCER_FENCED && code != quirev1.ErrorCode_INVALID_PRODUCER_EPOCH {
					t.Fatalf("the fenced instance's write: %v, want PRODUCER_FENCED", err)
				}
				zombie.close()
				aborted += len(batch)
				done = app.committed(ctx)
				return
			case 6:
				controller = c.WaitController(ctx)
				t.Logf("killing node %d, the controller, before a commit", controller)
				c.Kill(controller)
			}
			if err := app.tx.Commit(ctx); err != nil {
				// An unknown outcome: the new Transaction settles it, and
				// the group's offsets say where to go on from.
				t.Logf("step %d: commit: %v", step, err)
				app.restart(ctx)
				done = app.committed(ctx)
				return
			}
			done += int64(len(batch))
		}()
	}
	// The checks get a deadline of their own too.
	ctx, cancel = context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if leader == 0 {
		t.Fatalf("the input was all processed before the leader kill")
	}
	if got := app.committed(ctx); got != n {
		t.Errorf("the group's committed offsets add up to %d, want %d", got, n)
	}
	offs, err := app.cl.FetchOffsets(ctx, ctpGroup)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range offs {
		if o.Offset != n/ctpParts {
			t.Errorf("the group's offset of %s-%d is %d, want %d (the input's end)", o.Topic, o.Partition, o.Offset, n/ctpParts)
		}
	}

	readOut := func(cl *client.Client, want int) map[string]int {
		t.Helper()
		assign := map[int32]client.Offset{}
		for p := range int32(ctpParts) {
			assign[p] = client.AtStart()
		}
		cons, err := cl.NewConsumer(map[string]map[int32]client.Offset{ctpOut: assign})
		if err != nil {
			t.Fatal(err)
		}
		defer cons.Close()
		seen := map[string]int{}
		for total := 0; total < want; {
			recs, err := cons.Poll(ctx)
			if ctx.Err() != nil {
				t.Fatalf("read %d of %d records of %s: %v (last: %v)", total, want, ctpOut, ctx.Err(), err)
			}
			for _, r := range recs {
				seen[string(r.Value)]++
				total++
			}
		}
		return seen
	}
	seen := readOut(app.cl, n) // read_committed
	for i := range n {
		if k := seen[fmt.Sprintf("out-%d", i)]; k != 1 {
			t.Errorf("input %d is %d times in the committed output", i, k)
		}
	}
	if len(seen) != n {
		t.Errorf("the committed output holds %d distinct records, want %d", len(seen), n)
	}
	// read_uncommitted reads the aborted transactions' records too (n
	// and aborted records at least): they are in the log, and
	// read_committed left them out.
	var seeds []string
	for _, id := range c.Running() {
		seeds = append(seeds, c.Addr(id))
	}
	raw, err := client.New(ctx, client.SeedBrokers(seeds...), client.FetchMaxWait(250*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	readOut(raw, n+aborted)
}
