package subscribe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	grpcmd "google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/auth"
	"github.com/quirelog/quire/internal/wire"
	"github.com/quirelog/quire/request"
)

// A stream's member run against a fake broker and a fake stream: what it
// asks of the broker, in what order, and what the client sees.

// errFenced stands for the coordinator's FENCED_MEMBER_EPOCH.
var errFenced = errors.New("fake: fenced member epoch")

// fakeBroker answers a member's calls from the test's script and keeps
// them in order in events.
type fakeBroker struct {
	mu     sync.Mutex
	events []string
	// answer answers a heartbeat; nil answers epoch 1, nothing changed.
	answer  func(hb *request.GroupHeartbeat) (*request.GroupHeartbeatResult, error)
	batches map[int32][]byte // orders-N's log, read once from offset 0
	read    map[int32]bool
	closing chan struct{}
	denied  string // a topic the caller may not read
	// fetchRefused: the core refuses every fetch (the caller's Read
	// taken away).
	fetchRefused error
	streams      *Streams
}

func newFakeBroker() *fakeBroker {
	return &fakeBroker{batches: map[int32][]byte{}, read: map[int32]bool{}, closing: make(chan struct{}), streams: NewStreams()}
}

func (f *fakeBroker) note(format string, args ...any) {
	f.mu.Lock()
	f.events = append(f.events, fmt.Sprintf(format, args...))
	f.mu.Unlock()
}

func (f *fakeBroker) log() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.events)
}

func (f *fakeBroker) ConsumerGroupHeartbeat(_ context.Context, hb *request.GroupHeartbeat) (*request.GroupHeartbeatResult, error) {
	var owned []string
	if hb.Owned != nil {
		for _, t := range hb.Owned.Topics {
			for _, p := range t.Partitions {
				owned = append(owned, fmt.Sprintf("%s-%d", t.Topic, p))
			}
		}
	}
	f.note("heartbeat epoch %d owned %v", hb.MemberEpoch, owned)
	f.mu.Lock()
	answer := f.answer
	f.mu.Unlock()
	if answer != nil {
		return answer(hb)
	}
	return &request.GroupHeartbeatResult{MemberID: hb.MemberID, MemberEpoch: 1, HeartbeatIntervalMs: 10}, nil
}

func (f *fakeBroker) CommitOffsets(_ context.Context, req *request.CommitOffsetsRequest) (time.Time, error) {
	for _, o := range req.Offsets {
		f.note("commit %s-%d at %d by epoch %d", o.Topic, o.Partition, o.Offset, req.MemberEpoch)
	}
	return time.Now(), nil
}

func (f *fakeBroker) FetchOffsets(_ context.Context, _ string, tps []request.GroupPartition) ([]request.CommittedOffset, error) {
	out := make([]request.CommittedOffset, len(tps))
	for i, tp := range tps {
		out[i] = request.CommittedOffset{Topic: tp.Topic, Partition: tp.Partition, Offset: -1, LeaderEpoch: -1}
	}
	return out, nil
}

func (f *fakeBroker) ListOffsetsAnywhere(_ context.Context, parts []request.ListOffsetsPartition) ([]request.ListOffsetsResult, error) {
	out := make([]request.ListOffsetsResult, len(parts))
	for i, p := range parts {
		out[i] = request.ListOffsetsResult{Topic: p.Topic, Partition: p.Partition, Offset: 0, Timestamp: -1, LeaderEpoch: -1}
	}
	return out, nil
}

func (f *fakeBroker) Fetch(ctx context.Context, req *request.FetchRequest) ([]request.FetchResult, error) {
	if !req.Route {
		return nil, errors.New("fake: a fetch not routed to the leaders")
	}
	f.mu.Lock()
	refused := f.fetchRefused
	f.mu.Unlock()
	if refused != nil {
		f.note("fetch refused")
		return nil, refused
	}
	out := make([]request.FetchResult, len(req.Partitions))
	any := false
	f.mu.Lock()
	for i, sp := range req.Partitions {
		f.events = append(f.events, fmt.Sprintf("fetch %s-%d from %d", sp.Topic, sp.Partition, sp.Offset))
		out[i].FetchPartition = sp
		if b := f.batches[sp.Partition]; b != nil && sp.Offset == 0 && !f.read[sp.Partition] {
			f.read[sp.Partition] = true
			out[i].Records = b
			any = true
		}
	}
	f.mu.Unlock()
	if !any {
		<-ctx.Done() // a long poll with nothing to read
	}
	return out, nil
}

