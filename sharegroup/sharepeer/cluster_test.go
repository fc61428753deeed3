package sharepeer_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	pb "github.com/quirelog/quire/api/internalv1"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/replica"
	"github.com/quirelog/quire/request"
	"github.com/quirelog/quire/share"
	"github.com/quirelog/quire/sharegroup"
	"github.com/quirelog/quire/sharegroup/sharepeer"
)

// fakeCore is a node's request core as the share calls see it: the
// members that heartbeat to it, and the fetches passed on to it.
type fakeCore struct {
	mu      sync.Mutex
	members map[string][]string // by group
	gone    map[string][]string // by group, as told
	fetched *request.ShareFetchRequest
	acked   []request.SharePartition
	keyed   bool
	prin    string
}

func newFakeCore(group string, members ...string) *fakeCore {
	return &fakeCore{members: map[string][]string{group: members}, gone: map[string][]string{}}
}

func (c *fakeCore) ShareMemberHere(group, id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Contains(c.members[group], id)
}

func (c *fakeCore) ShareGroupMembersHere(group string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.members[group]) > 0
}

func (c *fakeCore) ShareMembersGone(group string, ids []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gone[group] = append(c.gone[group], ids...)
}

func (c *fakeCore) goneFrom(group string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Sorted(slices.Values(c.gone[group]))
}

// ShareFetch acquires the offsets each partition acknowledged, refusing
// partition 1 of every topic.
func (c *fakeCore) ShareFetch(ctx context.Context, req *request.ShareFetchRequest) ([]request.ShareFetchResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fetched, c.prin = req, request.Principal(ctx)
	if req.Group == "refused" {
		return nil, fmt.Errorf("%w: no such group", sharegroup.ErrUnknownMember)
	}
	out := make([]request.ShareFetchResult, len(req.Partitions))
	for i, p := range req.Partitions {
		out[i] = request.ShareFetchResult{Topic: p.Topic, Partition: p.Partition, Records: []byte("records")}
		if p.Partition == 1 {
			out[i].Err = &replica.NotLeaderError{Topic: p.Topic, Partition: p.Partition, Leader: 7, Epoch: 3}
			continue
		}
		for _, a := range p.Acks {
			out[i].Acquired = append(out[i].Acquired, share.AcquiredRange{First: a.First, Last: a.Last, DeliveryCount: 2})
		}
	}
	return out, nil
}

func (c *fakeCore) ShareAcknowledge(ctx context.Context, group, member string, parts []request.SharePartition) ([]request.ShareAckResult, error) {
	return c.ack(ctx, false, parts)
}

func (c *fakeCore) ShareAcknowledgeKeyOrdered(ctx context.Context, group, member string, parts []request.SharePartition) ([]request.ShareAckResult, error) {
	return c.ack(ctx, true, parts)
}

func (c *fakeCore) ack(ctx context.Context, keyed bool, parts []request.SharePartition) ([]request.ShareAckResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.acked, c.keyed, c.prin = parts, keyed, request.Principal(ctx)
	out := make([]request.ShareAckResult, len(parts))
	for i, p := range parts {
		out[i] = request.ShareAckResult{Topic: p.Topic, Partition: p.Partition}
	}
	return out, nil
}

// replicaServer is the internal ReplicaService with only its share
// calls, answered by sharepeer.Server (unimplemented is one level
// further down, so the Server's methods win).
type replicaServer struct {
	*sharepeer.Server
	unimplemented
}

type unimplemented struct {
	pb.UnimplementedReplicaServiceServer
}

// peerSet is sharepeer.Node over in-memory connections to fake nodes.
type peerSet struct {
	brokers []metadata.BrokerInfo
	conns   map[int32]*grpc.ClientConn
	servers map[int32]*grpc.Server
}

