package coordinator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	pb "github.com/quirelog/quire/api/metapb"
	"github.com/quirelog/quire/group"
	"github.com/quirelog/quire/internal/poll"
	"github.com/quirelog/quire/metadata"
)

// blockingWriter holds every GroupRecords command of one group written
// through a log until released.
type blockingWriter struct {
	group   string
	once    sync.Once
	blocked chan struct{} // closed when the first write of group waits
	release chan struct{}
	fail    error // if set, the first write of group fails with it
}

// hook is an fsmLog hook.
func (w *blockingWriter) hook(_ context.Context, cmd *pb.Command) error {
	if !slices.Contains(cmdGroups(cmd), w.group) {
		return nil
	}
	first := false
	w.once.Do(func() { close(w.blocked); first = true })
	<-w.release
	if first && w.fail != nil {
		return w.fail
	}
	return nil
}

// cmdGroups names the groups a GroupRecords command writes.
func cmdGroups(cmd *pb.Command) []string {
	var out []string
	for _, r := range cmd.GetGroupRecords().GetRecords() {
		for _, m := range []interface{ GetGroup() string }{r.GetMemberMetadata(), r.GetMemberAssignment(), r.GetMemberRemoved(),
			r.GetGroupEpoch(), r.GetTargetAssignment(), r.GetGroupDeleted()} {
			if g := m.GetGroup(); g != "" && !slices.Contains(out, g) {
				out = append(out, g)
			}
		}
	}
	return out
}

// TestCoordinatorGroupsProgressWhileOneWriteIsStuck: the coordinator holds
// no lock shared by all groups across a metadata write. While one group's
// write is stuck, members of twenty other groups join and are answered;
// the stuck group's next change waits for its turn (it is not answered
// before the first is written), and once the write goes through both
// reach the log in the order the Machine made them.
func TestCoordinatorGroupsProgressWhileOneWriteIsStuck(t *testing.T) {
	t.Parallel()
	l := newFSMLog(t, metadata.LatestMetadataVersion)
	w := &blockingWriter{group: "slow", blocked: make(chan struct{}), release: make(chan struct{})}
	l.hook = w.hook
	co := newTestCoordinator(t, l, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	released := false
	defer func() {
		if !released {
			close(w.release)
		}
	}()

	type answer struct {
		resp group.Response
		err  error
	}
	first, second := make(chan answer, 1), make(chan answer, 1)
	go func() {
		r, err := co.Heartbeat(ctx, join("slow", "m1"))
		first <- answer{r, err}
	}()
	select {
	case <-w.blocked:
	case <-ctx.Done():
		t.Fatal("the slow group's write never started")
	}
	go func() {
		r, err := co.Heartbeat(ctx, join("slow", "m2"))
		second <- answer{r, err}
	}()

	// A call that changes nothing answers only once its group's earlier
	// changes are in the log.
	described := make(chan error, 1)
	go func() {
		_, err := co.Describe(ctx, "slow")
		described <- err
	}()

	const groups = 20
	errs := make(chan error, groups)
	for i := range groups {
		go func() {
			id := fmt.Sprintf("g%d", i)
			r, err := co.Heartbeat(ctx, join(id, "m"))
			if err == nil && r.MemberEpoch <= 0 {
				err = fmt.Errorf("group %s: joined at epoch %d", id, r.MemberEpoch)
			}
			errs <- err
		}()
	}
	for range groups {
		select {
		case err := <-errs:
			if err != nil {
				t.Fatalf("a join while another group's write is stuck: %v", err)
			}
		case <-ctx.Done():
			t.Fatal("joins of other groups wait for the stuck group's write")
		}
	}
	select {
	case a := <-first:
		t.Fatalf("the stuck change was answered before its write: %+v", a)
	case a := <-second:
		t.Fatalf("the stuck group's next change was answered before the first was written: %+v", a)
	case err := <-described:
		t.Fatalf("the stuck group was described before its change was written (%v)", err)
	default:
	}

	close(w.release)
	released = true
	a1, a2 := <-first, <-second
	if a1.err != nil || a2.err != nil {
		t.Fatalf("after the release: %v, %v", a1.err, a2.err)
	}
	if err := <-described; err != nil {
		t.Fatalf("describe after the release: %v", err)
	}
	// In the log in the Machine's order: the second join's group epoch
	// last, with both members.
	epoch, members := groupOf(l, "slow")
	if epoch != 2 || members != 2 {
		t.Fatalf("the slow group in the image: epoch %d, %d members", epoch, members)
	}
	d, err := co.Describe(ctx, "slow")
	if err != nil || d.Epoch != epoch {
		t.Fatalf("described at epoch %d (%v), the log has %d", d.Epoch, err, epoch)
	}
}

// TestCoordinatorFailedWriteDropsTheChangesAfterIt: when a group's write
// fails, the change of the same group computed after it on the Machine
// (which assumed the first) is not written either, both are answered
// ErrNotCoordinator, and the Machine is rebuilt from the log: the next
// join finds the group as the log has it.
func TestCoordinatorFailedWriteDropsTheChangesAfterIt(t *testing.T) {
	t.Parallel()
	l := newFSMLog(t, metadata.LatestMetadataVersion)
	w := &blockingWriter{group: "slow", blocked: make(chan struct{}), release: make(chan struct{}),
		fail: fmt.Errorf("%w: injected", metadata.ErrNoQuorum)}
	l.hook = w.hook
	co := newTestCoordinator(t, l, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	first, second := make(chan error, 1), make(chan error, 1)
	go func() {
		_, err := co.Heartbeat(ctx, join("slow", "m1"))
		first <- err
	}()
	select {
	case <-w.blocked:
	case <-ctx.Done():
		close(w.release)
		t.Fatal("the slow group's write never started")
	}
	// The second join is computed on the Machine that has the first.
	go func() {
		_, err := co.Heartbeat(ctx, join("slow", "m2"))
		second <- err
	}()
	poll.True(t, "the second join to wait for its turn", func() bool {
		co.mu.RLock()
		g := co.groups["slow"]
		co.mu.RUnlock()
		g.turns.mu.Lock()
		defer g.turns.mu.Unlock()
		return g.turns.next == 2
	})
	close(w.release)
	if err := <-first; !errors.Is(err, metadata.ErrNotCoordinator) {
		t.Fatalf("the failed write answered %v", err)
	}
	if err := <-second; !errors.Is(err, metadata.ErrNotCoordinator) {
		t.Fatalf("the change after the failed write answered %v", err)
	}
	if l.Image().HasGroupState("slow") {
		t.Fatal("the log has the group after both writes were dropped")
	}
	r, err := co.Heartbeat(ctx, join("slow", "m3"))
	if err != nil {
		t.Fatal(err)
	}
	if epoch, members := groupOf(l, "slow"); members != 1 || epoch != 1 || r.MemberEpoch != 1 {
		t.Fatalf("after the rebuild: member epoch %d, image at epoch %d with %d members", r.MemberEpoch, epoch, members)
	}
}
