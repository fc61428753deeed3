package broker

import (
	"math"
	"runtime"
	"syscall"
	"testing"
)

func TestBrokerDerivePartitionBudget(t *testing.T) {
	const gib = 1 << 30
	cases := []struct {
		name string
		c    capacity
		want int32
	}{
		// (20000 - 5000 reserved) / 3 files; 24 GiB allows 12288.
		{"files bound", capacity{OpenFiles: 20000, Memory: 24 * gib}, 5000},
		// A quarter of 1024 reserved.
		{"small limit", capacity{OpenFiles: 1024}, 256},
		// At least 64 reserved.
		{"tiny limit", capacity{OpenFiles: 64 + 3*10}, 10},
		// 1M files allow 262144; 8 GiB allows 4096.
		{"memory bound", capacity{OpenFiles: 1 << 20, Memory: 8 * gib}, 4096},
		{"files unknown", capacity{Memory: 2 * gib}, 1024},
		{"memory unknown", capacity{OpenFiles: 4096}, 1024},
		{"nothing known", capacity{}, math.MaxInt32},
		// Never 0, which would read as "no limit".
		{"limit below the reserve", capacity{OpenFiles: 60, Memory: gib}, 1},
		{"huge", capacity{OpenFiles: math.MaxUint64, Memory: math.MaxUint64}, math.MaxInt32},
	}
	for _, tc := range cases {
		if got := derivePartitionBudget(tc.c); got != tc.want {
			t.Errorf("%s: derivePartitionBudget(%+v) = %d, want %d", tc.name, tc.c, got, tc.want)
		}
	}
}

// The soft open-file limit is raised to the hard one (lowered first here,
// and put back after).
func TestBrokerRaiseOpenFileLimit(t *testing.T) {
	if runtime.GOOS != "linux" {
		c, err := raiseOpenFileLimit()
		if err != nil || c != (capacity{}) {
			t.Fatalf("no-op elsewhere: %+v %v", c, err)
		}
		return
	}
	var orig syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &orig); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &orig) })
	if orig.Max < 512 {
		t.Skipf("hard open-file limit %d is too low to lower", orig.Max)
	}
	low := syscall.Rlimit{Cur: 256, Max: orig.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	c, err := raiseOpenFileLimit()
	if err != nil {
		t.Fatal(err)
	}
	var now syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &now); err != nil {
		t.Fatal(err)
	}
	if now.Cur != orig.Max || c.OpenFiles != orig.Max || c.OpenFilesHard != orig.Max {
		t.Fatalf("after the raise: limit %d/%d, reported %+v; hard %d", now.Cur, now.Max, c, orig.Max)
	}
	if m := memoryLimit(); m == 0 {
		t.Fatal("memory unknown on linux")
	}
}
