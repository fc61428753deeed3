package storage

import (
	"bytes"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quirelog/quire/internal/testdepth"
	"github.com/quirelog/quire/record"
)

// writeRandomLog fills a log in dir and returns what it wrote.
func writeRandomLog(t testing.TB, rng *rand.Rand, dir string, cfg LogConfig, n int) [][]byte {
	l := openTest(t, dir, cfg, 0)
	var written [][]byte
	for i := 0; i < n; i++ {
		codec := record.Codec(rng.Intn(5))
		b := record.NewBuilder(codec)
		for j := 0; j < 1+rng.Intn(4); j++ {
			b.Append(int64(i), nil, bytes.Repeat([]byte{byte(i)}, rng.Intn(150)), nil)
		}
		batch := b.Build()
		mustAppend(t, l, batch, int32(i/10))
		written = append(written, batch)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return written
}

// checkPrefix reopens dir and checks the log is a clean prefix of written:
// batch for batch identical, each passing validation.
func checkPrefix(t testing.TB, dir string, cfg LogConfig, rp int64, written [][]byte, what string) int {
	t.Helper()
	l := openTest(t, dir, cfg, rp)
	defer l.Close()
	got := readAll(t, l)
	if len(got) > len(written) {
		t.Fatalf("%s: %d batches, wrote %d", what, len(got), len(written))
	}
	for i, b := range got {
		if _, err := record.Validate(b); err != nil {
			t.Fatalf("%s: batch %d invalid: %v", what, i, err)
		}
		if !bytes.Equal(b, written[i]) {
			t.Fatalf("%s: batch %d differs from what was written", what, i)
		}
	}
	if e, ok := l.LatestEpoch(); ok && len(got) > 0 {
		h, _ := record.ParseHeader(got[len(got)-1])
		if e != h.PartitionLeaderEpoch {
			t.Fatalf("%s: epoch cache says %d, last batch %d", what, e, h.PartitionLeaderEpoch)
		}
	}
	// The recovered log takes appends.
	mustAppend(t, l, makeBatch(1, 1, 1), 100)
	return len(got)
}

// TestRecoveryCrashDamage writes a log, then cuts a random file at a
// random point or flips random bytes in it, reopens, and checks the log is
// a clean prefix of what was written. Damage to an index alone must lose
// nothing.
func TestRecoveryCrashDamage(t *testing.T) {
	t.Parallel()
	iters := testdepth.Rounds(120, 30)
	cfg := smallConfig()
	cfg.SegmentBytes = 2048
	cfg.IndexIntervalBytes = 128
	for it := 0; it < iters; it++ {
		rng := rand.New(rand.NewSource(int64(it)))
		dir := t.TempDir()
		written := writeRandomLog(t, rng, dir, cfg, 20+rng.Intn(30))
		files, _ := filepath.Glob(filepath.Join(dir, "0*"))
		victim := files[rng.Intn(len(files))]
		data, err := os.ReadFile(victim)
		if err != nil {
			t.Fatal(err)
		}
		what := filepath.Base(victim)
		if len(data) > 0 && rng.Intn(2) == 0 {
			cut := rng.Intn(len(data))
			data = data[:cut]
			what += " cut"
		} else if len(data) > 0 {
			for k := 0; k < 1+rng.Intn(3); k++ {
				data[rng.Intn(len(data))] ^= byte(1 + rng.Intn(255))
			}
			what += " flipped"
		}
		if err := os.WriteFile(victim, data, 0o644); err != nil {
			t.Fatal(err)
		}
		isIndex := !strings.HasSuffix(victim, ".log")
		rp := int64(0)
		if isIndex && rng.Intn(2) == 0 {
			rp = math.MaxInt64 // clean shutdown: indexes are still checked
		}
		n := checkPrefix(t, dir, cfg, rp, written, what)
		if isIndex && n != len(written) {
			t.Fatalf("iteration %d: index damage (%s) lost batches: %d of %d", it, what, n, len(written))
		}
	}
}

// TestRecoveryTornTail cuts the active segment mid-batch and opens the log
// as after a clean shutdown: the tail check must still catch it.
func TestRecoveryTornTail(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := smallConfig()
	written := writeRandomLog(t, rand.New(rand.NewSource(7)), dir, cfg, 30)
	files, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	last := files[len(files)-1]
	st, _ := os.Stat(last)
	if err := os.Truncate(last, st.Size()-5); err != nil {
		t.Fatal(err)
	}
	if n := checkPrefix(t, dir, cfg, math.MaxInt64, written, "torn tail"); n != len(written)-1 {
		t.Fatalf("%d batches survive, want %d", n, len(written)-1)
	}
}

// TestRecoveryEpochCheckpointDamaged rebuilds the epoch cache from the log.
func TestRecoveryEpochCheckpointDamaged(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := smallConfig()
	written := writeRandomLog(t, rand.New(rand.NewSource(3)), dir, cfg, 35)
	if err := os.WriteFile(filepath.Join(dir, LeaderEpochCheckpointFile), []byte("0\n9\nbad"), 0o644); err != nil {
		t.Fatal(err)
	}
	l := openTest(t, dir, cfg, math.MaxInt64)
	defer l.Close()
	if e, o := l.EndOffsetForEpoch(1); e != 1 || o <= 0 {
		t.Fatalf("epoch 1 ends at %d %d", e, o)
	}
	if e, _ := l.LatestEpoch(); e != 3 || len(readAll(t, l)) != len(written) {
		t.Fatalf("latest epoch %d", e)
	}
}

// FuzzRecoverSegment opens a log whose only segment holds arbitrary bytes:
// opening must not fail or panic, and what survives must be valid batches,
// a prefix of the segment, and the log must take an append afterwards.
//
// Every exec runs on a fresh in-memory filesystem with a fixed clock, so
// it is fast (no temp directories, no syscalls) and deterministic: an
// input that fails while fuzzing fails again under -run.
func FuzzRecoverSegment(f *testing.F) {
	var seed []byte
	for i := 0; i < 3; i++ {
		b := makeBatch(2, 10, int64(i))
		record.SetBaseOffset(b, int64(2*i))
		seed = append(seed, b...)
	}
	f.Add(seed)
	f.Add(seed[:len(seed)-7])
	cfg := smallConfig()
	clock := func() time.Time { return memModTime }
	f.Fuzz(func(t *testing.T, data []byte) {
		fsys := newMemFS()
		const dir = "/log/f-0"
		if err := fsys.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		fsys.writeFile(filepath.Join(dir, segmentName(0)+logSuffix), data)
		l, err := OpenLog(dir, "f", 0, cfg, 0, Options{FS: fsys, Now: clock})
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		defer l.Close()
		got := readAll(t, l)
		total := 0
		for _, b := range got {
			if _, err := record.Validate(b); err != nil {
				t.Fatalf("invalid batch served: %v", err)
			}
			total += len(b)
		}
		if !bytes.Equal(data[:total], bytes.Join(got, nil)) {
			t.Fatal("served bytes are not a prefix of the segment")
		}
		// Recovery keeps whatever epochs the batches carry (there is no
		// checkpoint to bound them): append with the newest.
		epoch := int32(0)
		if e, ok := l.LatestEpoch(); ok {
			epoch = max(epoch, e)
		}
		if _, err := l.AppendAsLeader(makeBatch(1, 1, 1), epoch); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatalf("close: %v", err)
		}
		// Reopening (clean) serves the same batches and the appended one.
		l2, err := OpenLog(dir, "f", 0, cfg, math.MaxInt64, Options{FS: fsys, Now: clock})
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		defer l2.Close()
		if again := readAll(t, l2); len(again) != len(got)+1 || !bytes.Equal(bytes.Join(again[:len(got)], nil), data[:total]) {
			t.Fatalf("reopen serves %d batches, want %d", len(again), len(got)+1)
		}
	})
}

