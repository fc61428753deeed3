package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/broker/brokertest"
	"github.com/quirelog/quire/client"
)

// TestCLIConsumeShare: consume --share prints records and accepts each
// printed, so the next run goes on from there; what a run held and did
// not print (-n) goes back to the group when it exits. group describe
// shows the share group's members, in-flight records, oldest lock and
// dead-lettered count. Flags that do not go with --share are refused.
func TestCLIConsumeShare(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, func(c *broker.Config) {
		c.GroupShareEnable = true
		c.ShareAutoOffsetReset = "earliest"
	})
	brokers := []string{"--brokers", b.Addr()}
	if _, _, err := runCLIStdin("a\nb\nc\n", append(brokers, "produce", "s", "-p", "0")...); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := runCLIStdin("", append(brokers, "consume", "s", "--share", "G", "-n", "2")...)
	if err != nil || out != "a\nb\n" || !strings.Contains(errOut, "share group G: member ") {
		t.Fatalf("first run: printed %q (stderr %q), error %v", out, errOut, err)
	}
	// c was held and not printed: released at exit, delivered again.
	out, _, err = runCLIStdin("", append(brokers, "consume", "s", "--share", "G", "-n", "1", "-f", `%v %o\n`)...)
	if err != nil || out != "c 2\n" {
		t.Fatalf("second run: printed %q, error %v; want c at offset 2", out, err)
	}

	// A member holding one record and having rejected another.
	ctx, cl := testClient(t, b.Addr())
	sc, err := cl.NewShareConsumer(ctx, "G", []string{"s"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := runCLIStdin("d\ne\n", append(brokers, "produce", "s", "-p", "0")...); err != nil {
		t.Fatal(err)
	}
	var got []*client.ShareRecord
	for len(got) < 2 {
		recs, err := sc.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, recs...)
	}
	got[0].Reject() // d, offset 3
	if err := sc.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	out, _, err = runCLIStdin("", append(brokers, "group", "describe", "G")...)
	if err != nil {
		t.Fatal(err)
	}
	member := sc.MemberID()
	for _, want := range []string{"share group G (served by broker ", "1 members", "key ordering off",
		"IN-FLIGHT", "4 (" + member + ", expires in "} {
		if !strings.Contains(out, want) {
			t.Errorf("describe printed %q, want it to say %q", out, want)
		}
	}
	out, _, err = runCLIStdin("", append(brokers, "--format", "json", "group", "describe", "G")...)
	if err != nil {
		t.Fatal(err)
	}
	var d client.ShareGroupDescription
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatalf("describe --format json printed %q: %v", out, err)
	}
	if len(d.Members) != 1 || d.Members[0].InFlight != 1 || len(d.Partitions) != 1 {
		t.Fatalf("described %+v, want one member holding one record, one partition", d)
	}
	if p := d.Partitions[0]; p.InFlight != 1 || p.OldestLock.Offset != 4 || p.OldestLock.DeliveryCount != 1 || p.DeadLettered != 1 || p.StartOffset != 4 {
		t.Errorf("partition described %+v, want offset 4 in flight, 1 dead-lettered, start 4", p)
	}
	out, _, err = runCLIStdin("", append(brokers, "group", "describe", "G", "--members")...)
	if err != nil || !strings.Contains(out, member) {
		t.Errorf("describe --members printed %q (%v), want member %s", out, err, member)
	}
	if err := sc.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// Per-key ordering is the group's, asked for by its first member.
	if _, _, err := runCLIStdin("", append(brokers, "consume", "s", "--share", "K", "--key-ordered", "-n", "1")...); err != nil {
		t.Fatal(err)
	}
	if out, _, err := runCLIStdin("", append(brokers, "group", "describe", "K")...); err != nil || !strings.Contains(out, "key ordering on") {
		t.Errorf("describe K printed %q (%v), want key ordering on", out, err)
	}

	for _, bad := range [][]string{
		{"consume", "s", "--share", "G", "-p", "0"},
		{"consume", "s", "--share", "G", "-o", "end"},
		{"consume", "s", "--share", "G", "--group", "H"},
		{"consume", "s", "--key-ordered"},
	} {
		if _, _, err := runCLIStdin("", append(brokers, bad...)...); err == nil || !strings.Contains(err.Error(), "--share") {
			t.Errorf("%v: %v, want a refusal naming --share", bad, err)
		}
	}
}