func (f *fakeBroker) DeniedTopics(_ context.Context, op auth.Operation, names []string) map[string]error {
	if op != auth.OpRead {
		return nil
	}
	for _, t := range names {
		if t == f.denied {
			return map[string]error{t: fmt.Errorf("fake: not allowed to read %q", t)}
		}
	}
	return nil
}

func (f *fakeBroker) ClientHost(context.Context) string { return "127.0.0.1" }
func (f *fakeBroker) Status(err error) error            { return err }
func (f *fakeBroker) Error(err error) *quirev1.Error {
	if errors.Is(err, errFenced) {
		return &quirev1.Error{Code: quirev1.ErrorCode_FENCED_MEMBER_EPOCH, Message: err.Error()}
	}
	if errors.Is(err, request.ErrGroupAuthorizationFailed) {
		return &quirev1.Error{Code: quirev1.ErrorCode_GROUP_AUTHORIZATION_FAILED, Message: err.Error()}
	}
	return &quirev1.Error{Code: quirev1.ErrorCode_UNKNOWN_SERVER_ERROR, Message: err.Error()}
}
func (f *fakeBroker) Closing() <-chan struct{} { return f.closing }
func (f *fakeBroker) ShuttingDown() error      { return errors.New("fake: shutting down") }
func (f *fakeBroker) Logger() hclog.Logger     { return hclog.NewNullLogger() }
func (f *fakeBroker) Streams() *Streams        { return f.streams }

// GroupChanges: the fake has no image; its heartbeats' answers say it
// all.
func (f *fakeBroker) GroupChanges() (<-chan struct{}, func())  { return nil, func() {} }
func (f *fakeBroker) Member(string, string) (MemberView, bool) { return MemberView{}, false }
func (f *fakeBroker) TakenOver(group, member string) error {
	return fmt.Errorf("%w: member %q of %q taken over", errFenced, member, group)
}

// fakeStream is the client's end: in carries its messages (closed: the
// client closed its side), out what the member sent it.
type fakeStream struct {
	ctx context.Context
	in  chan *quirev1.SubscribeRequest
	out chan *quirev1.SubscribeResponse
}

func newFakeStream(ctx context.Context) *fakeStream {
	return &fakeStream{ctx: ctx, in: make(chan *quirev1.SubscribeRequest, 16), out: make(chan *quirev1.SubscribeResponse, 64)}
}

func (s *fakeStream) Recv() (*quirev1.SubscribeRequest, error) {
	select {
	case m, ok := <-s.in:
		if !ok {
			return nil, io.EOF
		}
		return m, nil
	case <-s.ctx.Done():
		return nil, s.ctx.Err()
	}
}

func (s *fakeStream) Send(m *quirev1.SubscribeResponse) error {
	select {
	case s.out <- m:
		return nil
	case <-s.ctx.Done():
		return s.ctx.Err()
	}
}

// SendMsg takes the pre-encoded records messages as gRPC's codec would.
func (s *fakeStream) SendMsg(m any) error {
	switch m := m.(type) {
	case *wire.Encoded:
		var r quirev1.SubscribeResponse
		err := proto.Unmarshal(m.Data.Materialize(), &r)
		m.Data.Free()
		if err != nil {
			return err
		}
		return s.Send(&r)
	case *quirev1.SubscribeResponse:
		return s.Send(m)
	}
	return fmt.Errorf("fake stream: cannot send %T", m)
}

func (s *fakeStream) RecvMsg(any) error          { return errors.New("fake stream: RecvMsg") }
func (s *fakeStream) SetHeader(grpcmd.MD) error  { return nil }
func (s *fakeStream) SendHeader(grpcmd.MD) error { return nil }
func (s *fakeStream) SetTrailer(grpcmd.MD)       {}
func (s *fakeStream) Context() context.Context   { return s.ctx }

