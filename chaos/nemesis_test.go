package chaos

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/quirelog/quire/internal/clock"
)

// The clock-jump fault's steps: minutes or hours, either way, never past
// MaxClockJump (the workload's retention.ms is judged against it), and
// the same ones again for the same seed.
func TestChaosClockSteps(t *testing.T) {
	steps := func(seed uint64) []time.Duration {
		n := &nemesis{rng: rand.New(rand.NewPCG(seed, seed))}
		var out []time.Duration
		for range 400 {
			out = append(out, n.clockStep())
		}
		return out
	}
	var minutesFwd, minutesBack, hoursFwd, hoursBack int
	got := steps(7)
	for i, d := range got {
		abs := d.Abs()
		switch {
		case abs >= time.Minute && abs <= 15*time.Minute && d > 0:
			minutesFwd++
		case abs >= time.Minute && abs <= 15*time.Minute:
			minutesBack++
		case abs >= time.Hour && abs <= MaxClockJump && d > 0:
			hoursFwd++
		case abs >= time.Hour && abs <= MaxClockJump:
			hoursBack++
		default:
			t.Fatalf("step %d is %v", i, d)
		}
	}
	if minutesFwd == 0 || minutesBack == 0 || hoursFwd == 0 || hoursBack == 0 {
		t.Fatalf("steps of minutes +%d -%d, of hours +%d -%d: every kind should come up", minutesFwd, minutesBack, hoursFwd, hoursBack)
	}
	again := steps(7)
	for i := range got {
		if got[i] != again[i] {
			t.Fatalf("seed 7 gave step %d %v, then %v", i, got[i], again[i])
		}
	}
}

// What StepClock writes is what the test build of the server reads
// (cmd/quire/clockjump_chaosfs.go loads the file into a clock.Jumped).
func TestChaosStepClockFile(t *testing.T) {
	c := &Cluster{}
	n := &Node{ID: 1, Dir: t.TempDir()}
	var j clock.Jumped
	for _, d := range []time.Duration{-5*time.Hour - 17*time.Minute - 3*time.Second, 90 * time.Second, 0} {
		if err := c.StepClock(n, d); err != nil {
			t.Fatal(err)
		}
		if _, err := j.Load(n.clockFile()); err != nil {
			t.Fatal(err)
		}
		if j.Offset() != d {
			t.Fatalf("stepped by %v, the server reads %v", d, j.Offset())
		}
	}
}
