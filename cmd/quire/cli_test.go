package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/broker/brokertest"
	"github.com/quirelog/quire/client"
	"github.com/quirelog/quire/internal/poll"
	"github.com/quirelog/quire/testcluster"
)

// syncBuffer is a bytes.Buffer safe for a command writing while the test
// reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// runCLIStdin runs the CLI with stdin, returning stdout, stderr and the
// error main would print.
func runCLIStdin(stdin string, args ...string) (string, string, error) {
	var out, errOut syncBuffer
	err := runCLIWith(strings.NewReader(stdin), &out, &errOut, args...)
	return out.String(), errOut.String(), err
}

func runCLIWith(stdin *strings.Reader, out, errOut *syncBuffer, args ...string) error {
	root := newRootCmd()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(out)
	root.SetErr(errOut)
	return root.Execute()
}

func testClient(t *testing.T, addr string) (context.Context, *client.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	cl, err := client.New(ctx, client.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return ctx, cl
}

// TestCLITopicCreateBadCounts: -p and -r are sent as typed, and the
// broker's refusal is shown once (in the table) with a non-zero exit.
func TestCLITopicCreateBadCounts(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	for _, tc := range []struct {
		args []string
		want string // in stdout, or else in the error
	}{
		{[]string{"-p", "-3"}, "partitions must be positive, got -3"},
		{[]string{"-r", "-1"}, "replication factor must be between 1 and 32767, got -1"},
		{[]string{"-p", "0"}, "-p 0: partitions must be positive"},
		{[]string{"-r", "0"}, "-r 0: replication factor must be positive"},
	} {
		args := append([]string{"--brokers", b.Addr(), "topic", "create", "bad"}, tc.args...)
		out, _, err := runCLIStdin("", args...)
		if err == nil {
			t.Fatalf("%v: succeeded: %s", tc.args, out)
		}
		if !strings.Contains(out, tc.want) && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: printed %q, error %v; want %q", tc.args, out, err, tc.want)
		}
		if strings.Contains(out, tc.want) && strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: the error is printed twice: %q and %v", tc.args, out, err)
		}
	}
	ctx, cl := testClient(t, b.Addr())
	if ts, err := cl.ListTopics(ctx); err != nil || len(ts) != 0 {
		t.Fatalf("topics after bad creates: %v %v", ts, err)
	}
}

// TestCLIConsumeReset: an explicit offset past the end fails with the
// valid range unless --reset says where to go instead.
func TestCLIConsumeReset(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	brokers := []string{"--brokers", b.Addr()}
	if _, _, err := runCLIStdin("a\nb\nc\n", append(brokers, "produce", "r", "-p", "0")...); err != nil {
		t.Fatal(err)
	}
	out, _, err := runCLIStdin("", append(brokers, "consume", "r", "-p", "0", "-o", "1000000", "-n", "1")...)
	if err == nil || out != "" || !strings.Contains(err.Error(), "offset 1000000, valid offsets are 0 to 2 (log end 3)") ||
		!strings.Contains(err.Error(), "--reset") {
		t.Fatalf("consume past the end: printed %q, error %v", out, err)
	}
	out, _, err = runCLIStdin("", append(brokers, "consume", "r", "-p", "0", "-o", "1000000", "-n", "1", "--reset", "earliest")...)
	if err != nil || out != "a\n" {
		t.Fatalf("--reset earliest: printed %q, error %v", out, err)
	}
	if _, _, err := runCLIStdin("", append(brokers, "consume", "r", "--reset", "sometimes")...); err == nil ||
		!strings.Contains(err.Error(), "earliest, latest or none") {
		t.Fatalf("bad --reset: %v", err)
	}
}