// next returns the next message the member sent, failing after a while.
func (s *fakeStream) next(t *testing.T) *quirev1.SubscribeResponse {
	t.Helper()
	select {
	case m := <-s.out:
		return m
	case <-time.After(time.Minute):
		t.Fatal("no message from the stream within a minute")
		return nil
	}
}

// serve runs Serve in the background; wait returns its result.
func serve(b *fakeBroker, st *fakeStream, start *quirev1.SubscribeStart) (wait func(t *testing.T) error) {
	done := make(chan error, 1)
	st.in <- &quirev1.SubscribeRequest{Request: &quirev1.SubscribeRequest_Start{Start: start}}
	go func() { done <- Serve(st.ctx, b, b, st) }()
	return func(t *testing.T) error {
		t.Helper()
		select {
		case err := <-done:
			return err
		case <-time.After(time.Minute):
			t.Fatal("Serve did not return within a minute")
			return nil
		}
	}
}

func assignment(ps ...int32) *request.GroupAssignment {
	keys := make([]partKey, len(ps))
	for i, p := range ps {
		keys[i] = partKey{"orders", p}
	}
	return partsToGroupAssignment(keys)
}

// indexOf is the index of the first event with prefix, -1 for none.
func indexOf(events []string, prefix string) int {
	return slices.IndexFunc(events, func(e string) bool { return strings.HasPrefix(e, prefix) })
}

// waitEvent polls b's events until one starts with prefix.
func waitEvent(t *testing.T, b *fakeBroker, prefix string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for indexOf(b.log(), prefix) < 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no %q within 10s; events: %q", prefix, b.log())
		}
		time.Sleep(time.Millisecond)
	}
}

func parts(a *quirev1.GroupAssignment) []string {
	var out []string
	for _, t := range a.GetTopics() {
		for _, p := range t.Partitions {
			out = append(out, fmt.Sprintf("%s-%d", t.Topic, p))
		}
	}
	return out
}

var ordersStart = &quirev1.SubscribeStart{Group: "g", Subscription: &quirev1.GroupSubscription{Topics: []string{"orders"}},
	Batches: true, MaxOutstandingRecords: 3, CommitIntervalMs: 3_600_000}

