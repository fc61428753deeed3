package storage

import (
	"path/filepath"
	"testing"
)

// The latest epoch is kept apart from the entries (an atomic, read
// without the lock): it follows every change to them, and a cache loaded
// from its checkpoint.
func TestEpochCacheLatestFollowsEntries(t *testing.T) {
	t.Parallel()
	fsys := newMemFS()
	if err := fsys.MkdirAll("/log", 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("/log", LeaderEpochCheckpointFile)
	c, err := loadEpochCache(fsys, path)
	if err != nil {
		t.Fatal(err)
	}
	check := func(step string, want int32) {
		t.Helper()
		got, ok := c.latest()
		if got != want || ok != (want >= 0) {
			t.Fatalf("%s: latest %d %v, want %d", step, got, ok, want)
		}
	}
	check("empty", -1)
	for _, s := range []struct {
		step string
		do   func() error
		want int32
	}{
		{"epoch 0 at 0", func() error { c.assign(0, 0, persistLazy); return c.writeStale() }, 0},
		{"epoch 3 at 10", func() error { c.assign(3, 10, persistLazy); return c.writeStale() }, 3},
		{"epoch 5 at 20", func() error { c.assign(5, 20, persistLazy); return c.writeStale() }, 5},
		{"an older epoch refused", func() error { c.assign(4, 30, persistLazy); return c.writeStale() }, 5},
		{"truncated to 15", func() error { return c.truncateFromEnd(15) }, 3},
		{"log start 12", func() error { return c.truncateFromStart(12) }, 3},
		{"epoch 6 at 12, over 3", func() error { c.assign(6, 12, persistNone); return nil }, 6},
		{"truncated to 12", func() error { return c.truncateFromEnd(12) }, -1},
		{"epoch 7 at 12", func() error { c.assign(7, 12, persistLazy); return c.writeStale() }, 7},
	} {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.step, err)
		}
		check(s.step, s.want)
	}
	if c, err = loadEpochCache(fsys, path); err != nil {
		t.Fatal(err)
	}
	check("loaded", 7)
	if err := c.clear(); err != nil {
		t.Fatal(err)
	}
	check("cleared", -1)
}