// TestCLIUnknownTopicAutoCreateOff: produce and consume of a missing topic
// on a broker that creates none fail at once with the broker's answer,
// and produce prints it once.
func TestCLIUnknownTopicAutoCreateOff(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, func(c *broker.Config) { c.AutoCreateTopicsEnable = false })
	done := make(chan struct{})
	var out, errOut string
	var err error
	go func() {
		defer close(done)
		out, errOut, err = runCLIStdin("a\nb\n", "--brokers", b.Addr(), "produce", "missing")
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("produce to a missing topic still waiting after 30s")
	}
	const want = `topic "missing" does not exist, and auto.create.topics.enable is false`
	if err == nil || out != "" {
		t.Fatalf("produce: printed %q, error %v", out, err)
	}
	if n := strings.Count(errOut+err.Error(), want); n != 1 {
		t.Fatalf("produce printed the error %d times: stderr %q, error %v", n, errOut, err)
	}
	if _, _, err := runCLIStdin("", "--brokers", b.Addr(), "consume", "missing", "-n", "1"); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("consume: %v", err)
	}
}

// TestCLIAutoCreateConsistent: where the broker creates topics on first
// use, produce and consume both create a missing topic and say so.
func TestCLIAutoCreateConsistent(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	_, errOut, err := runCLIStdin("x\n", "--brokers", b.Addr(), "produce", "typo1")
	if err != nil || !strings.Contains(errOut, "created topic typo1") {
		t.Fatalf("produce: stderr %q, error %v", errOut, err)
	}

	var out, cerr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- runCLIWith(strings.NewReader(""), &out, &cerr, "--brokers", b.Addr(), "consume", "typo2", "-n", "1")
	}()
	ctx, cl := testClient(t, b.Addr())
	for !strings.Contains(cerr.String(), "created topic typo2") {
		select {
		case err := <-done:
			t.Fatalf("consume ended: %v, stderr %q", err, cerr.String())
		case <-ctx.Done():
			t.Fatalf("consume did not create typo2: stderr %q", cerr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err := cl.ProduceSync(ctx, client.StringRecord("typo2", "late")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil || out.String() != "late\n" {
			t.Fatalf("consume: printed %q, error %v", out.String(), err)
		}
	case <-ctx.Done():
		t.Fatal("consume did not print the record produced")
	}
}

// TestCLIUnderReplicatedRightAfterKill: with a leader just killed, before
// the controller fences it, describe --under-replicated lists its
// partitions as LEADER-UNREACHABLE and says what happens next.
func TestCLIUnderReplicatedRightAfterKill(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 3, testcluster.Config(func(_ int32, cfg *broker.Config) {
		cfg.BrokerSessionTimeoutMs = 120000 // no fencing within the test
	}))
	ctx, cl := testClient(t, c.Addr(1))
	if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: "ur", Partitions: 3, ReplicationFactor: 3}); err != nil {
		t.Fatal(err)
	}
	var ds []client.TopicDescription
	for {
		var err error
		ds, err = cl.DescribeTopics(ctx, "ur")
		if err == nil && len(ds) == 1 && ds[0].Partitions[0].Leader > 0 && ds[0].Partitions[0].HighWatermark >= 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no leader for ur-0: %v %v", ds, err)
		}
		time.Sleep(20 * time.Millisecond) // polling the metadata, with the test's deadline
	}
	// Every node has applied the topic (the CLI asks the survivor).
	c.WaitIdenticalImages(ctx)
	dead := ds[0].Partitions[0].Leader
	alive := int32(1)
	if dead == 1 {
		alive = 2
	}
	c.Kill(dead)
	// Every partition has the dead node as its leader or as an in-sync
	// follower (RF 3 on 3 nodes), so every one is at risk. A live leader
	// that did not answer within the describe's bound (a loaded machine)
	// shows as unreachable too: asked again until the view is the one
	// the dead node alone makes.
	poll.Until(t, "describe --under-replicated to tell the dead node's partitions apart", func() error {
		out, errOut, err := runCLIStdin("", "--brokers", c.Addr(alive), "topic", "describe", "--under-replicated", "ur")
		if err != nil {
			return err
		}
		status := map[string]string{}
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) == 6 && f[0] == "ur" {
				status[f[1]] = f[5]
				want := "REPLICA-UNREACHABLE"
				if f[2] == fmt.Sprint(dead) {
					want = "LEADER-UNREACHABLE"
				}
				if f[5] != want {
					return fmt.Errorf("partition %s led by %s with node %d killed: %s, want %s", f[1], f[2], dead, f[5], want)
				}
			}
		}
		if len(status) != 3 || status["0"] != "LEADER-UNREACHABLE" || !strings.Contains(errOut, "broker.session.timeout.ms") {
			return fmt.Errorf("describe --under-replicated with leader %d killed:\n%s\nstderr: %s", dead, out, errOut)
		}
		return nil
	})
	out, _, err := runCLIStdin("", "--brokers", c.Addr(alive), "topic", "describe", "ur")
	if err != nil || !strings.Contains(out, fmt.Sprintf("%d (unreachable)", dead)) {
		t.Fatalf("describe with leader %d killed: %v\n%s", dead, err, out)
	}
}

