package poll

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
)

// TestPollWaitReturnsOnceTheConditionHolds: Wait looks until the condition
// holds and returns nil, having looked as many times as it took.
func TestPollWaitReturnsOnceTheConditionHolds(t *testing.T) {
	var n atomic.Int32
	err := Wait(context.Background(), func() error {
		if n.Add(1) < 3 {
			return fmt.Errorf("look %d", n.Load())
		}
		return nil
	})
	if err != nil || n.Load() != 3 {
		t.Fatalf("Wait: %v after %d looks, want nil after 3", err, n.Load())
	}
}

// TestPollWaitReportsTheLastState: when the context ends first, the error
// wraps the context's and carries the condition's last error.
func TestPollWaitReportsTheLastState(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var n atomic.Int32
	err := Wait(ctx, func() error {
		if n.Add(1) == 2 {
			cancel()
		}
		return fmt.Errorf("state %d", n.Load())
	})
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "last: state 2") {
		t.Fatalf("Wait: %v, want context.Canceled with the last state (state 2)", err)
	}
}

// TestPollUntilFailsWithWhatItWaitedFor: Until fails the test naming what
// it waited for and the last error.
func TestPollUntilFailsWithWhatItWaitedFor(t *testing.T) {
	rec := &recorder{TB: t}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	until(ctx, rec, "the thing", func() error { return errors.New("never") })
	if !strings.Contains(rec.msg, "waiting for the thing") || !strings.Contains(rec.msg, "last: never") {
		t.Fatalf("failure %q, want what was waited for and the last error", rec.msg)
	}
	True(t, "a condition already true", func() bool { return true })
}

type recorder struct {
	testing.TB
	msg string
}

func (r *recorder) Fatalf(format string, args ...any) { r.msg = fmt.Sprintf(format, args...) }
