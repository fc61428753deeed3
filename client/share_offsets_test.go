package client_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/broker/brokertest"
	"github.com/quirelog/quire/client"
	"github.com/quirelog/quire/internal/poll"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/testcluster"
)

// shareOffsetsString shows results as "topic/partition start lag" or
// "topic/partition CODE", for comparing whole answers.
func shareOffsetsString(got []client.ShareGroupOffset) string {
	s := ""
	for _, o := range got {
		if o.Err != nil {
			s += fmt.Sprintf("%s/%d %s; ", o.Topic, o.Partition, client.ErrorCode(o.Err))
			continue
		}
		s += fmt.Sprintf("%s/%d %d %d; ", o.Topic, o.Partition, o.StartOffset, o.Lag)
	}
	return s
}

// TestClientShareGroupOffsets: AlterShareGroupOffsets on a share group
// never seen sets the start offsets of the partitions named, refusing an
// unknown partition, an unknown topic and a negative offset in their
// results; DescribeShareGroupOffsets then answers them with their lag,
// every share-partition when no topic is named, those of the topics named
// (and an unknown topic's refusal) in the order named. A member then
// reads from the offsets set; while it is in the group an alter fails
// with NON_EMPTY_GROUP, as an *client.Error matched by errors.Is, and
// once it has left the alter is taken again.
func TestClientShareGroupOffsets(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, func(c *broker.Config) {
		c.GroupShareEnable = true
		c.ShareAutoOffsetReset = "earliest"
	})
	brokertest.WaitMetadataVersion(t, b, metadata.MetadataVersionShareOffsets)
	ctx := testCtx(t)
	cl := newClient(t, b.Addr(), client.RecordPartitioner(client.ManualPartitioner()))
	createTopic(t, cl, "so", 2)
	createTopic(t, cl, "other", 1)
	for p, n := range map[int32]int{0: 10, 1: 5} {
		for i := range n {
			r := client.StringRecord("so", fmt.Sprintf("p%d-%d", p, i))
			r.Partition = p
			if err := cl.ProduceSync(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
	}

	if _, err := cl.DescribeShareGroupOffsets(ctx, "G"); client.ErrorCode(err) != quirev1.ErrorCode_GROUP_ID_NOT_FOUND {
		t.Fatalf("describe of a group never seen: %v, want GROUP_ID_NOT_FOUND", err)
	}
	if _, err := cl.AlterShareGroupOffsets(ctx, "G"); client.ErrorCode(err) != quirev1.ErrorCode_INVALID_REQUEST {
		t.Fatalf("alter with no offsets: %v, want INVALID_REQUEST", err)
	}

	got, err := cl.AlterShareGroupOffsets(ctx, "G",
		client.ShareOffset{Topic: "so", Partition: 0, Offset: 4},
		client.ShareOffset{Topic: "so", Partition: 7, Offset: 1},
		client.ShareOffset{Topic: "so", Partition: 1, Offset: 2},
		client.ShareOffset{Topic: "nosuch", Partition: 0, Offset: 0},
		client.ShareOffset{Topic: "other", Partition: 0, Offset: -1})
	if err != nil {
		t.Fatal(err)
	}
	if s, want := shareOffsetsString(got),
		"so/0 4 -1; so/7 UNKNOWN_TOPIC_OR_PARTITION; so/1 2 -1; nosuch/0 UNKNOWN_TOPIC_OR_PARTITION; other/0 INVALID_REQUEST; "; s != want {
		t.Fatalf("alter answered %s\nwant %s", s, want)
	}
	var ce *client.Error
	if !errors.As(got[1].Err, &ce) || ce.Message == "" {
		t.Fatalf("unknown partition's error %#v, want a *client.Error saying why", got[1].Err)
	}

	got, err = cl.DescribeShareGroupOffsets(ctx, "G")
	if err != nil {
		t.Fatal(err)
	}
	// Lag: 10 records of partition 0 below the high watermark, 4 of them
	// below the start offset; 5 of partition 1, 2 below.
	if s, want := shareOffsetsString(got), "so/0 4 6; so/1 2 3; "; s != want {
		t.Fatalf("describe answered %s\nwant %s", s, want)
	}
	got, err = cl.DescribeShareGroupOffsets(ctx, "G", "other", "so", "nosuch")
	if err != nil {
		t.Fatal(err)
	}
	if s, want := shareOffsetsString(got), "other/0 -1 -1; so/0 4 6; so/1 2 3; nosuch/-1 UNKNOWN_TOPIC_OR_PARTITION; "; s != want {
		t.Fatalf("describe of topics answered %s\nwant %s", s, want)
	}

	// A member reads from the offsets set, and keeps them from being set.
	sc, err := cl.NewShareConsumer(ctx, "G", []string{"so"})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for len(seen) < 9 { // 4 to 9 of partition 0, 2 to 4 of partition 1
		recs, err := sc.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if want := fmt.Sprintf("p%d-%d", r.Partition, r.Offset); string(r.Value) != want {
				t.Fatalf("record %d/%d is %q, want %q", r.Partition, r.Offset, r.Value, want)
			}
			if (r.Partition == 0 && r.Offset < 4) || (r.Partition == 1 && r.Offset < 2) {
				t.Fatalf("record %d/%d delivered, below the start offset set", r.Partition, r.Offset)
			}
			seen[string(r.Value)] = true
			r.Accept()
		}
	}
	if err := sc.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = cl.AlterShareGroupOffsets(ctx, "G", client.ShareOffset{Topic: "so", Partition: 0, Offset: 0})
	if !errors.Is(err, &client.Error{Code: quirev1.ErrorCode_NON_EMPTY_GROUP}) {
		t.Fatalf("alter of a group with a member: %v, want NON_EMPTY_GROUP", err)
	}
	if err := sc.Close(ctx); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "an alter once the member left", func() error {
		_, err := cl.AlterShareGroupOffsets(ctx, "G", client.ShareOffset{Topic: "so", Partition: 0, Offset: 1})
		return err
	})
	got, err = cl.DescribeShareGroupOffsets(ctx, "G", "so")
	if err != nil {
		t.Fatal(err)
	}
	if s, want := shareOffsetsString(got), "so/0 1 9; so/1 5 0; "; s != want {
		t.Fatalf("describe after the member's reads and an alter answered %s\nwant %s", s, want)
	}
}

