package kafka

import (
	"context"
	"crypto/rand"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

// The classic group protocol (JoinGroup, SyncGroup, Heartbeat,
// LeaveGroup), which consumers that predate KIP-848 speak: librdkafka
// before 2.4, the Java client by default, franz-go without its
// server-side balancer. It is mapped onto the same coordinator: the
// listener heartbeats for a classic member in KIP-848's protocol, so
// classic and KIP-848 members may share a group, the group's assignor
// assigns for both, and a partition is never given to one member before
// the other gave it up.
//
//   - JoinGroup is a KIP-848 join for a new member, and for one the group
//     has a heartbeat at its epoch that carries its subscription and the
//     partitions it still uses: those it lists as owned with the
//     cooperative protocol, none with an eager one (whose members give
//     up everything before they rejoin). The generation answered is the
//     member's epoch. No member is made leader: the coordinator assigns,
//     so every member's SyncGroup names no assignments.
//   - SyncGroup answers the member's current assignment.
//   - Heartbeat is a KIP-848 heartbeat that still uses all it was given.
//     Once the coordinator moves the member on (a new epoch, partitions
//     to give up or to take), the answer is REBALANCE_IN_PROGRESS, and the
//     member rejoins to learn its assignment. A cooperative member given
//     less than it owns gives the rest up and rejoins at once, as the
//     protocol has it.
//   - LeaveGroup leaves.
//
// Nothing is kept on the listener: a rejoin asks the coordinator for the
// member's epoch (DescribeGroup), so a member may move to another node.
// The coordinator's session timeout (group.consumer.session.timeout.ms)
// applies, not the one a member asks for; group.instance.id is accepted
// and its members are dynamic ones.

// cooperative is the one protocol whose members keep their partitions
// through a rejoin (KIP-429): chosen whenever a member offers it.
const cooperative = "cooperative-sticky"

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
	var meta kmsg.ConsumerMemberMetadata
	if err := meta.ReadFrom(proto.Metadata); err != nil || len(meta.Topics) == 0 {
		return fail(kerr.InconsistentGroupProtocol.Code)
	}
	if req.MemberID == "" {
		resp.MemberID = newMemberID(clientID)
		if req.Version >= 4 {
			// KIP-394: the member learns its id first and joins with it,
			// so a join whose answer is lost leaves no unknown member.
			return fail(kerr.MemberIDRequired.Code)
		}
	}
	var owned *quirev1.GroupAssignment
	if proto.Name == cooperative {
		owned = &quirev1.GroupAssignment{}
		for _, o := range meta.OwnedPartitions {
			owned.Topics = append(owned.Topics, &quirev1.GroupTopicPartitions{Topic: o.Topic, Partitions: o.Partitions})
		}
	}
	epoch, err := memberEpoch(ctx, b, req.Group, resp.MemberID)
	switch {
	case err != nil:
		return fail(classicError(err))
	case epoch < 0 && owned != nil && len(owned.Topics) > 0:
		// Removed from the group (its session ran out) while it still
		// uses partitions that may have gone to others: it drops them
		// and joins again, as a new member.
		return fail(kerr.UnknownMemberID.Code)
	case epoch < 0:
		epoch, owned = 0, nil // a join owns nothing
	case owned == nil:
		owned = &quirev1.GroupAssignment{} // eager: it gave up everything
	}
	rebalance := req.RebalanceTimeoutMillis
	if req.Version == 0 || rebalance <= 0 {
		rebalance = req.SessionTimeoutMillis
	}
	out, err := b.ConsumerGroupHeartbeat(ctx, &quirev1.ConsumerGroupHeartbeatRequest{
		Group: req.Group, MemberId: resp.MemberID, MemberEpoch: epoch,
		Subscription: &quirev1.GroupSubscription{Topics: meta.Topics},
		Owned:        owned, RebalanceTimeoutMs: rebalance,
	})
	if err != nil {
		return fail(classicError(err))
	}
	resp.Generation = out.MemberEpoch
	resp.ProtocolType, resp.Protocol = kmsg.StringPtr(classicType), kmsg.StringPtr(proto.Name)
	return resp
}

