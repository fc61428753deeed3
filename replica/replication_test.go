package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/quirelog/quire/storage"
)

// replicaOn is a replica manager for node id with topic "t" configured.
func replicaOn(t *testing.T, id int32) *Manager {
	t.Helper()
	return newTestManager(t, id, nil, nil)
}

// lead makes rm lead t-0 at epoch over replicas 1..3 (all in sync) and
// appends batches of n records.
func lead(t *testing.T, rm *Manager, epoch int32, isr []int32, batches ...int) *Partition {
	t.Helper()
	if err := rm.apply("t", 0, Assignment{Leader: rm.nodeID, LeaderEpoch: epoch, Replicas: []int32{1, 2, 3}, ISR: isr}); err != nil {
		t.Fatal(err)
	}
	p, _ := rm.Partition("t", 0)
	for _, n := range batches {
		if _, err := p.appendAsLeader(testBatch(n), 1, 1); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func follow(t *testing.T, rm *Manager, leader, epoch int32) *Partition {
	t.Helper()
	if err := rm.apply("t", 0, Assignment{Leader: leader, LeaderEpoch: epoch, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}}); err != nil {
		t.Fatal(err)
	}
	p, _ := rm.Partition("t", 0)
	return p
}

// fetchOnce is one round of a follower's fetch from leader, without the
// network: the leader's checks, its read, and the follower applying the
// answer. It returns the bytes appended.
func fetchOnce(t *testing.T, leader, follower *Partition, followerID int32) int {
	t.Helper()
	st := follower.state()
	f := &FetchPartition{Topic: "t", CurrentLeaderEpoch: st.leaderEpoch,
		FetchOffset: follower.log.LogEndOffset(), LastFetchedEpoch: follower.lastFetchedEpoch()}
	in := fromLeader{leaderEpoch: st.leaderEpoch, fetchOffset: f.FetchOffset}
	div, err := leader.followerFetch(followerID, f, time.Now())
	switch {
	case errors.Is(err, storage.ErrOffsetOutOfRange):
		in.outOfRange = true
	case err != nil:
		t.Fatalf("follower fetch: %v", err)
	case div != nil:
		in.diverging = div
	default:
		res, err := leader.readForFollower(nil, f.FetchOffset, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		in.records = res.Batches
	}
	in.highWatermark, in.logStartOffset, in.logEndOffset = leader.HighWatermark(), leader.log.LogStartOffset(), leader.log.LogEndOffset()
	n, err := follower.applyFromLeader(in)
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	return n
}

// syncUp fetches until the follower has the leader's log end offset.
func syncUp(t *testing.T, leader, follower *Partition, followerID int32) {
	t.Helper()
	for i := 0; follower.log.LogEndOffset() != leader.log.LogEndOffset(); i++ {
		if i > 20 {
			t.Fatalf("follower at %d, leader at %d after 20 fetches", follower.log.LogEndOffset(), leader.log.LogEndOffset())
		}
		fetchOnce(t, leader, follower, followerID)
	}
	fetchOnce(t, leader, follower, followerID) // report the LEO: moves the HW
}

func logContents(t *testing.T, p *Partition) []byte {
	t.Helper()
	res, err := p.log.Read(p.log.LogStartOffset(), math.MaxInt32, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	var all []byte
	for off := p.log.LogStartOffset(); off < p.log.LogEndOffset(); off = res.HighOffset {
		if res, err = p.log.Read(off, 1<<20, math.MaxInt64); err != nil {
			t.Fatal(err)
		}
		all = append(all, res.Batches...)
	}
	return all
}

// TestReplicaCopiesAndMovesHW: a follower copies the leader's
// batches byte for byte (offsets and epochs kept), and the leader's HW
// moves to the smallest LEO over the ISR as the followers report theirs.
func TestReplicaCopiesAndMovesHW(t *testing.T) {
	l := lead(t, replicaOn(t, 1), 3, []int32{1, 2, 3}, 5, 3)
	f2 := follow(t, replicaOn(t, 2), 1, 3)
	f3 := follow(t, replicaOn(t, 3), 1, 3)
	if l.HighWatermark() != 0 {
		t.Fatalf("hw %d before any follower fetched", l.HighWatermark())
	}
	syncUp(t, l, f2, 2)
	if l.HighWatermark() != 0 {
		t.Fatalf("hw %d while follower 3 has not fetched", l.HighWatermark())
	}
	syncUp(t, l, f3, 3)
	if l.HighWatermark() != 8 {
		t.Fatalf("hw %d, want 8", l.HighWatermark())
	}
	fetchOnce(t, l, f2, 2) // learns the HW
	if f2.HighWatermark() != 8 {
		t.Fatalf("follower hw %d, want 8", f2.HighWatermark())
	}
	if !bytes.Equal(logContents(t, l), logContents(t, f2)) || !bytes.Equal(logContents(t, l), logContents(t, f3)) {
		t.Fatal("follower logs differ from the leader's")
	}
	if e, _ := f2.log.LatestEpoch(); e != 3 {
		t.Fatalf("follower's latest epoch %d, want the leader's 3", e)
	}
}

// TestReplicaDivergedFollowerTruncates: a replica that led at
// epoch 1 and took records nobody copied becomes a follower of the epoch 2
// leader; its fetch at epoch 1 gets the divergence (epoch 0 ends at 5), it
// truncates there and copies the leader's epoch 2 records.
func TestReplicaDivergedFollowerTruncates(t *testing.T) {
	rm1, rm2 := replicaOn(t, 1), replicaOn(t, 2)
	l := lead(t, rm1, 0, []int32{1, 2}, 5)
	f := follow(t, rm2, 1, 0)
	syncUp(t, l, f, 2)
	// Node 2 leads epoch 1 alone for a while and takes 3 records.
	lead(t, rm2, 1, []int32{2}, 3)
	// Node 1 leads epoch 2 and takes 4 others.
	lead(t, rm1, 2, []int32{1, 2}, 4)
	f = follow(t, rm2, 1, 2)
	if f.log.LogEndOffset() != 8 {
		t.Fatalf("diverged follower at %d", f.log.LogEndOffset())
	}
	fetchOnce(t, l, f, 2)
	if leo := f.log.LogEndOffset(); leo != 5 {
		t.Fatalf("after the divergence the follower is at %d, want 5 (end of epoch 0)", leo)
	}
	syncUp(t, l, f, 2)
	if !bytes.Equal(logContents(t, l), logContents(t, f)) {
		t.Fatal("follower log differs from the leader's after truncation")
	}
	if e, end := f.log.EndOffsetForEpoch(1); e == 1 {
		t.Fatalf("epoch 1 still in the follower's history (ends at %d)", end)
	}
}

// TestReplicaFollowerRestartsAtLeaderLogStart: a follower whose
// log end lies below the leader's log start (retention deleted what it
// needs) is answered out of range and restarts its log there.
func TestReplicaFollowerRestartsAtLeaderLogStart(t *testing.T) {
	l := lead(t, replicaOn(t, 1), 0, []int32{1}, 5, 5)
	if err := l.log.DeleteRecordsBefore(5); err != nil {
		t.Fatal(err)
	}
	f := follow(t, replicaOn(t, 2), 1, 0)
	fetchOnce(t, l, f, 2)
	if f.log.LogStartOffset() != 5 || f.log.LogEndOffset() != 5 {
		t.Fatalf("follower log [%d, %d), want to restart at 5", f.log.LogStartOffset(), f.log.LogEndOffset())
	}
	syncUp(t, l, f, 2)
	if f.log.LogEndOffset() != 10 {
		t.Fatalf("follower at %d, want 10", f.log.LogEndOffset())
	}
}

// TestReplicaFetchRefusals: what a leader refuses in a follower's
// fetch, with the error a follower acts on.
func TestReplicaFetchRefusals(t *testing.T) {
	l := lead(t, replicaOn(t, 1), 4, []int32{1, 2, 3}, 5)
	now := time.Now()
	for _, tc := range []struct {
		name    string
		replica int32
		f       *FetchPartition
		want    error
	}{
		{"not a replica", 7, &FetchPartition{CurrentLeaderEpoch: 4, LastFetchedEpoch: -1}, ErrInvalidRequest},
		{"the leader itself", 1, &FetchPartition{CurrentLeaderEpoch: 4, LastFetchedEpoch: -1}, ErrInvalidRequest},
		{"older epoch", 2, &FetchPartition{CurrentLeaderEpoch: 3, LastFetchedEpoch: -1}, ErrFencedLeaderEpoch},
		{"newer epoch", 2, &FetchPartition{CurrentLeaderEpoch: 5, LastFetchedEpoch: -1}, ErrUnknownLeaderEpoch},
		{"past the log end", 2, &FetchPartition{CurrentLeaderEpoch: 4, FetchOffset: 6, LastFetchedEpoch: -1}, storage.ErrOffsetOutOfRange},
		{"negative offset", 2, &FetchPartition{CurrentLeaderEpoch: 4, FetchOffset: -1, LastFetchedEpoch: -1}, storage.ErrOffsetOutOfRange},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := l.followerFetch(tc.replica, tc.f, now)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if err.Error() == "" {
				t.Fatal("no message")
			}
		})
	}
	if l.HighWatermark() != 0 {
		t.Fatalf("refused fetches moved the HW to %d", l.HighWatermark())
	}
	f := follow(t, replicaOn(t, 2), 3, 4)
	if _, err := f.followerFetch(3, &FetchPartition{CurrentLeaderEpoch: 4, LastFetchedEpoch: -1}, now); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("fetch from a follower: %v", err)
	}
}

