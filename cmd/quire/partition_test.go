package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/quirelog/quire/client"
	"github.com/quirelog/quire/internal/poll"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/testcluster"
)

// TestCLIPartitionReassign: --plan on a cluster that gained a broker
// writes a plan that moves replicas onto it; a bad file is refused with
// nothing started; --execute --wait follows the good one to the end;
// --status shows nothing left; --cancel of a finished plan fails.
func TestCLIPartitionReassign(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 4, testcluster.Voters(3))
	addr := c.Addr(1)
	ctx, cl := testClient(t, addr)
	c.WaitImage(ctx, func(img *metadata.Image) bool { return img.MetadataVersion() >= metadata.MetadataVersionReassignment })
	if err := cl.CordonBroker(ctx, 4, true); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: "cli-moves", Partitions: 4, ReplicationFactor: 3}); err != nil {
		t.Fatal(err)
	}
	out, _, err := runCLIStdin("", "--brokers", addr, "broker", "uncordon", "4")
	if err != nil || !strings.Contains(out, "broker 4 uncordoned") {
		t.Fatalf("uncordon: %v %s", err, out)
	}
	// Whichever node the plan asks sees it uncordoned.
	c.WaitImage(ctx, func(img *metadata.Image) bool { b, _ := img.Broker(4); return !b.Cordoned })
	dir := t.TempDir()
	planFile := filepath.Join(dir, "plan.json")
	out, _, err = runCLIStdin("", "--brokers", addr, "partition", "reassign", "--plan", "--output", planFile)
	if err != nil || !strings.Contains(out, "PROPOSED") || !strings.Contains(out, "plan written to") {
		t.Fatalf("plan: %v\n%s", err, out)
	}
	var plan reassignmentPlan
	data, err := os.ReadFile(planFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &plan); err != nil {
		t.Fatal(err)
	}
	onNew := 0
	for _, p := range plan.Partitions {
		if slices.Contains(p.Replicas, 4) {
			onNew++
		}
	}
	if onNew != 3 {
		t.Fatalf("the plan puts %d replicas on the new broker, want 3: %s", onNew, data)
	}

	bad := reassignmentPlan{Version: 1, Partitions: append(slices.Clone(plan.Partitions), plannedReplica{Topic: "nope", Partition: 0, Replicas: []int32{1, 2, 3}})}
	badFile := filepath.Join(dir, "bad.json")
	data, _ = json.Marshal(bad)
	if err := os.WriteFile(badFile, data, 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err = runCLIStdin("", "--brokers", addr, "partition", "reassign", "--execute", badFile)
	if err == nil || !strings.Contains(err.Error(), "none started") || !strings.Contains(err.Error(), "nope-0") {
		t.Fatalf("a plan naming an unknown partition: %v", err)
	}
	out, _, err = runCLIStdin("", "--brokers", addr, "partition", "reassign", "--status")
	if err != nil || !strings.Contains(out, "no reassignment in progress") {
		t.Fatalf("status after a refused plan: %v %s", err, out)
	}

	out, _, err = runCLIStdin("", "--brokers", addr, "partition", "reassign", "--execute", planFile, "--wait", "--poll-interval", "20ms", "--throttle", "0")
	if err != nil || !strings.Contains(out, "every move completed") {
		t.Fatalf("execute --wait: %v\n%s", err, out)
	}
	out, _, err = runCLIStdin("", "--brokers", addr, "partition", "reassign", "--status")
	if err != nil || !strings.Contains(out, "no reassignment in progress") {
		t.Fatalf("status: %v %s", err, out)
	}
	_, _, err = runCLIStdin("", "--brokers", addr, "partition", "reassign", "--cancel", planFile)
	if err == nil || !strings.Contains(err.Error(), "nothing to cancel") || !strings.Contains(err.Error(), "cli-moves-"+fmt.Sprint(plan.Partitions[0].Partition)) || exitCode(err) == 0 {
		t.Fatalf("cancel of a finished plan: %v (exit %d), want it to name the partitions and exit non-zero", err, exitCode(err))
	}
	if _, _, err = runCLIStdin("", "--brokers", addr, "partition", "reassign", "--plan", "--status"); err == nil {
		t.Fatal("two actions at once accepted")
	}
}