// syncGroup answers a classic member's assignment at its generation;
// assignments a member sends are ignored (no member is leader).
func syncGroup(ctx context.Context, b Backend, req *kmsg.SyncGroupRequest) *kmsg.SyncGroupResponse {
	resp := kmsg.NewPtrSyncGroupResponse()
	resp.ProtocolType, resp.Protocol = req.ProtocolType, req.Protocol
	d, err := b.DescribeGroup(ctx, &quirev1.DescribeGroupRequest{Group: req.Group})
	if err != nil {
		resp.ErrorCode = classicError(err)
		return resp
	}
	mem := findMember(d, req.MemberID)
	switch {
	case mem == nil:
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return resp
	case mem.MemberEpoch != req.Generation:
		resp.ErrorCode = kerr.RebalanceInProgress.Code
		return resp
	}
	a := kmsg.NewConsumerMemberAssignment()
	for _, t := range mem.GetAssigned().GetTopics() {
		at := kmsg.NewConsumerMemberAssignmentTopic()
		at.Topic, at.Partitions = t.Topic, t.Partitions
		a.Topics = append(a.Topics, at)
	}
	resp.MemberAssignment = a.AppendTo(nil)
	return resp
}

// heartbeat keeps a classic member in its group, and tells it to rejoin
// once the coordinator moved it on.
func heartbeat(ctx context.Context, b Backend, req *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse {
	resp := kmsg.NewPtrHeartbeatResponse()
	if req.Generation <= 0 {
		// 0 would join and -1 leave, in KIP-848's heartbeat.
		resp.ErrorCode = kerr.IllegalGeneration.Code
		return resp
	}
	out, err := b.ConsumerGroupHeartbeat(ctx, &quirev1.ConsumerGroupHeartbeatRequest{
		Group: req.Group, MemberId: req.MemberID, MemberEpoch: req.Generation,
	})
	switch {
	case err != nil:
		resp.ErrorCode = classicError(err)
	case out.MemberEpoch != req.Generation || out.Assignment != nil:
		resp.ErrorCode = kerr.RebalanceInProgress.Code
	}
	return resp
}

// leaveGroup removes classic members, one (v0-2) or many.
func leaveGroup(ctx context.Context, b Backend, req *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse {
	resp := kmsg.NewPtrLeaveGroupResponse()
	leave := func(id string) int16 {
		if _, err := b.ConsumerGroupHeartbeat(ctx, &quirev1.ConsumerGroupHeartbeatRequest{
			Group: req.Group, MemberId: id, MemberEpoch: -1,
		}); err != nil {
			return classicError(err)
		}
		return 0
	}
	if req.Version < 3 {
		resp.ErrorCode = leave(req.MemberID)
		return resp
	}
	for _, m := range req.Members {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID, rm.ErrorCode = m.MemberID, m.InstanceID, leave(m.MemberID)
		resp.Members = append(resp.Members, rm)
	}
	return resp
}

// memberEpoch is a member's epoch in its group, -1 for a member (or
// group) the coordinator does not have.
func memberEpoch(ctx context.Context, b Backend, group, id string) (int32, error) {
	d, err := b.DescribeGroup(ctx, &quirev1.DescribeGroupRequest{Group: group})
	if code, _ := callError(err); code == kerr.GroupIDNotFound.Code {
		return -1, nil
	} else if err != nil {
		return 0, err
	}
	if mem := findMember(d, id); mem != nil {
		return mem.MemberEpoch, nil
	}
	return -1, nil
}

func findMember(d *quirev1.DescribeGroupResponse, id string) *quirev1.GroupMemberDescription {
	for _, m := range d.Members {
		if m.MemberId == id {
			return m
		}
	}
	return nil
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
