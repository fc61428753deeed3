package kafka

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/quirelog/quire/request"
)

// The classic group protocol (JoinGroup, SyncGroup, Heartbeat,
// LeaveGroup), which consumers that predate KIP-848 speak: librdkafka
// before 2.4, the Java client by default, franz-go without its
// server-side balancer. It is mapped onto the same coordinator, as
// classic members (quire.v1's ConsumerGroupHeartbeatRequest.classic), so
// classic and KIP-848 members may share a group, the group's assignor
// assigns for both, and a partition is never given to one member before
// the other gave it up.
//
//   - JoinGroup is a KIP-848 join for a new member and, for one the group
//     has, a rejoin at its epoch that carries its subscription and the
//     partitions it still owns (those its subscription lists: none with
//     an eager protocol, whose members give up everything before they
//     rejoin). Only a join moves the member's epoch and assignment; the
//     generation answered is its epoch. No member is made leader: the
//     coordinator assigns, so every member's SyncGroup names no
//     assignments.
//   - SyncGroup answers the member's assignment at its generation.
//   - Heartbeat keeps the member's session, and is answered
//     REBALANCE_IN_PROGRESS for as long as a rejoin would change its
//     assignment (a new target, partitions to give up, partitions now
//     free to take): level-triggered, so an answer lost or ignored in
//     the middle of a join is given again; one that has not rejoined
//     within its rebalance timeout is removed. A cooperative member
//     given less than it owns gives the rest up and rejoins at once, as
//     the protocol has it.
//   - LeaveGroup leaves.
//
// Nothing is kept on the listener, so a member may move to another node.
// A member's session timeout is the one its join asks for, within
// group.min.session.timeout.ms and group.max.session.timeout.ms (else
// INVALID_SESSION_TIMEOUT), as Kafka's classic groups have it; from
// metadata.version 6 (below it, the coordinator's). A member with a
// group.instance.id is static: its JoinGroup without a member id is given
// one at once (no MEMBER_ID_REQUIRED round, as Kafka does for static
// members) and takes the place of the instance's member, its partitions
// and generation, with no rebalance; the member it replaced is answered
// FENCED_INSTANCE_ID from then on. LeaveGroup may name members by
// instance id alone.

// cooperative is the cooperative rebalance protocol's assignor (KIP-429):
// chosen whenever a member offers it, so that its members keep their
// partitions through a rejoin. The coordinator assigns, with the
// server-side assignor of the protocol's name (serverAssignor); a
// member's owned partitions say what it kept.
const cooperative = "cooperative-sticky"

// serverAssignor is the coordinator's assignor for a classic protocol
// (a client-side assignor's name), which assigns as that one does:
// range and roundrobin as Kafka's, the sticky ones as uniform (balanced,
// and a partition stays with its owner unless balance needs it
// elsewhere, which is what sticky assignors do). Another name (a client's
// own assignor) is "": the group's assignor, the configured default
// unless its members ask for another.
func serverAssignor(protocol string) string {
	switch protocol {
	case "range", "roundrobin":
		return protocol
	case "sticky", cooperative:
		return "uniform"
	}
	return ""
}

// unsupportedAssignor is the coordinator refusing an assignor it does not
// allow.
func unsupportedAssignor(err error) bool {
	if err == nil {
		return false
	}
	code, _ := coreError(err)
	return code == kerr.UnsupportedAssignor.Code
}

// streams is Kafka Streams' protocol, whose leader assigns tasks with
// data of its own: not served, as the coordinator cannot make it.
const streams = "stream"

// classicType is the only protocol type served: consumers'.
const classicType = "consumer"

