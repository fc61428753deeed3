package testcluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/quirelog/quire/metadata"
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
