package client_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/client"
)

// refusingBroker serves metadata for topic "rt" (two partitions, led by
// itself) and refuses every FetchOffsets and ListOffsets with a
// non-retriable error.
type refusingBroker struct {
	quirev1.UnimplementedMetadataServer
	quirev1.UnimplementedConsumerServer
	quirev1.UnimplementedGroupsServer
	addr string
}

func startRefusing(t *testing.T) *refusingBroker {
	rb := &refusingBroker{}
	rb.addr = serveFake(t, rb, rb, rb)
	return rb
}

// serveFake serves the services given (groups may be nil), and any that
// more registers, on a loopback port until the test ends, and returns its
// address.
func serveFake(t *testing.T, md quirev1.MetadataServer, cons quirev1.ConsumerServer, groups quirev1.GroupsServer, more ...func(*grpc.Server)) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	quirev1.RegisterMetadataServer(s, md)
	quirev1.RegisterConsumerServer(s, cons)
	if groups != nil {
		quirev1.RegisterGroupsServer(s, groups)
	}
	for _, register := range more {
		register(s)
	}
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return lis.Addr().String()
}

func refused(what string) error {
	st, err := status.New(codes.InvalidArgument, what+" refused").WithDetails(
		&quirev1.Error{Code: quirev1.ErrorCode_INVALID_REQUEST, Message: what + " refused"})
	if err != nil {
		panic(err)
	}
	return st.Err()
}

func (rb *refusingBroker) GetMetadata(context.Context, *quirev1.GetMetadataRequest) (*quirev1.GetMetadataResponse, error) {
	return &quirev1.GetMetadataResponse{ClusterId: "refusing", ControllerId: 1,
		Brokers: []*quirev1.Broker{{Id: 1, Address: rb.addr}},
		Topics: []*quirev1.TopicMetadata{{Name: "rt", TopicId: "rt", Partitions: []*quirev1.PartitionMetadata{
			{Partition: 0, Leader: 1, Replicas: []int32{1}, Isr: []int32{1}},
			{Partition: 1, Leader: 1, Replicas: []int32{1}, Isr: []int32{1}},
		}}},
	}, nil
}

func (rb *refusingBroker) FetchOffsets(context.Context, *quirev1.FetchOffsetsRequest) (*quirev1.FetchOffsetsResponse, error) {
	return nil, refused("FetchOffsets")
}

func (rb *refusingBroker) ListOffsets(context.Context, *quirev1.ListOffsetsRequest) (*quirev1.ListOffsetsResponse, error) {
	return nil, refused("ListOffsets")
}