// TestCLIPartitionReassignCancelMoving: while a move is pending (records
// to copy, a byte a second), topic describe's table shows its ADDING and
// REMOVING replicas; --cancel of a file naming it and a partition with no
// move cancels the one and names the other; a --cancel of nothing pending
// names the partitions and exits non-zero.
func TestCLIPartitionReassignCancelMoving(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 3, testcluster.Voters(3))
	addr := c.Addr(1)
	ctx, cl := testClient(t, addr)
	c.WaitImage(ctx, func(img *metadata.Image) bool { return img.MetadataVersion() >= metadata.MetadataVersionReassignment })
	if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: "cli-slow", Partitions: 2, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	out, _, err := runCLIStdin("", "--brokers", addr, "topic", "describe", "cli-slow")
	if err != nil || strings.Contains(out, "ADDING") {
		t.Fatalf("describe with no move: %v\n%s", err, out)
	}
	pcl, err := client.New(ctx, client.SeedBrokers(addr), client.RecordPartitioner(client.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer pcl.Close()
	// One batch per record: a throttled replica's first fetch takes one
	// whole batch whatever the throttle, so with a single batch it would
	// hold everything at once and have no bytes left.
	for i := range 30 {
		r := &client.Record{Topic: "cli-slow", Partition: 0, Value: []byte(strings.Repeat(fmt.Sprint(i%10), 1000))}
		if err := pcl.ProduceSync(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	p0, _ := c.Image(1).Partition("cli-slow", 0)
	from := p0.Replicas[0]
	to := from%3 + 1
	if err := cl.SetReassignmentThrottle(ctx, 1, false, to); err != nil {
		t.Fatal(err)
	}
	plan := reassignmentPlan{Version: 1, Partitions: []plannedReplica{
		{Topic: "cli-slow", Partition: 0, Replicas: []int32{to}}}}
	planFile := filepath.Join(t.TempDir(), "plan.json")
	data, _ := json.Marshal(plan)
	if err := os.WriteFile(planFile, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, _, err := runCLIStdin("", "--brokers", addr, "partition", "reassign", "--execute", planFile); err != nil || !strings.Contains(out, "started 1") {
		t.Fatalf("execute: %v\n%s", err, out)
	}
	// Whichever node is asked has the move in its image.
	c.WaitImage(ctx, func(img *metadata.Image) bool { p, _ := img.Partition("cli-slow", 0); return p.Reassigning() })
	out, _, err = runCLIStdin("", "--brokers", addr, "topic", "describe", "cli-slow")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out, "\n")
	header := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "PARTITION ") })
	if !strings.Contains(out, "REPLICAS    1\n") || header < 0 || len(lines) < header+3 || !strings.Contains(lines[header], "ADDING") || !strings.Contains(lines[header], "REMOVING") {
		t.Fatalf("describe of a moving partition has no ADDING and REMOVING columns:\n%s", out)
	}
	row0, row1 := strings.Fields(lines[header+1]), strings.Fields(lines[header+2])
	if row0[0] != "0" || row0[len(row0)-2] != fmt.Sprintf("[%d]", to) || row0[len(row0)-1] != fmt.Sprintf("[%d]", from) ||
		row1[0] != "1" || row1[len(row1)-2] != "-" || row1[len(row1)-1] != "-" {
		t.Fatalf("want partition 0 adding [%d] removing [%d], partition 1 neither:\n%s", to, from, out)
	}
	// --status shows the bytes the new replica has still to fetch, once
	// its broker has created it.
	poll.Until(t, "the bytes left in --status", func() error {
		out, _, err := runCLIStdin("", "--brokers", addr, "partition", "reassign", "--status")
		if err != nil {
			return err
		}
		if !strings.Contains(out, "BYTES LEFT") {
			return fmt.Errorf("no BYTES LEFT column:\n%s", out)
		}
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) > 0 && f[0] == "cli-slow" {
				if n, err := strconv.ParseInt(f[len(f)-1], 10, 64); err != nil || n <= 0 {
					return fmt.Errorf("bytes left %q:\n%s", f[len(f)-1], out)
				}
				return nil
			}
		}
		return fmt.Errorf("no move listed:\n%s", out)
	})

	plan.Partitions = append(plan.Partitions, plannedReplica{Topic: "cli-slow", Partition: 1, Replicas: []int32{to}})
	data, _ = json.Marshal(plan)
	if err := os.WriteFile(planFile, data, 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, err = runCLIStdin("", "--brokers", addr, "partition", "reassign", "--cancel", planFile)
	if err != nil || !strings.Contains(out, "cancelled 1 partition reassignments") || !strings.Contains(out, "not pending, left as they are: cli-slow-1") {
		t.Fatalf("cancel of a pending move and an idle partition: %v\n%s", err, out)
	}
	c.WaitImage(ctx, func(img *metadata.Image) bool {
		p, _ := img.Partition("cli-slow", 0)
		return !p.Reassigning() && slices.Equal(p.Replicas, []int32{from})
	})
	_, _, err = runCLIStdin("", "--brokers", addr, "partition", "reassign", "--cancel", planFile)
	if err == nil || !strings.Contains(err.Error(), "cli-slow-0, cli-slow-1") || !strings.Contains(err.Error(), "nothing to cancel") || exitCode(err) == 0 {
		t.Fatalf("cancel with nothing pending: %v (exit %d)", err, exitCode(err))
	}
}

