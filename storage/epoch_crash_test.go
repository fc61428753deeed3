package storage

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/quirelog/quire/record"
)

// powerLossFS keeps, for every leader epoch checkpoint, what a power loss
// would find on disk: a checkpoint reaches the disk only when its
// temporary file was fsynced before the rename and the directory fsynced
// after it (writeFileAtomic); one renamed without that is in the page
// cache only (writeFileReplace). powerLoss puts back what is on disk. The
// segments are left as they are: a power loss that keeps them is the
// harder case for the checkpoint (batches of an epoch it does not know).
type powerLossFS struct {
	noSyncFS

	mu      sync.Mutex
	synced  map[string]bool   // temporary checkpoints fsynced since created
	renamed map[string][]byte // renamed in fsynced, until the directory's fsync
	durable map[string][]byte // on disk
	touched map[string]bool
}

func newPowerLossFS() *powerLossFS {
	return &powerLossFS{synced: map[string]bool{}, renamed: map[string][]byte{},
		durable: map[string][]byte{}, touched: map[string]bool{}}
}

func isEpochCheckpoint(name string) bool {
	return filepath.Base(strings.TrimSuffix(name, ".tmp")) == LeaderEpochCheckpointFile
}

type syncTrackedFile struct {
	File
	fs   *powerLossFS
	name string
}

func (f syncTrackedFile) Sync() error {
	f.fs.mu.Lock()
	f.fs.synced[f.name] = true
	f.fs.mu.Unlock()
	return nil
}

func (p *powerLossFS) Create(name string) (File, error) {
	f, err := p.noSyncFS.Create(name)
	if err != nil || !isEpochCheckpoint(name) {
		return f, err
	}
	p.mu.Lock()
	p.synced[name] = false
	p.mu.Unlock()
	return syncTrackedFile{File: f, fs: p, name: name}, nil
}

func (p *powerLossFS) Rename(oldname, newname string) error {
	if !isEpochCheckpoint(newname) {
		return p.noSyncFS.Rename(oldname, newname)
	}
	data, err := os.ReadFile(oldname)
	if err != nil {
		return err
	}
	if err := p.noSyncFS.Rename(oldname, newname); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.touched[newname] = true
	if p.synced[oldname] {
		p.renamed[newname] = data
	} else {
		delete(p.renamed, newname) // a directory fsync now would commit unsynced data
	}
	return nil
}

func (p *powerLossFS) SyncDir(dir string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for name, data := range p.renamed {
		if filepath.Dir(name) == filepath.Clean(dir) {
			p.durable[name] = data
			delete(p.renamed, name)
		}
	}
	return nil
}

// powerLoss puts every checkpoint back to what is on disk.
func (p *powerLossFS) powerLoss(t *testing.T) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, name := range slices.Sorted(maps.Keys(p.touched)) {
		var err error
		if data, ok := p.durable[name]; ok {
			err = os.WriteFile(name, data, 0o644)
		} else {
			err = os.Remove(name)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	p.renamed = map[string][]byte{}
}

// replicaLog is a replica's log as far as a divergence check goes: its
// log end and its epoch cache.
type replicaLog struct {
	leo     int64
	entries []epochEntry
}

func (r replicaLog) String() string { return fmt.Sprintf("end %d epochs %v", r.leo, r.entries) }

// stateOf is l as a replicaLog.
func stateOf(l *Log) replicaLog {
	l.epochs.mu.RLock()
	defer l.epochs.mu.RUnlock()
	return replicaLog{leo: l.LogEndOffset(), entries: slices.Clone(l.epochs.entries)}
}

// truncationPoint runs the divergence check a follower makes against its
// leader (replica's followerFetch and applyFromLeader) to its end: while
// the leader answers the follower's last epoch with an older epoch or an
// end below the follower's log end, the follower truncates to that end or
// to where that epoch ends in its own log, if earlier. It returns where
// the follower's log ends then.
func truncationPoint(t *testing.T, leader, f replicaLog) int64 {
	t.Helper()
	lc := &epochCache{entries: leader.entries}
	c := &epochCache{entries: slices.Clone(f.entries)}
	c.setLastLocked()
	leo := f.leo
	for range 10 {
		last, ok := c.latest()
		if !ok {
			return leo
		}
		e, end := lc.endOffsetFor(last, leader.leo)
		if e >= last && end >= leo {
			return leo
		}
		if e < 0 {
			t.Fatalf("leader %v does not know epoch %d", leader, last)
		}
		to := end
		if fe, fend := c.endOffsetFor(e, leo); fe >= 0 {
			to = min(to, fend)
		}
		leo = min(leo, to)
		n := len(c.entries)
		for n > 0 && c.entries[n-1].StartOffset >= leo {
			n--
		}
		c.entries = c.entries[:n]
		c.setLastLocked()
	}
	t.Fatalf("divergence check against %v does not end (%v)", leader, f)
	return 0
}

func segmentCount(l *Log) int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.segs)
}

