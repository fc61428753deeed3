package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/quirelog/quire/broker/brokertest"
	"github.com/quirelog/quire/client"
	"github.com/quirelog/quire/metadata"
)

// commitLog records the commits a groupCommitter sends, failing them with
// err while it is set.
type commitLog struct {
	commits   [][]client.OffsetCommit
	deadlines []time.Duration // left on each commit's context
	err       error
}

func (l *commitLog) commit(ctx context.Context, offsets []client.OffsetCommit) error {
	l.commits = append(l.commits, offsets)
	if d, ok := ctx.Deadline(); ok {
		l.deadlines = append(l.deadlines, time.Until(d))
	}
	return l.err
}

func rec(p int32, offset int64, epoch int32) *client.Record {
	return &client.Record{Topic: "t", Partition: p, Offset: offset, LeaderEpoch: epoch}
}

func oc(p int32, offset int64, epoch int32) client.OffsetCommit {
	return client.OffsetCommit{Topic: "t", Partition: p, Offset: offset, LeaderEpoch: epoch}
}

// TestGroupCommitterFailedFlushNotCommitted: a batch whose flush failed is
// dropped from what the final commit sends; the batches printed before it
// are committed.
func TestGroupCommitterFailedFlushNotCommitted(t *testing.T) {
	t.Parallel()
	var l commitLog
	gc := newGroupCommitter("g", time.Hour, l.commit)
	gc.stage(rec(0, 4, 2))
	gc.stage(rec(1, 9, 2))
	gc.printed()
	gc.stage(rec(0, 5, 2)) // the next batch, whose flush fails
	gc.stage(rec(2, 0, 2))
	gc.unstage()
	if err := gc.final(); err != nil {
		t.Fatal(err)
	}
	want := [][]client.OffsetCommit{{oc(0, 5, 2), oc(1, 10, 2)}}
	if !reflect.DeepEqual(l.commits, want) {
		t.Fatalf("commits %+v, want %+v", l.commits, want)
	}
	// Nothing printed since: nothing more to commit.
	if err := gc.final(); err != nil || len(l.commits) != 1 {
		t.Fatalf("second final: %v, %d commits", err, len(l.commits))
	}
}

// TestGroupCommitterNothingPrinted: a first batch that fails to flush
// leaves nothing to commit.
func TestGroupCommitterNothingPrinted(t *testing.T) {
	t.Parallel()
	var l commitLog
	gc := newGroupCommitter("g", 0, l.commit)
	gc.stage(rec(0, 0, 1))
	gc.unstage()
	if err := gc.final(); err != nil || len(l.commits) != 0 {
		t.Fatalf("final: %v, commits %+v", err, l.commits)
	}
}

