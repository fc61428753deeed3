package client

import (
	"fmt"
	"io"
	"testing"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

// A ProduceStream that ends (io.EOF from Recv, or from SendMsg on a
// stream that broke under it, as when a stopping broker is finally
// stopped hard) is a retriable network failure: its batches are retried,
// not failed with a bare EOF.
func TestClientStreamEOFIsRetriable(t *testing.T) {
	t.Parallel()
	for _, err := range []error{io.EOF, fmt.Errorf("send: %w", io.EOF)} {
		got := streamErr(err)
		if !retriable(got) || ErrorCode(got) != quirev1.ErrorCode_NETWORK_EXCEPTION || !needsMetadata(got) {
			t.Fatalf("streamErr(%v) = %v: want a retriable NETWORK_EXCEPTION", err, got)
		}
	}
	if got := streamErr(nil); got != nil {
		t.Fatalf("streamErr(nil) = %v", got)
	}
}