// TestConsumerCommittedFailureReportedOnce: when reading the group's
// offsets fails and so does the ListOffsets of the partitions led by the
// same broker, each partition's error is reported once, not the
// AtCommitted partition's twice.
func TestConsumerCommittedFailureReportedOnce(t *testing.T) {
	t.Parallel()
	rb := startRefusing(t)
	// No retry within the test: each partition fails once.
	cl := newClient(t, rb.addr, client.RetryBackoff(time.Hour))
	cons, err := cl.NewConsumer(map[string]map[int32]client.Offset{"rt": {
		0: client.AtCommitted("readers", client.AtStart()),
		1: client.AtStart(),
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	ctx := testCtx(t)
	var msgs []string
	count := func(part, what string) int {
		n := 0
		for _, m := range msgs {
			if strings.Contains(m, "rt/"+part+":") && strings.Contains(m, what) {
				n++
			}
		}
		return n
	}
	collect := func(ctx context.Context) error {
		_, err := cons.Poll(ctx)
		for _, e := range unjoin(err) {
			if !errors.Is(e, context.DeadlineExceeded) {
				msgs = append(msgs, e.Error())
			}
		}
		return err
	}
	for count("1", "ListOffsets refused") == 0 {
		if err := collect(ctx); ctx.Err() != nil {
			t.Fatalf("no ListOffsets error for partition 1: %v (got %q)", err, msgs)
		}
	}
	// Partition 0's errors, had there been two, were queued in the same
	// resolve pass as partition 1's: a short wait collects any left.
	wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	for wctx.Err() == nil {
		_ = collect(wctx)
	}
	if n := count("0", "refused"); n != 1 || count("0", "FetchOffsets refused") != 1 {
		t.Fatalf("partition 0 reported %d errors, want its FetchOffsets error once: %q", n, msgs)
	}
	if n := count("1", "refused"); n != 1 {
		t.Fatalf("partition 1 reported %d errors, want 1: %q", n, msgs)
	}
}

// unjoin splits the errors.Join of a Poll.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	if err == nil {
		return nil
	}
	return []error{err}
}

// TestConsumerBadGroupIDRefusedUpFront: an AtCommitted with a bad group
// id fails NewConsumer, with the code a broker would give; Assign reports
// it once from Poll and assigns nothing.
func TestConsumerBadGroupIDRefusedUpFront(t *testing.T) {
	t.Parallel()
	rb := startRefusing(t)
	cl := newClient(t, rb.addr)
	for _, group := range []string{"", strings.Repeat("g", client.MaxGroupIDLen+1), "a\x00b"} {
		_, err := cl.NewConsumer(map[string]map[int32]client.Offset{"rt": {0: client.AtCommitted(group, client.AtStart())}})
		if !errors.Is(err, client.ErrInvalidOffset) || client.ErrorCode(err) != quirev1.ErrorCode_INVALID_GROUP_ID ||
			!strings.Contains(err.Error(), "rt/0") {
			t.Errorf("NewConsumer with group %q: %v", group, err)
		}
	}
	if err := client.ValidateGroupID(strings.Repeat("g", client.MaxGroupIDLen)); err != nil {
		t.Errorf("a group id of the longest length: %v", err)
	}

	cons, err := cl.NewConsumer(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	cons.Assign("rt", 1, client.AtCommitted("", client.AtStart()))
	ctx := testCtx(t)
	_, err = cons.Poll(ctx)
	if !errors.Is(err, client.ErrInvalidOffset) || client.ErrorCode(err) != quirev1.ErrorCode_INVALID_GROUP_ID {
		t.Fatalf("poll after Assign with an empty group: %v", err)
	}
	// Nothing was assigned, so nothing more comes (no retried FetchOffsets
	// failing with the same error).
	wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := cons.Poll(wctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second poll: %v", err)
	}
}

// silentCoordinator answers the first heartbeat (a join) with both
// partitions of "rt" and a short session, then never again: every later
// heartbeat waits until its caller gives up, as when the coordinator is
// paused or cut off. It notes when it answered, and the rejoin.
type silentCoordinator struct {
	*refusingBroker
	session  time.Duration
	answered chan time.Time // when the join was answered
	rejoined chan struct{}  // closed at the second join
	mu       sync.Mutex
	joins    int // a member whose session ran out again joins a third time
}

func (sc *silentCoordinator) ConsumerGroupHeartbeat(ctx context.Context, in *quirev1.ConsumerGroupHeartbeatRequest) (*quirev1.ConsumerGroupHeartbeatResponse, error) {
	if in.MemberEpoch == 0 {
		sc.mu.Lock()
		sc.joins++
		joins := sc.joins
		sc.mu.Unlock()
		if joins == 1 {
			defer func() { sc.answered <- time.Now() }()
			return &quirev1.ConsumerGroupHeartbeatResponse{MemberId: in.MemberId, MemberEpoch: 1, HeartbeatIntervalMs: 100,
				SessionTimeoutMs: int32(sc.session.Milliseconds()),
				Assignment:       &quirev1.GroupAssignment{Topics: []*quirev1.GroupTopicPartitions{{Topic: "rt", Partitions: []int32{0, 1}}}}}, nil
		}
		if joins == 2 {
			close(sc.rejoined)
		}
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

// CommitOffsets never answers either.
func (sc *silentCoordinator) CommitOffsets(ctx context.Context, _ *quirev1.CommitOffsetsRequest) (*quirev1.CommitOffsetsResponse, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestGroupConsumerGivesUpPartitionsBeforeTheSessionEnds: a member whose
// heartbeats go unanswered stops using its partitions (OnRevoked) before
// the coordinator's session timeout, counted from when the coordinator
// last heard it, could let another member have them; then it joins
// again.
func TestGroupConsumerGivesUpPartitionsBeforeTheSessionEnds(t *testing.T) {
	t.Parallel()
	for _, commitHangs := range []bool{false, true} {
		t.Run(map[bool]string{false: "idle", true: "commit hangs"}[commitHangs], func(t *testing.T) {
			testGivesUpPartitions(t, commitHangs)
		})
	}
}

func testGivesUpPartitions(t *testing.T, commitHangs bool) {
	rb := &refusingBroker{}
	// The member gives up a fifth of the session (at most a second)
	// before it ends: with 5 s, a second to spare, where 1 s left 200 ms,
	// which a loaded machine's scheduling took.
	sc := &silentCoordinator{refusingBroker: rb, session: 5 * time.Second, answered: make(chan time.Time, 1), rejoined: make(chan struct{})}
	rb.addr = serveFake(t, rb, rb, sc)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := client.New(ctx, client.SeedBrokers(rb.addr), client.RequestTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	revoked := make(chan []client.TopicPartition, 1)
	g, err := cl.NewGroupConsumer(client.GroupConfig{Group: "g", Topics: []string{"rt"}, AutoCommitInterval: -1,
		OnRevoked: func(tps []client.TopicPartition) { revoked <- tps }})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		cctx, ccancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer ccancel()
		_ = g.Close(cctx)
	}()
	var answered time.Time
	select {
	case answered = <-sc.answered:
	case <-ctx.Done():
		t.Fatal("the member never joined")
	}
	if commitHangs {
		// The application commits, and the commit hangs: it must not
		// hold the member up.
		for len(g.Assignment()) != 2 {
			if ctx.Err() != nil {
				t.Fatal("the assignment never applied")
			}
			time.Sleep(time.Millisecond)
		}
		if err := g.Seek("rt", 0, 5); err != nil {
			t.Fatal(err)
		}
		go func() {
			cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
			defer ccancel()
			_ = g.Commit(cctx)
		}()
	}
	select {
	case tps := <-revoked:
		at := time.Now()
		if len(tps) != 2 {
			t.Errorf("revoked %v, want both partitions", tps)
		}
		if expiry := answered.Add(sc.session); !at.Before(expiry) {
			t.Errorf("partitions given up at %v, not before the coordinator could give them away (%v)", at, expiry)
		}
		if got := g.Assignment(); len(got) != 0 {
			t.Errorf("still owns %v after giving up", got)
		}
	case <-ctx.Done():
		t.Fatal("the partitions were never given up")
	}
	select {
	case <-sc.rejoined:
	case <-ctx.Done():
		t.Fatal("the member never joined again")
	}
}
