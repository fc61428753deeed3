package storage

import (
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/quirelog/quire/internal/poll"
	"github.com/quirelog/quire/record"
)

// The Cleaner's goroutines find a compacted log that needs cleaning,
// clean it, leave a log that is not compacted alone, and are all gone
// once Stop returns.
func TestCleanerRunsAndStops(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	m, err := OpenManager(t.TempDir(), smallConfig(), Options{FS: noSyncFS{}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	cfg := compactConfig()
	cfg.MinCompactionLagMs = 0
	compacted, err := m.GetOrCreate("kv", 0, cfg)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := m.GetOrCreate("plain", 0, smallConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []*Log{compacted, plain} {
		for i := 0; i < 40; i++ {
			b := record.NewBuilder(record.None)
			b.Append(time.Now().UnixMilli(), []byte(fmt.Sprint("k", i%3)), []byte(fmt.Sprint("v", i)), nil)
			mustAppend(t, l, b.Build(), 0)
			if i%4 == 3 {
				if err := l.Roll(); err != nil {
					t.Fatal(err)
				}
			}
		}
		l.SetHighWatermark(l.LogEndOffset())
	}
	plainSize := plain.Size()
	cc := DefaultCleanerConfig()
	cc.Threads, cc.BackoffMs = 2, 10
	c := NewCleaner(m, cc, nil)
	c.Start()
	poll.True(t, "the cleaner cleans the compacted log", func() bool {
		return compacted.CleanerStats().Passes > 0 && compacted.CleanerStats().DirtyRatio == 0
	})
	c.Stop()
	if tot := c.Totals(); tot.Passes < 1 || tot.BytesRead == 0 || tot.Failures != 0 {
		t.Fatalf("totals %+v", tot)
	}
	if plain.Size() != plainSize || plain.CleanerStats().Passes != 0 {
		t.Fatalf("the log that is not compacted changed: %d bytes, was %d", plain.Size(), plainSize)
	}
	if err := m.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	cp, err := readOffsetCheckpoint(OSFS{}, join(m.Dir(), CleanerCheckpointFile))
	if err != nil || cp[TopicPartition{"kv", 0}] != compacted.CleanPoint() || compacted.CleanPoint() == 0 {
		t.Fatalf("cleaner checkpoint %v (%v), clean point %d", cp, err, compacted.CleanPoint())
	}
}
