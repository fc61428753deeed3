package client_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker/brokertest"
	"github.com/quirelog/quire/client"
	"github.com/quirelog/quire/internal/poll"
	"github.com/quirelog/quire/metadata"
)

// TestClientSendGroupOffsets: a transaction's offsets sent as a group
// consumer's member are staged while the member owns the partition at
// its epoch, and refused (ILLEGAL_GENERATION) for a partition it does
// not own, or once the member has left (UNKNOWN_MEMBER_ID); the refusal
// does not end the producer, whose transaction commits the accepted
// offsets.
func TestClientSendGroupOffsets(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	brokertest.WaitMetadataVersion(t, b, metadata.MetadataVersionTransactions)
	cl := newClient(t, b.Addr())
	ctx := testCtx(t)
	createTopic(t, cl, "sgo", 1)
	createTopic(t, cl, "sgo-other", 1)
	g, err := cl.NewGroupConsumer(client.GroupConfig{Group: "sg", Topics: []string{"sgo"}})
	if err != nil {
		t.Fatal(err)
	}
	poll.True(t, "the member is assigned sgo-0", func() bool { return len(g.Assignment()) == 1 })
	tx, err := cl.NewTransaction(ctx, "sg-tx", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Begin(); err != nil {
		t.Fatal(err)
	}
	if err := tx.SendGroupOffsets(ctx, g, client.OffsetCommit{Topic: "sgo", Partition: 0, Offset: 4, LeaderEpoch: -1}); err != nil {
		t.Fatalf("offsets of an owned partition: %v", err)
	}
	err = tx.SendGroupOffsets(ctx, g, client.OffsetCommit{Topic: "sgo-other", Partition: 0, Offset: 4, LeaderEpoch: -1})
	if client.ErrorCode(err) != quirev1.ErrorCode_ILLEGAL_GENERATION {
		t.Fatalf("offsets of a partition not owned: %v, want ILLEGAL_GENERATION", err)
	}
	closeCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := g.Close(closeCtx); err != nil && !errors.Is(err, client.ErrClosed) {
		t.Fatal(err)
	}
	err = tx.SendGroupOffsets(ctx, g, client.OffsetCommit{Topic: "sgo", Partition: 0, Offset: 8, LeaderEpoch: -1})
	if client.ErrorCode(err) != quirev1.ErrorCode_UNKNOWN_MEMBER_ID {
		t.Fatalf("offsets after the member left: %v, want UNKNOWN_MEMBER_ID", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := cl.FetchOffsets(ctx, "sg", client.TopicPartition{Topic: "sgo", Partition: 0}, client.TopicPartition{Topic: "sgo-other", Partition: 0})
	if err != nil || len(got) != 2 || got[0].Offset != 4 || got[1].Offset != -1 {
		t.Fatalf("committed %+v, %v; want sgo-0 at 4 and nothing of sgo-other", got, err)
	}
}

// TestClientGroupStableLag: while a transaction is open on a partition,
// a group's lag against the last stable offset (a read_committed
// consumer's) leaves out the transaction's records, which its lag
// against the high watermark counts; once it commits the two agree.
func TestClientGroupStableLag(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	brokertest.WaitMetadataVersion(t, b, metadata.MetadataVersionTransactions)
	cl := newClient(t, b.Addr())
	ctx := testCtx(t)
	createTopic(t, cl, "lagtx", 1)
	var plain []*client.Record
	for range 3 {
		plain = append(plain, &client.Record{Topic: "lagtx", Value: []byte("p")})
	}
	if err := cl.ProduceSync(ctx, plain...); err != nil {
		t.Fatal(err)
	}
	if err := cl.CommitOffsets(ctx, "lagg", client.OffsetCommit{Topic: "lagtx", Partition: 0, Offset: 1, LeaderEpoch: -1}); err != nil {
		t.Fatal(err)
	}
	tx, err := cl.NewTransaction(ctx, "lag-tx", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Begin(); err != nil {
		t.Fatal(err)
	}
	var recs []*client.Record
	for range 4 {
		recs = append(recs, &client.Record{Value: []byte("t")})
	}
	if _, err := tx.Produce(ctx, "lagtx", 0, recs...); err != nil {
		t.Fatal(err)
	}
	lag := func() client.GroupPartitionLag {
		t.Helper()
		d, err := cl.DescribeGroup(ctx, "lagg")
		if err != nil || len(d.Partitions) != 1 {
			t.Fatalf("describe: %+v, %v", d, err)
		}
		return d.Partitions[0]
	}
	if p := lag(); p.HighWatermark != 7 || p.Lag != 6 || p.LastStableOffset != 3 || p.StableLag != 2 {
		t.Fatalf("transaction open: %+v; want high watermark 7, lag 6, last stable offset 3, stable lag 2", p)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// The marker is at 7: both are against 8 now.
	if p := lag(); p.HighWatermark != 8 || p.Lag != 7 || p.LastStableOffset != 8 || p.StableLag != 7 {
		t.Fatalf("transaction committed: %+v; want high watermark 8, lag 7, last stable offset 8, stable lag 7", p)
	}
}

// TestClientGroupConsumerReadsCommittedByDefault: a group consumer reads
// committed records only unless the client is given ReadUncommitted; a
// Consumer of assigned partitions reads every record unless given
// ReadCommitted, as Kafka's consumers do.
func TestClientGroupConsumerReadsCommittedByDefault(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	brokertest.WaitMetadataVersion(t, b, metadata.MetadataVersionTransactions)
	cl := newClient(t, b.Addr())
	ctx := testCtx(t)
	createTopic(t, cl, "rcdef", 1)
	tx, err := cl.NewTransaction(ctx, "rcdef-tx", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Begin(); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Produce(ctx, "rcdef", 0, &client.Record{Value: []byte("aborted")}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &client.Record{Topic: "rcdef", Partition: 0, Value: []byte("plain")}); err != nil {
		t.Fatal(err)
	}
	// read polls until "plain" and returns every value read.
	read := func(next func(context.Context) ([]*client.Record, error)) []string {
		t.Helper()
		var got []string
		for !slices.Contains(got, "plain") {
			rs, err := next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rs {
				got = append(got, string(r.Value))
			}
		}
		return got
	}
	group := func(name string, opts ...client.Opt) []string {
		c := newClient(t, b.Addr(), opts...)
		g, err := c.NewGroupConsumer(client.GroupConfig{Group: name, Topics: []string{"rcdef"}, Reset: client.AtStart()})
		if err != nil {
			t.Fatal(err)
		}
		return read(g.Poll)
	}
	if got := group("rcdef-default"); !slices.Equal(got, []string{"plain"}) {
		t.Errorf("a group consumer by default read %q, want only the record of no transaction", got)
	}
	if got := group("rcdef-uncommitted", client.ReadUncommitted()); !slices.Equal(got, []string{"aborted", "plain"}) {
		t.Errorf("a group consumer with ReadUncommitted read %q, want the aborted record too", got)
	}
	cons, err := cl.NewConsumer(map[string]map[int32]client.Offset{"rcdef": {0: client.AtStart()}})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	if got := read(cons.Poll); !slices.Equal(got, []string{"aborted", "plain"}) {
		t.Errorf("a Consumer by default read %q, want every record", got)
	}
}