// crashLog abandons l as a killed process would: its files closed, nothing
// flushed, trimmed or checkpointed, and its background flushes ended (a
// kill -9 ends them; one left running would write the old log's leader
// epoch checkpoint under the next open's).
func crashLog(l *Log) {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.flushWG.Wait()
	for _, s := range l.segs {
		_ = s.closeFiles()
	}
}

// TestRecoveryIntactTailWritesNothing: after an unclean stop, a log whose
// batches past the recovery point all check out and whose epoch
// checkpoint knows them is recovered without a write or an fsync, its
// recovery point left where the last flush put it, and the next flush
// moves it; a torn tail found the same way is still cut, and the cut
// fsynced.
func TestRecoveryIntactTailWritesNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := DefaultLogConfig()
	cfg.IndexIntervalBytes = 256
	l := openTest(t, dir, cfg, 0)
	var written [][]byte
	for i := range 10 {
		b := makeBatch(3, 50, int64(i))
		mustAppend(t, l, b, 1)
		written = append(written, b)
		if i == 4 {
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	rp, leo := l.RecoveryPoint(), l.LogEndOffset()
	if rp != 15 || leo != 30 {
		t.Fatalf("recovery point %d, log end %d before the crash", rp, leo)
	}
	crashLog(l)

	var syncs, renames atomic.Int64
	efs := NewErrorFS(OSFS{})
	efs.SetInjector(func(op Op, path string) error {
		switch op {
		case OpSync:
			syncs.Add(1)
		case OpRename:
			renames.Add(1)
		}
		return nil
	})
	l, err := OpenLog(dir, "t", 0, cfg, rp, Options{FS: efs})
	if err != nil {
		t.Fatal(err)
	}
	if syncs.Load() != 0 || renames.Load() != 0 {
		t.Fatalf("recovering an intact tail: %d fsyncs, %d renames", syncs.Load(), renames.Load())
	}
	if l.LogEndOffset() != leo || l.RecoveryPoint() != rp {
		t.Fatalf("log end %d recovery point %d, want %d and %d", l.LogEndOffset(), l.RecoveryPoint(), leo, rp)
	}
	got := readAll(t, l)
	if len(got) != len(written) {
		t.Fatalf("%d batches, want %d", len(got), len(written))
	}
	for i := range got {
		if !bytes.Equal(got[i], written[i]) {
			t.Fatalf("batch %d differs", i)
		}
	}
	// The index was rebuilt: an offset in the middle reads its batch.
	if r, err := l.Read(20, 1, math.MaxInt64); err != nil || len(r.Batches) == 0 {
		t.Fatalf("read at 20: %v", err)
	} else if h, _ := record.ParseHeader(r.Batches); h.BaseOffset != 18 {
		t.Fatalf("read at 20 starts at %d, want 18", h.BaseOffset)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if syncs.Load() == 0 || l.RecoveryPoint() != leo {
		t.Fatalf("after the flush: %d fsyncs, recovery point %d, want %d", syncs.Load(), l.RecoveryPoint(), leo)
	}

	// Crash again, past the recovery point, and tear the last batch.
	mustAppend(t, l, makeBatch(3, 50, 10), 1)
	crashLog(l)
	files, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	last := files[len(files)-1]
	st, _ := os.Stat(last)
	if err := os.Truncate(last, st.Size()-5); err != nil {
		t.Fatal(err)
	}
	syncs.Store(0)
	l, err = OpenLog(dir, "t", 0, cfg, leo, Options{FS: efs})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.LogEndOffset() != leo || l.RecoveryPoint() != leo || syncs.Load() == 0 {
		t.Fatalf("torn tail: log end %d recovery point %d (%d fsyncs), want %d", l.LogEndOffset(), l.RecoveryPoint(), syncs.Load(), leo)
	}
	if st, _ := os.Stat(last); st.Size() != int64(len(bytes.Join(written, nil))) {
		t.Fatalf("segment is %d bytes after cutting the torn batch", st.Size())
	}
}