// joinGroup joins, or rejoins, a classic member.
func joinGroup(ctx context.Context, b Backend, clientID string, req *kmsg.JoinGroupRequest) *kmsg.JoinGroupResponse {
	resp := kmsg.NewPtrJoinGroupResponse()
	resp.Generation, resp.MemberID = -1, req.MemberID
	fail := func(code int16) *kmsg.JoinGroupResponse {
		resp.ErrorCode = code
		return resp
	}
	if req.ProtocolType != classicType || len(req.Protocols) == 0 {
		return fail(kerr.InconsistentGroupProtocol.Code)
	}
	if req.SessionTimeoutMillis <= 0 {
		return fail(kerr.InvalidSessionTimeout.Code)
	}
	proto := req.Protocols[0]
	for _, p := range req.Protocols {
		if p.Name == cooperative {
			proto = p
		}
	}
	meta, err := readSubscription(proto.Metadata)
	if err != nil || proto.Name == streams {
		return fail(kerr.InconsistentGroupProtocol.Code)
	}
	if req.MemberID == "" {
		resp.MemberID = newMemberID(clientID)
		if req.Version >= 4 && req.InstanceID == nil {
			// KIP-394: the member learns its id first and joins with it,
			// so a join whose answer is lost leaves no unknown member.
			return fail(kerr.MemberIDRequired.Code)
		}
	}
	owned := &request.GroupAssignment{}
	for _, o := range meta.OwnedPartitions {
		owned.Topics = append(owned.Topics, request.GroupTopicPartitions{Topic: o.Topic, Partitions: o.Partitions})
	}
	rebalance := req.RebalanceTimeoutMillis
	if rebalance <= 0 { // v0 has none
		rebalance = req.SessionTimeoutMillis
	}
	hb := func(proto string) (*request.GroupHeartbeatResult, error) {
		return b.ConsumerGroupHeartbeat(ctx, &request.GroupHeartbeat{
			Group: req.Group, MemberID: resp.MemberID, MemberEpoch: 0, Classic: true,
			Subscription: &request.GroupSubscription{Topics: meta.Topics},
			Owned:        owned, RebalanceTimeoutMs: rebalance, InstanceID: deref(req.InstanceID),
			SessionTimeoutMs: req.SessionTimeoutMillis, Assignor: serverAssignor(proto),
		})
	}
	out, err := hb(proto.Name)
	// An assignor the coordinator does not allow (group.consumer.assignors)
	// is not applied under another's name: the member's other protocols
	// are tried in its order, and one with none allowed is refused, as
	// Kafka refuses a member with no protocol the group can use.
	tried := map[string]bool{serverAssignor(proto.Name): true}
	for _, p := range req.Protocols {
		if !unsupportedAssignor(err) {
			break
		}
		if a := serverAssignor(p.Name); !tried[a] && p.Name != streams {
			tried[a] = true
			proto = p
			out, err = hb(p.Name)
		}
	}
	if unsupportedAssignor(err) {
		return fail(kerr.InconsistentGroupProtocol.Code)
	}
	if err != nil {
		return fail(classicError(err))
	}
	resp.Generation = out.MemberEpoch
	resp.ProtocolType, resp.Protocol = kmsg.StringPtr(classicType), kmsg.StringPtr(proto.Name)
	return resp
}

// readSubscription reads a consumer's subscription (its protocol's
// metadata, ConsumerProtocolSubscription) leniently. Kafka's coordinator
// never reads these bytes (the leader's assignor does), so clients label
// them loosely: segmentio/kafka-go sends version 1 without version 1's
// owned partitions. A subscription whose fields end early is read at
// the highest version its bytes hold in full; the fields after the
// topics are optional to the coordinator, the topics are not.
func readSubscription(b []byte) (kmsg.ConsumerMemberMetadata, error) {
	var meta kmsg.ConsumerMemberMetadata
	err := meta.ReadFrom(b)
	if err == nil || len(b) < 2 {
		return meta, err
	}
	declared := int16(binary.BigEndian.Uint16(b))
	lower := slices.Clone(b)
	for v := min(declared, 3) - 1; v >= 0; v-- {
		binary.BigEndian.PutUint16(lower, uint16(v))
		if meta.ReadFrom(lower) == nil {
			meta.Version = declared
			return meta, nil
		}
	}
	return meta, err
}

// classicBeat is a classic member's heartbeat at its generation, which
// changes nothing but its session.
func classicBeat(ctx context.Context, b Backend, group, member string, instance *string, generation int32) (*request.GroupHeartbeatResult, int16) {
	if member == "" {
		return nil, kerr.UnknownMemberID.Code
	}
	if generation <= 0 {
		// 0 would join and -1 leave, in KIP-848's heartbeat.
		return nil, kerr.IllegalGeneration.Code
	}
	out, err := b.ConsumerGroupHeartbeat(ctx, &request.GroupHeartbeat{
		Group: group, MemberID: member, MemberEpoch: generation, Classic: true, InstanceID: deref(instance),
	})
	if err != nil {
		return nil, classicError(err)
	}
	return out, 0
}