// TestServeCommitsRevokedFirst: a partition taken away is no longer
// sent, and is given up only once the client acknowledged what it was
// sent of it: the client is told it is revoking, then, after its ack,
// the partition is committed at what it acknowledged (under the epoch
// the revoking answer gave, the member's epoch at the coordinator from
// then on) and revoked, and only then does a heartbeat give it up, so
// its next owner starts after the records this client had; closing the
// stream leaves the group (epoch -1).
func TestServeCommitsRevokedFirst(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := newFakeBroker()
	b.batches[0] = subTestBatch(0, 3, 10, 1)
	var mu sync.Mutex
	revoke := false
	b.answer = func(req *request.GroupHeartbeat) (*request.GroupHeartbeatResult, error) {
		resp := &request.GroupHeartbeatResult{MemberID: req.MemberID, MemberEpoch: req.MemberEpoch, HeartbeatIntervalMs: 10}
		mu.Lock()
		defer mu.Unlock()
		switch {
		case req.MemberEpoch == 0:
			resp.MemberEpoch, resp.Assignment = 1, assignment(0)
		case revoke && req.MemberEpoch == 1:
			resp.MemberEpoch, resp.Assignment = 2, assignment()
		}
		return resp, nil
	}
	st := newFakeStream(ctx)
	wait := serve(b, st, ordersStart)

	if a := st.next(t).GetAssignment(); !slices.Equal(parts(a.GetAssigned()), []string{"orders-0"}) {
		t.Fatalf("first message: assignment %v, want orders-0 assigned", a)
	}
	batch := st.next(t).GetBatch()
	if got := batchOffsets(batch); !slices.Equal(got, span(0, 3)) {
		t.Fatalf("records %v, want 0..2", got)
	}
	mu.Lock()
	revoke = true
	mu.Unlock()
	a := st.next(t).GetAssignment()
	if !slices.Equal(parts(a.GetRevoking()), []string{"orders-0"}) || !slices.Equal(parts(a.GetOwned()), []string{"orders-0"}) ||
		len(parts(a.GetRevoked())) != 0 || a.GetMemberEpoch() != 2 {
		t.Fatalf("after the revocation: %v, want orders-0 revoking (still owned) at epoch 2", a)
	}
	// The grace (3/4 of the default 60 s rebalance timeout) holds the
	// partition until the client acknowledges what it has.
	before := b.log()
	if i := indexOf(before, "heartbeat epoch 2 owned []"); i >= 0 {
		t.Fatalf("orders-0 given up (event %d) before its records were acknowledged: %q", i, before)
	}
	st.in <- &quirev1.SubscribeRequest{Request: &quirev1.SubscribeRequest_Ack{Ack: &quirev1.SubscribeAck{
		Partitions: []*quirev1.AckedOffsets{{Topic: "orders", Partition: 0, Offsets: span(0, 3)}}}}}
	a = st.next(t).GetAssignment()
	if !slices.Equal(parts(a.GetRevoked()), []string{"orders-0"}) || len(parts(a.GetOwned())) != 0 || len(parts(a.GetRevoking())) != 0 {
		t.Fatalf("after the ack: %v, want orders-0 revoked, nothing owned", a)
	}
	waitEvent(t, b, "heartbeat epoch 2 owned []")
	events := b.log()
	commit, giveUp := indexOf(events, "commit orders-0 at 3 by epoch 2"), indexOf(events, "heartbeat epoch 2 owned []")
	if commit < 0 || commit > giveUp {
		t.Fatalf("commit of orders-0 at 3 (event %d) not before the heartbeat giving it up (event %d): %q", commit, giveUp, events)
	}
	if i := indexOf(events, "fetch orders-0 from 3"); i >= 0 && i > indexOf(events, "heartbeat epoch 2") {
		t.Fatalf("orders-0 fetched (event %d) after its revocation began: %q", i, events)
	}

	close(st.in)
	if err := wait(t); err != nil {
		t.Fatalf("Serve after the client closed: %v, want nil", err)
	}
	if last := b.log()[len(b.log())-1]; !strings.HasPrefix(last, "heartbeat epoch -1") {
		t.Fatalf("last call %q, want the leave (heartbeat epoch -1)", last)
	}
}

// TestServeCommitsAckedWhenRevoking: what the client acknowledged of a
// partition before it is taken away is committed as soon as it is
// listed revoking, not only at the end of its grace, so that a member the
// coordinator drops during the grace (its rebalance timeout overrun on a
// slow node), which can commit nothing then, does not leave its next
// owner to read those records again.
func TestServeCommitsAckedWhenRevoking(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := newFakeBroker()
	b.batches[0] = subTestBatch(0, 3, 10, 1)
	var mu sync.Mutex
	revoke := false
	b.answer = func(req *request.GroupHeartbeat) (*request.GroupHeartbeatResult, error) {
		resp := &request.GroupHeartbeatResult{MemberID: req.MemberID, MemberEpoch: req.MemberEpoch, HeartbeatIntervalMs: 10}
		mu.Lock()
		defer mu.Unlock()
		switch {
		case req.MemberEpoch == 0 && !revoke:
			resp.MemberEpoch, resp.Assignment = 1, assignment(0)
		case req.MemberEpoch == 0:
			resp.MemberEpoch, resp.Assignment = 3, assignment()
		case revoke && req.MemberEpoch == 1:
			resp.MemberEpoch, resp.Assignment = 2, assignment()
		case req.MemberEpoch == 2:
			return nil, errFenced // dropped during the grace
		}
		return resp, nil
	}
	st := newFakeStream(ctx)
	wait := serve(b, st, ordersStart)

	if a := st.next(t).GetAssignment(); !slices.Equal(parts(a.GetAssigned()), []string{"orders-0"}) {
		t.Fatalf("first message: assignment %v, want orders-0 assigned", a)
	}
	if got := batchOffsets(st.next(t).GetBatch()); !slices.Equal(got, span(0, 3)) {
		t.Fatalf("records %v, want 0..2", got)
	}
	st.in <- &quirev1.SubscribeRequest{Request: &quirev1.SubscribeRequest_Ack{Ack: &quirev1.SubscribeAck{
		Partitions: []*quirev1.AckedOffsets{{Topic: "orders", Partition: 0, NextOffset: 2}}}}}
	waitEvent(t, b, "fetch orders-0 from 3") // the ack applied: its credit fetches on
	if i := indexOf(b.log(), "commit"); i >= 0 {
		t.Fatalf("a commit (%q) with commits on the interval off and nothing revoked", b.log()[i])
	}
	mu.Lock()
	revoke = true
	mu.Unlock()
	if a := st.next(t).GetAssignment(); !slices.Equal(parts(a.GetRevoking()), []string{"orders-0"}) {
		t.Fatalf("after the revocation: %v, want orders-0 revoking", a)
	}
	if a := st.next(t).GetAssignment(); !slices.Equal(parts(a.GetRevoked()), []string{"orders-0"}) || a.GetMemberEpoch() != 0 {
		t.Fatalf("after the fencing: %v, want orders-0 revoked at epoch 0", a)
	}
	events := b.log()
	commit, fenced := indexOf(events, "commit orders-0 at 2 by epoch 2"), indexOf(events, "heartbeat epoch 2")
	if commit < 0 || commit > fenced {
		t.Fatalf("commit of orders-0 at 2 (event %d) not before the heartbeat that was fenced (event %d): %q", commit, fenced, events)
	}
	close(st.in)
	if err := wait(t); err != nil {
		t.Fatalf("Serve after the client closed: %v, want nil", err)
	}
}

