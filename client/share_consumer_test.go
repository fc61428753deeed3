package client_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/client"
	"github.com/quirelog/quire/testcluster"
)

// TestClientClusterShareConsumer: two share consumers of one group on a
// one-partition topic of a 3-node cluster (the client finds the leader)
// divide its records, each accepted exactly once, with acknowledgements
// batched into ranges; a record released comes back with its delivery
// count raised; an acknowledgement of a record no longer held is refused
// by Flush, naming it, and the consumer goes on; closing a consumer
// releases what it held to the other at once.
func TestClientClusterShareConsumer(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 3, testcluster.Config(func(_ int32, cfg *broker.Config) {
		cfg.GroupShareEnable = true
		cfg.ShareAutoOffsetReset = "earliest"
	}))
	ctx := clusterCtx(t, 2*time.Minute)
	c.WaitController(ctx)
	cl := clusterClient(t, c, nil)
	const topic, n = "queue", 200
	if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: topic, Partitions: 1, ReplicationFactor: 3}); err != nil {
		t.Fatal(err)
	}
	leaderOf(ctx, c, topic, 0)
	var recs []*client.Record
	for i := range n {
		recs = append(recs, client.KeyStringRecord(topic, fmt.Sprintf("k%d", i%7), fmt.Sprintf("v%d", i)))
	}
	if err := cl.ProduceSync(ctx, recs...); err != nil {
		t.Fatal(err)
	}

	a, err := cl.NewShareConsumer(ctx, "workers", []string{topic}, client.ShareMaxRecords(20))
	if err != nil {
		t.Fatal(err)
	}
	b, err := cl.NewShareConsumer(ctx, "workers", []string{topic}, client.ShareMaxRecords(20))
	if err != nil {
		t.Fatal(err)
	}
	if a.MemberID() == "" || a.MemberID() == b.MemberID() {
		t.Fatalf("member ids %q and %q", a.MemberID(), b.MemberID())
	}

	var mu sync.Mutex
	accepted := map[int64]string{}
	released := map[int64]bool{}
	var failures []string
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		failures = append(failures, fmt.Sprintf(format, args...))
	}
	consume := func(name string, sc *client.ShareConsumer) {
		for {
			mu.Lock()
			finished := len(accepted) == n
			mu.Unlock()
			if finished {
				return
			}
			pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			got, err := sc.Poll(pctx)
			cancel()
			if ctx.Err() != nil {
				mu.Lock()
				k := len(accepted)
				mu.Unlock()
				fail("%s: gave up with %d of %d records accepted", name, k, n)
				return
			}
			if err != nil && pctx.Err() == nil {
				fail("%s: poll: %v", name, err)
				return
			}
			for _, r := range got {
				mu.Lock()
				if by, ok := accepted[r.Offset]; ok {
					fail("%s: record %d delivered after %s accepted it", name, r.Offset, by)
				}
				if want := fmt.Sprintf("v%d", r.Offset); string(r.Value) != want {
					fail("%s: record %d is %q, want %q", name, r.Offset, r.Value, want)
				}
				// Every tenth record is released once, then accepted.
				if r.Offset%10 == 0 && !released[r.Offset] {
					released[r.Offset] = true
					if r.DeliveryCount != 1 {
						fail("%s: record %d first delivered with count %d", name, r.Offset, r.DeliveryCount)
					}
					mu.Unlock()
					r.Release()
					continue
				}
				if r.Offset%10 == 0 && r.DeliveryCount != 2 {
					fail("%s: released record %d delivered again with count %d, want 2", name, r.Offset, r.DeliveryCount)
				}
				accepted[r.Offset] = name
				mu.Unlock()
				r.Accept()
			}
			if err := sc.Flush(ctx); err != nil {
				fail("%s: flush: %v", name, err)
				return
			}
		}
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); consume("a", a) }()
	go func() { defer wg.Done(); consume("b", b) }()
	wg.Wait()
	for _, f := range failures {
		t.Error(f)
	}
	if len(accepted) != n {
		t.Fatalf("%d of %d records accepted", len(accepted), n)
	}

	// An acknowledgement of a record no longer held: refused, and the
	// consumer goes on.
	last, holder, _ := pollOne(ctx, t, cl, topic, "last", a, b)
	last.Accept()
	if err := holder.Flush(ctx); err != nil {
		t.Fatalf("accept of %d: %v", last.Offset, err)
	}
	last.Accept()
	err = holder.Flush(ctx)
	if client.ErrorCode(err) != quirev1.ErrorCode_INVALID_RECORD_STATE || !strings.Contains(err.Error(), fmt.Sprintf("offsets %d to %d", last.Offset, last.Offset)) {
		t.Fatalf("second accept of %d: %v, want INVALID_RECORD_STATE naming it", last.Offset, err)
	}

	// Closing releases what the consumer holds, to the other at once.
	held, holder, other := pollOne(ctx, t, cl, topic, "held", a, b)
	if err := holder.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	got, err := other.Poll(ctx)
	if err != nil || len(got) != 1 || got[0].Offset != held.Offset || got[0].DeliveryCount != 2 {
		t.Fatalf("after the holder closed, the other polled %v, %v; want record %d with count 2", got, err, held.Offset)
	}
	got[0].Accept()
	if err := other.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
}

// pollOne produces a record of value v and polls both consumers until
// one has it; it returns the record, that consumer and the other.
func pollOne(ctx context.Context, t *testing.T, cl *client.Client, topic, v string, a, b *client.ShareConsumer) (*client.ShareRecord, *client.ShareConsumer, *client.ShareConsumer) {
	t.Helper()
	if err := cl.ProduceSync(ctx, client.StringRecord(topic, v)); err != nil {
		t.Fatal(err)
	}
	for ctx.Err() == nil {
		for i, sc := range []*client.ShareConsumer{a, b} {
			pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			got, _ := sc.Poll(pctx)
			cancel()
			if len(got) == 1 && string(got[0].Value) == v {
				if i == 0 {
					return got[0], a, b
				}
				return got[0], b, a
			}
			if len(got) > 0 {
				t.Fatalf("polled %d records, want only %q", len(got), v)
			}
		}
	}
	t.Fatalf("record %q never polled", v)
	return nil, nil, nil
}
