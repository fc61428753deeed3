package replica

import (
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
// leader it follows without fetching into the failed log.
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
	rm.fetchers.mu.Lock()
	_, fetching := rm.fetchers.where[l]
	rm.fetchers.mu.Unlock()
	if fetching {
		t.Fatal("a failed replica fetches from the new leader")
	}
	if _, err := l.Append(testBatch(1), -1); !errors.As(err, new(*NotLeaderError)) {
		t.Fatalf("append after giving up: %v", err)
	}
}
