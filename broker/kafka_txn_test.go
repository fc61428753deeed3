package broker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/broker/brokertest"
	"github.com/quirelog/quire/internal/poll"
)

// consumeAll reads partition 0 of topic from the start until it has n
// records, at the isolation level given.
func consumeAll(ctx context.Context, t *testing.T, addr, topic string, n int, level kgo.IsolationLevel) []*kgo.Record {
	t.Helper()
	cons := kafkaClient(t, addr, kgo.FetchIsolationLevel(level),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	var got []*kgo.Record
	for len(got) < n {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records of %s: %v", len(got), n, topic, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		got = append(got, fs.Records()...)
	}
	return got
}

// TestBrokerKafkaTransactions: franz-go's transactional producer commits
// and aborts transactions over the Kafka listener; a read_committed
// consumer sees exactly the committed records, a read_uncommitted one
// every record (and neither a marker); DescribeTransactions and
// ListTransactions show the transactional id.
//
// At transaction version 2 (franz-go's default against this listener)
// each EndTxn bumps the epoch; capped at Kafka 3.9's versions, the
// producer speaks version 1 and keeps its epoch.
func TestBrokerKafkaTransactions(t *testing.T) {
	t.Parallel()
	t.Run("v2", func(t *testing.T) {
		t.Parallel()
		kafkaTransactions(t, 3)
	})
	t.Run("v1", func(t *testing.T) {
		t.Parallel()
		kafkaTransactions(t, 0, kgo.MaxVersions(kversion.V3_9_0()))
	})
}

func kafkaTransactions(t *testing.T, wantEpoch int16, opts ...kgo.Opt) {
	_, addr := startKafkaBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	prod := kafkaClient(t, addr, append([]kgo.Opt{kgo.TransactionalID("tx1"), kgo.DefaultProduceTopic("ktx"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(30 * time.Second)}, opts...)...)
	txn := func(prefix string, n int, commit kgo.TransactionEndTry) {
		t.Helper()
		if err := prod.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			r := &kgo.Record{Partition: 0, Value: []byte(fmt.Sprintf("%s-%d", prefix, i))}
			if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("produce %s-%d: %v", prefix, i, err)
			}
		}
		if err := prod.EndTransaction(ctx, commit); err != nil {
			t.Fatalf("end transaction %s: %v", prefix, err)
		}
	}
	txn("a", 10, kgo.TryCommit)
	txn("b", 5, kgo.TryAbort)
	txn("c", 3, kgo.TryCommit)

	var want []string
	for i := range 10 {
		want = append(want, fmt.Sprintf("a-%d", i))
	}
	for i := range 3 {
		want = append(want, fmt.Sprintf("c-%d", i))
	}
	committed := consumeAll(ctx, t, addr, "ktx", len(want), kgo.ReadCommitted())
	if len(committed) != len(want) {
		t.Fatalf("read_committed got %d records, want %d", len(committed), len(want))
	}
	for i, r := range committed {
		if string(r.Value) != want[i] {
			t.Fatalf("read_committed record %d is %q, want %q", i, r.Value, want[i])
		}
	}
	all := consumeAll(ctx, t, addr, "ktx", 18, kgo.ReadUncommitted())
	for i, r := range all {
		if len(r.Value) == 0 || r.Attrs.IsControl() {
			t.Fatalf("read_uncommitted record %d: a marker %+v", i, r)
		}
	}
	// The markers take offsets: the last record is not at offset 17.
	if last := all[len(all)-1].Offset; last <= 17 {
		t.Fatalf("last record at offset %d: no room for the markers", last)
	}

	admin := kafkaClient(t, addr)
	dreq := kmsg.NewPtrDescribeTransactionsRequest()
	dreq.TransactionalIDs = []string{"tx1", "nope"}
	dresp, err := dreq.RequestWith(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	if len(dresp.TransactionStates) != 2 || dresp.TransactionStates[0].ErrorCode != 0 || dresp.TransactionStates[0].State != "CompleteCommit" ||
		dresp.TransactionStates[0].ProducerID < 0 || dresp.TransactionStates[0].ProducerEpoch != wantEpoch || dresp.TransactionStates[1].ErrorCode == 0 {
		t.Fatalf("DescribeTransactions: %+v", dresp.TransactionStates)
	}
	lreq := kmsg.NewPtrListTransactionsRequest()
	lresp, err := lreq.RequestWith(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	if lresp.ErrorCode != 0 || len(lresp.TransactionStates) != 1 || lresp.TransactionStates[0].TransactionalID != "tx1" {
		t.Fatalf("ListTransactions: %+v", lresp)
	}
}

// TestBrokerKafkaGroupTransactSession: franz-go's GroupTransactSession
// consumes an input topic in a consumer group and produces a transformed
// record per input record, committing the group's offsets with each
// transaction; one transaction is aborted on purpose, its input read
// again. The committed output holds every input exactly once, and the
// group's committed offset is the input's end.
func TestBrokerKafkaGroupTransactSession(t *testing.T) {
	t.Parallel()
	_, addr := startKafkaBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const n = 60
	in := kafkaClient(t, addr, kgo.DefaultProduceTopic("ctp-in"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range n {
		if err := in.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// The output topic exists before the session's first produce.
	out := kafkaClient(t, addr, kgo.DefaultProduceTopic("ctp-out"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := out.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("seed")}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(addr), kgo.MetadataMinAge(100*time.Millisecond),
		kgo.TransactionalID("ctp"), kgo.ConsumerGroup("ctp-group"), kgo.ConsumeTopics("ctp-in"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.DefaultProduceTopic("ctp-out"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	done, aborted := 0, false
	for done < n {
		fs := sess.PollRecords(ctx, 7)
		if err := ctx.Err(); err != nil {
			t.Fatalf("transformed %d of %d: %v", done, n, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		recs := fs.Records()
		if len(recs) == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			o := &kgo.Record{Partition: 0, Value: []byte("out-" + string(r.Value))}
			if err := sess.ProduceSync(ctx, o).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
		}
		abort := !aborted && done > n/3
		committed, err := sess.End(ctx, kgo.TransactionEndTry(!abort))
		if err != nil {
			t.Fatalf("end: %v", err)
		}
		if abort {
			aborted = true
			continue // the session rewinds to the last committed offsets
		}
		if committed {
			done += len(recs)
		}
	}
	if !aborted {
		t.Fatal("no transaction was aborted")
	}
	got := consumeAll(ctx, t, addr, "ctp-out", n+1, kgo.ReadCommitted())
	seen := map[string]int{}
	for _, r := range got[1:] {
		seen[string(r.Value)]++
	}
	for i := range n {
		if c := seen[fmt.Sprintf("out-%d", i)]; c != 1 {
			t.Fatalf("input %d appears %d times in the committed output (%d records)", i, c, len(got)-1)
		}
	}
	if len(got) != n+1 {
		t.Fatalf("committed output has %d records, want %d", len(got)-1, n)
	}
	admin := kafkaClient(t, addr)
	ofr := kmsg.NewPtrOffsetFetchRequest()
	ofr.Group = "ctp-group"
	oresp, err := ofr.RequestWith(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	if len(oresp.Topics) != 1 || oresp.Topics[0].Partitions[0].Offset != n {
		t.Fatalf("committed offsets %+v, want %d", oresp.Topics, n)
	}
}

// TestBrokerKafkaTransactionFencingAndTimeout: a second producer with the
// same transactional id fences the first, whose open transaction is
// aborted; a transaction left open past its timeout is aborted by the
// coordinator and its producer fenced. read_committed readers see neither
// transaction's records, and the partition's last stable offset moves on.
func TestBrokerKafkaTransactionFencingAndTimeout(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, func(c *broker.Config) {
		c.ListenAddr = "PLAINTEXT://127.0.0.1:0,KAFKA://127.0.0.1:0"
		c.KafkaListenerNames = "kafka"
		c.TransactionAbortCheckIntervalMs = 100
	})
	addr, _ := b.ListenerAddr("KAFKA")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	opts := []kgo.Opt{kgo.DefaultProduceTopic("kfence"), kgo.RecordPartitioner(kgo.ManualPartitioner())}
	old := kafkaClient(t, addr, append(opts, kgo.TransactionalID("fence"))...)
	if err := old.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := old.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("zombie")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// The new producer's init aborts the old one's transaction.
	fresh := kafkaClient(t, addr, append(opts, kgo.TransactionalID("fence"))...)
	if err := fresh.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := fresh.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("fresh")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := fresh.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if err := old.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Fatal("the fenced producer committed")
	}

	// A transaction open past its 1s timeout is aborted for it.
	slow := kafkaClient(t, addr, append(opts, kgo.TransactionalID("slow"), kgo.TransactionTimeout(time.Second))...)
	if err := slow.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := slow.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("late")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	admin := kafkaClient(t, addr)
	poll.Until(t, "the coordinator aborts the timed-out transaction", func() error {
		dreq := kmsg.NewPtrDescribeTransactionsRequest()
		dreq.TransactionalIDs = []string{"slow"}
		dresp, err := dreq.RequestWith(ctx, admin)
		if err != nil {
			return err
		}
		if st := dresp.TransactionStates[0].State; st != "CompleteAbort" {
			return fmt.Errorf("state %s", st)
		}
		return nil
	})
	if err := slow.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Fatal("the timed-out producer committed")
	}
	// Only the fresh producer's record is committed; then a plain record
	// after it is read too, past both aborted transactions.
	plain := kafkaClient(t, addr, opts...)
	if err := plain.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	got := consumeAll(ctx, t, addr, "kfence", 2, kgo.ReadCommitted())
	if len(got) != 2 || string(got[0].Value) != "fresh" || string(got[1].Value) != "after" {
		var vals []string
		for _, r := range got {
			vals = append(vals, string(r.Value))
		}
		t.Fatalf("read_committed read %v, want [fresh after]", vals)
	}
}
