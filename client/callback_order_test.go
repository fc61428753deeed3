package client_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/client"
	"github.com/quirelog/quire/record"
)

// leaderGivenUp starts two scripted brokers, a leading "st" and holding
// every produce unanswered, and a client without idempotence
// (acks=1, RetryUnknownOutcome off). Produce the first record with
// produce; then the cluster names b the leader, so that the client gives
// the request to a up and fails the record with ErrUnknownOutcome.
func leaderGivenUp(t *testing.T, produce func(cl *client.Client)) (*client.Client, *scriptedBroker) {
	t.Helper()
	a, b := scriptedPair(t)
	a.set(1, false, 1)
	b.set(1, false, 1)
	a.extra, b.extra = "st2", "st2"
	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) }) // before the servers stop
	a.onProduce = func(int, *quirev1.ProduceRequest) *quirev1.Error {
		<-hold // never answered while the test runs
		return nil
	}
	cl, err := client.New(testCtx(t), client.SeedBrokers(a.addr, b.addr), client.RequiredAcks(client.LeaderAck),
		client.RetryBackoff(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx := testCtx(t)
	produce(cl)
	for a.produces.Load() < 1 {
		if ctx.Err() != nil {
			t.Fatal("the request never reached the first leader")
		}
		time.Sleep(time.Millisecond) // polling the scripted broker, with the test's deadline
	}
	a.set(2, false, 2)
	b.set(2, false, 2)
	return cl, b
}

// TestProducerCallbacksOfAPartitionRunOneAtATime: the record given up at
// a replaced leader is called back (ErrUnknownOutcome) by the goroutine
// that saw the move; a second record, produced while that callback runs,
// is acknowledged by the new leader. Its callback waits for the first one
// to return: callbacks of a partition run in order, never two at once.
func TestProducerCallbacksOfAPartitionRunOneAtATime(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	var inFirst, secondStarted, overlap atomic.Bool
	firstCalled := make(chan error, 1)
	secondDone := make(chan error, 1)
	var order []string // appended by the callbacks, read once both ran
	cl, _ := leaderGivenUp(t, func(cl *client.Client) {
		cl.Produce(ctx, &client.Record{Topic: "st", Partition: 0, Value: []byte("first")}, func(_ *client.Record, err error) {
			inFirst.Store(true)
			order = append(order, "first")
			firstCalled <- err
			// Wait until the second record is acknowledged: its callback
			// then either runs now (wrong) or waits for this one.
			for !secondStarted.Load() && client.CallbacksWaiting(cl) == 0 && ctx.Err() == nil {
				time.Sleep(time.Millisecond) // polling the client, with the test's deadline
			}
			inFirst.Store(false)
		})
	})
	var err error
	select {
	case err = <-firstCalled:
	case <-ctx.Done():
		t.Fatal("the first record was never called back")
	}
	if !errors.Is(err, client.ErrUnknownOutcome) {
		t.Fatalf("first record: %v, want ErrUnknownOutcome", err)
	}
	cl.Produce(ctx, &client.Record{Topic: "st", Partition: 0, Value: []byte("second")}, func(_ *client.Record, err error) {
		secondStarted.Store(true)
		overlap.Store(inFirst.Load())
		order = append(order, "second")
		secondDone <- err
	})
	select {
	case err = <-secondDone:
	case <-ctx.Done():
		t.Fatal("the second record was never called back")
	}
	if err != nil {
		t.Fatalf("second record: %v", err)
	}
	if overlap.Load() {
		t.Fatal("the second record's callback ran while the first one's was still running")
	}
	if len(order) != 2 || order[0] != "first" || order[1] != "second" {
		t.Fatalf("callbacks ran in the order %v", order)
	}
}

// TestProducerCallbackOfAGivenUpRecordMayProduceToANewTopic: the callback
// of the record given up at a replaced leader produces to a topic the
// client has not used yet (as an application sending failures elsewhere
// does), which needs a metadata refresh. It is delivered: the callback
// does not run where it would hold the metadata refresh up.
func TestProducerCallbackOfAGivenUpRecordMayProduceToANewTopic(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	rerouted := make(chan error, 1)
	leaderGivenUp(t, func(cl *client.Client) {
		cl.Produce(ctx, &client.Record{Topic: "st", Partition: 0, Value: []byte("first")}, func(_ *client.Record, err error) {
			if !errors.Is(err, client.ErrUnknownOutcome) {
				rerouted <- err
				return
			}
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			cl.Produce(pctx, &client.Record{Topic: "st2", Partition: 0, Value: []byte("first, rerouted")},
				func(_ *client.Record, err error) { rerouted <- err })
		})
	})
	select {
	case err := <-rerouted:
		if err != nil {
			t.Fatalf("the record produced from the callback: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the record produced from the callback was never called back")
	}
}

// TestProducerGivesUpARequestBeingSentWithoutTouchingItsBatches: the
// partition moves to a new leader while the old leader's sink is still
// encoding a request (stalled here by a hook, as by a slow stream open or
// the compression of the request's other batches). The request is given
// up, but its batches are not settled, freed and reused for other records
// while the old sink still reads them: the old leader receives the
// record the request was made of, and the record fails with
// ErrUnknownOutcome (without idempotence) once the request is out.
//
// Not parallel: the send hook is the package's, so every client's sink
// would stop at it, and another test's request could be the one held.
func TestProducerGivesUpARequestBeingSentWithoutTouchingItsBatches(t *testing.T) {
	a, b := scriptedPair(t)
	a.set(1, false, 1)
	b.set(1, false, 1)
	var mu sync.Mutex
	var atA []string // the values of each request a received
	a.onProduce = func(_ int, req *quirev1.ProduceRequest) *quirev1.Error {
		var vs []string
		_ = record.SplitBatches(req.Partitions[0].Records, func(raw []byte, _ record.Header) error {
			return record.ForEachRecord(raw, func(r *record.Record) error { vs = append(vs, string(r.Value)); return nil })
		})
		mu.Lock()
		atA = append(atA, strings.Join(vs, ","))
		mu.Unlock()
		return nil
	}
	cl, err := client.New(testCtx(t), client.SeedBrokers(a.addr, b.addr), client.RequiredAcks(client.LeaderAck),
		client.RetryBackoff(10*time.Millisecond), client.MetadataMaxAge(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx := testCtx(t)
	rec := func(v string) *client.Record { return &client.Record{Topic: "st", Partition: 0, Value: []byte(v)} }
	if err := cl.ProduceSync(ctx, rec("r0")); err != nil {
		t.Fatal(err)
	}

	entered, proceed := make(chan struct{}), make(chan struct{})
	var armed atomic.Bool
	armed.Store(true)
	client.SetSendHook(func() {
		if armed.CompareAndSwap(true, false) {
			close(entered)
			<-proceed
		}
	})
	t.Cleanup(func() { client.SetSendHook(nil) })
	done1 := make(chan error, 1)
	cl.Produce(ctx, rec("r1"), func(_ *client.Record, err error) { done1 <- err })
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("r1's request was never sent")
	}
	a.set(2, false, 2)
	b.set(2, false, 2)
	// The next metadata refresh moves the partition to b and gives up
	// the request being sent to a.
	var err1 error
	called := false
	for !called && client.GivenUpWhileSending(cl) == 0 {
		select {
		case err1 = <-done1:
			called = true
		case <-ctx.Done():
			t.Fatal("the request to the replaced leader was never given up")
		case <-time.After(time.Millisecond): // polling the client, with the test's deadline
		}
	}
	if called {
		// r1's batch is free: records produced now may reuse it.
		for _, v := range []string{"r2", "r3", "r4"} {
			if err := cl.ProduceSync(ctx, rec(v)); err != nil {
				t.Fatal(err)
			}
		}
	}
	close(proceed)
	if !called {
		select {
		case err1 = <-done1:
		case <-ctx.Done():
			t.Fatal("r1 was never called back")
		}
	}
	if !errors.Is(err1, client.ErrUnknownOutcome) {
		t.Fatalf("r1: %v, want ErrUnknownOutcome", err1)
	}
	if err := cl.ProduceSync(ctx, rec("r5")); err != nil {
		t.Fatal(err)
	}
	// a counts a request before its onProduce records the values, so
	// the wait is on what onProduce recorded.
	received := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(atA)
	}
	for received() < 2 {
		if ctx.Err() != nil {
			t.Fatal("r1's request never reached a")
		}
		time.Sleep(time.Millisecond) // polling the scripted broker, with the test's deadline
	}
	mu.Lock()
	defer mu.Unlock()
	if atA[1] != "r1" {
		t.Fatalf("the request made of r1 reached the old leader holding %q", atA[1])
	}
}
