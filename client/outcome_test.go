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
