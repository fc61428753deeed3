package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/quirelog/quire/broker/brokertest"
	"github.com/quirelog/quire/client"
	"github.com/quirelog/quire/metadata"
)

// TestCLIGroupDescribeLag: group describe shows the coordinator's
// committed offset, high watermark and lag in records and seconds, in the
// table and in --format json; an unknown group is an error.
func TestCLIGroupDescribeLag(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	ctx, cl := testClient(t, b.Addr())
	if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: "gd", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	brokertest.WaitMetadataVersion(t, b, metadata.MetadataVersionProducerIDs)
	old := time.Now().Add(-time.Minute)
	for i := 0; i < 3; i++ {
		r := client.StringRecord("gd", fmt.Sprint("v", i))
		r.Timestamp = old
		if err := cl.ProduceSync(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.CommitOffsets(ctx, "billing", client.OffsetCommit{Topic: "gd", Offset: 1, LeaderEpoch: -1}); err != nil {
		t.Fatal(err)
	}

	var out bytes.Buffer
	if err := runCLI(&out, "--brokers", b.Addr(), "group", "describe", "billing", "--format", "json"); err != nil {
		t.Fatal(err)
	}
	var d struct {
		State      string `json:"state"`
		Partitions []struct {
			Topic           string  `json:"topic"`
			CommittedOffset int64   `json:"committed_offset"`
			HighWatermark   int64   `json:"high_watermark"`
			Lag             int64   `json:"lag"`
			LagSeconds      float64 `json:"lag_seconds"`
			CommitTimeMs    int64   `json:"commit_time_ms"`
		} `json:"partitions"`
		Throughput struct {
			Lag           int64 `json:"lag"`
			Partitions    int   `json:"partitions"`
			MembersNeeded int   `json:"members_needed"`
		} `json:"throughput"`
	}
	if err := json.Unmarshal(out.Bytes(), &d); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if d.State != "empty" || len(d.Partitions) != 1 {
		t.Fatalf("describe: %s", out.String())
	}
	// No members: how many would keep up is not known.
	if tp := d.Throughput; tp.Lag != 2 || tp.Partitions != 1 || tp.MembersNeeded != -1 {
		t.Fatalf("want throughput lag 2 over 1 partition, members needed unknown: %s", out.String())
	}
	p := d.Partitions[0]
	if p.Topic != "gd" || p.CommittedOffset != 1 || p.HighWatermark != 3 || p.Lag != 2 || p.LagSeconds < 60 || p.CommitTimeMs <= 0 {
		t.Fatalf("want committed 1, high watermark 3, lag 2 and at least 60 s: %s", out.String())
	}

	out.Reset()
	if err := runCLI(&out, "--brokers", b.Addr(), "group", "describe", "billing"); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	last := strings.Fields(lines[len(lines)-1])
	if !strings.Contains(out.String(), "STABLE-LAG") || !strings.Contains(out.String(), "lag 2 records;") || len(last) != 9 || last[3] != "1" || last[4] != "3" || last[5] != "2" || last[6] != "2" || last[8] != "-" {
		t.Fatalf("table: %q", out.String())
	}

	if err := runCLI(&out, "--brokers", b.Addr(), "group", "describe", "nobody"); err == nil || !strings.Contains(err.Error(), "GROUP_ID_NOT_FOUND") {
		t.Fatalf("describe of an unknown group: %v", err)
	}
}

// TestCLIConsumeStaticMember: `consume --group G --instance-id ID` is a
// static member: on exit it keeps its place (group describe still shows
// it, with its instance id), and the next run with the same ID takes the
// partition back with no rebalance (the group epoch stays) and continues
// from the group's commit. --instance-id without --group is refused.
func TestCLIConsumeStaticMember(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	ctx, cl := testClient(t, b.Addr())
	if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: "sm", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	brokertest.WaitMetadataVersion(t, b, metadata.MetadataVersionStaticMembers)
	for i := range 5 {
		if err := cl.ProduceSync(ctx, client.StringRecord("sm", fmt.Sprint("v", i))); err != nil {
			t.Fatal(err)
		}
	}
	type member struct {
		MemberID    string `json:"member_id"`
		InstanceID  string `json:"instance_id"`
		MemberEpoch int32  `json:"member_epoch"`
	}
	describe := func() (epoch int32, members []member) {
		t.Helper()
		var out bytes.Buffer
		if err := runCLI(&out, "--brokers", b.Addr(), "group", "describe", "g", "--format", "json"); err != nil {
			t.Fatal(err)
		}
		var d struct {
			GroupEpoch int32    `json:"group_epoch"`
			Members    []member `json:"members"`
		}
		if err := json.Unmarshal(out.Bytes(), &d); err != nil {
			t.Fatalf("%v: %s", err, out.String())
		}
		return d.GroupEpoch, d.Members
	}
	consume := func(n int) string {
		t.Helper()
		var out bytes.Buffer
		if err := runCLI(&out, "--brokers", b.Addr(), "consume", "sm", "--group", "g", "--instance-id", "pod-1", "-n", fmt.Sprint(n)); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	if got := consume(3); got != "v0\nv1\nv2\n" {
		t.Fatalf("first run printed %q", got)
	}
	epoch, first := describe()
	if len(first) != 1 || first[0].InstanceID != "pod-1" {
		t.Fatalf("after the first run exited: members %+v, want pod-1 still in its place", first)
	}
	if got := consume(2); got != "v3\nv4\n" {
		t.Fatalf("second run printed %q", got)
	}
	epoch2, second := describe()
	if epoch2 != epoch || len(second) != 1 || second[0].InstanceID != "pod-1" || second[0].MemberID == first[0].MemberID {
		t.Fatalf("after the second run: epoch %d, members %+v; after the first: epoch %d, members %+v", epoch2, second, epoch, first)
	}

	var out bytes.Buffer
	if err := runCLI(&out, "--brokers", b.Addr(), "group", "describe", "g", "--members"); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if row := strings.Fields(lines[len(lines)-1]); len(row) != 7 || row[1] != second[0].MemberID || row[2] != "pod-1" || row[3] != "127.0.0.1" || row[5] != "1" || row[6] != "sm-0" {
		t.Fatalf("describe --members: %q", out.String())
	}
	out.Reset()
	if err := runCLI(&out, "--brokers", b.Addr(), "group", "list", "--state"); err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(out.String()); strings.Join(got, " ") != "GROUP STATE g stable" {
		t.Fatalf("group list --state: %q", out.String())
	}
	out.Reset()
	if err := runCLI(&out, "--brokers", b.Addr(), "consume", "sm", "--instance-id", "pod-1", "-n", "1"); err == nil || !strings.Contains(err.Error(), "--instance-id") {
		t.Fatalf("--instance-id without --group: %v", err)
	}
}