// TestServeFencedRejoins: a member fenced by the coordinator drops its
// partitions (telling the client, committing nothing under the old
// epoch) and joins again.
func TestServeFencedRejoins(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := newFakeBroker()
	var mu sync.Mutex
	joins, fenced := 0, false
	b.answer = func(req *request.GroupHeartbeat) (*request.GroupHeartbeatResult, error) {
		mu.Lock()
		defer mu.Unlock()
		if req.MemberEpoch == 0 {
			joins++
			if req.Subscription == nil {
				return nil, fmt.Errorf("fake: join %d without its subscription", joins)
			}
			return &request.GroupHeartbeatResult{MemberID: req.MemberID, MemberEpoch: int32(joins * 10),
				HeartbeatIntervalMs: 10, Assignment: assignment(0)}, nil
		}
		if !fenced {
			fenced = true
			return nil, errFenced
		}
		return &request.GroupHeartbeatResult{MemberID: req.MemberID, MemberEpoch: req.MemberEpoch, HeartbeatIntervalMs: 10}, nil
	}
	st := newFakeStream(ctx)
	wait := serve(b, st, ordersStart)

	for i, want := range []struct {
		assigned, revoked []string
		epoch             int32
	}{
		{[]string{"orders-0"}, nil, 10},
		{nil, []string{"orders-0"}, 0},
		{[]string{"orders-0"}, nil, 20},
	} {
		var a *quirev1.SubscribeAssignment
		for a == nil {
			a = st.next(t).GetAssignment() // records between are not what this test is about
		}
		if !slices.Equal(parts(a.GetAssigned()), want.assigned) || !slices.Equal(parts(a.GetRevoked()), want.revoked) || a.GetMemberEpoch() != want.epoch {
			t.Fatalf("assignment %d: %v, want assigned %v revoked %v at epoch %d", i, a, want.assigned, want.revoked, want.epoch)
		}
	}
	if i := indexOf(b.log(), "commit"); i >= 0 {
		t.Fatalf("a commit (%q) by a member with nothing acknowledged", b.log()[i])
	}
	close(st.in)
	if err := wait(t); err != nil {
		t.Fatalf("Serve: %v", err)
	}
}

// TestServeEndsAtShutdown: the broker shutting down ends the stream with
// its status, and the member leaves its group first.
func TestServeEndsAtShutdown(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := newFakeBroker()
	st := newFakeStream(ctx)
	wait := serve(b, st, ordersStart)
	waitEvent(t, b, "heartbeat epoch 1")
	close(b.closing)
	if err := wait(t); err == nil || err.Error() != "fake: shutting down" {
		t.Fatalf("Serve at shutdown: %v, want the broker's shutting-down status", err)
	}
	if last := b.log()[len(b.log())-1]; !strings.HasPrefix(last, "heartbeat epoch -1") {
		t.Fatalf("last call %q, want the leave (heartbeat epoch -1)", last)
	}
}

