package testdepth

import "testing"

func TestRounds(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want int
	}{{"full", 10}, {"quick", 2}} {
		t.Setenv("QUIRE_TEST_DEPTH", tc.env)
		if got := Rounds(10, 2); got != tc.want {
			t.Errorf("QUIRE_TEST_DEPTH=%s: Rounds(10, 2) = %d, want %d", tc.env, got, tc.want)
		}
	}
	t.Setenv("QUIRE_TEST_DEPTH", "")
	want := 10
	if raceEnabled || testing.Short() {
		want = 2
	}
	if got := Rounds(10, 2); got != want {
		t.Errorf("race %v, short %v: Rounds(10, 2) = %d, want %d", raceEnabled, testing.Short(), got, want)
	}
}
