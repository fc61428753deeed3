package kafka

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/request"
)

// classicBackend records the heartbeats the classic protocol makes and
// answers them from its fields; the coordinator's own handling of
// classic members is group's (testdata/classic.txt).
type classicBackend struct {
	fakeBackend
	mu      sync.Mutex
	hbs     []*request.GroupHeartbeat
	hbResp  *request.GroupHeartbeatResult
	hbErr   error
	commits int
}

func (c *classicBackend) ConsumerGroupHeartbeat(_ context.Context, req *request.GroupHeartbeat) (*request.GroupHeartbeatResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hbs = append(c.hbs, req)
	return c.hbResp, c.hbErr
}

func (c *classicBackend) CommitOffsets(context.Context, *request.CommitOffsetsRequest) (time.Time, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.commits++
	return time.Time{}, quireError(quirev1.ErrorCode_STALE_MEMBER_EPOCH)
}

func (c *classicBackend) set(resp *request.GroupHeartbeatResult, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hbResp, c.hbErr = resp, err
}

func (c *classicBackend) lastHeartbeat() *request.GroupHeartbeat {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.hbs) == 0 {
		return nil
	}
	return c.hbs[len(c.hbs)-1]
}

func (c *classicBackend) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.hbs)
}

// quireError is the core's refusal with code.
func quireError(code quirev1.ErrorCode) error {
	return &request.Error{Code: int32(code), Message: code.String(), LeaderID: -1, LeaderEpoch: -1}
}

// joinReq is a JoinGroup offering protocols, each with a subscription to
// topic t owning owned.
func joinReq(version int16, member string, owned []int32, protocols ...string) *kmsg.JoinGroupRequest {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version, req.Group, req.MemberID, req.ProtocolType = version, "g", member, "consumer"
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 45000, 60000
	for _, name := range protocols {
		meta := kmsg.NewConsumerMemberMetadata()
		meta.Version, meta.Topics = 1, []string{"t"}
		if owned != nil {
			op := kmsg.NewConsumerMemberMetadataOwnedPartition()
			op.Topic, op.Partitions = "t", owned
			meta.OwnedPartitions = append(meta.OwnedPartitions, op)
		}
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name, p.Metadata = name, meta.AppendTo(nil)
		req.Protocols = append(req.Protocols, p)
	}
	return req
}

func join(t *testing.T, k *kconn, req *kmsg.JoinGroupRequest) *kmsg.JoinGroupResponse {
	t.Helper()
	k.request(req)
	resp := kmsg.NewPtrJoinGroupResponse()
	resp.Version = req.Version
	k.response(resp, req.Version >= 6)
	return resp
}