// syncGroup answers a classic member's assignment at its generation;
// assignments a member sends are ignored (no member is leader).
func syncGroup(ctx context.Context, b Backend, req *kmsg.SyncGroupRequest) *kmsg.SyncGroupResponse {
	resp := kmsg.NewPtrSyncGroupResponse()
	resp.ProtocolType, resp.Protocol = req.ProtocolType, req.Protocol
	out, code := classicBeat(ctx, b, req.Group, req.MemberID, req.InstanceID, req.Generation)
	if code != 0 {
		resp.ErrorCode = code
		return resp
	}
	resp.MemberAssignment = encodeAssignment(out.Assignment)
	return resp
}

// encodeAssignment is a set of partitions as consumers encode their
// assignment (ConsumerProtocolAssignment v0).
func encodeAssignment(in *request.GroupAssignment) []byte {
	a := kmsg.NewConsumerMemberAssignment()
	if in == nil {
		return a.AppendTo(nil)
	}
	for _, t := range in.Topics {
		at := kmsg.NewConsumerMemberAssignmentTopic()
		at.Topic, at.Partitions = t.Topic, t.Partitions
		a.Topics = append(a.Topics, at)
	}
	return a.AppendTo(nil)
}

// heartbeat keeps a classic member in its group, and tells it to rejoin
// while the coordinator has moved on.
func heartbeat(ctx context.Context, b Backend, req *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse {
	resp := kmsg.NewPtrHeartbeatResponse()
	out, code := classicBeat(ctx, b, req.Group, req.MemberID, req.InstanceID, req.Generation)
	if code == 0 && out.Rejoin {
		code = kerr.RebalanceInProgress.Code
	}
	resp.ErrorCode = code
	return resp
}

// leaveGroup removes classic members, one (v0-2) or many.
func leaveGroup(ctx context.Context, b Backend, req *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse {
	resp := kmsg.NewPtrLeaveGroupResponse()
	leave := func(id string, instance *string) int16 {
		if id == "" && instance == nil {
			return kerr.UnknownMemberID.Code
		}
		// A member named by its instance id alone (an admin removing it)
		// is the instance's member, whatever its id.
		if _, err := b.ConsumerGroupHeartbeat(ctx, &request.GroupHeartbeat{
			Group: req.Group, MemberID: id, MemberEpoch: -1, InstanceID: deref(instance),
		}); err != nil {
			return classicError(err)
		}
		return 0
	}
	if req.Version < 3 {
		resp.ErrorCode = leave(req.MemberID, nil)
		return resp
	}
	for _, m := range req.Members {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID, rm.ErrorCode = m.MemberID, m.InstanceID, leave(m.MemberID, m.InstanceID)
		resp.Members = append(resp.Members, rm)
	}
	return resp
}

// classicError is a group call's error code for a classic member: a
// member behind its epoch (fenced, or a commit at an older one) rejoins
// (REBALANCE_IN_PROGRESS), as a member of a classic group that is
// rebalancing does; a group the coordinator lacks has no such member.
func classicError(err error) int16 {
	code, _ := groupError(err)
	switch code {
	case kerr.FencedMemberEpoch.Code, kerr.StaleMemberEpoch.Code:
		return kerr.RebalanceInProgress.Code
	case kerr.GroupIDNotFound.Code:
		return kerr.UnknownMemberID.Code
	}
	return code
}

// newMemberID is a new classic member's id, Kafka's form: the client id
// (at most 200 bytes of it) and a random UUID.
func newMemberID(clientID string) string {
	if len(clientID) > 200 {
		clientID = clientID[:200]
	}
	var u [16]byte
	_, _ = rand.Read(u[:]) // never fails (crypto/rand)
	u[6], u[8] = u[6]&0x0f|0x40, u[8]&0x3f|0x80
	return fmt.Sprintf("%s-%x-%x-%x-%x-%x", clientID, u[0:4], u[4:6], u[6:8], u[8:10], u[10:])
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