// TestGroupCommitterInterval: printed offsets are committed at most once
// per interval, and what is left by the final commit.
func TestGroupCommitterInterval(t *testing.T) {
	t.Parallel()
	var l commitLog
	gc := newGroupCommitter("g", 5*time.Second, l.commit)
	t0 := gc.last
	ctx := context.Background()
	if _, ok := gc.dueAt(); ok {
		t.Fatal("due with nothing printed")
	}
	gc.stage(rec(0, 0, 1))
	gc.printed()
	if at, ok := gc.dueAt(); !ok || !at.Equal(t0.Add(5*time.Second)) {
		t.Fatalf("due at %v %v, want %v", at, ok, t0.Add(5*time.Second))
	}
	for _, d := range []time.Duration{time.Second, 4 * time.Second} {
		if err := gc.commitIfDue(ctx, t0.Add(d)); err != nil || len(l.commits) != 0 {
			t.Fatalf("at +%v: %v, %d commits", d, err, len(l.commits))
		}
	}
	if err := gc.commitIfDue(ctx, t0.Add(5*time.Second)); err != nil || len(l.commits) != 1 {
		t.Fatalf("at +5s: %v, %d commits", err, len(l.commits))
	}
	// Due again an interval after that commit, not before.
	gc.stage(rec(0, 1, 1))
	gc.printed()
	if err := gc.commitIfDue(ctx, t0.Add(9*time.Second)); err != nil || len(l.commits) != 1 {
		t.Fatalf("at +9s: %v, %d commits", err, len(l.commits))
	}
	gc.stage(rec(0, 2, 1))
	gc.printed()
	if err := gc.final(); err != nil {
		t.Fatal(err)
	}
	want := [][]client.OffsetCommit{{oc(0, 1, 1)}, {oc(0, 3, 1)}}
	if !reflect.DeepEqual(l.commits, want) {
		t.Fatalf("commits %+v, want %+v", l.commits, want)
	}

	// An interval of 0 commits every printed batch.
	l = commitLog{}
	gc = newGroupCommitter("g", 0, l.commit)
	for i := int64(0); i < 3; i++ {
		gc.stage(rec(0, i, 1))
		gc.printed()
		if err := gc.commitIfDue(ctx, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if len(l.commits) != 3 {
		t.Fatalf("interval 0: %d commits, want 3", len(l.commits))
	}
}

// TestGroupCommitterEpoch: the epoch committed is the batch's, or -1 (not
// 0) for a batch that carries none.
func TestGroupCommitterEpoch(t *testing.T) {
	t.Parallel()
	var l commitLog
	gc := newGroupCommitter("g", 0, l.commit)
	gc.stage(rec(0, 0, 7))
	gc.stage(rec(1, 0, -1))
	gc.stage(rec(2, 0, 0))
	gc.printed()
	if err := gc.final(); err != nil {
		t.Fatal(err)
	}
	want := [][]client.OffsetCommit{{oc(0, 1, 7), oc(1, 1, -1), oc(2, 1, 0)}}
	if !reflect.DeepEqual(l.commits, want) {
		t.Fatalf("commits %+v, want %+v", l.commits, want)
	}
}

// TestGroupCommitterFinalAfterFailure: after a commit failed, the final
// commit tries again (the offsets are still owed) but only briefly.
func TestGroupCommitterFinalAfterFailure(t *testing.T) {
	t.Parallel()
	l := commitLog{err: errors.New("no controller")}
	gc := newGroupCommitter("g", 0, l.commit)
	gc.stage(rec(0, 0, 1))
	gc.printed()
	if err := gc.commitIfDue(context.Background(), time.Now()); err == nil || !strings.Contains(err.Error(), "group g") {
		t.Fatalf("failed commit: %v", err)
	}
	if err := gc.final(); err == nil {
		t.Fatal("final commit succeeded against a failing commit")
	}
	if len(l.deadlines) != 1 || l.deadlines[0] > finalRetryCommitTimeout {
		t.Fatalf("final commit after a failure had %v to run, want at most %v", l.deadlines, finalRetryCommitTimeout)
	}
	// Once a commit succeeds again, the final commit has its full time.
	l.err = nil
	if err := gc.final(); err != nil {
		t.Fatal(err)
	}
	gc.stage(rec(0, 1, 1))
	gc.printed()
	if err := gc.final(); err != nil || len(l.deadlines) != 3 || l.deadlines[2] <= finalRetryCommitTimeout {
		t.Fatalf("final commits: %v, time left %v", err, l.deadlines)
	}
}

// failingWriter fails every write.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// runCLI runs the quire command line with args, its output to out.
func runCLI(out io.Writer, args ...string) error {
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(out)
	root.SetErr(io.Discard)
	return root.Execute()
}

// TestConsumeGroupCommitsWhatWasPrinted runs consume --group against a
// broker: a run whose output cannot be written commits nothing, the next
// run prints everything and commits it, and a third finds nothing left.
func TestConsumeGroupCommitsWhatWasPrinted(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := client.New(ctx, client.SeedBrokers(b.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: "cg", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	brokertest.WaitMetadataVersion(t, b, metadata.MetadataVersionProducerIDs)
	for i := 0; i < 5; i++ {
		if err := cl.ProduceSync(ctx, client.StringRecord("cg", fmt.Sprint("v", i))); err != nil {
			t.Fatal(err)
		}
	}
	committed := func() int64 {
		t.Helper()
		got, err := cl.FetchOffsets(ctx, "readers", client.TopicPartition{Topic: "cg"})
		if err != nil {
			t.Fatal(err)
		}
		return got[0].Offset
	}

	err = runCLI(failingWriter{}, "--brokers", b.Addr(), "consume", "cg", "--group", "readers", "-n", "5")
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("consume into a failing writer: %v", err)
	}
	if o := committed(); o != -1 {
		t.Fatalf("committed %d after printing nothing", o)
	}

	var out bytes.Buffer
	if err := runCLI(&out, "--brokers", b.Addr(), "consume", "cg", "--group", "readers", "-n", "5"); err != nil {
		t.Fatal(err)
	}
	if out.String() != "v0\nv1\nv2\nv3\nv4\n" {
		t.Fatalf("printed %q", out.String())
	}
	if o := committed(); o != 5 {
		t.Fatalf("committed %d after printing 5 records", o)
	}
	got, err := cl.FetchOffsets(ctx, "readers")
	if err != nil || len(got) != 1 || got[0].LeaderEpoch < 0 {
		t.Fatalf("committed %+v %v, want the batch's leader epoch", got, err)
	}

	if err := cl.ProduceSync(ctx, client.StringRecord("cg", "v5")); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := runCLI(&out, "--brokers", b.Addr(), "consume", "cg", "--group", "readers", "-n", "1"); err != nil {
		t.Fatal(err)
	}
	if out.String() != "v5\n" {
		t.Fatalf("a run after the commit printed %q, want only the new record", out.String())
	}
}

// TestConsumeGroupCommitsWhileWaiting: a consume --group waiting for more
// records commits what it printed once the interval has passed, without
// waiting for the next record or its exit.
func TestConsumeGroupCommitsWhileWaiting(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := client.New(ctx, client.SeedBrokers(b.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: "cw", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	brokertest.WaitMetadataVersion(t, b, metadata.MetadataVersionProducerIDs)
	for i := 0; i < 3; i++ {
		if err := cl.ProduceSync(ctx, client.StringRecord("cw", fmt.Sprint("v", i))); err != nil {
			t.Fatal(err)
		}
	}
	// Asks for one record more than there is, so it waits after three.
	done := make(chan error, 1)
	var out bytes.Buffer
	go func() {
		done <- runCLI(&out, "--brokers", b.Addr(), "consume", "cw", "--group", "waiters", "-n", "4", "--commit-interval", "100ms")
	}()
	for {
		got, err := cl.FetchOffsets(ctx, "waiters", client.TopicPartition{Topic: "cw"})
		if err != nil {
			t.Fatal(err)
		}
		if got[0].Offset == 3 {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("consume ended early: %v", err)
		case <-ctx.Done():
			t.Fatalf("offset 3 not committed while waiting; committed %d", got[0].Offset)
		case <-time.After(20 * time.Millisecond): // poll interval, not synchronisation
		}
	}
	if err := cl.ProduceSync(ctx, client.StringRecord("cw", "v3")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("consume did not end after its fourth record")
	}
	if out.String() != "v0\nv1\nv2\nv3\n" {
		t.Fatalf("printed %q", out.String())
	}
	if got, err := cl.FetchOffsets(ctx, "waiters"); err != nil || len(got) != 1 || got[0].Offset != 4 {
		t.Fatalf("after exit committed %+v %v, want 4", got, err)
	}
	if err := runCLI(io.Discard, "--brokers", b.Addr(), "consume", "cw", "--group", "waiters", "--commit-interval=-1s"); err == nil ||
		!strings.Contains(err.Error(), "must be >= 0") {
		t.Fatalf("negative --commit-interval: %v", err)
	}
}