func TestKafkaClassicJoin(t *testing.T) {
	t.Parallel()
	backend := &classicBackend{}
	_, k := startServer(t, backend)

	// A member without an id learns one first (v4+: MEMBER_ID_REQUIRED),
	// the client id and a UUID; nothing is asked of the coordinator.
	r := join(t, k, joinReq(9, "", nil, "range"))
	if r.ErrorCode != kerr.MemberIDRequired.Code || !regexp.MustCompile(`^test-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(r.MemberID) {
		t.Fatalf("join without a member id: code %d, id %q", r.ErrorCode, r.MemberID)
	}
	if hb := backend.lastHeartbeat(); hb != nil {
		t.Fatalf("a join without a member id heartbeat %+v", hb)
	}

	// With it, the member joins: a classic heartbeat at epoch 0 (a
	// rejoin, for a member the coordinator has) with its subscription
	// and what it owns; the generation is its epoch; no member is leader.
	backend.set(&request.GroupHeartbeatResult{MemberID: "m", MemberEpoch: 3}, nil)
	r = join(t, k, joinReq(9, "m", nil, "range", "roundrobin"))
	hb := backend.lastHeartbeat()
	if r.ErrorCode != 0 || r.Generation != 3 || r.LeaderID != "" || len(r.Members) != 0 || *r.Protocol != "range" || *r.ProtocolType != "consumer" {
		t.Fatalf("join: %+v", r)
	}
	if !hb.Classic || hb.MemberEpoch != 0 || hb.Owned == nil || len(hb.Owned.Topics) != 0 ||
		fmt.Sprint(hb.Subscription.Topics) != "[t]" || hb.RebalanceTimeoutMs != 60000 || hb.SessionTimeoutMs != 45000 {
		t.Fatalf("join heartbeat %+v", hb)
	}
	// cooperative-sticky is chosen whenever offered; the owned partitions
	// pass on whatever the protocol (an eager member lists none).
	r = join(t, k, joinReq(9, "m", []int32{1, 2}, "range", "cooperative-sticky"))
	if hb = backend.lastHeartbeat(); *r.Protocol != "cooperative-sticky" || fmt.Sprint(hb.Owned.Topics[0].Partitions) != "[1 2]" {
		t.Fatalf("cooperative rejoin: protocol %s, heartbeat %+v", *r.Protocol, hb)
	}
	r = join(t, k, joinReq(5, "m", []int32{4}, "mine"))
	if hb = backend.lastHeartbeat(); r.ErrorCode != 0 || *r.Protocol != "mine" || fmt.Sprint(hb.Owned.Topics[0].Partitions) != "[4]" {
		t.Fatalf("a rejoin with another assignor: protocol %s, heartbeat %+v", *r.Protocol, hb)
	}
	// A subscription naming no topic yet (a pattern that matches none)
	// joins.
	empty := joinReq(9, "m", nil, "range")
	meta := kmsg.NewConsumerMemberMetadata()
	empty.Protocols[0].Metadata = meta.AppendTo(nil)
	if r = join(t, k, empty); r.ErrorCode != 0 || len(backend.lastHeartbeat().Subscription.Topics) != 0 {
		t.Fatalf("an empty subscription: code %d, heartbeat %+v", r.ErrorCode, backend.lastHeartbeat())
	}

	// A static member (group.instance.id) without an id is given one and
	// joins at once, its instance id passed on; the coordinator fencing
	// an instance's old member is FENCED_INSTANCE_ID.
	static := joinReq(9, "", nil, "range")
	static.InstanceID = kmsg.StringPtr("host-1")
	backend.set(&request.GroupHeartbeatResult{MemberEpoch: 3}, nil)
	r = join(t, k, static)
	if hb = backend.lastHeartbeat(); r.ErrorCode != 0 || r.Generation != 3 || !strings.HasPrefix(r.MemberID, "test-") || hb.MemberID != r.MemberID || hb.InstanceID != "host-1" {
		t.Fatalf("a static join without a member id: %+v, heartbeat %+v", r, hb)
	}
	backend.set(nil, quireError(quirev1.ErrorCode_FENCED_INSTANCE_ID))
	static.MemberID = "old"
	if r = join(t, k, static); r.ErrorCode != kerr.FencedInstanceID.Code {
		t.Fatalf("a fenced instance: code %d", r.ErrorCode)
	}

	// The coordinator's UNKNOWN_MEMBER_ID passes on.
	backend.set(nil, quireError(quirev1.ErrorCode_UNKNOWN_MEMBER_ID))
	if r = join(t, k, joinReq(9, "m", []int32{1}, "cooperative-sticky")); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("a removed cooperative member: code %d", r.ErrorCode)
	}

	// Refused: another protocol type, no protocols, a subscription that
	// does not parse, Kafka Streams' protocol (its leader assigns tasks).
	bad := joinReq(9, "m", nil, "range")
	bad.ProtocolType = "connect"
	none := joinReq(9, "m", nil)
	garbled := joinReq(9, "m", nil, "range")
	garbled.Protocols[0].Metadata = []byte{0, 1, 0xff}
	streams := joinReq(9, "m", nil, "stream")
	for name, req := range map[string]*kmsg.JoinGroupRequest{"connect": bad, "no protocols": none, "garbled": garbled, "streams": streams} {
		if r = join(t, k, req); r.ErrorCode != kerr.InconsistentGroupProtocol.Code {
			t.Errorf("%s: code %d, want INCONSISTENT_GROUP_PROTOCOL", name, r.ErrorCode)
		}
	}

	// The coordinator out of reach for a moment: COORDINATOR_NOT_AVAILABLE.
	backend.set(nil, quireError(quirev1.ErrorCode_NOT_CONTROLLER))
	if r = join(t, k, joinReq(9, "m", nil, "range")); r.ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("no controller: code %d", r.ErrorCode)
	}
}

func TestKafkaClassicSyncHeartbeatLeave(t *testing.T) {
	t.Parallel()
	backend := &classicBackend{}
	_, k := startServer(t, backend)
	assigned := &request.GroupAssignment{Topics: []request.GroupTopicPartitions{{Topic: "t", Partitions: []int32{0, 2}}}}

	sync := func(gen int32) *kmsg.SyncGroupResponse {
		req := kmsg.NewPtrSyncGroupRequest()
		req.Version, req.Group, req.MemberID, req.Generation = 5, "g", "m", gen
		req.ProtocolType, req.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
		k.request(req)
		resp := kmsg.NewPtrSyncGroupResponse()
		resp.Version = 5
		k.response(resp, true)
		return resp
	}
	// The member's assignment at its generation, from a classic
	// heartbeat; a generation passed (fenced) rejoins.
	backend.set(&request.GroupHeartbeatResult{MemberEpoch: 4, Assignment: assigned, Rejoin: true}, nil)
	s := sync(4)
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(s.MemberAssignment); err != nil || s.ErrorCode != 0 || *s.Protocol != "range" ||
		len(a.Topics) != 1 || a.Topics[0].Topic != "t" || fmt.Sprint(a.Topics[0].Partitions) != "[0 2]" {
		t.Fatalf("sync: %+v, assignment %+v (%v)", s, a, err)
	}
	if hb := backend.lastHeartbeat(); !hb.Classic || hb.MemberEpoch != 4 || hb.Owned != nil || hb.Subscription != nil {
		t.Fatalf("sync heartbeat %+v", hb)
	}
	backend.set(nil, quireError(quirev1.ErrorCode_FENCED_MEMBER_EPOCH))
	if s = sync(3); s.ErrorCode != kerr.RebalanceInProgress.Code {
		t.Fatalf("sync at another generation: code %d", s.ErrorCode)
	}

	beat := func(gen int32) int16 {
		req := kmsg.NewPtrHeartbeatRequest()
		req.Version, req.Group, req.MemberID, req.Generation = 4, "g", "m", gen
		k.request(req)
		resp := kmsg.NewPtrHeartbeatResponse()
		resp.Version = 4
		k.response(resp, true)
		return resp.ErrorCode
	}
	for _, tc := range []struct {
		name string
		resp *request.GroupHeartbeatResult
		err  error
		want int16
	}{
		{"unchanged", &request.GroupHeartbeatResult{MemberEpoch: 4, Assignment: assigned}, nil, 0},
		{"to rejoin", &request.GroupHeartbeatResult{MemberEpoch: 4, Assignment: assigned, Rejoin: true}, nil, kerr.RebalanceInProgress.Code},
		{"fenced", nil, quireError(quirev1.ErrorCode_FENCED_MEMBER_EPOCH), kerr.RebalanceInProgress.Code},
		{"unknown member", nil, quireError(quirev1.ErrorCode_UNKNOWN_MEMBER_ID), kerr.UnknownMemberID.Code},
		{"no controller", nil, fmt.Errorf("%w: no leader", request.ErrLeaderUnreachable), kerr.CoordinatorNotAvailable.Code},
	} {
		backend.set(tc.resp, tc.err)
		if got := beat(4); got != tc.want {
			t.Errorf("heartbeat, %s: code %d, want %d", tc.name, got, tc.want)
		}
		if hb := backend.lastHeartbeat(); !hb.Classic || hb.MemberEpoch != 4 || hb.Owned != nil || hb.Subscription != nil {
			t.Errorf("heartbeat, %s: sent %+v, want the epoch alone", tc.name, hb)
		}
	}
	n := backend.count()
	if got := beat(0); got != kerr.IllegalGeneration.Code || backend.count() != n {
		t.Fatalf("heartbeat at generation 0: code %d, %d heartbeats made", got, backend.count()-n)
	}

	// A classic member's commit at an epoch passed rejoins: the
	// connection spoke the classic protocol, or the version is before
	// KIP-848's (9). KIP-848's members get STALE_MEMBER_EPOCH.
	commit := func(k *kconn, version int16) int16 {
		oc := kmsg.NewPtrOffsetCommitRequest()
		oc.Version, oc.Group, oc.MemberID, oc.Generation = version, "g", "m", 4
		ot := kmsg.NewOffsetCommitRequestTopic()
		ot.Topic = "t"
		op := kmsg.NewOffsetCommitRequestTopicPartition()
		op.Offset = 1
		ot.Partitions = append(ot.Partitions, op)
		oc.Topics = append(oc.Topics, ot)
		k.request(oc)
		resp := kmsg.NewPtrOffsetCommitResponse()
		resp.Version = version
		k.response(resp, version >= 8)
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	if got := commit(k, 9); got != kerr.RebalanceInProgress.Code {
		t.Fatalf("a classic member's stale commit: code %d", got)
	}
	_, k2 := startServer(t, backend)
	if got := commit(k2, 9); got != kerr.StaleMemberEpoch.Code {
		t.Fatalf("a KIP-848 member's stale commit: code %d", got)
	}
	if got := commit(k2, 7); got != kerr.RebalanceInProgress.Code {
		t.Fatalf("a stale commit v7, on a connection that spoke no group protocol: code %d", got)
	}

	// LeaveGroup: one member (v2), or each of several with its own code.
	backend.set(&request.GroupHeartbeatResult{MemberEpoch: -1}, nil)
	lv := kmsg.NewPtrLeaveGroupRequest()
	lv.Version, lv.Group, lv.MemberID = 2, "g", "m"
	k.request(lv)
	lr := kmsg.NewPtrLeaveGroupResponse()
	lr.Version = 2
	k.response(lr, false)
	if hb := backend.lastHeartbeat(); lr.ErrorCode != 0 || hb.MemberID != "m" || hb.MemberEpoch != -1 {
		t.Fatalf("leave v2: code %d, heartbeat %+v", lr.ErrorCode, hb)
	}
	backend.set(nil, quireError(quirev1.ErrorCode_UNKNOWN_MEMBER_ID))
	lv = kmsg.NewPtrLeaveGroupRequest()
	lv.Version, lv.Group = 5, "g"
	for _, id := range []string{"a", "b", ""} {
		m := kmsg.NewLeaveGroupRequestMember()
		m.MemberID = id
		if id == "" {
			m.InstanceID = kmsg.StringPtr("static-1") // the instance's member, whatever its id
		}
		lv.Members = append(lv.Members, m)
	}
	n = backend.count()
	k.request(lv)
	lr = kmsg.NewPtrLeaveGroupResponse()
	lr.Version = 5
	k.response(lr, true)
	if len(lr.Members) != 3 || lr.Members[1].MemberID != "b" || lr.Members[1].ErrorCode != kerr.UnknownMemberID.Code ||
		lr.Members[2].ErrorCode != kerr.UnknownMemberID.Code || *lr.Members[2].InstanceID != "static-1" || backend.count() != n+3 {
		t.Fatalf("leave v5: %+v, %d heartbeats for 3 members", lr.Members, backend.count()-n)
	}
	if hb := backend.lastHeartbeat(); hb.MemberID != "" || hb.InstanceID != "static-1" || hb.MemberEpoch != -1 {
		t.Fatalf("leave by instance id: heartbeat %+v", hb)
	}
}

// TestKafkaGroupCallsCoordinatorNotAvailable: a KIP-848 heartbeat and an
// offset commit that meet no controller are COORDINATOR_NOT_AVAILABLE,
// which members retry, not NOT_CONTROLLER or a partition's code, which
// Kafka's clients take as fatal to the member.
func TestKafkaGroupCallsCoordinatorNotAvailable(t *testing.T) {
	t.Parallel()
	backend := &classicBackend{fakeBackend: fakeBackend{meta: &quirev1.GetMetadataResponse{}}}
	_, k := startServer(t, backend)
	for _, err := range []error{
		quireError(quirev1.ErrorCode_NOT_CONTROLLER),
		fmt.Errorf("%w: connection refused", request.ErrLeaderUnreachable),
		fmt.Errorf("controller: %w", context.DeadlineExceeded),
		quireError(quirev1.ErrorCode_LEADER_NOT_AVAILABLE),
	} {
		backend.set(nil, err)
		hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		hb.Version, hb.Group, hb.MemberID, hb.MemberEpoch = 1, "g", "m", 3
		k.request(hb)
		hr := kmsg.NewPtrConsumerGroupHeartbeatResponse()
		hr.Version = 1
		k.response(hr, true)
		if hr.ErrorCode != kerr.CoordinatorNotAvailable.Code {
			t.Errorf("heartbeat, backend %v: code %d, want COORDINATOR_NOT_AVAILABLE", err, hr.ErrorCode)
		}
	}
}
