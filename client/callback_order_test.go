package client_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/client"
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
