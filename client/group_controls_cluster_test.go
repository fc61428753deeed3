package client_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/client"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/testcluster"
)

// pollUntil polls g until cond holds for what was polled so far, failing
// at ctx's end; it returns the errors Poll gave meanwhile.
func pollUntil(ctx context.Context, t *testing.T, g *client.GroupConsumer, got *[]*client.Record, what string, cond func(errs []error) bool) []error {
	t.Helper()
	var errs []error
	for !cond(errs) {
		pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		recs, err := g.Poll(pctx)
		cancel()
		if ctx.Err() != nil {
			t.Fatalf("%s: %v (polled %v %v; owns %v; %d errors, the last %v)", what, ctx.Err(), valuesOf(*got, 0), valuesOf(*got, 1), g.Assignment(), len(errs), errs[max(len(errs)-1, 0):])
		}
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			errs = append(errs, err)
		}
		*got = append(*got, recs...)
	}
	return errs
}

func valuesOf(recs []*client.Record, p int32) []string {
	var out []string
	for _, r := range recs {
		if r.Partition == p {
			out = append(out, string(r.Value))
		}
	}
	return out
}

// TestClusterGroupConsumerControls: with Reset NoReset a partition the
// group never committed is not read and Poll says ErrNoCommittedOffset
// until it is Seek'd, while committed ones are read; Pause stops a
// partition's records (none polled) and Resume reads on from its
// position; CommitAsync commits in order and reports to its callback,
// and Close waits for it.
func TestClusterGroupConsumerControls(t *testing.T) {
	t.Parallel()
	// No member's session may run out here (a rebalance would read
	// partitions again from their commits): 30 s, which a loaded machine
	// does not reach between heartbeats.
	c := testcluster.New(t, 3, testcluster.Config(func(_ int32, cfg *broker.Config) {
		cfg.GroupConsumerSessionTimeoutMs = 30000
		cfg.GroupConsumerHeartbeatIntervalMs = 100
	}))
	ctx := clusterCtx(t, 3*time.Minute)
	c.WaitController(ctx)
	// CommitAsync takes no context: the client's request timeout bounds
	// each commit, its retries included. The brokers ride out a
	// controller election within it, which on a loaded machine (an
	// election, then the commit again on the new controller) takes more
	// than the 5 s clusterClient sets; 30 s is the client's default.
	cl := clusterClient(t, c, nil, client.RecordPartitioner(client.ManualPartitioner()), client.RequestTimeout(30*time.Second))
	if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: "ctl", Partitions: 2, ReplicationFactor: 3}); err != nil {
		t.Fatal(err)
	}
	c.WaitImage(ctx, func(img *metadata.Image) bool {
		_, ok := img.Topic("ctl")
		return ok && img.MetadataVersion() >= metadata.MetadataVersionProducerIDs
	})
	produce := func(p int32, vals ...string) {
		t.Helper()
		var rs []*client.Record
		for _, v := range vals {
			rs = append(rs, &client.Record{Topic: "ctl", Partition: p, Value: []byte(v)})
		}
		if err := cl.ProduceSync(ctx, rs...); err != nil {
			t.Fatal(err)
		}
	}
	produce(0, "a0", "a1", "a2")
	produce(1, "b0", "b1", "b2")
	// Partition 0 committed at 1; partition 1 never.
	if err := cl.CommitOffsets(ctx, "cg", client.OffsetCommit{Topic: "ctl", Partition: 0, Offset: 1, LeaderEpoch: -1}); err != nil {
		t.Fatal(err)
	}

	g, err := cl.NewGroupConsumer(client.GroupConfig{Group: "cg", Topics: []string{"ctl"}, Reset: client.NoReset(), AutoCommitInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	var got []*client.Record
	errs := pollUntil(ctx, t, g, &got, "partition 0 read and partition 1 reported", func([]error) bool {
		return len(valuesOf(got, 0)) == 2
	})
	// Polled until Poll says so, if it had not yet (the condition sees
	// this call's errors, not those before it).
	noCommit := func(e error) bool { return errors.Is(e, client.ErrNoCommittedOffset) }
	if !slices.ContainsFunc(errs, noCommit) {
		pollUntil(ctx, t, g, &got, "ErrNoCommittedOffset", func(seen []error) bool {
			return slices.ContainsFunc(seen, noCommit)
		})
	}
	if v := valuesOf(got, 0); !slices.Equal(v, []string{"a1", "a2"}) {
		t.Fatalf("partition 0 read %v, want a1 a2 (from the commit)", v)
	}
	if v := valuesOf(got, 1); len(v) != 0 {
		t.Fatalf("partition 1, never committed, read %v with reset none", v)
	}
	if err := g.Seek("ctl", 1, 1); err != nil {
		t.Fatal(err)
	}
	pollUntil(ctx, t, g, &got, "partition 1 after the seek", func([]error) bool { return len(valuesOf(got, 1)) == 2 })
	if v := valuesOf(got, 1); !slices.Equal(v, []string{"b1", "b2"}) {
		t.Fatalf("partition 1 read %v after Seek to 1, want b1 b2", v)
	}

	// Pause partition 0: what is produced to it meanwhile is not polled,
	// while partition 1 goes on; Resume reads it from its position.
	g.Pause(client.TopicPartition{Topic: "ctl", Partition: 0})
	if p := g.Paused(); len(p) != 1 || p[0].Partition != 0 {
		t.Fatalf("paused %v", p)
	}
	produce(0, "a3", "a4")
	produce(1, "b3")
	pollUntil(ctx, t, g, &got, "partition 1 while 0 is paused", func([]error) bool { return len(valuesOf(got, 1)) == 3 })
	// Partition 1's record was produced after partition 0's: had 0 not
	// been paused, its records would be here too (one fetch for both).
	produce(1, "b4")
	pollUntil(ctx, t, g, &got, "partition 1 again", func([]error) bool { return len(valuesOf(got, 1)) == 4 })
	if v := valuesOf(got, 0); len(v) != 2 {
		t.Fatalf("partition 0 polled %v while paused", v)
	}
	g.Resume(client.TopicPartition{Topic: "ctl", Partition: 0})
	pollUntil(ctx, t, g, &got, "partition 0 resumed", func([]error) bool { return len(valuesOf(got, 0)) == 4 })
	if v := valuesOf(got, 0); !slices.Equal(v, []string{"a1", "a2", "a3", "a4"}) {
		t.Fatalf("partition 0 read %v, want a1..a4 once each", v)
	}

	// CommitAsync: the callbacks come in order, and the last commit is
	// what the group has.
	var mu sync.Mutex
	var order []int
	for i := range 3 {
		g.CommitAsync(func(err error) {
			if err != nil {
				t.Errorf("async commit %d: %v", i, err)
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
		})
	}
	if err := g.Leave(ctx); err != nil { // Leave does not commit: only the async commits did
		t.Fatal(err)
	}
	mu.Lock()
	if !slices.Equal(order, []int{0, 1, 2}) {
		t.Fatalf("async commit callbacks %v, want 0 1 2 before Close returned", order)
	}
	mu.Unlock()
	offs, err := cl.FetchOffsets(ctx, "cg")
	if err != nil {
		t.Fatal(err)
	}
	if len(offs) != 2 || offs[0].Offset != 5 || offs[1].Offset != 5 {
		t.Fatalf("committed %+v, want 5 and 5", offs)
	}
	if _, err := cl.NewGroupConsumer(client.GroupConfig{Group: "cg", Topics: []string{"ctl"}, Reset: client.At(3)}); !errors.Is(err, client.ErrInvalidOffset) {
		t.Fatalf("reset At(3): %v", err)
	}
}
