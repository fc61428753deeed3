package client_test

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker/brokertest"
	"github.com/quirelog/quire/client"
)

func TestClientGroupOffsets(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	cl := newClient(t, b.Addr())
	ctx := testCtx(t)
	createTopic(t, cl, "gt", 3)

	if err := cl.CommitOffsets(ctx, "g1",
		client.OffsetCommit{Topic: "gt", Partition: 2, Offset: 7, LeaderEpoch: 0, Metadata: "m"},
		client.OffsetCommit{Topic: "gt", Partition: 0, Offset: 3, LeaderEpoch: -1}); err != nil {
		t.Fatal(err)
	}
	all, err := cl.FetchOffsets(ctx, "g1")
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[0].Partition != 0 || all[0].Offset != 3 || all[0].LeaderEpoch != -1 ||
		all[1].Partition != 2 || all[1].Offset != 7 || all[1].Metadata != "m" || all[1].CommitTimeMs <= 0 {
		t.Fatalf("offsets %+v", all)
	}
	named, err := cl.FetchOffsets(ctx, "g1", client.TopicPartition{Topic: "gt", Partition: 1}, client.TopicPartition{Topic: "gt", Partition: 2})
	if err != nil || len(named) != 2 || named[0].Offset != -1 || named[0].CommitTimeMs != -1 || named[1].Offset != 7 {
		t.Fatalf("named offsets %+v %v", named, err)
	}
	if err := cl.CommitOffsets(ctx, "g2", client.OffsetCommit{Topic: "gt", Offset: 1, LeaderEpoch: -1}); err != nil {
		t.Fatal(err)
	}
	if groups, err := cl.ListGroups(ctx); err != nil || !reflect.DeepEqual(groups, []string{"g1", "g2"}) {
		t.Fatalf("groups %v %v", groups, err)
	}
	if err := cl.DeleteGroup(ctx, "g1"); err != nil {
		t.Fatal(err)
	}
	if groups, err := cl.ListGroups(ctx); err != nil || !reflect.DeepEqual(groups, []string{"g2"}) {
		t.Fatalf("groups after delete %v %v", groups, err)
	}

	// Refusals come back at once (not retried) with their codes.
	for _, c := range []struct {
		err  error
		code quirev1.ErrorCode
	}{
		{cl.CommitOffsets(ctx, "", client.OffsetCommit{Topic: "gt", Offset: 1}), quirev1.ErrorCode_INVALID_GROUP_ID},
		{cl.CommitOffsets(ctx, "g", client.OffsetCommit{Topic: "nope", Offset: 1}), quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION},
		{cl.CommitOffsets(ctx, "g", client.OffsetCommit{Topic: "gt", Partition: 3, Offset: 1}), quirev1.ErrorCode_INVALID_REQUEST},
		{cl.CommitOffsets(ctx, "g", client.OffsetCommit{Topic: "", Offset: 1}), quirev1.ErrorCode_INVALID_TOPIC_EXCEPTION},
		{cl.CommitOffsets(ctx, "g", client.OffsetCommit{Topic: "gt", Offset: -2}), quirev1.ErrorCode_INVALID_REQUEST},
		{cl.CommitOffsets(ctx, "g", client.OffsetCommit{Topic: "gt", Offset: 1, LeaderEpoch: -2}), quirev1.ErrorCode_INVALID_REQUEST},
		{cl.DeleteGroup(ctx, "g1"), quirev1.ErrorCode_GROUP_ID_NOT_FOUND},
	} {
		if client.ErrorCode(c.err) != c.code {
			t.Errorf("got %v, want %v", c.err, c.code)
		}
	}
}

// TestConsumerAtCommitted: a partition the group committed starts there,
// the others at the fallback; a consumer that commits what it read and
// starts again continues after it.
func TestConsumerAtCommitted(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	cl := newClient(t, b.Addr(), client.RecordPartitioner(client.ManualPartitioner()), client.FetchMaxWait(50*time.Millisecond))
	ctx := testCtx(t)
	createTopic(t, cl, "ac", 2)
	var recs []*client.Record
	for p := int32(0); p < 2; p++ {
		for i := 0; i < 10; i++ {
			recs = append(recs, &client.Record{Topic: "ac", Partition: p, Value: []byte(fmt.Sprint(p, "-", i))})
		}
	}
	if err := cl.ProduceSync(ctx, recs...); err != nil {
		t.Fatal(err)
	}
	if err := cl.CommitOffsets(ctx, "readers", client.OffsetCommit{Topic: "ac", Partition: 0, Offset: 6, LeaderEpoch: -1}); err != nil {
		t.Fatal(err)
	}
	got := consumeN(t, cl, "ac", []int32{0, 1}, client.AtCommitted("readers", client.AtStart()), 14)
	firsts := map[int32]int64{0: -1, 1: -1}
	var commits []client.OffsetCommit
	for _, r := range got {
		if firsts[r.Partition] < 0 {
			firsts[r.Partition] = r.Offset
		}
		commits = slices.DeleteFunc(commits, func(o client.OffsetCommit) bool { return o.Partition == r.Partition })
		commits = append(commits, client.OffsetCommit{Topic: "ac", Partition: r.Partition, Offset: r.Offset + 1, LeaderEpoch: r.LeaderEpoch})
	}
	if firsts[0] != 6 || firsts[1] != 0 {
		t.Fatalf("first offsets %v, want partition 0 from its commit (6), 1 from the start (0)", firsts)
	}
	if err := cl.CommitOffsets(ctx, "readers", commits...); err != nil {
		t.Fatal(err)
	}
	// Everything read and committed: the next records are the new ones.
	if err := cl.ProduceSync(ctx, &client.Record{Topic: "ac", Partition: 1, Value: []byte("new")}); err != nil {
		t.Fatal(err)
	}
	next := consumeN(t, cl, "ac", []int32{0, 1}, client.AtCommitted("readers", client.AtStart()), 1)
	if next[0].Partition != 1 || next[0].Offset != 10 || string(next[0].Value) != "new" {
		t.Fatalf("after committing everything read %+v", next[0])
	}
	if s := client.AtCommitted("readers", client.AtCommitted("x", client.AtEnd())).String(); s != "committed by readers, else end" {
		t.Fatalf("nested fallback: %s", s)
	}
}
