package client_test

import (
	"errors"
	"testing"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/client"
)

// TestProducerWithoutIdempotenceReportsUnknownOutcome: a producer without
// idempotence (acks=1) whose attempt may have been written (answered with
// outcome_unknown, or not answered before the stream ended) fails the
// record with ErrUnknownOutcome at once, wrapping the attempt's error,
// and does not send it again; with RetryUnknownOutcome it retries, as
// Kafka's producer does. An attempt refused before the append is retried
// either way.
func TestProducerWithoutIdempotenceReportsUnknownOutcome(t *testing.T) {
	t.Parallel()
	appended := &quirev1.Error{Code: quirev1.ErrorCode_REQUEST_TIMED_OUT, Message: "scripted: appended, not committed",
		Retriable: true, OutcomeUnknown: true}
	refused := &quirev1.Error{Code: quirev1.ErrorCode_NOT_ENOUGH_REPLICAS, Message: "scripted: refused", Retriable: true}
	for _, tc := range []struct {
		name     string
		first    *quirev1.Error // the first attempt's answer
		hangUp   bool           // the first attempt gets none
		retry    bool           // RetryUnknownOutcome
		unknown  bool           // the record fails with ErrUnknownOutcome
		wantCode quirev1.ErrorCode
	}{
		{name: "outcome_unknown", first: appended, unknown: true, wantCode: quirev1.ErrorCode_REQUEST_TIMED_OUT},
		{name: "no answer", hangUp: true, unknown: true, wantCode: quirev1.ErrorCode_NETWORK_EXCEPTION},
		{name: "outcome_unknown, retries allowed", first: appended, retry: true},
		{name: "no answer, retries allowed", hangUp: true, retry: true},
		{name: "refused", first: refused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := startScripted(t)
			a.peers = []*quirev1.Broker{{Id: 1, Address: a.addr}}
			a.set(1, false, 1)
			a.onProduce = func(n int, _ *quirev1.ProduceRequest) *quirev1.Error {
				if n == 1 {
					return tc.first
				}
				return nil
			}
			a.hangUp = func(n int) bool { return tc.hangUp && n == 1 }
			cl := newClient(t, a.addr, client.RequiredAcks(client.LeaderAck), client.RetryBackoff(10*time.Millisecond),
				client.RetryUnknownOutcome(tc.retry))
			err := cl.ProduceSync(testCtx(t), &client.Record{Topic: "st", Partition: 0, Value: []byte("v")})
			sent := a.produces.Load()
			switch {
			case tc.unknown:
				if !errors.Is(err, client.ErrUnknownOutcome) || client.ErrorCode(err) != tc.wantCode {
					t.Fatalf("got %v (code %v), want ErrUnknownOutcome wrapping %v", err, client.ErrorCode(err), tc.wantCode)
				}
				if sent != 1 {
					t.Fatalf("the record was sent %d times, want once", sent)
				}
			default:
				if err != nil {
					t.Fatalf("got %v, want the retry delivered", err)
				}
				if sent != 2 {
					t.Fatalf("the record was sent %d times, want twice", sent)
				}
			}
		})
	}
}

// TestProducerLeavesAReplacedLeader: a leader that stops answering (paused,
// or cut off) while a request waits on it, and that the metadata then
// shows replaced, does not hold the partition until the request timeout:
// the client looks at the metadata again after a second, gives the
// request up and sends the batch to the new leader (RetryUnknownOutcome:
// the producer here has no idempotence), or, without leave to retry,
// reports the record's outcome unknown, long before the request timeout.
func TestProducerLeavesAReplacedLeader(t *testing.T) {
	t.Parallel()
	for _, retry := range []bool{true, false} {
		t.Run(map[bool]string{true: "retried", false: "unknown outcome"}[retry], func(t *testing.T) {
			a, b := scriptedPair(t)
			a.set(1, false, 1)
			b.set(1, false, 1)
			hold := make(chan struct{})
			t.Cleanup(func() { close(hold) }) // before the servers stop
			a.onProduce = func(int, *quirev1.ProduceRequest) *quirev1.Error {
				<-hold // never answered while the test runs
				return nil
			}
			// Far above the deadline below, which only tells an answer
			// after the leader change from one at the request timeout.
			const requestTimeout = 5 * time.Minute
			cl, err := client.New(testCtx(t), client.SeedBrokers(a.addr, b.addr), client.RequiredAcks(client.LeaderAck),
				client.RequestTimeout(requestTimeout), client.RetryBackoff(10*time.Millisecond), client.RetryUnknownOutcome(retry))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(cl.Close)
			done := make(chan error, 1)
			start := time.Now()
			cl.Produce(testCtx(t), &client.Record{Topic: "st", Partition: 0, Value: []byte("v")}, func(_ *client.Record, err error) { done <- err })
			for a.produces.Load() < 1 {
				if time.Since(start) > 30*time.Second {
					t.Fatal("the request never reached the first leader (waited 30 s)")
				}
				time.Sleep(time.Millisecond) // polling the scripted broker, not synchronising
			}
			// The cluster replaces the leader.
			a.set(2, false, 2)
			b.set(2, false, 2)
			var got error
			select {
			case got = <-done:
			case <-time.After(time.Minute):
				t.Fatalf("the record was not answered within a minute of a leader change (request timeout %v)", requestTimeout)
			}
			t.Logf("answered %v after the produce: %v", time.Since(start).Round(time.Millisecond), got)
			if retry {
				if got != nil || b.produces.Load() != 1 {
					t.Fatalf("got %v with %d produces at the new leader, want the record delivered there", got, b.produces.Load())
				}
			} else if !errors.Is(got, client.ErrUnknownOutcome) || b.produces.Load() != 0 {
				t.Fatalf("got %v with %d produces at the new leader, want ErrUnknownOutcome and none", got, b.produces.Load())
			}
		})
	}
}

// TestProducerIdempotentRetryAfterNoAnswerFailsAsUnknownOutcome: an
// idempotent producer's first attempt gets no answer (its stream ends: it
// may have been written), and the retry is refused for good
// (TOPIC_AUTHORIZATION_FAILED). The record fails with ErrUnknownOutcome
// wrapping the refusal, not with the refusal alone: the first attempt may
// be in the log.
func TestProducerIdempotentRetryAfterNoAnswerFailsAsUnknownOutcome(t *testing.T) {
	t.Parallel()
	a := startScripted(t)
	a.peers = []*quirev1.Broker{{Id: 1, Address: a.addr}}
	a.set(1, false, 1)
	a.hangUp = func(n int) bool { return n == 1 }
	a.onProduce = func(n int, _ *quirev1.ProduceRequest) *quirev1.Error {
		return &quirev1.Error{Code: quirev1.ErrorCode_TOPIC_AUTHORIZATION_FAILED, Message: "scripted: refused for good"}
	}
	cl := newClient(t, a.addr, client.RetryBackoff(10*time.Millisecond))
	err := cl.ProduceSync(testCtx(t), &client.Record{Topic: "st", Partition: 0, Value: []byte("v")})
	if sent := a.produces.Load(); sent != 2 {
		t.Fatalf("the record was sent %d times, want twice (got %v)", sent, err)
	}
	if !errors.Is(err, client.ErrUnknownOutcome) || client.ErrorCode(err) != quirev1.ErrorCode_TOPIC_AUTHORIZATION_FAILED {
		t.Fatalf("got %v (code %v), want ErrUnknownOutcome wrapping TOPIC_AUTHORIZATION_FAILED", err, client.ErrorCode(err))
	}
}
