package clock

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The layout stepWall relies on holds for the Go this is built with: were
// it not, a stepped clock would fall back to moving elapsed times too.
func TestClockCanStep(t *testing.T) {
	if !canStep {
		t.Fatal("time.Time's layout is not what stepWall reads")
	}
}

// A step moves what the wall clock says and nothing else: the time
// elapsed between readings on either side of it is the time that passed,
// forwards or backwards, as with a real settimeofday.
func TestClockJumpedStepsWallClockOnly(t *testing.T) {
	// slack is what may pass between two readings (a loaded machine can
	// hold the test up), far below the smallest step.
	const slack = time.Minute
	for _, step := range []time.Duration{3 * time.Hour, -3 * time.Hour, 7 * time.Minute, -7 * time.Minute} {
		var j Jumped
		before := j.Now()
		j.Set(step)
		after := j.Now()
		if got := j.Offset(); got != step {
			t.Fatalf("Offset %v after Set(%v)", got, step)
		}
		// Elapsed time, by the monotonic reading.
		if d := after.Sub(before); d < 0 || d > slack {
			t.Errorf("step %v: %v elapsed between the readings", step, d)
		}
		if !after.After(before) {
			t.Errorf("step %v: the later reading is not after the earlier one", step)
		}
		if d := time.Since(after); d < 0 || d > slack {
			t.Errorf("step %v: time.Since a stepped reading is %v", step, d)
		}
		// The wall clock, and times rebuilt from timestamps.
		wall := time.Duration(after.UnixMilli()-before.UnixMilli()) * time.Millisecond
		if wall < step || wall > step+slack {
			t.Errorf("step %v: the wall clock moved %v", step, wall)
		}
		if d := after.Sub(time.UnixMilli(before.UnixMilli())) - step; d < 0 || d > slack {
			t.Errorf("step %v: %v from a timestamp taken before the step", step, d+step)
		}
		if d := time.Since(after.Round(0)) + step; d < -slack || d > slack {
			t.Errorf("step %v: the machine's clock is %v from the stepped wall reading", step, d-step)
		}
		j.Set(0)
		if d := j.Now().Round(0).Sub(time.Now().Round(0)); d < -slack || d > slack {
			t.Errorf("step %v: %v from the machine's clock after stepping back", step, d)
		}
	}
}

// Why the monotonic reading is put back: Add moves it with the wall
// clock, so an elapsed time across a step made with Add would see the
// step, which a Go process on a stepped machine never does.
func TestClockAddMovesElapsedTimeToo(t *testing.T) {
	before := time.Now()
	added := time.Now().Add(time.Hour)
	if d := added.Sub(before); d < time.Hour {
		t.Fatalf("Add: %v elapsed; the step would not be seen", d)
	}
	stepped := stepWall(time.Now(), time.Hour)
	if d := stepped.Sub(before); d >= time.Hour {
		t.Fatalf("stepWall: %v elapsed", d)
	}
}

func TestClockSystemIsTimeNow(t *testing.T) {
	a := time.Now()
	b := System{}.Now()
	c := time.Now()
	if b.Before(a) || c.Before(b) {
		t.Fatalf("System.Now %v not between %v and %v", b, a, c)
	}
}

func TestClockJumpedLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "clock-offset")
	var j Jumped
	load := func(want time.Duration, wantChanged bool) {
		t.Helper()
		changed, err := j.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		if j.Offset() != want || changed != wantChanged {
			t.Fatalf("offset %v changed %v, want %v %v", j.Offset(), changed, want, wantChanged)
		}
	}
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	load(0, false) // no file
	write("90m\n")
	load(90*time.Minute, true)
	load(90*time.Minute, false)
	write("-2h30m")
	load(-150*time.Minute, true)
	write("three hours")
	if _, err := j.Load(path); err == nil {
		t.Fatal("no error for an offset that is not a duration")
	}
	if j.Offset() != -150*time.Minute {
		t.Fatalf("a bad file changed the offset to %v", j.Offset())
	}
	write("")
	load(0, true)
	write(" 5s ")
	load(5*time.Second, true)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	load(0, true)
}
