package sharegroup

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/quirelog/quire/internal/poll"
	"github.com/quirelog/quire/share"
)

// A call changes a share-partition, then saves it (PersistSince) once
// done: ShareFetch after its long poll. Between the two, the state the
// change was made to can be replaced: dropped when another call's save
// is refused, then restored from the store, or restored on a new lease.
// The change went with it, and the call must not be answered as saved
// because a later state, without it, was saved meanwhile
// (TestClusterShareKeyOrderedFailures saw kq-1@0-2 delivered at count
// 1 to one member and accepted at count 1 by another).

// TestSharePersistDeliveryLostToARestoreNotHandedOut: x's fetch
// acquires 0-2; before it saves, the state is dropped (a save refused)
// and restored, y's fetch acquires 0-2 again at delivery count 1 and
// saves. x's save must fail: 0-2 are y's, and handing them to x as well
// is two first deliveries of each.
func TestSharePersistDeliveryLostToARestoreNotHandedOut(t *testing.T) {
	m := newMetaStore()
	m.lead(tp, 1, 0)
	log := &memLog{hw: 3, keys: []string{"a", "b", "c"}}
	n1 := newNode(t, m, 1)
	join(t, n1, "x")
	join(t, n1, "y")
	ctx := context.Background()
	tps := []TopicPartition{tp}
	first := []share.AcquiredRange{{First: 0, Last: 2, DeliveryCount: 1}}

	markX := n1.MarkGroup("g")
	f, err := n1.Acquire(t0, "g", "x", tp, 3, log)
	if err != nil || fmt.Sprint(f.Acquired) != fmt.Sprint(first) {
		t.Fatalf("x acquired %v, %v; want %v", f.Acquired, err, first)
	}
	// Another call's save is refused (the leadership moved away; a
	// group's settings changed does it under one lease): the state is
	// dropped. The node leads again.
	m.lead(tp, 2, 1)
	if errs := n1.Persist(ctx, "g", tps); errs[0] == nil {
		t.Fatal("a save under a lost lease answered saved")
	}
	m.lead(tp, 1, 2)

	markY := n1.MarkGroup("g")
	f, err = n1.Acquire(t0, "g", "y", tp, 3, log)
	if err != nil || fmt.Sprint(f.Acquired) != fmt.Sprint(first) {
		t.Fatalf("y acquired %v, %v; want %v (nothing was saved of x's)", f.Acquired, err, first)
	}
	if errs := n1.PersistSince(ctx, "g", tps, markY); errs[0] != nil {
		t.Fatalf("y's save: %v", errs[0])
	}
	errs := n1.PersistSince(ctx, "g", tps, markX)
	if errs[0] == nil {
		t.Fatal("x's acquisition of 0-2, dropped with the state, answered saved: 0-2 handed to x and y, each at delivery count 1")
	}
	if !errors.Is(errs[0], ErrStateNotSaved) {
		t.Fatalf("x's save: %v, want ErrStateNotSaved", errs[0])
	}
}

// TestSharePersistAckLostToARestoreNotAnsweredSaved: x accepts 0-2;
// before its save the state is replaced by the one saved before the
// acceptance, from which y gets 0-2 again. x must hear that its
// acceptance did not count, whether the state was dropped by a refused
// save and restored, or restored on a new lease with nothing refused.
func TestSharePersistAckLostToARestoreNotAnsweredSaved(t *testing.T) {
	for _, refused := range []bool{true, false} {
		t.Run(fmt.Sprintf("refused=%v", refused), func(t *testing.T) {
			m := newMetaStore()
			m.lead(tp, 1, 0)
			log := &memLog{hw: 3, keys: []string{"a", "b", "c"}}
			n1 := newNode(t, m, 1)
			join(t, n1, "x")
			join(t, n1, "y")
			ctx := context.Background()
			tps := []TopicPartition{tp}
			if _, err := n1.Acquire(t0, "g", "x", tp, 3, log); err != nil {
				t.Fatal(err)
			}
			persist(t, n1, tp)

			markX := n1.MarkGroup("g")
			if _, err := n1.Acknowledge(t0, "g", "x", tp, []share.Ack{{First: 0, Last: 2, Type: share.Accept}}); err != nil {
				t.Fatal(err)
			}
			m.lead(tp, 2, 1)
			if refused {
				if errs := n1.Persist(ctx, "g", tps); errs[0] == nil {
					t.Fatal("a save under a lost lease answered saved")
				}
			}
			m.lead(tp, 1, 2)

			markY := n1.MarkGroup("g")
			f, err := n1.Acquire(t0, "g", "y", tp, 3, log)
			if err != nil {
				t.Fatal(err)
			}
			yErr := n1.PersistSince(ctx, "g", tps, markY)[0]
			xErr := n1.PersistSince(ctx, "g", tps, markX)[0]
			if xErr == nil {
				t.Fatalf("x's acceptance of 0-2 answered saved, yet the state saved has them for another delivery (y acquired %v, its save %v)", f.Acquired, yErr)
			}
			if !errors.Is(xErr, ErrStateNotSaved) {
				t.Fatalf("x's save: %v, want ErrStateNotSaved", xErr)
			}
			if refused && (yErr != nil || !slices.Equal(offsets(f.Acquired), []int64{0, 1, 2})) {
				// Its mark came after the drop: its delivery is saved.
				t.Fatalf("y acquired %v, saved %v; want 0-2, saved", f.Acquired, yErr)
			}
		})
	}
}

