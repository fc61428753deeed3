package subscribe

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/request"
)

// TestServeRefusedAckGoesOn: an ack of an offset never sent is answered
// on the stream, naming it, and nothing of it is applied (the good
// offsets in it neither); the stream goes on, takes a correct ack and
// commits it when it ends.
func TestServeRefusedAckGoesOn(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := newFakeBroker()
	b.batches[0] = subTestBatch(0, 3, 10, 1)
	b.answer = func(req *request.GroupHeartbeat) (*request.GroupHeartbeatResult, error) {
		resp := &request.GroupHeartbeatResult{MemberID: req.MemberID, MemberEpoch: 1, HeartbeatIntervalMs: 10}
		if req.MemberEpoch == 0 {
			resp.Assignment = assignment(0)
		}
		return resp, nil
	}
	st := newFakeStream(ctx)
	wait := serve(b, st, ordersStart)
	st.next(t) // the assignment
	if got := batchOffsets(st.next(t).GetBatch()); !slices.Equal(got, span(0, 3)) {
		t.Fatalf("records %v, want 0..2", got)
	}
	bad := &quirev1.SubscribeAck{Partitions: []*quirev1.AckedOffsets{{Topic: "orders", Partition: 0, Offsets: []int64{0, 1, 2, 9}}}}
	st.in <- &quirev1.SubscribeRequest{Request: &quirev1.SubscribeRequest_Ack{Ack: bad}}
	r := st.next(t).GetAckRefused()
	if r == nil || !strings.Contains(r.GetError().GetMessage(), "ack of orders-0 offset 9, which this stream was not sent") ||
		len(r.GetAck().GetPartitions()) != 1 {
		t.Fatalf("after a bad ack: %v, want it refused, naming offset 9", r)
	}
	st.in <- &quirev1.SubscribeRequest{Request: &quirev1.SubscribeRequest_Ack{Ack: &quirev1.SubscribeAck{
		Partitions: []*quirev1.AckedOffsets{{Topic: "orders", Partition: 0, NextOffset: 2}}}}}
	close(st.in)
	if err := wait(t); err != nil {
		t.Fatalf("Serve after a refused ack and a clean close: %v, want nil", err)
	}
	if i := indexOf(b.log(), "commit orders-0 at 2 by epoch 1"); i < 0 {
		t.Fatalf("no commit at 2 (the good ack after the refused one): %q", b.log())
	}
	if i := indexOf(b.log(), "commit orders-0 at 3"); i >= 0 {
		t.Fatalf("a commit at 3: the refused ack was applied: %q", b.log())
	}
}

// TestServeBrokenLeaves: a stream cancelled by its client leaves the
// group at once (epoch -1); a static member's leaves its place to its
// instance (epoch -2).
func TestServeBrokenLeaves(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		instance string
		leave    string
	}{
		{"", "heartbeat epoch -1"},
		{"pod-1", "heartbeat epoch -2"},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		b := newFakeBroker()
		st := newFakeStream(ctx)
		start := &quirev1.SubscribeStart{Group: "g", Subscription: &quirev1.GroupSubscription{Topics: []string{"orders"}}, InstanceId: tc.instance}
		b.answer = func(req *request.GroupHeartbeat) (*request.GroupHeartbeatResult, error) {
			resp := &request.GroupHeartbeatResult{MemberID: req.MemberID, MemberEpoch: 1, HeartbeatIntervalMs: 60_000}
			if req.MemberEpoch == 0 {
				resp.Assignment = assignment(0)
			}
			return resp, nil
		}
		wait := serve(b, st, start)
		st.next(t) // the assignment
		cancel()
		if err := wait(t); err != nil {
			t.Fatalf("instance %q: Serve after the stream broke: %v", tc.instance, err)
		}
		if indexOf(b.log(), tc.leave) < 0 || (tc.instance != "" && indexOf(b.log(), "heartbeat epoch -1") >= 0) {
			t.Fatalf("instance %q: calls %q, want %q", tc.instance, b.log(), tc.leave)
		}
	}
}

