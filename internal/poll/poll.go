// Package poll waits, in tests, for a condition to be reached in the state
// of what is tested: it looks again every Interval until the condition
// holds, and gives up only after a deadline far above what the condition
// takes on a loaded machine, so that a test fails instead of hanging, never
// because the machine is slow. A failure says what was waited for and the
// condition's last answer.
//
// Wait on the event itself where there is one (a channel, a callback);
// poll where the state has to be looked at.
package poll

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// Timeout is how long Until and True wait, and Wait when its context has
// no deadline.
const Timeout = 30 * time.Second

// Interval is how long the waits sleep between two looks.
const Interval = 10 * time.Millisecond

// Until calls cond every Interval until it returns nil, and fails tb if it
// has not after Timeout, with what it waited for and cond's last error.
func Until(tb testing.TB, what string, cond func() error) {
	tb.Helper()
	until(context.Background(), tb, what, cond)
}

func until(ctx context.Context, tb testing.TB, what string, cond func() error) {
	tb.Helper()
	if err := Wait(ctx, cond); err != nil {
		tb.Fatalf("waiting for %s: %v", what, err)
	}
}

// True is Until for a condition without a state to report.
func True(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	Until(tb, what, func() error {
		if !cond() {
			return errFalse
		}
		return nil
	})
}

var errFalse = fmt.Errorf("condition not met")

// Wait calls cond every Interval until it returns nil or ctx ends, Timeout
// after the call when ctx has no deadline. It returns nil once cond has,
// else an error wrapping ctx's, naming how long it waited, how many times
// it looked and cond's last error.
func Wait(ctx context.Context, cond func() error) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, Timeout)
		defer cancel()
	}
	start := time.Now()
	t := time.NewTicker(Interval)
	defer t.Stop()
	for looks := 1; ; looks++ {
		err := cond()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w after %v and %d looks (last: %v)", ctx.Err(), time.Since(start).Round(time.Millisecond), looks, err)
		case <-t.C:
		}
	}
}