// newPeerSet has this node (1) and the others of cores, each serving its
// core, registered and unfenced.
func newPeerSet(t *testing.T, cores map[int32]*fakeCore) *peerSet {
	t.Helper()
	ps := &peerSet{brokers: []metadata.BrokerInfo{{ID: 1, Addr: "node1"}},
		conns: map[int32]*grpc.ClientConn{}, servers: map[int32]*grpc.Server{}}
	for id, core := range cores {
		lis := bufconn.Listen(1 << 20)
		s := grpc.NewServer()
		pb.RegisterReplicaServiceServer(s, replicaServer{Server: sharepeer.NewServer(core)})
		go func() { _ = s.Serve(lis) }()
		t.Cleanup(s.Stop)
		cc, err := grpc.NewClient("passthrough:///bufconn", grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cc.Close() })
		ps.brokers = append(ps.brokers, metadata.BrokerInfo{ID: id, Addr: fmt.Sprintf("node%d", id)})
		ps.conns[id], ps.servers[id] = cc, s
	}
	return ps
}

func (ps *peerSet) Brokers() []metadata.BrokerInfo { return ps.brokers }

func (ps *peerSet) Conn(id int32) (grpc.ClientConnInterface, error) {
	cc, ok := ps.conns[id]
	if !ok {
		return nil, fmt.Errorf("%w: broker %d has no connection", request.ErrLeaderUnreachable, id)
	}
	return cc, nil
}

// fence marks broker id fenced in the image.
func (ps *peerSet) fence(id int32) {
	for i := range ps.brokers {
		if ps.brokers[i].ID == id {
			ps.brokers[i].Fenced = true
		}
	}
}

// stop takes broker id down: its calls fail Unavailable.
func (ps *peerSet) stop(id int32) { ps.servers[id].Stop() }