// TestCLIProduceFollowsTopicMaxMessageBytes: a line bigger than 1 MiB
// goes to a topic whose max.message.bytes takes it; --batch-max-bytes
// overrides the topic's limit.
func TestCLIProduceFollowsTopicMaxMessageBytes(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	brokers := []string{"--brokers", b.Addr()}
	if _, _, err := runCLIStdin("", append(brokers, "topic", "create", "wide", "-p", "1", "-c", "max.message.bytes=4194304")...); err != nil {
		t.Fatal(err)
	}
	line := strings.Repeat("x", 2<<20) + "\n"
	if _, errOut, err := runCLIStdin(line, append(brokers, "produce", "wide")...); err != nil {
		t.Fatalf("2 MiB line to a topic of max.message.bytes 4 MiB: %v %s", err, errOut)
	}
	_, errOut, err := runCLIStdin(line, append(brokers, "produce", "wide", "--batch-max-bytes", "1048576")...)
	if err == nil || !strings.Contains(errOut, "batch max 1048576 (BatchMaxBytes)") {
		t.Fatalf("2 MiB line with --batch-max-bytes 1 MiB: %v %s", err, errOut)
	}
}

// TestCLIProduceLineTooLong: a line over --max-line-bytes stops produce
// with an error naming the line and the flag; the lines before it are
// produced. A line of exactly --max-line-bytes is taken.
func TestCLIProduceLineTooLong(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	brokers := []string{"--brokers", b.Addr()}
	if _, _, err := runCLIStdin(strings.Repeat("y", 1024)+"\n", append(brokers, "produce", "exact", "--max-line-bytes", "1024")...); err != nil {
		t.Fatalf("a 1024-byte line with --max-line-bytes 1024: %v", err)
	}
	in := "a\nb\n" + strings.Repeat("x", 1025) + "\nc\n"
	_, _, err := runCLIStdin(in, append(brokers, "produce", "long", "-p", "0", "--max-line-bytes", "1024")...)
	if err == nil || !strings.Contains(err.Error(), "line 3 is longer than --max-line-bytes (1024 bytes)") {
		t.Fatalf("a 2000-byte line with --max-line-bytes 1024: %v", err)
	}
	out, _, err := runCLIStdin("", append(brokers, "consume", "long", "-p", "0", "-o", "start", "-n", "2")...)
	if err != nil || out != "a\nb\n" {
		t.Fatalf("the lines before the long one: printed %q, error %v", out, err)
	}
	ctx, cl := testClient(t, b.Addr())
	ds, err := cl.DescribeTopics(ctx, "long")
	if err != nil || len(ds) != 1 || ds[0].Partitions[0].HighWatermark != 2 {
		t.Fatalf("want exactly the 2 lines before the long one in long-0: %+v %v", ds, err)
	}
}

