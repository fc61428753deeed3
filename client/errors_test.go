package client

import (
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/internal/errcode"
)

// TestClientRetriesWhatTheCodeDeclares: the client's retry decision is
// the code's declared retriability, whatever flag came with it; only a code
// this client does not know falls back on the flag.
func TestClientRetriesWhatTheCodeDeclares(t *testing.T) {
	t.Parallel()
	for v, name := range quirev1.ErrorCode_name {
		c := quirev1.ErrorCode(v)
		if c == quirev1.ErrorCode_NONE {
			continue
		}
		want := errcode.Retriable(c)
		for _, flag := range []bool{true, false} {
			err := fromProto(&quirev1.Error{Code: c, Message: "m", Retriable: flag})
			var e *Error
			if !errors.As(err, &e) || e.Retriable != want || retriable(err) != want {
				t.Errorf("%s sent with retriable=%v: client says %v, declared %v", name, flag, retriable(err), want)
			}
			st, _ := status.New(codes.FailedPrecondition, "m").WithDetails(&quirev1.Error{Code: c, Retriable: flag})
			if got := retriable(fromStatus(st.Err())); got != want {
				t.Errorf("%s in a status with retriable=%v: client says %v, declared %v", name, flag, got, want)
			}
		}
		if e := newError(c, "m"); e.Retriable != want || retriable(e) != want {
			t.Errorf("the client's own %s error: retriable=%v, declared %v", name, e.Retriable, want)
		}
		// An Error built by hand is judged by its code too.
		if retriable(&Error{Code: c, Retriable: !want}) != want {
			t.Errorf("a hand-made %s error is not judged by its code", name)
		}
	}
	newer := quirev1.ErrorCode(4242)
	if !retriable(fromProto(&quirev1.Error{Code: newer, Retriable: true})) || retriable(fromProto(&quirev1.Error{Code: newer})) {
		t.Error("a code this client does not know must follow the broker's flag")
	}
	if !retriable(fromStatus(status.Error(codes.Unavailable, "down"))) {
		t.Error("an unreachable broker (a status with no detail) is a retriable NETWORK_EXCEPTION")
	}
	if retriable(errors.New("plain")) || retriable(ErrClosed) {
		t.Error("an error with no code is not retried")
	}
}
