package coordinator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/quirelog/quire/group"
	"github.com/quirelog/quire/metadata"
)

// TestCoordinatorGroupBlockedWhileBuiltHoldsUpNoOther: each group runs
// under its own lock. A write of group A fails, so A's Machine is rebuilt
// from the log on its next call, under A's lock, after a barrier (the
// failed write may still be applied). While that barrier is stuck,
// holding A's lock, a member of group B heartbeats and is answered, a new
// group C is joined and described, and A's own calls wait; once the
// barrier passes, A is served as the log has it. (With one lock over
// every group, B's heartbeat would wait for A's rebuild.)
func TestCoordinatorGroupBlockedWhileBuiltHoldsUpNoOther(t *testing.T) {
	t.Parallel()
	l := newFSMLog(t, metadata.LatestMetadataVersion)
	co := newTestCoordinator(t, l, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	if _, err := co.Heartbeat(ctx, join("A", "a1")); err != nil {
		t.Fatal(err)
	}
	rb, err := co.Heartbeat(ctx, join("B", "b1"))
	if err != nil {
		t.Fatal(err)
	}

	// A's next write fails: its Machine is to be rebuilt.
	w := &blockingWriter{group: "A", blocked: make(chan struct{}), release: make(chan struct{}),
		fail: fmt.Errorf("%w: injected", metadata.ErrNoQuorum)}
	close(w.release)
	l.hook = w.hook
	if _, err := co.Heartbeat(ctx, join("A", "a2")); !errors.Is(err, metadata.ErrNotCoordinator) {
		t.Fatalf("a join whose write failed answered %v", err)
	}

	// The rebuild's barrier is stuck until released.
	barrierWaits, barrierRelease := make(chan struct{}), make(chan struct{})
	var once sync.Once
	l.barrier = func(ctx context.Context) error {
		once.Do(func() { close(barrierWaits) })
		select {
		case <-barrierRelease:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	released := false
	defer func() {
		if !released {
			close(barrierRelease)
		}
	}()

	type described struct {
		d   group.Description
		err error
	}
	firstA := make(chan described, 1)
	go func() {
		d, err := co.Describe(ctx, "A")
		firstA <- described{d, err}
	}()
	select {
	case <-barrierWaits:
	case <-ctx.Done():
		t.Fatal("group A's rebuild never waited for a barrier")
	}
	// A's lock is held by its rebuild: the next call on A waits.
	secondA := make(chan error, 1)
	go func() {
		_, err := co.Heartbeat(ctx, group.Heartbeat{Group: "A", MemberID: "a1", MemberEpoch: 1})
		secondA <- err
	}()

	others := make(chan error, 1)
	go func() {
		others <- func() error {
			r, err := co.Heartbeat(ctx, group.Heartbeat{Group: "B", MemberID: "b1", MemberEpoch: rb.MemberEpoch})
			if err != nil {
				return err
			}
			if r.MemberEpoch != rb.MemberEpoch {
				return fmt.Errorf("B's member moved from epoch %d to %d", rb.MemberEpoch, r.MemberEpoch)
			}
			if _, err := co.Heartbeat(ctx, join("C", "c1")); err != nil {
				return err
			}
			d, err := co.Describe(ctx, "C")
			if err == nil && len(d.Members) != 1 {
				err = fmt.Errorf("group C described with %d members, want 1", len(d.Members))
			}
			return err
		}()
	}()
	select {
	case err := <-others:
		if err != nil {
			t.Fatalf("other groups while A's rebuild is stuck: %v", err)
		}
	case a := <-firstA:
		t.Fatalf("A described while its rebuild is stuck: %+v, %v", a.d, a.err)
	case <-ctx.Done():
		t.Fatal("other groups' heartbeats wait for group A's stuck rebuild")
	}
	select {
	case a := <-firstA:
		t.Fatalf("A described while its rebuild is stuck: %+v, %v", a.d, a.err)
	case err := <-secondA:
		t.Fatalf("A's heartbeat answered while its rebuild is stuck: %v", err)
	default:
	}

	close(barrierRelease)
	released = true
	a := <-firstA
	if a.err != nil || len(a.d.Members) != 1 || a.d.Members[0].MemberID != "a1" {
		t.Fatalf("A after the rebuild: %+v, %v; want a1 alone (a2's join was not written)", a.d, a.err)
	}
	if err := <-secondA; err != nil {
		t.Fatalf("A's heartbeat after the rebuild: %v", err)
	}
}

// TestCoordinatorNewTermLoadsTheLog: in a new leadership term the
// coordinator serves the groups as the log has them, those another
// controller wrote included, and drops what it knew that the log lacks.
func TestCoordinatorNewTermLoadsTheLog(t *testing.T) {
	t.Parallel()
	l := newFSMLog(t, metadata.LatestMetadataVersion)
	co := newTestCoordinator(t, l, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := co.Heartbeat(ctx, join("mine", "m")); err != nil {
		t.Fatal(err)
	}
	// Another controller's term: it removed "mine" and made "theirs".
	other, err := group.New(group.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Replay(l.Image().GroupRecords(), l.Image().PartitionCounts(), time.Now()); err != nil {
		t.Fatal(err)
	}
	_, left, err := other.Heartbeat(group.Heartbeat{Group: "mine", MemberID: "m", MemberEpoch: group.LeaveEpoch, Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	deleted, err := other.Delete("mine")
	if err != nil {
		t.Fatal(err)
	}
	hb := join("theirs", "x")
	hb.Now = time.Now()
	_, joined, err := other.Heartbeat(hb)
	if err != nil {
		t.Fatal(err)
	}
	for _, recs := range [][]group.Record{append(left, deleted...), joined} {
		if _, err := l.Apply(ctx, metadata.GroupRecordsCommand(recs, metadata.LatestMetadataVersion)); err != nil {
			t.Fatal(err)
		}
	}
	l.term.Store(2)

	states, err := co.States(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := states["mine"]; ok || len(states) != 1 {
		t.Fatalf("states in the new term: %v, want theirs alone", states)
	}
	d, err := co.Describe(ctx, "theirs")
	if err != nil || len(d.Members) != 1 || d.Members[0].MemberID != "x" {
		t.Fatalf("a group another controller wrote: %+v, %v", d, err)
	}
	if _, err := co.Describe(ctx, "mine"); !errors.Is(err, group.ErrUnknownGroup) {
		t.Fatalf("a group another controller deleted: %v, want unknown", err)
	}
}

// TestCoordinatorForgetsGroupsItHasNot: the map of groups keeps no place
// for a group looked at but unknown, nor for one deleted, once the ticker
// has passed; a group with members stays.
func TestCoordinatorForgetsGroupsItHasNot(t *testing.T) {
	t.Parallel()
	l := newFSMLog(t, metadata.LatestMetadataVersion)
	co := newTestCoordinator(t, l, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := co.Describe(ctx, "ghost"); !errors.Is(err, group.ErrUnknownGroup) {
		t.Fatalf("describe an unknown group: %v", err)
	}
	for _, id := range []string{"gone", "kept"} {
		if _, err := co.Heartbeat(ctx, join(id, "m")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := co.Heartbeat(ctx, group.Heartbeat{Group: "gone", MemberID: "m", MemberEpoch: group.LeaveEpoch}); err != nil {
		t.Fatal(err)
	}
	if err := co.DeleteMembership(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	if err := co.DeleteMembership(ctx, "kept"); !errors.Is(err, group.ErrNonEmptyGroup) {
		t.Fatalf("delete a group with a member: %v", err)
	}
	co.tick(ctx)
	if got := co.ids(); len(got) != 1 || got[0] != "kept" {
		t.Fatalf("groups after a tick: %v, want kept alone", got)
	}
	if l.Image().HasGroupState("gone") || !l.Image().HasGroupState("kept") {
		t.Fatal("the log does not have the groups as the coordinator does")
	}
}

// TestCoordinatorGroupsConcurrently: members of many groups join,
// heartbeat and commit-check at once while the ticker's passes (Tick,
// expiry) run beside them; every call is answered, and each group ends
// as the log has it. Run with -race, it checks the per-group locking.
func TestCoordinatorGroupsConcurrently(t *testing.T) {
	t.Parallel()
	l := newFSMLog(t, metadata.LatestMetadataVersion)
	co := newTestCoordinator(t, l, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const groups, members, rounds = 8, 3, 5
	stop := make(chan struct{})
	ticker := make(chan struct{})
	go func() {
		defer close(ticker)
		for {
			select {
			case <-stop:
				return
			default:
			}
			co.tick(ctx)
			co.nextExpiry = time.Time{}
			co.expire(ctx)
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, groups*members)
	for g := range groups {
		for m := range members {
			wg.Go(func() {
				id, mid := fmt.Sprintf("g%d", g), fmt.Sprintf("m%d", m)
				r, err := co.Heartbeat(ctx, join(id, mid))
				for i := 0; err == nil && i < rounds; i++ {
					r, err = co.Heartbeat(ctx, group.Heartbeat{Group: id, MemberID: mid, MemberEpoch: r.MemberEpoch,
						HasOwned: true, Owned: r.Assignment})
					if err == nil {
						err = co.ValidateCommit(ctx, id, metadata.GroupMember{ID: mid, Epoch: r.MemberEpoch})
					}
					if errors.Is(err, group.ErrStaleMemberEpoch) || errors.Is(err, group.ErrFencedMemberEpoch) {
						// The group moved on meanwhile (another member
						// joined): heartbeat again.
						err = nil
					}
				}
				if err != nil {
					err = fmt.Errorf("group %s member %s: %w", id, mid, err)
				}
				errs <- err
			})
		}
	}
	wg.Wait()
	close(stop)
	<-ticker
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	for g := range groups {
		id := fmt.Sprintf("g%d", g)
		d, err := co.Describe(ctx, id)
		epoch, n := groupOf(l, id)
		if err != nil || len(d.Members) != members || n != members || d.Epoch != epoch {
			t.Errorf("group %s: described %d members at epoch %d (%v); the log has %d at epoch %d", id, len(d.Members), d.Epoch, err, n, epoch)
		}
	}
}