// TestSharePersistBatchAnswersOnlyTheStateWritten: two saves of one
// share-partition queued behind a third go in one write, the later
// state only. When the earlier was of a state replaced since (a new
// lease, restored), the change it carried is not in the one written,
// and its caller must not be answered by that write.
func TestSharePersistBatchAnswersOnlyTheStateWritten(t *testing.T) {
	m := newMetaStore()
	other := TopicPartition{Topic: "t", Partition: 1}
	m.lead(tp, 1, 0)
	m.lead(other, 1, 0)
	log := &memLog{hw: 3, keys: []string{"a", "b", "c"}}
	n1 := newNode(t, m, 1)
	join(t, n1, "x")
	join(t, n1, "y")
	ctx := context.Background()
	for _, p := range []TopicPartition{tp, other} {
		if _, err := n1.Acquire(t0, "g", "x", p, 3, log); err != nil {
			t.Fatal(err)
		}
	}
	persist(t, n1, tp, other)

	// A save of the other partition is under way, held at the store.
	m.saving, m.gate = make(chan struct{}, 8), make(chan struct{})
	if _, err := n1.Acknowledge(t0, "g", "x", other, []share.Ack{{First: 0, Last: 0, Type: share.Accept}}); err != nil {
		t.Fatal(err)
	}
	go n1.Persist(ctx, "g", []TopicPartition{other})
	<-m.saving

	// x accepts 0-2 of tp; its save queues.
	markX := n1.MarkGroup("g")
	if _, err := n1.Acknowledge(t0, "g", "x", tp, []share.Ack{{First: 0, Last: 2, Type: share.Accept}}); err != nil {
		t.Fatal(err)
	}
	doneX := make(chan error, 1)
	go func() { doneX <- n1.PersistSince(ctx, "g", []TopicPartition{tp}, markX)[0] }()
	poll.True(t, "x's save to queue", func() bool {
		n1.saver.mu.Lock()
		defer n1.saver.mu.Unlock()
		return len(n1.saver.pending) == 1
	})
	// The leadership moves and comes back; y's fetch restores the saved
	// state (0-2 x's, not accepted) and gets 0-2 again; a save of that
	// state queues behind x's.
	m.lead(tp, 2, 1)
	m.lead(tp, 1, 2)
	f, err := n1.Acquire(t0, "g", "y", tp, 3, log)
	if err != nil || !slices.Equal(offsets(f.Acquired), []int64{0, 1, 2}) {
		t.Fatalf("y acquired %v, %v; want 0-2", f.Acquired, err)
	}
	doneY := make(chan error, 1)
	go func() { doneY <- n1.Persist(ctx, "g", []TopicPartition{tp})[0] }()
	poll.True(t, "the restored state's save to queue", func() bool {
		n1.saver.mu.Lock()
		defer n1.saver.mu.Unlock()
		return len(n1.saver.pending) == 2
	})
	m.saving = nil
	close(m.gate)
	if err := <-doneY; err != nil {
		t.Fatalf("the restored state's save: %v", err)
	}
	xErr := <-doneX
	if xErr == nil {
		t.Fatalf("x's acceptance of 0-2 answered saved by the write of a state without it (saved: %v)", m.saved[skey("g", tp)].Snapshot)
	}
	if !errors.Is(xErr, ErrStateNotSaved) {
		t.Fatalf("x's save: %v, want ErrStateNotSaved", xErr)
	}
}