func openPowerLoss(t *testing.T, dir string, fsys FS, rp int64) *Log {
	t.Helper()
	l, err := OpenLog(dir, "t", 0, smallConfig(), rp, Options{FS: fsys})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// electedLog is a log led at epoch 1 (4 batches of 2 records, fsynced),
// then given epoch 5 by an election at its log end, 8 (epochs 2 to 4 were
// other leaders' that it never followed).
func electedLog(t *testing.T, dir string, fsys FS) *Log {
	t.Helper()
	l := openPowerLoss(t, dir, fsys, 0)
	if err := l.AssignEpochStart(1); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		mustAppend(t, l, makeBatch(2, 20, int64(i)), 1)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := l.AssignEpochStart(5); err != nil {
		t.Fatal(err)
	}
	return l
}

// TestEpochCheckpointLostAfterElection: a new leader writes its epoch
// into the checkpoint without fsync, and a power loss takes that write.
// The cache read back lacks the epoch, which had no record, as the cache
// recovered after a kill -9 that kept the write does. Restarted, the
// replica either leads again, at that epoch or a newer one, and records it
// at the same offset, which leaves the cache it would have had; or it
// follows a new leader, and its divergence checks truncate it to the same
// offset as with the epoch in its cache, whatever the new leader's log.
func TestEpochCheckpointLostAfterElection(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fsys := newPowerLossFS()
	l := electedLog(t, dir, fsys)
	before := stateOf(l)
	if want := []epochEntry{{1, 0}, {5, 8}}; !slices.Equal(before.entries, want) {
		t.Fatalf("cache %v, want %v", before.entries, want)
	}
	rp := l.RecoveryPoint()
	crashLog(l)
	// The same crash with the write kept (kill -9), on a copy.
	kept := t.TempDir()
	if err := os.CopyFS(kept, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	fsys.powerLoss(t)

	l = openPowerLoss(t, dir, fsys, rp)
	defer l.Close()
	after := stateOf(l)
	lk := openPowerLoss(t, kept, newPowerLossFS(), rp)
	if got := stateOf(lk); !slices.Equal(got.entries, after.entries) || got.leo != after.leo {
		t.Fatalf("after kill -9 %v, after the power loss %v", got, after)
	}
	if err := lk.Close(); err != nil {
		t.Fatal(err)
	}
	if want := before.entries[:1]; !slices.Equal(after.entries, want) || after.leo != 8 {
		t.Fatalf("after the power loss: %v, want epochs %v and end 8", after, want)
	}
	if n := len(readAll(t, l)); n != 4 {
		t.Fatalf("%d batches after the power loss, want 4", n)
	}

	// Every leader at epoch 6 this replica could follow: epochs of other
	// leaders it never followed (0, 2 to 4), logs longer or shorter.
	leaders := []replicaLog{
		{8, []epochEntry{{1, 0}, {6, 8}}},                    // in step
		{20, []epochEntry{{1, 0}, {6, 8}}},                   // and on at epoch 6
		{12, []epochEntry{{1, 0}, {6, 12}}},                  // epoch 1 records we do not have
		{5, []epochEntry{{1, 0}, {6, 5}}},                    // fewer epoch 1 records
		{10, []epochEntry{{0, 0}, {1, 4}, {6, 10}}},          // diverged at 4
		{12, []epochEntry{{1, 0}, {3, 6}, {6, 12}}},          // another leader's epoch from 6
		{11, []epochEntry{{1, 0}, {4, 8}, {6, 11}}},          // another's from our end
		{14, []epochEntry{{1, 0}, {2, 9}, {4, 11}, {6, 14}}}, // two past our end
		{3, []epochEntry{{2, 0}, {6, 3}}},                    // nothing in common
	}
	for _, x := range leaders {
		if got, want := truncationPoint(t, x, after), truncationPoint(t, x, before); got != want {
			t.Errorf("following %v: truncated to %d after the power loss, to %d before", x, got, want)
		}
	}

	// Leading again: at the same epoch (an image that has not moved on)
	// or a newer one, the cache is the one the lost write would have led to.
	for _, epoch := range []int32{5, 6} {
		if err := l.AssignEpochStart(epoch); err != nil {
			t.Fatal(err)
		}
		if got, want := stateOf(l).entries, []epochEntry{{1, 0}, {epoch, 8}}; !slices.Equal(got, want) {
			t.Fatalf("cache after election at %d: %v, want %v", epoch, got, want)
		}
	}
}

// TestEpochCheckpointSyncedBeforeRecoveryPoint: once records of the new
// epoch are below the recovery point (a flush, a roll's background flush,
// a close), the checkpoint naming the epoch is on disk, so recovery, which
// does not scan them again, still knows their epoch.
func TestEpochCheckpointSyncedBeforeRecoveryPoint(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"flush", "roll", "close"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			fsys := newPowerLossFS()
			l := electedLog(t, dir, fsys)
			batches := 3
			switch how {
			case "flush", "close":
				for i := range batches {
					mustAppend(t, l, makeBatch(2, 20, int64(i)), 5)
				}
			case "roll":
				// Past a segment of 4096 bytes: the append that rolls
				// queues the old segment's background flush.
				for batches = 0; segmentCount(l) < 2; batches++ {
					mustAppend(t, l, makeBatch(2, 200, int64(batches)), 5)
				}
			}
			leo := l.LogEndOffset()
			switch how {
			case "flush":
				if err := l.Flush(); err != nil {
					t.Fatal(err)
				}
			case "roll":
				l.flushWG.Wait()
				if l.RecoveryPoint() <= 8 {
					t.Fatalf("recovery point %d after the roll's flush", l.RecoveryPoint())
				}
			case "close":
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
			}
			rp := l.RecoveryPoint()
			if how != "close" {
				crashLog(l)
			}
			fsys.powerLoss(t)
			l = openPowerLoss(t, dir, fsys, rp)
			defer l.Close()
			if got, want := stateOf(l).entries, []epochEntry{{1, 0}, {5, 8}}; !slices.Equal(got, want) {
				t.Fatalf("cache after the power loss %v, want %v", got, want)
			}
			if l.LogEndOffset() != leo || len(readAll(t, l)) != 4+batches {
				t.Fatalf("log end %d, want %d", l.LogEndOffset(), leo)
			}
		})
	}
}