// TestServeTakesOverItsMember: a stream started with a member id and
// epoch ends the stream of that member on this node, which commits and
// does not leave, then heartbeats at that epoch, with its subscription
// and owning nothing, and has the member's assignment.
func TestServeTakesOverItsMember(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := newFakeBroker()
	var mu sync.Mutex
	var takeover *request.GroupHeartbeat
	b.answer = func(req *request.GroupHeartbeat) (*request.GroupHeartbeatResult, error) {
		resp := &request.GroupHeartbeatResult{MemberID: req.MemberID, MemberEpoch: 1, HeartbeatIntervalMs: 60_000}
		switch {
		case req.MemberEpoch == 0:
			resp.Assignment = assignment(0, 1)
		case req.Subscription != nil:
			mu.Lock()
			takeover = req
			mu.Unlock()
			resp.Assignment = assignment(0, 1)
		}
		return resp, nil
	}
	first := newFakeStream(ctx)
	wait1 := serve(b, first, ordersStart)
	a := first.next(t).GetAssignment()
	if a.GetMemberEpoch() != 1 || !slices.Equal(parts(a.GetAssigned()), []string{"orders-0", "orders-1"}) {
		t.Fatalf("first stream: %v", a)
	}
	second := newFakeStream(ctx)
	start := proto.Clone(ordersStart).(*quirev1.SubscribeStart)
	start.MemberId, start.MemberEpoch = a.MemberId, a.MemberEpoch
	wait2 := serve(b, second, start)
	if err := wait1(t); !errors.Is(err, errFenced) {
		t.Fatalf("the first stream ended with %v, want taken over (fenced)", err)
	}
	a2 := second.next(t).GetAssignment()
	if a2.GetMemberId() != a.MemberId || a2.GetMemberEpoch() != 1 || !slices.Equal(parts(a2.GetAssigned()), []string{"orders-0", "orders-1"}) {
		t.Fatalf("second stream: %v, want member %s's orders-0 and 1 at epoch 1", a2, a.MemberId)
	}
	mu.Lock()
	hb := takeover
	mu.Unlock()
	if hb == nil || hb.MemberID != a.MemberId || hb.MemberEpoch != 1 || hb.Owned == nil || len(hb.Owned.Topics) != 0 || hb.RebalanceTimeoutMs <= 0 {
		t.Fatalf("take-over heartbeat %+v, want member %s at epoch 1 with its subscription, owning nothing", hb, a.MemberId)
	}
	if i := indexOf(b.log(), "heartbeat epoch -1"); i >= 0 {
		t.Fatalf("the member left (event %d) when taken over: %q", i, b.log())
	}
	close(second.in)
	if err := wait2(t); err != nil {
		t.Fatalf("second stream: %v", err)
	}
}

// TestWants: what in the image makes a stream heartbeat at once.
func TestWants(t *testing.T) {
	t.Parallel()
	tp := func(ps ...int32) []request.GroupPartition {
		var out []request.GroupPartition
		for _, p := range ps {
			out = append(out, request.GroupPartition{Topic: "orders", Partition: p})
		}
		return out
	}
	s := &subscription{epoch: 3, owned: map[partKey]*subPart{
		{"orders", 0}: {tp: partKey{"orders", 0}},
		{"orders", 1}: {tp: partKey{"orders", 1}},
	}}
	for _, tc := range []struct {
		name string
		v    MemberView
		want bool
	}{
		{"reconciled", MemberView{GroupEpoch: 3, Epoch: 3, Target: tp(0, 1)}, false},
		{"a partition to give up", MemberView{GroupEpoch: 4, Epoch: 3, Target: tp(0)}, true},
		{"a free partition to take", MemberView{GroupEpoch: 3, Epoch: 3, Target: tp(0, 1, 2)}, true},
		{"a partition another still holds", MemberView{GroupEpoch: 3, Epoch: 3, Target: tp(0, 1, 2), Held: tp(2)}, false},
		{"a member gone", MemberView{GroupEpoch: 4, Epoch: 3, Target: tp(0, 1)}, true},
		{"an epoch not seen", MemberView{GroupEpoch: 4, Epoch: 4, Target: tp(0, 1)}, true},
	} {
		if got := s.wants(tc.v); got != tc.want {
			t.Errorf("%s: wants %v, want %v", tc.name, got, tc.want)
		}
	}
	// A partition already revoking asks for nothing more.
	s.owned[partKey{"orders", 1}].revokeBy = s.owned[partKey{"orders", 1}].revokeBy.AddDate(1, 0, 0)
	if s.wants(MemberView{GroupEpoch: 3, Epoch: 3, Target: tp(0)}) {
		t.Error("a partition revoking: wants a heartbeat")
	}
}