func newCluster(ps *peerSet) *sharepeer.Cluster {
	return sharepeer.New(sharepeer.Config{NodeID: 1, Node: ps, Logger: hclog.NewNullLogger()})
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// A member is known when one other node says it heartbeats there; this
// node is not asked (it has no connection to itself: asking it would
// be an error).
func TestSharePeerMemberAsked(t *testing.T) {
	ps := newPeerSet(t, map[int32]*fakeCore{2: newFakeCore("g"), 3: newFakeCore("g", "m1")})
	c, ctx := newCluster(ps), testContext(t)
	for _, tc := range []struct {
		group, id string
		want      bool
	}{{"g", "m1", true}, {"g", "m2", false}, {"other", "m1", false}} {
		got, err := c.ShareMember(ctx, tc.group, tc.id)
		if err != nil || got != tc.want {
			t.Errorf("ShareMember(%q, %q) = %v, %v; want %v, nil", tc.group, tc.id, got, err, tc.want)
		}
	}
	for group, want := range map[string]bool{"g": true, "other": false} {
		if got, err := c.ShareGroupHasMembers(ctx, group); err != nil || got != want {
			t.Errorf("ShareGroupHasMembers(%q) = %v, %v; want %v, nil", group, got, err, want)
		}
	}
}

// A node that cannot be asked leaves a member no other node has
// unconfirmed: an error, not a no (the member may heartbeat there).
func TestSharePeerUnreachableUnconfirmed(t *testing.T) {
	ps := newPeerSet(t, map[int32]*fakeCore{2: newFakeCore("g"), 3: newFakeCore("g", "m1")})
	ps.stop(3)
	c, ctx := newCluster(ps), testContext(t)
	got, err := c.ShareMember(ctx, "g", "m1")
	if got || status.Code(err) != codes.Unavailable {
		t.Fatalf("ShareMember with its node down = %v, %v; want false and Unavailable", got, err)
	}
}

// Departures are told to every other node, by group.
func TestSharePeerMembersLeft(t *testing.T) {
	cores := map[int32]*fakeCore{2: newFakeCore("g"), 3: newFakeCore("g")}
	c := newCluster(newPeerSet(t, cores))
	c.ShareMembersLeft(testContext(t), []sharegroup.Departure{{Group: "g", MemberID: "m2"}, {Group: "h", MemberID: "m3"}, {Group: "g", MemberID: "m1"}})
	for id, core := range cores {
		if got := core.goneFrom("g"); !slices.Equal(got, []string{"m1", "m2"}) {
			t.Errorf("node %d told %v left g; want [m1 m2]", id, got)
		}
		if got := core.goneFrom("h"); !slices.Equal(got, []string{"m3"}) {
			t.Errorf("node %d told %v left h; want [m3]", id, got)
		}
	}
}

// A share fetch passed on reaches the leader with the caller's
// principal, partitions and acknowledgements, and its answers and
// refusals come back as the leader made them.
func TestSharePeerFetchPassedOn(t *testing.T) {
	leader := newFakeCore("g", "m1")
	c := newCluster(newPeerSet(t, map[int32]*fakeCore{2: leader}))
	ctx := request.WithPrincipal(testContext(t), "User:alice")
	req := &request.ShareFetchRequest{Group: "g", MemberID: "m1", MaxWait: 250 * time.Millisecond, MaxRecords: 10, KeyOrdered: true,
		Partitions: []request.SharePartition{{Topic: "t", Partition: 0, Acks: []share.Ack{{First: 4, Last: 6, Type: share.Release}}}, {Topic: "t", Partition: 1}}}
	res, err := c.ShareFetch(ctx, 2, req)
	if err != nil {
		t.Fatal(err)
	}
	if leader.prin != "User:alice" || leader.fetched.MaxWait != req.MaxWait || leader.fetched.MaxRecords != 10 || !leader.fetched.KeyOrdered ||
		len(leader.fetched.Partitions) != 2 || !slices.Equal(leader.fetched.Partitions[0].Acks, req.Partitions[0].Acks) {
		t.Fatalf("leader served %+v as %q; want %+v as User:alice", leader.fetched, leader.prin, req)
	}
	if len(res) != 2 || string(res[0].Records) != "records" || len(res[0].Acquired) != 1 || res[0].Acquired[0] != (share.AcquiredRange{First: 4, Last: 6, DeliveryCount: 2}) || res[0].Err != nil {
		t.Fatalf("partition 0 answered %+v; want records 4-6 acquired twice", res)
	}
	var e *request.Error
	if !errors.As(res[1].Err, &e) || e.LeaderID != 7 || e.LeaderEpoch != 3 {
		t.Fatalf("partition 1 answered %v; want the leader's not-leader error naming broker 7 at epoch 3", res[1].Err)
	}
	if _, err := c.ShareFetch(ctx, 2, &request.ShareFetchRequest{Group: "refused", MemberID: "m1"}); !errors.As(err, &e) {
		t.Fatalf("a refused fetch answered %v; want the leader's refusal", err)
	}
	if _, err := c.ShareFetch(ctx, 9, req); !errors.Is(err, request.ErrLeaderUnreachable) {
		t.Fatalf("a fetch to a leader with no connection answered %v; want ErrLeaderUnreachable", err)
	}

	acks := []request.SharePartition{{Topic: "t", Partition: 0, Acks: []share.Ack{{First: 1, Last: 1, Type: share.Accept}}}}
	ackRes, err := c.ShareAcknowledge(ctx, 2, "g", "m1", true, acks)
	if err != nil || len(ackRes) != 1 || ackRes[0].Err != nil {
		t.Fatalf("ShareAcknowledge = %+v, %v", ackRes, err)
	}
	if !leader.keyed || leader.prin != "User:alice" || !slices.Equal(leader.acked[0].Acks, acks[0].Acks) {
		t.Fatalf("leader acknowledged %+v (key-ordered %v) as %q", leader.acked, leader.keyed, leader.prin)
	}
}

// A member whose heartbeat node is fenced a moment (its heartbeat to
// the controller late) is still vouched for by it: the fenced node is
// asked too, so the leader does not take the member as unknown and
// release its records.
func TestSharePeerFencedNodeVouches(t *testing.T) {
	ps := newPeerSet(t, map[int32]*fakeCore{2: newFakeCore("g"), 3: newFakeCore("g", "m1")})
	ps.fence(3)
	c, ctx := newCluster(ps), testContext(t)
	if got, err := c.ShareMember(ctx, "g", "m1"); err != nil || !got {
		t.Fatalf("ShareMember with its heartbeat node fenced = %v, %v; want true, nil", got, err)
	}
	if got, err := c.ShareGroupHasMembers(ctx, "g"); err != nil || !got {
		t.Fatalf("ShareGroupHasMembers with the members' node fenced = %v, %v; want true, nil", got, err)
	}
	if got, err := c.ShareMember(ctx, "g", "m2"); err != nil || got {
		t.Fatalf("ShareMember of a member no node has = %v, %v; want false, nil", got, err)
	}
}

// A fenced node that cannot be reached gives no answer: not a yes, and
// no doubt about the others' no (it was fenced for being down, most
// likely); an unfenced one that cannot be reached still leaves the
// member unconfirmed.
func TestSharePeerFencedNodeDownNoAnswer(t *testing.T) {
	ps := newPeerSet(t, map[int32]*fakeCore{2: newFakeCore("g"), 3: newFakeCore("g", "m1"), 4: newFakeCore("g")})
	ps.fence(3)
	ps.stop(3)
	c, ctx := newCluster(ps), testContext(t)
	if got, err := c.ShareMember(ctx, "g", "m1"); err != nil || got {
		t.Fatalf("ShareMember with its fenced node down = %v, %v; want false, nil", got, err)
	}
	ps.stop(4)
	if got, err := c.ShareMember(ctx, "g", "m1"); got || status.Code(err) != codes.Unavailable {
		t.Fatalf("ShareMember with an unfenced node down too = %v, %v; want false and Unavailable", got, err)
	}
}

// Departures are told to the unfenced nodes only: a fenced one may be
// down, and a leave would wait on it.
func TestSharePeerMembersLeftSkipsFenced(t *testing.T) {
	cores := map[int32]*fakeCore{2: newFakeCore("g"), 3: newFakeCore("g")}
	ps := newPeerSet(t, cores)
	ps.fence(3)
	newCluster(ps).ShareMembersLeft(testContext(t), []sharegroup.Departure{{Group: "g", MemberID: "m1"}})
	if got := cores[2].goneFrom("g"); !slices.Equal(got, []string{"m1"}) {
		t.Errorf("unfenced node told %v left; want [m1]", got)
	}
	if got := cores[3].goneFrom("g"); len(got) != 0 {
		t.Errorf("fenced node told %v left; want none", got)
	}
}

// A question its caller gave up on is no answer at all, not a no, even
// when the only other nodes are fenced: a member is not taken as unknown
// (and its records released) because the question was cut short.
func TestSharePeerCallerGoneNotANo(t *testing.T) {
	ps := newPeerSet(t, map[int32]*fakeCore{2: newFakeCore("g", "m1")})
	ps.fence(2)
	c := newCluster(ps)
	ctx, cancel := context.WithCancel(testContext(t))
	cancel()
	if got, err := c.ShareMember(ctx, "g", "m1"); got || !errors.Is(err, context.Canceled) {
		t.Fatalf("ShareMember with its caller gone = %v, %v; want false and the caller's error", got, err)
	}
	if got, err := c.ShareGroupHasMembers(ctx, "g"); got || !errors.Is(err, context.Canceled) {
		t.Fatalf("ShareGroupHasMembers with its caller gone = %v, %v; want false and the caller's error", got, err)
	}
}

// A Cluster made without a logger logs nowhere: telling a node that is
// down that members left (which logs) does not panic.
func TestSharePeerNoLogger(t *testing.T) {
	ps := newPeerSet(t, map[int32]*fakeCore{2: newFakeCore("g")})
	ps.stop(2)
	c := sharepeer.New(sharepeer.Config{NodeID: 1, Node: ps})
	c.ShareMembersLeft(testContext(t), []sharegroup.Departure{{Group: "g", MemberID: "m1"}})
}
