package replica

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quirelog/quire/storage"
)

// TestReplicaLogFailureGivesUpLeadership: a leader whose log fails on
// write (EIO) asks the controller for the ISR without itself, reports the
// failed log and its directory, asks again from the ISR check when the
// first ask was not answered, and once the image makes another broker
// leader its fetches only tell that leader its log failed.
func TestReplicaLogFailureGivesUpLeadership(t *testing.T) {
	efs := storage.NewErrorFS(storage.OSFS{})
	sm, err := storage.OpenManager(t.TempDir(), storage.DefaultLogConfig(), storage.Options{FS: efs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sm.Close() })
	rec := &scriptedRecorder{isrRecorder: isrRecorder{done: make(chan struct{}, 4)}, answers: []error{errors.New("controller unreachable")}}
	rm := newManagerOn(t, 1, sm, rec, nil)
	l := lead(t, rm, 0, []int32{1, 2, 3}, 5)
	efs.SetInjector(func(op storage.Op, path string) error {
		if op == storage.OpWrite && strings.Contains(path, "t-0") {
			return syscall.EIO
		}
		return nil
	})
	if _, err := l.Append(testBatch(1), -1); !errors.Is(err, storage.ErrLogFailed) {
		t.Fatalf("append on a failing disk: %v", err)
	}
	dir, ferr := l.LogFailure()
	if !errors.Is(ferr, storage.ErrLogFailed) || filepath.Base(dir) != "t-0" {
		t.Fatalf("log failure: %q %v", dir, ferr)
	}
	<-rec.done // unanswered
	rm.bg.Wait()
	l.maybeShrinkISR(time.Now(), time.Hour) // the ISR check asks again
	<-rec.done
	rm.bg.Wait()
	rec.mu.Lock()
	asks := slices.Clone(rec.asks)
	rec.mu.Unlock()
	if want := [][]int32{{2, 3}, {2, 3}}; !slices.EqualFunc(asks, want, slices.Equal[[]int32]) {
		t.Fatalf("asked for ISRs %v, want %v", asks, want)
	}
	// The controller made broker 2 leader; the image says so.
	if err := rm.apply("t", 0, Assignment{Leader: 2, LeaderEpoch: 1, PartitionEpoch: 2, Replicas: []int32{1, 2, 3}, ISR: []int32{2, 3}}); err != nil {
		t.Fatal(err)
	}
	if st := l.State(); st.Leader || st.LeaderID != 2 {
		t.Fatalf("after the image: %+v", st)
	}
	// It fetches from the new leader only to say its log failed.
	rm.fetchers.mu.Lock()
	f := rm.fetchers.fetchers[2]
	rm.fetchers.mu.Unlock()
	if f == nil {
		t.Fatal("no fetcher for the new leader")
	}
	req, _, _ := f.request(time.Now())
	// The request's partitions are the fetcher's buffer, which its own
	// goroutine fills again under f.mu at its next request: read under it.
	f.mu.Lock()
	reqParts := slices.Clone(req.Partitions)
	f.mu.Unlock()
	if len(reqParts) != 1 || !reqParts[0].LogFailed || reqParts[0].PartitionMaxBytes != 0 {
		t.Fatalf("fetch from the failed replica: %+v", reqParts)
	}
	if _, err := l.Append(testBatch(1), -1); !errors.As(err, new(*NotLeaderError)) {
		t.Fatalf("append after giving up: %v", err)
	}
}