// TestEpochCheckpointUnflushedTailLost: records of the new epoch not yet
// flushed, and a power loss that keeps them but loses the checkpoint
// write: recovery cuts the log where the epoch the checkpoint does not
// know begins (that tail was never fsynced) and nothing below the
// recovery point; the cache is the log's.
func TestEpochCheckpointUnflushedTailLost(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fsys := newPowerLossFS()
	l := electedLog(t, dir, fsys)
	for i := range 3 {
		mustAppend(t, l, makeBatch(2, 20, int64(i)), 5)
	}
	rp := l.RecoveryPoint()
	crashLog(l)
	fsys.powerLoss(t)
	l = openPowerLoss(t, dir, fsys, rp)
	defer l.Close()
	if got, want := stateOf(l).entries, []epochEntry{{1, 0}}; !slices.Equal(got, want) {
		t.Fatalf("cache after the power loss %v, want %v", got, want)
	}
	if rp != 8 || l.LogEndOffset() != 8 || len(readAll(t, l)) != 4 {
		t.Fatalf("recovery point %d, log end %d after the power loss, want 8 and 8", rp, l.LogEndOffset())
	}
}

// TestEpochCheckpointReadBackUnsynced: a kill -9 after an election and
// some appends leaves the checkpoint written but not fsynced; the
// restarted log reads it from the page cache, finds the records past its
// recovery point whole and writes nothing, and must still fsync the
// checkpoint before its next flush moves the recovery point past the
// epoch's records, or a later power loss would take the epoch of records
// recovery no longer scans.
func TestEpochCheckpointReadBackUnsynced(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fsys := newPowerLossFS()
	l := electedLog(t, dir, fsys)
	for i := range 3 {
		mustAppend(t, l, makeBatch(2, 20, int64(i)), 5)
	}
	rp := l.RecoveryPoint()
	crashLog(l) // kill -9: the page cache keeps the write

	l = openPowerLoss(t, dir, fsys, rp)
	if got, want := stateOf(l).entries, []epochEntry{{1, 0}, {5, 8}}; !slices.Equal(got, want) {
		t.Fatalf("cache after kill -9 %v, want %v", got, want)
	}
	for i := range 2 {
		mustAppend(t, l, makeBatch(2, 20, int64(i)), 5)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	rp, leo := l.RecoveryPoint(), l.LogEndOffset()
	crashLog(l)
	fsys.powerLoss(t)

	l = openPowerLoss(t, dir, fsys, rp)
	defer l.Close()
	if got, want := stateOf(l).entries, []epochEntry{{1, 0}, {5, 8}}; !slices.Equal(got, want) {
		t.Fatalf("cache after the power loss %v, want %v", got, want)
	}
	if l.LogEndOffset() != leo || len(readAll(t, l)) != 9 {
		t.Fatalf("log end %d, want %d", l.LogEndOffset(), leo)
	}
}

// TestEpochCheckpointWrittenAhead: WriteEpochCheckpoint writes a new
// leader's epoch, recorded in memory at election, to the file without an
// fsync, and then the epoch's first append writes nothing more.
func TestEpochCheckpointWrittenAhead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var syncs, creates atomic.Int64
	efs := NewErrorFS(noSyncFS{})
	efs.SetInjector(func(op Op, path string) error {
		if isEpochCheckpoint(path) {
			switch op {
			case OpSync:
				syncs.Add(1)
			case OpCreate:
				creates.Add(1)
			}
		}
		return nil
	})
	l := openPowerLoss(t, dir, efs, 0)
	defer l.Close()
	if err := l.AssignEpochStart(4); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, LeaderEpochCheckpointFile)
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("checkpoint after the election: %v, want none yet", err)
	}
	if err := l.WriteEpochCheckpoint(); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(path); err != nil || string(data) != "0\n1\n4 0\n" {
		t.Fatalf("checkpoint %q %v, want epoch 4 from 0", data, err)
	}
	mustAppend(t, l, makeBatch(2, 20, 0), 4)
	if creates.Load() != 1 || syncs.Load() != 0 {
		t.Fatalf("%d files created, %d fsyncs, want 1 and 0", creates.Load(), syncs.Load())
	}
}