// isrRecorder stands in for the controller: it records ISR changes and
// commits them with the next partition epoch.
type isrRecorder struct {
	mu   sync.Mutex
	asks [][]int32
	done chan struct{}
}

func (r *isrRecorder) AlterPartition(_ context.Context, topic string, p int32, a Assignment) (Assignment, error) {
	r.mu.Lock()
	r.asks = append(r.asks, slices.Clone(a.ISR))
	r.mu.Unlock()
	a.PartitionEpoch++
	r.done <- struct{}{}
	return a, nil
}

// TestReplicaISRShrinkAndExpand: the leader asks to drop a follower that
// has not caught up for replica.lag.time.max.ms, keeps one that fetches,
// and asks to add the dropped one back once it reaches the HW; the
// committed ISR is what min.insync.replicas counts.
func TestReplicaISRShrinkAndExpand(t *testing.T) {
	rec := &isrRecorder{done: make(chan struct{}, 4)}
	rm := newTestManager(t, 1, rec, nil)
	t0 := time.Now()
	if err := rm.apply("t", 0, Assignment{Leader: 1, LeaderEpoch: 0, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}}); err != nil {
		t.Fatal(err)
	}
	l, _ := rm.Partition("t", 0)
	if _, err := l.appendAsLeader(testBatch(5), 1, 1); err != nil {
		t.Fatal(err)
	}
	lag := 30 * time.Second
	if _, err := l.followerFetch(2, &FetchPartition{FetchOffset: 5, LastFetchedEpoch: 0}, t0.Add(lag)); err != nil {
		t.Fatal(err)
	}
	l.maybeShrinkISR(t0.Add(lag/2), lag)
	l.maybeShrinkISR(t0.Add(lag+time.Second), lag)
	<-rec.done
	rm.bg.Wait()
	if st := l.state(); !slices.Equal(st.isr, []int32{1, 2}) || st.partitionEpoch != 1 {
		t.Fatalf("after the shrink: isr %v, partition epoch %d", st.isr, st.partitionEpoch)
	}
	if _, err := l.appendAsLeader(testBatch(1), -1, 3); !errors.Is(err, ErrNotEnoughReplicas) {
		t.Fatalf("acks=all with 2 in sync and min.insync.replicas 3: %v", err)
	}
	// Follower 3 behind the HW stays out; at the HW it is asked back in.
	if _, err := l.followerFetch(3, &FetchPartition{FetchOffset: 2, LastFetchedEpoch: 0}, t0.Add(lag+2*time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := l.followerFetch(3, &FetchPartition{FetchOffset: 5, LastFetchedEpoch: 0}, t0.Add(lag+3*time.Second)); err != nil {
		t.Fatal(err)
	}
	<-rec.done
	rm.bg.Wait()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if want := [][]int32{{1, 2}, {1, 2, 3}}; !slices.EqualFunc(rec.asks, want, slices.Equal[[]int32]) {
		t.Fatalf("ISR changes asked %v, want %v", rec.asks, want)
	}
	if st := l.state(); !slices.Equal(st.isr, []int32{1, 2, 3}) || st.partitionEpoch != 2 {
		t.Fatalf("after the expansion: isr %v, partition epoch %d", st.isr, st.partitionEpoch)
	}
}

// TestReplicaNewLeaderWithoutAppendsKeepsCommitted: a follower
// that has a record the new leader lacks (never committed) fetches from a
// leader that has appended nothing in its epoch: it cuts just that record,
// keeping everything committed. (Without the new epoch recorded at
// election, the leader would not know the follower's last epoch, and the
// follower would throw its whole log away.)
func TestReplicaNewLeaderWithoutAppendsKeepsCommitted(t *testing.T) {
	rm1, rm2, rm3 := replicaOn(t, 1), replicaOn(t, 2), replicaOn(t, 3)
	l := lead(t, rm1, 0, []int32{1, 2, 3}, 5)
	f2, f3 := follow(t, rm2, 1, 0), follow(t, rm3, 1, 0)
	syncUp(t, l, f2, 2)
	syncUp(t, l, f3, 3)
	if l.HighWatermark() != 5 {
		t.Fatalf("hw %d", l.HighWatermark())
	}
	// Node 2 leads epoch 1 and appends two records nobody copies.
	lead(t, rm2, 1, []int32{1, 2, 3}, 2)
	// Node 3 leads epoch 2 and appends nothing; node 2 follows it.
	newLeader := lead(t, rm3, 2, []int32{2, 3})
	f2 = follow(t, rm2, 3, 2)
	fetchOnce(t, newLeader, f2, 2)
	if f2.log.LogEndOffset() != 5 || f2.log.LogStartOffset() != 0 {
		t.Fatalf("follower log [%d, %d), want [0, 5): the committed records kept, the uncommitted one cut",
			f2.log.LogStartOffset(), f2.log.LogEndOffset())
	}
	syncUp(t, newLeader, f2, 2)
	if !bytes.Equal(logContents(t, newLeader), logContents(t, f2)) {
		t.Fatal("follower log differs from the new leader's")
	}
	if e, _ := f2.log.LatestEpoch(); e != 0 {
		// The new leader has no batch of epoch 2 yet; the follower's own
		// epoch 1 entry is gone with its records.
		t.Fatalf("follower's latest epoch %d, want 0", e)
	}
}

// TestReplicaWaitHWRefusesAfterLeadershipMoves: an acks=all wait does not
// succeed on a HW this replica follows from another leader, even past the
// offset: the record at that offset may be another one by then.
func TestReplicaWaitHWRefusesAfterLeadershipMoves(t *testing.T) {
	rm := replicaOn(t, 1)
	l := lead(t, rm, 3, []int32{1, 2})
	info, err := l.appendAsLeader(testBatch(2), -1, 1)
	if err != nil {
		t.Fatal(err)
	}
	f := follow(t, rm, 2, 4)
	f.followHW(10) // as if it had copied the new leader's log: capped at its LEO, 2
	if f.HighWatermark() <= info.LastOffset {
		t.Fatalf("hw %d, want past %d", f.HighWatermark(), info.LastOffset)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = l.waitHW(ctx, info.LeaderEpoch, info.LastOffset, 1)
	var nle *NotLeaderError
	if !errors.As(err, &nle) || nle.Leader != 2 {
		t.Fatalf("wait after losing the leadership: %v", err)
	}
}

// blockingRecorder is an isrRecorder whose commits wait for release.
type blockingRecorder struct {
	isrRecorder
	release chan struct{}
}

func (r *blockingRecorder) AlterPartition(ctx context.Context, topic string, p int32, a Assignment) (Assignment, error) {
	<-r.release
	return r.isrRecorder.AlterPartition(ctx, topic, p, a)
}

// TestReplicaHWCountsPendingISRAddition: while a follower's return to the
// ISR is being committed, the HW does not pass it (KIP-497's maximal ISR),
// so it never joins an ISR below the HW.
func TestReplicaHWCountsPendingISRAddition(t *testing.T) {
	rec := &blockingRecorder{isrRecorder: isrRecorder{done: make(chan struct{}, 4)}, release: make(chan struct{})}
	rm := newTestManager(t, 1, rec, nil)
	l := lead(t, rm, 0, []int32{1, 2}, 5)
	now := time.Now()
	fetch := func(id int32, off int64) {
		t.Helper()
		if _, err := l.followerFetch(id, &FetchPartition{FetchOffset: off, LastFetchedEpoch: 0}, now); err != nil {
			t.Fatal(err)
		}
	}
	fetch(2, 5)
	if l.HighWatermark() != 5 {
		t.Fatalf("hw %d", l.HighWatermark())
	}
	fetch(3, 5) // caught up: asked into the ISR
	if _, err := l.appendAsLeader(testBatch(5), 1, 1); err != nil {
		t.Fatal(err)
	}
	fetch(2, 10)
	if hw := l.HighWatermark(); hw != 5 {
		t.Fatalf("hw %d passed follower 3 (at 5) while its addition is pending", hw)
	}
	close(rec.release)
	<-rec.done
	rm.bg.Wait()
	if st := l.state(); !slices.Equal(st.isr, []int32{1, 2, 3}) {
		t.Fatalf("isr %v", st.isr)
	}
	fetch(3, 10)
	if hw := l.HighWatermark(); hw != 10 {
		t.Fatalf("hw %d, want 10", hw)
	}
}

// TestReplicaFencedFollowerNotAddedToISR: a follower whose broker the
// controller has fenced keeps fetching, but the leader does not ask for it
// in the ISR; dropping a lagging member is not held up by it.
func TestReplicaFencedFollowerNotAddedToISR(t *testing.T) {
	rec := &isrRecorder{done: make(chan struct{}, 4)}
	rm := newTestManager(t, 1, rec, brokersFunc(func(id int32) (Registration, bool) { return Registration{Fenced: id == 3}, true }))
	t0 := time.Now()
	l := lead(t, rm, 0, []int32{1, 2}, 5)
	for i := range 5 {
		if _, err := l.followerFetch(3, &FetchPartition{FetchOffset: 5, LastFetchedEpoch: 0}, t0.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	rm.bg.Wait()
	rec.mu.Lock()
	asks := len(rec.asks)
	rec.mu.Unlock()
	if asks != 0 {
		t.Fatalf("asked %d times to add a fenced broker", asks)
	}
	lag := 30 * time.Second
	l.maybeShrinkISR(t0.Add(lag+time.Minute), lag)
	<-rec.done
	rm.bg.Wait()
	if st := l.state(); !slices.Equal(st.isr, []int32{1}) {
		t.Fatalf("isr %v after follower 2 went silent", st.isr)
	}
}

// scriptedRecorder answers ISR changes from a script of errors (nil:
// commit), recording what was asked.
type scriptedRecorder struct {
	isrRecorder
	answers []error
	release chan struct{} // if set, each answer waits for it
}

func (r *scriptedRecorder) AlterPartition(ctx context.Context, topic string, p int32, a Assignment) (Assignment, error) {
	if r.release != nil {
		<-r.release
	}
	r.mu.Lock()
	var err error
	if len(r.answers) > 0 {
		err, r.answers = r.answers[0], r.answers[1:]
	}
	r.mu.Unlock()
	if err != nil {
		r.mu.Lock()
		r.asks = append(r.asks, slices.Clone(a.ISR))
		r.mu.Unlock()
		r.done <- struct{}{}
		return a, err
	}
	return r.isrRecorder.AlterPartition(ctx, topic, p, a)
}

// TestReplicaISRChangeOutcomes: a stale image does not undo a committed
// ISR change; a refused addition lets the HW go on without the follower;
// an unanswered one keeps counting it and is sent again until answered.
func TestReplicaISRChangeOutcomes(t *testing.T) {
	t.Run("stale image", func(t *testing.T) {
		rec := &isrRecorder{done: make(chan struct{}, 4)}
		rm := newTestManager(t, 1, rec, nil)
		l := lead(t, rm, 0, []int32{1, 2}, 5)
		for _, id := range []int32{2, 3} {
			if _, err := l.followerFetch(id, &FetchPartition{FetchOffset: 5, LastFetchedEpoch: 0}, time.Now()); err != nil {
				t.Fatal(err)
			}
		}
		<-rec.done
		rm.bg.Wait()
		// The image the watcher reconciles next still has the old ISR.
		if err := rm.apply("t", 0, Assignment{Leader: 1, LeaderEpoch: 0, PartitionEpoch: 0, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}}); err != nil {
			t.Fatal(err)
		}
		if st := l.state(); !slices.Equal(st.isr, []int32{1, 2, 3}) || st.partitionEpoch != 1 {
			t.Fatalf("an older image rewound the ISR to %v at partition epoch %d", st.isr, st.partitionEpoch)
		}
	})
	t.Run("refused", func(t *testing.T) {
		rec := &scriptedRecorder{isrRecorder: isrRecorder{done: make(chan struct{}, 4)},
			answers: []error{fmt.Errorf("%w: fenced", ErrISRRefused)}, release: make(chan struct{})}
		rm := newTestManager(t, 1, rec, nil)
		l := lead(t, rm, 0, []int32{1}, 5)
		if _, err := l.followerFetch(2, &FetchPartition{FetchOffset: 5, LastFetchedEpoch: 0}, time.Now()); err != nil {
			t.Fatal(err)
		}
		if _, err := l.appendAsLeader(testBatch(5), -1, 1); err != nil {
			t.Fatal(err)
		}
		if hw := l.HighWatermark(); hw != 5 {
			t.Fatalf("hw %d passed follower 2 while its addition is pending", hw)
		}
		close(rec.release) // now the controller refuses
		<-rec.done
		rm.bg.Wait()
		if hw := l.HighWatermark(); hw != 10 {
			t.Fatalf("hw %d after the addition was refused, want 10 (ISR [1])", hw)
		}
	})
	t.Run("unanswered", func(t *testing.T) {
		rec := &scriptedRecorder{isrRecorder: isrRecorder{done: make(chan struct{}, 4)}, answers: []error{errors.New("controller unreachable")}}
		rm := newTestManager(t, 1, rec, nil)
		l := lead(t, rm, 0, []int32{1}, 5)
		now := time.Now()
		if _, err := l.followerFetch(2, &FetchPartition{FetchOffset: 5, LastFetchedEpoch: 0}, now); err != nil {
			t.Fatal(err)
		}
		<-rec.done
		rm.bg.Wait()
		if _, err := l.appendAsLeader(testBatch(5), -1, 1); err != nil {
			t.Fatal(err)
		}
		if hw := l.HighWatermark(); hw != 5 {
			t.Fatalf("hw %d passed follower 2 while its addition may have been committed", hw)
		}
		l.maybeShrinkISR(now.Add(time.Minute), time.Hour) // sends it again
		<-rec.done
		rm.bg.Wait()
		rec.mu.Lock()
		asks := slices.Clone(rec.asks)
		rec.mu.Unlock()
		if want := [][]int32{{1, 2}, {1, 2}}; !slices.EqualFunc(asks, want, slices.Equal[[]int32]) {
			t.Fatalf("asked %v, want %v", asks, want)
		}
		if st := l.state(); !slices.Equal(st.isr, []int32{1, 2}) || st.partitionEpoch != 1 {
			t.Fatalf("isr %v at partition epoch %d", st.isr, st.partitionEpoch)
		}
	})
	// A change left unanswered, then another one answered (here refused)
	// before the unanswered one was sent again: the answer settles both,
	// and nothing is sent again. The retry once went out with the ISR
	// asked for already cleared, an empty ISR, which the controller takes
	// as the leader giving its replica up: the partition went offline.
	t.Run("unanswered, then refused", func(t *testing.T) {
		rec := &scriptedRecorder{isrRecorder: isrRecorder{done: make(chan struct{}, 4)},
			answers: []error{errors.New("controller unreachable"), fmt.Errorf("%w: stale epoch", ErrISRRefused)}}
		rm := newTestManager(t, 1, rec, nil)
		l := lead(t, rm, 0, []int32{1}, 5)
		if _, err := l.followerFetch(2, &FetchPartition{FetchOffset: 5, LastFetchedEpoch: 0}, time.Now()); err != nil {
			t.Fatal(err)
		}
		<-rec.done
		rm.bg.Wait()
		// Past the retry backoff, follower 3 catches up: a new change
		// goes out first, and is refused.
		later := time.Now().Add(time.Minute)
		if _, err := l.followerFetch(3, &FetchPartition{FetchOffset: 5, LastFetchedEpoch: 0}, later); err != nil {
			t.Fatal(err)
		}
		<-rec.done
		rm.bg.Wait()
		l.maybeShrinkISR(later.Add(time.Minute), time.Hour)
		rm.bg.Wait()
		rec.mu.Lock()
		asks := slices.Clone(rec.asks)
		rec.mu.Unlock()
		for _, isr := range asks {
			if !slices.Contains(isr, 1) {
				t.Fatalf("asked for ISR %v without the leader (asks %v): the leader gave its replica up", isr, asks)
			}
		}
		if want := [][]int32{{1, 2}, {1, 3}}; !slices.EqualFunc(asks, want, slices.Equal[[]int32]) {
			t.Fatalf("asked %v, want %v", asks, want)
		}
	})
}

// handingOffRecorder commits an ISR change as a completed reassignment
// that makes replica to the leader, at the next leader epoch.
type handingOffRecorder struct {
	to   int32
	done chan struct{}
}

func (r *handingOffRecorder) AlterPartition(_ context.Context, topic string, p int32, a Assignment) (Assignment, error) {
	a.PartitionEpoch++
	a.Leader, a.LeaderEpoch = r.to, a.LeaderEpoch+1
	r.done <- struct{}{}
	return a, nil
}

// TestReplicaHWStaysWhenLeadershipIsHandedOff: an ISR change the
// controller answers with another leader (a reassignment completed,
// moving the leadership to the replica just added) stops the old
// leader's HW until its image catches up: the new leader fetches no
// more, and a HW counted over the other followers would acknowledge
// records the new leader lacks.
func TestReplicaHWStaysWhenLeadershipIsHandedOff(t *testing.T) {
	rec := &handingOffRecorder{to: 3, done: make(chan struct{}, 1)}
	rm := newTestManager(t, 1, rec, nil)
	now := time.Now()
	if err := rm.apply("t", 0, Assignment{Leader: 1, LeaderEpoch: 0, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}}); err != nil {
		t.Fatal(err)
	}
	l, _ := rm.Partition("t", 0)
	if _, err := l.appendAsLeader(testBatch(5), 1, 1); err != nil {
		t.Fatal(err)
	}
	for _, id := range []int32{2, 3} { // both at the LEO: 3 is asked into the ISR
		if _, err := l.followerFetch(id, &FetchPartition{FetchOffset: 5, LastFetchedEpoch: 0}, now); err != nil {
			t.Fatal(err)
		}
	}
	<-rec.done
	rm.bg.Wait()
	if _, err := l.appendAsLeader(testBatch(5), 1, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := l.followerFetch(2, &FetchPartition{FetchOffset: 10, LastFetchedEpoch: 0}, now); err != nil {
		t.Fatal(err)
	}
	if hw := l.HighWatermark(); hw > 5 {
		t.Fatalf("HW %d passed the new leader 3's log end (5)", hw)
	}
}