// TestServeRefusesBadStart: a stream whose first message is no start, or
// a start that asks for what a member cannot do, ends with
// INVALID_REQUEST before it joins anything.
func TestServeRefusesBadStart(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		first *quirev1.SubscribeRequest
		want  string
	}{
		{&quirev1.SubscribeRequest{Request: &quirev1.SubscribeRequest_Ack{Ack: &quirev1.SubscribeAck{}}}, "must be a start"},
		{&quirev1.SubscribeRequest{Request: &quirev1.SubscribeRequest_Start{Start: &quirev1.SubscribeStart{Group: "g"}}}, "needs subscription"},
		{&quirev1.SubscribeRequest{Request: &quirev1.SubscribeRequest_Start{Start: &quirev1.SubscribeStart{Group: "g",
			Subscription: ordersStart.Subscription, AutoOffsetReset: "soonest"}}}, "auto_offset_reset"},
		{&quirev1.SubscribeRequest{Request: &quirev1.SubscribeRequest_Start{Start: &quirev1.SubscribeStart{Group: "g",
			Subscription: ordersStart.Subscription, Format: quirev1.RecordFormat(99)}}}, "record format 99"},
		{&quirev1.SubscribeRequest{Request: &quirev1.SubscribeRequest_Start{Start: &quirev1.SubscribeStart{Group: "g",
			Subscription: ordersStart.Subscription, OptionalIsolationLevel: &quirev1.SubscribeStart_IsolationLevel{IsolationLevel: 7}}}}, "isolation_level 7"},
	} {
		b := newFakeBroker()
		st := newFakeStream(context.Background())
		st.in <- tc.first
		err := Serve(st.ctx, b, b, st)
		if !errors.Is(err, ErrInvalidRequest) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("first message %v: %v, want INVALID_REQUEST saying %q", tc.first, err, tc.want)
		}
		if len(b.log()) > 0 {
			t.Errorf("first message %v: the member called %q", tc.first, b.log())
		}
	}
}

// TestServeLeavesWhenAssignedADeniedTopic: a partition of a topic the
// caller may not read (a regex subscription can match one) ends the
// stream with the broker's status, and the member leaves its group so
// that its partitions go to others at once, not after its session.
func TestServeLeavesWhenAssignedADeniedTopic(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := newFakeBroker()
	b.denied = "secret"
	b.answer = func(req *request.GroupHeartbeat) (*request.GroupHeartbeatResult, error) {
		resp := &request.GroupHeartbeatResult{MemberID: req.MemberID, MemberEpoch: 1, HeartbeatIntervalMs: 10}
		if req.MemberEpoch == 0 {
			resp.Assignment = partsToGroupAssignment([]partKey{{"orders", 0}, {"secret", 0}})
		}
		return resp, nil
	}
	st := newFakeStream(ctx)
	wait := serve(b, st, ordersStart)
	if err := wait(t); err == nil || !strings.Contains(err.Error(), `not allowed to read "secret"`) {
		t.Fatalf("Serve: %v, want the refusal of secret", err)
	}
	if last := b.log()[len(b.log())-1]; !strings.HasPrefix(last, "heartbeat epoch -1") {
		t.Fatalf("last call %q, want the leave (heartbeat epoch -1)", last)
	}
}

// TestServeRefusesADeniedTopicFirst: a start naming a topic the caller
// may not read ends with the core's refusal before the member joins.
func TestServeRefusesADeniedTopicFirst(t *testing.T) {
	t.Parallel()
	b := newFakeBroker()
	b.denied = "secret"
	st := newFakeStream(context.Background())
	start := &quirev1.SubscribeStart{Group: "g", Subscription: &quirev1.GroupSubscription{Topics: []string{"orders", "secret"}}}
	if err := serve(b, st, start)(t); err == nil || !strings.Contains(err.Error(), `not allowed to read "secret"`) {
		t.Fatalf("Serve: %v, want the refusal of secret", err)
	}
	if len(b.log()) > 0 {
		t.Fatalf("the member called %q before it was refused", b.log())
	}
}

