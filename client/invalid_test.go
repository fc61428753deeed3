package client_test

import (
	"errors"
	"testing"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker/brokertest"
	"github.com/quirelog/quire/client"
)

// TestClientConsumerInvalidPartitionFails: a consumer assigned a partition
// the topic does not have (below 0, past its count) reports a permanent
// INVALID_REQUEST from Poll instead of retrying it in silence forever.
func TestClientConsumerInvalidPartitionFails(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	cl := newClient(t, b.Addr())
	createTopic(t, cl, "inv", 2)
	for _, p := range []int32{-1, 2} {
		cons, err := cl.NewConsumer(map[string]map[int32]client.Offset{"inv": {p: client.AtStart()}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = cons.Poll(testCtx(t))
		cons.Close()
		var e *client.Error
		if !errors.As(err, &e) || e.Code != quirev1.ErrorCode_INVALID_REQUEST || e.Retriable {
			t.Fatalf("partition %d: Poll returned %v, want a permanent INVALID_REQUEST", p, err)
		}
	}
}