// TestReplicaFollowerLogFailureLeavesISR: a follower whose log fails on
// write stops taking records and says so in its fetches; the leader drops
// it from the ISR at once (not after replica.lag.time.max.ms), so acks=all
// goes on with the others, and does not add it back while it says so.
func TestReplicaFollowerLogFailureLeavesISR(t *testing.T) {
	peers := inProcess{}
	fc := FetchConfig{MaxWait: 200 * time.Millisecond, Backoff: 10 * time.Millisecond, CallTimeoutSlop: 5 * time.Second}
	rec := &isrRecorder{done: make(chan struct{}, 8)}
	rm1 := newManagerPeers(t, 1, openStorage(t), rec, nil, peers, fc)
	peers[1] = rm1
	efs := storage.NewErrorFS(storage.OSFS{})
	sm2, err := storage.OpenManager(t.TempDir(), storage.DefaultLogConfig(), storage.Options{FS: efs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sm2.Close() })
	rm2 := newManagerPeers(t, 2, sm2, nil, nil, peers, fc)
	a := Assignment{Leader: 1, LeaderEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}
	for _, rm := range []*Manager{rm1, rm2} {
		if err := rm.apply("t", 0, a); err != nil {
			t.Fatal(err)
		}
	}
	l, _ := rm1.Partition("t", 0)
	f, _ := rm2.Partition("t", 0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	first, err := l.Append(testBatch(2), -1)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.AwaitReplicated(ctx, first); err != nil {
		t.Fatalf("acks=all before the failure: %v", err)
	}
	efs.SetInjector(func(op storage.Op, path string) error {
		if op == storage.OpWrite && strings.Contains(path, "t-0") {
			return syscall.EIO
		}
		return nil
	})
	second, err := l.Append(testBatch(2), -1)
	if err != nil {
		t.Fatal(err)
	}
	<-rec.done // the leader asked for the ISR without 2
	rm1.bg.Wait()
	if _, ferr := f.LogFailure(); !errors.Is(ferr, storage.ErrLogFailed) {
		t.Fatalf("follower's log failure: %v", ferr)
	}
	if err := l.AwaitReplicated(ctx, second); err != nil {
		t.Fatalf("acks=all after the follower left the ISR: %v", err)
	}
	if st := l.State(); !slices.Equal(st.ISR, []int32{1}) {
		t.Fatalf("leader's ISR %v", st.ISR)
	}
	// Its fetches go on, saying its log failed, at the leader's end: it is
	// never asked back in.
	for range 3 {
		resp, err := rm1.HandleFetch(ctx, &FetchRequest{ReplicaID: 2, Partitions: []FetchPartition{{Topic: "t",
			CurrentLeaderEpoch: 1, FetchOffset: l.LogEndOffset(), LastFetchedEpoch: 1, PartitionMaxBytes: 1 << 20, LogFailed: true}}})
		if err != nil || resp.Partitions[0].Err != nil || len(resp.Partitions[0].Records) != 0 {
			t.Fatalf("fetch from the failed follower: %+v %v", resp, err)
		}
		l.maybeShrinkISR(time.Now(), time.Hour)
	}
	rm1.bg.Wait()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if want := [][]int32{{1}}; !slices.EqualFunc(rec.asks, want, slices.Equal[[]int32]) {
		t.Fatalf("ISR changes asked %v, want %v", rec.asks, want)
	}
}

// TestReplicaStorageFailureOffTheAppendPath: a storage failure found
// outside an append takes the replica out of service as a failed append
// does: the leader asks the controller for the ISR without itself and
// reports the failure, though nothing is appended after it. Three places:
// a flush (the periodic one: flush.ms), the data directory's checkpoints
// (the directory is offline, so every log in it fails), and the fsync of
// the leader epoch checkpoint a flush makes once a new leader's records
// are to pass the recovery point (the election only changes the cache in
// memory, and the first append writes the file without fsync).
func TestReplicaStorageFailureOffTheAppendPath(t *testing.T) {
	cases := []struct {
		name   string
		inject func(op storage.Op, path string) error
		fail   func(t *testing.T, sm *storage.Manager, rm *Manager, p *Partition)
	}{
		{"flush", func(op storage.Op, path string) error {
			if op == storage.OpSync && strings.Contains(path, "t-0") {
				return syscall.EIO
			}
			return nil
		}, func(t *testing.T, sm *storage.Manager, rm *Manager, p *Partition) {
			if err := p.log.Flush(); !errors.Is(err, storage.ErrLogFailed) {
				t.Fatalf("flush on a failing disk: %v", err)
			}
		}},
		{"checkpoint", func(op storage.Op, path string) error {
			if (op == storage.OpWrite || op == storage.OpCreate) && strings.Contains(filepath.Base(path), "checkpoint") &&
				!strings.Contains(path, "t-0") {
				return syscall.EIO
			}
			return nil
		}, func(t *testing.T, sm *storage.Manager, rm *Manager, p *Partition) {
			if err := sm.Checkpoint(); err == nil {
				t.Fatal("checkpoint on a failing disk succeeded")
			}
		}},
		{"leader epoch", func(op storage.Op, path string) error {
			if op == storage.OpSync && strings.Contains(path, "t-0") && strings.Contains(path, "leader-epoch") {
				return syscall.EIO
			}
			return nil
		}, func(t *testing.T, sm *storage.Manager, rm *Manager, p *Partition) {
			// A new epoch: the leader records where it starts, and its
			// first record takes it to the file, unsynced.
			if err := rm.apply("t", 0, Assignment{Leader: 1, LeaderEpoch: 6, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}}); err != nil {
				t.Fatal(err)
			}
			if _, err := p.appendAsLeader(testBatch(1), 1, 1); err != nil {
				t.Fatal(err)
			}
			if err := p.log.Flush(); !errors.Is(err, storage.ErrLogFailed) {
				t.Fatalf("flush on a failing disk: %v", err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			efs := storage.NewErrorFS(storage.OSFS{})
			sm, err := storage.OpenManager(t.TempDir(), storage.DefaultLogConfig(), storage.Options{FS: efs})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = sm.Close() })
			rec := &isrRecorder{done: make(chan struct{}, 4)}
			rm := newManagerOn(t, 1, sm, rec, nil)
			p := lead(t, rm, 5, []int32{1, 2, 3}, 5, 3)
			efs.SetInjector(tc.inject)
			tc.fail(t, sm, rm, p)
			select {
			case <-rec.done:
			case <-time.After(30 * time.Second):
				t.Fatal("the leader never asked to leave the ISR")
			}
			rm.bg.Wait()
			rec.mu.Lock()
			asks := slices.Clone(rec.asks)
			rec.mu.Unlock()
			if len(asks) == 0 || !slices.Equal(asks[0], []int32{2, 3}) {
				t.Fatalf("asked for ISRs %v, want [2 3] first", asks)
			}
			if _, ferr := p.LogFailure(); !errors.Is(ferr, storage.ErrLogFailed) {
				t.Fatalf("log failure: %v", ferr)
			}
			if _, err := p.appendAsLeader(testBatch(1), 1, 1); err == nil {
				t.Fatal("a failed log took an append")
			}
		})
	}
}