// TestServeEndsWhenReadIsTakenAway: a fetch the core refuses (the
// caller's Read on a topic removed since it was assigned) ends the
// stream with that refusal, and the member leaves its group.
func TestServeEndsWhenReadIsTakenAway(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := newFakeBroker()
	b.fetchRefused = fmt.Errorf("%w: User:x lacks Read on topic \"orders\"", request.ErrTopicAuthorizationFailed)
	b.answer = func(req *request.GroupHeartbeat) (*request.GroupHeartbeatResult, error) {
		resp := &request.GroupHeartbeatResult{MemberID: req.MemberID, MemberEpoch: 1, HeartbeatIntervalMs: 10}
		if req.MemberEpoch == 0 {
			resp.Assignment = assignment(0)
		}
		return resp, nil
	}
	st := newFakeStream(ctx)
	err := serve(b, st, ordersStart)(t)
	if !errors.Is(err, request.ErrTopicAuthorizationFailed) {
		t.Fatalf("Serve: %v, want the fetch's refusal", err)
	}
	events := b.log()
	if i := indexOf(events, "fetch refused"); i < 0 || !strings.HasPrefix(events[len(events)-1], "heartbeat epoch -1") {
		t.Fatalf("events %q: want a refused fetch, then the leave (heartbeat epoch -1) last", events)
	}
}

// TestServeEndsWhenTheGroupIsRefused: a heartbeat the core refuses (Read
// on the group taken away) ends the stream with that refusal rather
// than heartbeating on.
func TestServeEndsWhenTheGroupIsRefused(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := newFakeBroker()
	refusal := fmt.Errorf("%w: User:x lacks Read on group \"g\"", request.ErrGroupAuthorizationFailed)
	b.answer = func(req *request.GroupHeartbeat) (*request.GroupHeartbeatResult, error) {
		if req.MemberEpoch == 0 {
			return &request.GroupHeartbeatResult{MemberID: req.MemberID, MemberEpoch: 1, HeartbeatIntervalMs: 10}, nil
		}
		return nil, refusal
	}
	st := newFakeStream(ctx)
	if err := serve(b, st, ordersStart)(t); !errors.Is(err, request.ErrGroupAuthorizationFailed) {
		t.Fatalf("Serve: %v, want the heartbeat's refusal", err)
	}
	if n := len(b.log()); n != 2 {
		t.Fatalf("events %q: want the join and the one refused heartbeat", b.log())
	}
}

// TestRevocationGraceStartsAtHeartbeatSend: a revoked partition's grace
// is counted from the send of the heartbeat that brought the
// revocation, not from its answer's arrival: the coordinator's rebalance
// timeout starts when it handles that heartbeat, so a node that took
// long to see the answer must not wait past the coordinator's deadline
// (the member would be fenced, and could commit nothing).
func TestRevocationGraceStartsAtHeartbeatSend(t *testing.T) {
	t.Parallel()
	sent := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	arrived := sent.Add(3 * time.Second) // a slow answer
	k := partKey{"orders", 0}
	s := &subscription{start: &quirev1.SubscribeStart{RebalanceTimeoutMs: 8000},
		owned: map[partKey]*subPart{k: {tp: k}}, hbSent: sent}
	if got := s.startRevoking([]partKey{k}, s.graceFrom(arrived)); !slices.Equal(got, []partKey{k}) {
		t.Fatalf("startRevoking started %v, want %v", got, []partKey{k})
	}
	if got, want := s.owned[k].revokeBy, sent.Add(6*time.Second); !got.Equal(want) {
		t.Fatalf("grace ends at %v, want %v (three quarters of the rebalance timeout after the heartbeat's send)", got, want)
	}

	// Without a heartbeat sent (or one timed after now), the grace
	// starts now.
	s = &subscription{start: &quirev1.SubscribeStart{RebalanceTimeoutMs: 8000}}
	if got := s.graceFrom(arrived); !got.Equal(arrived) {
		t.Fatalf("graceFrom with no heartbeat sent = %v, want %v", got, arrived)
	}
	s.hbSent = arrived.Add(time.Second)
	if got := s.graceFrom(arrived); !got.Equal(arrived) {
		t.Fatalf("graceFrom with a heartbeat sent after now = %v, want %v", got, arrived)
	}
}