// TestClientClusterShareGroupOffsetsLag: on a 3-node cluster with a
// topic's partitions led by different nodes, DescribeShareGroupOffsets
// answers every partition's lag, which only its leader knows, whichever
// node the client was seeded with; an alter through one node is seen on
// all of them.
func TestClientClusterShareGroupOffsetsLag(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 3, testcluster.Config(func(_ int32, cfg *broker.Config) {
		cfg.GroupShareEnable = true
	}))
	ctx := clusterCtx(t, 2*time.Minute)
	c.WaitController(ctx)
	c.WaitMetadataVersion(ctx, metadata.MetadataVersionShareOffsets)
	cl := clusterClient(t, c, []int32{1}, client.RecordPartitioner(client.ManualPartitioner()))
	if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: "lag", Partitions: 3, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	leaders := map[int32]bool{}
	for p := range int32(3) {
		leaders[leaderOf(ctx, c, "lag", p).Leader] = true
		for i := range 3 + int(p) {
			r := client.StringRecord("lag", fmt.Sprint(i))
			r.Partition = p
			if err := cl.ProduceSync(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(leaders) < 2 {
		t.Fatalf("partitions led by %v: the test needs two leaders at least", leaders)
	}
	var offsets []client.ShareOffset
	for p := range int32(3) {
		offsets = append(offsets, client.ShareOffset{Topic: "lag", Partition: p, Offset: 1})
	}
	if got, err := cl.AlterShareGroupOffsets(ctx, "L", offsets...); err != nil || len(got) != 3 {
		t.Fatalf("alter: %v, %v", shareOffsetsString(got), err)
	}
	// Partition p holds 3+p records, 1 below the start offset.
	const want = "lag/0 1 2; lag/1 1 3; lag/2 1 4; "
	for _, seed := range c.IDs() {
		scl := clusterClient(t, c, []int32{seed})
		for _, topics := range [][]string{nil, {"lag"}} {
			c.Eventually(ctx, fmt.Sprintf("the offsets set and their lag, seeded with node %d, topics %v", seed, topics), func() error {
				got, err := scl.DescribeShareGroupOffsets(ctx, "L", topics...)
				if err != nil {
					return err
				}
				if s := shareOffsetsString(got); s != want {
					return fmt.Errorf("answered %s, want %s", s, want)
				}
				return nil
			})
		}
	}
}
