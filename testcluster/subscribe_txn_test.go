package testcluster_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/client"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/record"
	"github.com/quirelog/quire/testcluster"
)

// txnClient is a Go client of c's nodes.
func txnClient(ctx context.Context, t *testing.T, c *testcluster.Cluster) *client.Client {
	t.Helper()
	var addrs []string
	for _, id := range c.IDs() {
		addrs = append(addrs, c.Addr(id))
	}
	cl, err := client.New(ctx, client.SeedBrokers(addrs...), client.RetryBackoff(20*time.Millisecond), client.RequestTimeout(5*time.Second))
	if err != nil {
		t.Fatalf("client.New: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// txnWrite writes values to topic's partition 0 in a transaction of id,
// then commits it (end "commit"), aborts it ("abort") or leaves it open
// (""), returning the transaction.
func txnWrite(ctx context.Context, t *testing.T, cl *client.Client, id, topic, end string, values ...string) *client.Transaction {
	t.Helper()
	tx, err := cl.NewTransaction(ctx, id, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Begin(); err != nil {
		t.Fatal(err)
	}
	var recs []*client.Record
	for _, v := range values {
		recs = append(recs, &client.Record{Value: []byte(v)})
	}
	if _, err := tx.Produce(ctx, topic, 0, recs...); err != nil {
		t.Fatalf("transaction %s: produce: %v", id, err)
	}
	switch end {
	case "commit":
		err = tx.Commit(ctx)
	case "abort":
		err = tx.Abort(ctx)
	}
	if err != nil {
		t.Fatalf("transaction %s: %s: %v", id, end, err)
	}
	return tx
}

func (s *subStream) values(p string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, r := range s.records[p] {
		out = append(out, r.GetValue())
	}
	return out
}

// TestClusterSubscribeReadCommitted: on a partition holding a committed
// transaction, an aborted one, a record of no transaction, then an open
// transaction and a record after it, a Subscribe stream that says
// nothing of its isolation (read_committed, the default) is sent the
// committed and plain records only, and nothing past the open
// transaction's first record (the last stable offset) until it commits;
// one with raw_batches likewise, without a control batch; a
// read_uncommitted stream is sent every record at once.
func TestClusterSubscribeReadCommitted(t *testing.T) {
	t.Parallel()
	c, ctx, ctl := subCluster(t, 6000)
	c.WaitMetadataVersion(ctx, metadata.MetadataVersionTransactions)
	cl := txnClient(ctx, t, c)
	const topic = "subtxn"
	if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: topic, Partitions: 1, ReplicationFactor: 3}); err != nil {
		t.Fatal(err)
	}
	c.WaitLeader(ctx, topic, 0)
	plain := func(v string) {
		t.Helper()
		resp, err := quirev1.NewProducerClient(c.Conn(ctl)).ProduceRecords(ctx, &quirev1.ProduceRecordsRequest{Topic: topic,
			OptionalAcks: &quirev1.ProduceRecordsRequest_Acks{Acks: -1}, TimeoutMs: 5000,
			Records: []*quirev1.ProduceRecord{{ValueData: &quirev1.ProduceRecord_Value{Value: v},
				OptionalPartition: &quirev1.ProduceRecord_Partition{Partition: 0}}}})
		if err == nil && resp.Results[0].Error != nil {
			err = fmt.Errorf("%s", resp.Results[0].Error.Message)
		}
		if err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
	}
	txnWrite(ctx, t, cl, "sub-c", topic, "commit", "c-0", "c-1", "c-2")
	txnWrite(ctx, t, cl, "sub-a", topic, "abort", "a-0", "a-1", "a-2")
	plain("p-0")
	open := txnWrite(ctx, t, cl, "sub-o", topic, "", "o-0", "o-1")
	plain("after-0")

	sub := &quirev1.GroupSubscription{Topics: []string{topic}}
	tp := tpName(topic, 0)
	uncommitted := subscribe(t, c, ctl, "uncommitted", &quirev1.SubscribeStart{Group: "rcu", Subscription: sub, Batches: true,
		OptionalIsolationLevel: &quirev1.SubscribeStart_IsolationLevel{IsolationLevel: quirev1.IsolationLevel_READ_UNCOMMITTED}}, true)
	committed := subscribe(t, c, ctl, "committed", &quirev1.SubscribeStart{Group: "rcc", Subscription: sub, Batches: true}, true)
	raw := subscribe(t, c, ctl, "raw", &quirev1.SubscribeStart{Group: "rcr", Subscription: sub, RawBatches: true}, true)

	all := []string{"c-0", "c-1", "c-2", "a-0", "a-1", "a-2", "p-0", "o-0", "o-1", "after-0"}
	uncommitted.wait(ctx, "every record", func() bool { return len(uncommitted.records[tp]) >= len(all) })
	if got := uncommitted.values(tp); !slices.Equal(got, all) {
		t.Fatalf("read_uncommitted stream was sent %v, want %v", got, all)
	}
	stable := []string{"c-0", "c-1", "c-2", "p-0"}
	for _, s := range []*subStream{committed, raw} {
		s.wait(ctx, "the records below the last stable offset", func() bool { return len(s.records[tp]) >= len(stable) })
		// The read_uncommitted stream has everything: these would have
		// been read by the same fetches had they not stopped at the LSO.
		if got := s.values(tp); !slices.Equal(got, stable) {
			t.Fatalf("%s stream, the transaction open: sent %v, want %v", s.name, got, stable)
		}
	}

	if err := open.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{"c-0", "c-1", "c-2", "p-0", "o-0", "o-1", "after-0"}
	for _, s := range []*subStream{committed, raw} {
		s.wait(ctx, "the open transaction's records once committed", func() bool { return len(s.records[tp]) >= len(want) })
		if got := s.values(tp); !slices.Equal(got, want) {
			t.Fatalf("%s stream: sent %v, want %v", s.name, got, want)
		}
		for _, v := range s.values(tp) {
			if strings.HasPrefix(v, "a-") {
				t.Fatalf("%s stream was sent %s, of the aborted transaction", s.name, v)
			}
		}
	}
	raw.mu.Lock()
	defer raw.mu.Unlock()
	for _, b := range raw.raws {
		if err := record.SplitBatches(b.Records, func(_ []byte, h record.Header) error {
			if h.Control() {
				return fmt.Errorf("a control batch at %d", h.BaseOffset)
			}
			return nil
		}); err != nil {
			t.Fatalf("raw read_committed event from %d: %v", b.StartOffset, err)
		}
	}
}
