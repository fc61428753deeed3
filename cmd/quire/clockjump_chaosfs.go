//go:build chaosfs

package main

import (
	"os"
	"time"

	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/internal/clock"
)

// In the fault suite's test build (go build -tags chaosfs), the node's
// clock is a clock.Jumped whose offset is read from the file named by
// QUIRE_CHAOS_CLOCK_OFFSET (a duration: "-2h", "90m"; missing or empty
// is 0): writing it steps the node's wall clock, as settimeofday would
// step a machine's, leaving elapsed times alone. The suite writes a step
// while the node is paused, and 0 when it heals it.

// clockOffsetEnv names the file holding the node's clock offset.
const clockOffsetEnv = "QUIRE_CHAOS_CLOCK_OFFSET"

// clockPoll is how often the file is read again.
const clockPoll = 100 * time.Millisecond

func init() { serverHooks = append(serverHooks, injectClockJumps) }

func injectClockJumps(cfg *broker.Config) {
	path := os.Getenv(clockOffsetEnv)
	if path == "" {
		return
	}
	clk := &clock.Jumped{}
	load := func() {
		changed, err := clk.Load(path)
		switch {
		case err != nil:
			cfg.Logger.Error("chaos: clock offset", "error", err)
		case changed:
			cfg.Logger.Warn("chaos: clock stepped", "offset", clk.Offset(), "file", path)
		}
	}
	load()
	go func() {
		for range time.Tick(clockPoll) {
			load()
		}
	}()
	cfg.Clock = clk
	cfg.Logger.Info("chaos: clock jumps armed", "file", path)
}