// TestCLIConsumeGroupMember: consume -g without -p joins the group, reads
// what the group has not committed, commits it and leaves on exit, so the
// next run goes on from there.
func TestCLIConsumeGroupMember(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	brokers := []string{"--brokers", b.Addr()}
	// Groups need metadata.version 2, which a new cluster raises itself.
	brokertest.WaitMetadataVersion(t, b, 2)
	if _, _, err := runCLIStdin("a\nb\nc\n", append(brokers, "produce", "m", "-p", "0")...); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := runCLIStdin("", append(brokers, "consume", "m", "-g", "G", "-n", "3")...)
	if err != nil || out != "a\nb\nc\n" || !strings.Contains(errOut, "group G: assigned [{m 0}]") {
		t.Fatalf("first run: printed %q (stderr %q), error %v", out, errOut, err)
	}
	if _, _, err := runCLIStdin("d\n", append(brokers, "produce", "m", "-p", "0")...); err != nil {
		t.Fatal(err)
	}
	out, _, err = runCLIStdin("", append(brokers, "consume", "m", "-g", "G", "-n", "1")...)
	if err != nil || out != "d\n" {
		t.Fatalf("second run: printed %q, error %v", out, err)
	}
	// -n stops mid-batch: what was not printed is not committed.
	if _, _, err := runCLIStdin("e\nf\n", append(brokers, "produce", "m", "-p", "0")...); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"e\n", "f\n"} {
		out, _, err = runCLIStdin("", append(brokers, "consume", "m", "-g", "G", "-n", "1")...)
		if err != nil || out != want {
			t.Fatalf("run with -n 1: printed %q, error %v; want %q", out, err, want)
		}
	}
	if _, _, err := runCLIStdin("", append(brokers, "consume", "m", "-g", "G", "-o", "5")...); err == nil ||
		!strings.Contains(err.Error(), "start or end") {
		t.Fatalf("-o 5 as a member: %v", err)
	}
}

// TestCLIPerfE2EWarmup: perf e2e measures -n records after its warm-up,
// whose records reach the log but not the figures; a warm-up asked for
// without a rate is refused, and the default one is none at --rate 0.
func TestCLIPerfE2EWarmup(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	out, _, err := runCLIStdin("", "--brokers", b.Addr(), "--format", "json", "perf", "e2e", "--topic", "warm",
		"--partitions", "1", "--rate", "2000", "-n", "150", "--warmup", "100ms", "--interval", "1h")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, `"records": 150,`) || !strings.Contains(out, `"errors": 0,`) {
		t.Fatalf("perf e2e summary: %s", out)
	}
	ctx, cl := testClient(t, b.Addr())
	ends, err := cl.ListOffsets(ctx, "warm", client.AtEnd())
	if err != nil {
		t.Fatal(err)
	}
	if ends[0] != 350 { // 200 warm-up records (100ms at 2000/s), then 150
		t.Fatalf("the log ends at %d, want 350", ends[0])
	}
	_, _, err = runCLIStdin("", "--brokers", b.Addr(), "perf", "e2e", "--topic", "warm", "--rate", "0", "--warmup", "1s")
	if err == nil || !strings.Contains(err.Error(), "--warmup needs a --rate") {
		t.Fatalf("warm-up without a rate: %v", err)
	}
	// As fast as possible, the default warm-up is none.
	out, _, err = runCLIStdin("", "--brokers", b.Addr(), "--format", "json", "perf", "e2e", "--topic", "warm",
		"--rate", "0", "-n", "50", "--interval", "1h")
	if err != nil || !strings.Contains(out, `"records": 50,`) {
		t.Fatalf("perf e2e --rate 0: %v: %s", err, out)
	}
	if ends, err = cl.ListOffsets(ctx, "warm", client.AtEnd()); err != nil || ends[0] != 400 {
		t.Fatalf("the log ends at %v (%v), want 400", ends, err)
	}
}