// TestCLIBrokerDecommission: the broker is cordoned, every replica moves
// off it, and the command ends once it hosts none.
func TestCLIBrokerDecommission(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 4, testcluster.Voters(3))
	addr := c.Addr(1)
	ctx, cl := testClient(t, addr)
	c.WaitImage(ctx, func(img *metadata.Image) bool { return img.MetadataVersion() >= metadata.MetadataVersionReassignment })
	if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: "cli-decom", Partitions: 4, ReplicationFactor: 3}); err != nil {
		t.Fatal(err)
	}
	out, _, err := runCLIStdin("", "--brokers", addr, "broker", "decommission", "4", "--poll-interval", "20ms")
	if err != nil || !strings.Contains(out, "broker 4 hosts no replica") {
		t.Fatalf("decommission: %v\n%s", err, out)
	}
	c.WaitImage(ctx, func(img *metadata.Image) bool {
		b, _ := img.Broker(4)
		return b.Cordoned && img.HostedReplicas()[4] == 0
	})
	poll.Until(t, "broker 4's logs deleted", func() error {
		left, _ := filepath.Glob(filepath.Join(c.Dir(4), "cli-decom-*"))
		if len(left) > 0 {
			return os.ErrExist
		}
		return nil
	})
	// RF 3 on the three brokers left: a second decommission has nowhere
	// to go, and says so without moving anything.
	_, _, err = runCLIStdin("", "--brokers", addr, "broker", "decommission", "3")
	if err == nil || !strings.Contains(err.Error(), "nowhere else to go") {
		t.Fatalf("a decommission with nowhere to go: %v", err)
	}
	out, _, err = runCLIStdin("", "--brokers", addr, "broker", "throttle", "1048576", "--broker", "1")
	if err != nil || !strings.Contains(out, "1048576") {
		t.Fatalf("throttle: %v %s", err, out)
	}
	if _, _, err := runCLIStdin("", "--brokers", addr, "broker", "throttle", "-5"); err == nil {
		t.Fatal("a negative throttle accepted")
	}
	if _, _, err := runCLIStdin("", "--brokers", addr, "broker", "cordon", "9"); err == nil || !strings.Contains(err.Error(), "9") {
		t.Fatalf("cordon of an unknown broker: %v", err)
	}
}
