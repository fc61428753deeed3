package storage

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"
)

// TestEpochCheckpointBackgroundWriterRaces runs the background checkpoint
// writer (WriteEpochCheckpoint) without pause beside elections, appends,
// truncations and flushes, and checks after each step what a kill -9 would
// read back: every epoch below the log end as the cache has it.
func TestEpochCheckpointBackgroundWriterRaces(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l := openPowerLoss(t, dir, noSyncFS{}, 0)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := l.WriteEpochCheckpoint(); err != nil && !errors.Is(err, ErrClosed) {
				t.Error(err)
				return
			}
		}
	}()
	below := func(es []epochEntry, leo int64) []epochEntry {
		var out []epochEntry
		for _, e := range es {
			if e.StartOffset < leo {
				out = append(out, e)
			}
		}
		return out
	}
	check := func(step string, exact bool) {
		t.Helper()
		c, err := loadEpochCache(noSyncFS{}, filepath.Join(dir, LeaderEpochCheckpointFile))
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		st := stateOf(l)
		got, want := below(c.entries, st.leo), below(st.entries, st.leo)
		if exact {
			got, want = c.entries, st.entries
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: file %v, cache %v (log end %d)", step, c.entries, st.entries, st.leo)
		}
	}
	epoch := int32(0)
	for i := range 60 {
		epoch++
		if err := l.AssignEpochStart(epoch); err != nil {
			t.Fatal(err)
		}
		if i%4 == 1 { // two elections in a row, no record at the first
			epoch++
			if err := l.AssignEpochStart(epoch); err != nil {
				t.Fatal(err)
			}
		}
		for j := range 1 + i%3 {
			mustAppend(t, l, makeBatch(2, 20, int64(j)), epoch)
			check("append", false)
		}
		switch i % 5 {
		case 2:
			if err := l.Truncate(l.LogEndOffset() - 1); err != nil {
				t.Fatal(err)
			}
			check("truncate", true)
		case 3:
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			check("flush", false)
		case 4:
			if err := l.Truncate(l.LogEndOffset()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	close(stop)
	<-done
	check("close", false)
}