// followerBatch is a batch of n records as a follower copies it: at
// offset base, of leader epoch epoch.
func followerBatch(base int64, epoch int32, n int) []byte {
	b := makeBatch(n, 20, base)
	record.SetBaseOffset(b, base)
	record.SetPartitionLeaderEpoch(b, epoch)
	return b
}

// TestEpochCheckpointFollowerNewEpoch: a follower's copy of the first
// batch of a new epoch writes the checkpoint before the batch without an
// fsync (the append holds the log's append lock); the flush that moves
// the recovery point past the batch fsyncs it, so a power loss after the
// flush keeps the epoch, and one before it cuts the unflushed batches of
// the epoch the checkpoint on disk lacks, and nothing else.
func TestEpochCheckpointFollowerNewEpoch(t *testing.T) {
	t.Parallel()
	for _, flushed := range []bool{true, false} {
		t.Run(fmt.Sprintf("flushed=%v", flushed), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			plfs := newPowerLossFS()
			var syncs atomic.Int64
			efs := NewErrorFS(plfs)
			efs.SetInjector(func(op Op, path string) error {
				if op == OpSync && isEpochCheckpoint(path) {
					syncs.Add(1)
				}
				return nil
			})
			l := openPowerLoss(t, dir, efs, 0)
			// Epoch 1, flushed: on disk, checkpoint and records.
			for i := range 2 {
				if _, err := l.AppendAsFollower(followerBatch(int64(2*i), 1, 2)); err != nil {
					t.Fatal(err)
				}
			}
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			before := syncs.Load()
			for i := 2; i < 4; i++ {
				if _, err := l.AppendAsFollower(followerBatch(int64(2*i), 3, 2)); err != nil {
					t.Fatal(err)
				}
			}
			if n := syncs.Load() - before; n != 0 {
				t.Fatalf("%d fsyncs of the checkpoint by the appends of epoch 3, want 0", n)
			}
			want := []epochEntry{{1, 0}, {3, 4}}
			if data, err := os.ReadFile(filepath.Join(dir, LeaderEpochCheckpointFile)); err != nil || string(data) != "0\n2\n1 0\n3 4\n" {
				t.Fatalf("checkpoint before the power loss %q %v, want epochs %v", data, err, want)
			}
			leo := int64(8)
			if flushed {
				if err := l.Flush(); err != nil {
					t.Fatal(err)
				}
				if syncs.Load() == before {
					t.Fatal("the flush did not fsync the checkpoint")
				}
			} else {
				want, leo = want[:1], 4
			}
			rp := l.RecoveryPoint()
			crashLog(l)
			plfs.powerLoss(t)
			l = openPowerLoss(t, dir, plfs, rp)
			defer l.Close()
			if got := stateOf(l); !slices.Equal(got.entries, want) || got.leo != leo {
				t.Fatalf("after the power loss %v, want end %d epochs %v", got, leo, want)
			}
		})
	}
}
