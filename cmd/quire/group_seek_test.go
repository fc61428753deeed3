package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker/brokertest"
	"github.com/quirelog/quire/client"
)

// TestCLIGroupSeek: group seek moves an empty group's committed offsets to
// the start, the end, an offset, a time or by a shift, kept within the
// log; --dry-run commits nothing; bad targets, unknown topics, shifting a
// partition never committed and a group with a member are refused with
// nothing changed.
func TestCLIGroupSeek(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	brokertest.WaitMetadataVersion(t, b, 2)
	ctx, cl := testClient(t, b.Addr())
	pcl, err := client.New(ctx, client.SeedBrokers(b.Addr()), client.RecordPartitioner(client.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer pcl.Close()
	if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: "s", Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	base := time.UnixMilli(1_700_000_000_000)
	for p := range int32(2) {
		for i := range 10 {
			r := client.StringRecord("s", "v")
			r.Partition, r.Timestamp = p, base.Add(time.Duration(i)*time.Second)
			if err := pcl.ProduceSync(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := cl.CommitOffsets(ctx, "G", client.OffsetCommit{Topic: "s", Partition: 0, Offset: 3, LeaderEpoch: -1}); err != nil {
		t.Fatal(err)
	}
	committed := func() map[int32]int64 {
		t.Helper()
		got, err := cl.FetchOffsets(ctx, "G")
		if err != nil {
			t.Fatal(err)
		}
		out := map[int32]int64{}
		for _, o := range got {
			out[o.Partition] = o.Offset
		}
		return out
	}
	brokers := []string{"--brokers", b.Addr()}
	seek := func(args ...string) (string, error) {
		out, _, err := runCLIStdin("", append(append(brokers, "group", "seek", "G"), args...)...)
		return out, err
	}
	wantCommitted := func(step string, want map[int32]int64) {
		t.Helper()
		got := committed()
		if len(got) != len(want) {
			t.Fatalf("%s: committed %v, want %v", step, got, want)
		}
		for p, o := range want {
			if got[p] != o {
				t.Fatalf("%s: committed %v, want %v", step, got, want)
			}
		}
	}

	// Without --topic: the partitions the group committed (only 0).
	out, err := seek("--to", "shift:4")
	if err != nil || !strings.Contains(out, "PREVIOUS-OFFSET") {
		t.Fatalf("shift:4: %q, %v", out, err)
	}
	wantCommitted("shift:4", map[int32]int64{0: 7})
	if _, err := seek("--to", "shift:100"); err != nil {
		t.Fatal(err)
	}
	wantCommitted("shift:100 (kept at the high watermark)", map[int32]int64{0: 10})
	if _, err := seek("--to", "shift:-100"); err != nil {
		t.Fatal(err)
	}
	wantCommitted("shift:-100 (kept at the log start)", map[int32]int64{0: 0})

	// --dry-run commits nothing but says what it would.
	out, _, err = runCLIStdin("", append(brokers, "--format", "json", "group", "seek", "G", "--to", "end", "--topic", "s", "--dry-run")...)
	var plan []client.ResetOffset
	if err != nil || json.Unmarshal([]byte(out), &plan) != nil || len(plan) != 2 ||
		plan[0] != (client.ResetOffset{Topic: "s", Partition: 0, Previous: 0, Offset: 10}) ||
		plan[1] != (client.ResetOffset{Topic: "s", Partition: 1, Previous: -1, Offset: 10}) {
		t.Fatalf("dry run: %q, %v", out, err)
	}
	wantCommitted("dry run", map[int32]int64{0: 0})

	for _, tc := range []struct {
		to   string
		want int64
	}{
		{"end", 10}, {"start", 0}, {"6", 6}, {"1000", 10},
		{"@" + base.Add(4500*time.Millisecond).Format(time.RFC3339Nano), 5},
		{"@" + strconv.FormatInt(base.Add(2*time.Second).UnixMilli(), 10), 2},
		{"@" + base.Add(time.Hour).Format(time.RFC3339), 10},
	} {
		if _, err := seek("--to", tc.to, "--topic", "s"); err != nil {
			t.Fatalf("--to %s: %v", tc.to, err)
		}
		wantCommitted("--to "+tc.to, map[int32]int64{0: tc.want, 1: tc.want})
	}

	// Refusals change nothing.
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--to", "sideways"}, "unknown target"},
		{[]string{"--to", "-3"}, "negative offset"},
		{[]string{"--to", "shift:x"}, "not a whole number"},
		{[]string{"--to", "@yesterday"}, "neither RFC 3339"},
		{[]string{"--to", "end", "--topic", "nope"}, "does not exist"},
	} {
		if _, err := seek(tc.args...); err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Fatalf("seek %v: %v, want an error saying %q", tc.args, err, tc.msg)
		}
	}
	if _, err := cl.ResetOffsets(ctx, "fresh", client.ResetShift(1), false, "s"); client.ErrorCode(err) != quirev1.ErrorCode_INVALID_REQUEST {
		t.Fatalf("shift of partitions never committed: %v", err)
	}
	if _, err := cl.ResetOffsets(ctx, "fresh", client.ResetToEnd(), false); client.ErrorCode(err) != quirev1.ErrorCode_INVALID_REQUEST {
		t.Fatalf("no topics for a group with no offsets: %v", err)
	}

	// A group with a member cannot be moved.
	gc, err := cl.NewGroupConsumer(client.GroupConfig{Group: "G", Topics: []string{"s"}})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); gc.Epoch() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the member did not join")
		}
		time.Sleep(10 * time.Millisecond)
	}
	_, err = seek("--to", "start")
	if client.ErrorCode(err) != quirev1.ErrorCode_NON_EMPTY_GROUP || !strings.Contains(err.Error(), "1 members") {
		t.Fatalf("seek of a group with a member: %v", err)
	}
	wantCommitted("refused seek", map[int32]int64{0: 10, 1: 10})
	if err := gc.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := seek("--to", "start"); err != nil {
		t.Fatalf("seek after the member left: %v", err)
	}
	wantCommitted("seek after the member left", map[int32]int64{0: 0, 1: 0})
}
