package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/broker/brokertest"
	"github.com/quirelog/quire/client"
	"github.com/quirelog/quire/metadata"
)

// tableLines is a printed table without its header, each line's columns
// joined by one space.
func tableLines(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var rows []string
	for _, l := range lines[1:] {
		rows = append(rows, strings.Join(strings.Fields(l), " "))
	}
	return strings.Join(rows, "\n")
}

// TestCLIGroupShareSeekAndShareOffsets: group share-seek sets a share
// group's start offsets to an offset, a time (the high watermark past the
// last record), the end and the start, for every partition of --topic or
// those named, showing the previous ones; --dry-run sets nothing; group
// share-offsets shows them with their lag, as a table and as JSON. An
// unknown group, an unknown topic, a partition the topic lacks, bad
// targets and flags, and a group with a member are refused with a
// non-zero exit and a message saying why.
func TestCLIGroupShareSeekAndShareOffsets(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, func(c *broker.Config) {
		c.GroupShareEnable = true
		c.ShareAutoOffsetReset = "earliest"
	})
	brokertest.WaitMetadataVersion(t, b, metadata.MetadataVersionShareOffsets)
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
	brokers := []string{"--brokers", b.Addr()}
	run := func(args ...string) (string, error) {
		out, _, err := runCLIStdin("", append(brokers, args...)...)
		return out, err
	}
	wantTable := func(step, out string, err error, want ...string) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v (printed %q)", step, err, out)
		}
		if got := tableLines(out); got != strings.Join(want, "\n") {
			t.Fatalf("%s printed\n%s\nwant\n%s", step, got, strings.Join(want, "\n"))
		}
	}

	if out, err := run("group", "share-offsets", "G"); client.ErrorCode(err) != quirev1.ErrorCode_GROUP_ID_NOT_FOUND || !strings.Contains(err.Error(), "share group G") {
		t.Fatalf("share-offsets of a group never seen: %v (printed %q), want GROUP_ID_NOT_FOUND", err, out)
	}
	out, err := run("group", "share-seek", "G", "--to", "3", "--topic", "s", "--dry-run")
	wantTable("--dry-run", out, err, "G s 0 - 3", "G s 1 - 3")
	if _, err := run("group", "share-offsets", "G"); client.ErrorCode(err) != quirev1.ErrorCode_GROUP_ID_NOT_FOUND {
		t.Fatalf("share-offsets after a dry run: %v, want GROUP_ID_NOT_FOUND (nothing set)", err)
	}

	out, err = run("group", "share-seek", "G", "--to", "3", "--topic", "s", "--partition", "0")
	wantTable("--to 3 --partition 0", out, err, "G s 0 - 3")
	out, err = run("group", "share-offsets", "G")
	wantTable("share-offsets", out, err, "G s 0 3 7")
	if !strings.Contains(out, "START-OFFSET") || !strings.Contains(out, "LAG") {
		t.Fatalf("share-offsets header: %q", out)
	}

	at := fmt.Sprintf("@%d", base.Add(5*time.Second).UnixMilli())
	out, err = run("group", "share-seek", "G", "--to", at, "--topic", "s")
	wantTable("--to @5s", out, err, "G s 0 3 5", "G s 1 - 5")
	out, err = run("group", "share-seek", "G", "--to", "@"+base.Add(time.Hour).Format(time.RFC3339), "--topic", "s", "--partition", "1")
	wantTable("--to @past the last record", out, err, "G s 1 5 10")
	out, err = run("group", "share-seek", "G", "--to", "end", "--topic", "s", "--partition", "0")
	wantTable("--to end", out, err, "G s 0 5 10")
	out, err = run("group", "share-seek", "G", "--to", "start", "--topic", "s", "--partition", "1")
	wantTable("--to start", out, err, "G s 1 10 0")

	out, err = run("--format", "json", "group", "share-offsets", "G", "--topic", "s")
	if err != nil {
		t.Fatal(err)
	}
	var lines []struct {
		Topic       string `json:"topic"`
		Partition   int32  `json:"partition"`
		StartOffset int64  `json:"start_offset"`
		Lag         int64  `json:"lag"`
		Error       string `json:"error"`
	}
	if err := json.Unmarshal([]byte(out), &lines); err != nil {
		t.Fatalf("share-offsets --format json printed %q: %v", out, err)
	}
	if got := fmt.Sprint(lines); got != "[{s 0 10 0 } {s 1 0 10 }]" {
		t.Fatalf("share-offsets --format json: %s, want partition 0 at 10 with lag 0, 1 at 0 with lag 10", got)
	}

	// A topic refused in its result: the others shown, the refusal said,
	// a non-zero exit.
	out, err = run("group", "share-offsets", "G", "--topic", "s", "--topic", "nosuch")
	if err == nil || !strings.Contains(err.Error(), "nosuch") || !strings.Contains(err.Error(), "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Fatalf("share-offsets of an unknown topic: %v, want its refusal", err)
	}
	if got := tableLines(out); got != "G s 0 10 0\nG s 1 0 10" {
		t.Fatalf("share-offsets with an unknown topic printed\n%s", got)
	}
	if _, err := run("group", "share-seek", "G", "--to", "1", "--topic", "s", "--partition", "7"); err == nil || !strings.Contains(err.Error(), "partition out of range") {
		t.Fatalf("share-seek of a partition the topic lacks: %v", err)
	}
	if _, err := run("group", "share-seek", "G", "--to", "1", "--topic", "nosuch"); client.ErrorCode(err) != quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION {
		t.Fatalf("share-seek of an unknown topic: %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
	}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"--to", "shift:1", "--topic", "s"}, "no committed offset to shift"},
		{[]string{"--to", "-1", "--topic", "s"}, "a negative offset"},
		{[]string{"--to", "@yesterday", "--topic", "s"}, "neither RFC 3339 nor milliseconds"},
		{[]string{"--to", "bogus", "--topic", "s"}, "unknown target"},
		{[]string{"--to", "start"}, "--topic is required"},
		{[]string{"--topic", "s"}, `"to" not set`},
		{[]string{"--to", "start", "--topic", "s", "--topic", "t", "--partition", "0"}, "--partition goes with a single --topic"},
	} {
		if _, err := run(append([]string{"group", "share-seek", "G"}, bad.args...)...); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("share-seek %v: %v, want a refusal saying %q", bad.args, err, bad.want)
		}
	}

	// A member: the start offsets stay.
	sc, err := cl.NewShareConsumer(ctx, "G", []string{"s"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sc.Close(ctx) }()
	if _, err := run("group", "share-seek", "G", "--to", "start", "--topic", "s"); client.ErrorCode(err) != quirev1.ErrorCode_NON_EMPTY_GROUP {
		t.Fatalf("share-seek of a group with a member: %v, want NON_EMPTY_GROUP", err)
	}
	out, err = run("group", "share-offsets", "G", "--topic", "s")
	wantTable("share-offsets after a refused seek", out, err, "G s 0 10 0", "G s 1 0 10")
}
