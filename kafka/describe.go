package kafka

import (
	"context"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka's admin tools list and describe groups with the classic
// protocol's ListGroups and DescribeGroups (kafka-consumer-groups.sh,
// franz-go's kadm): answered for every group, whatever protocol its
// members speak, from the coordinator's description.

// groupStates are the classic states of the coordinator's group states.
var groupStates = map[string]string{
	"empty":       "Empty",
	"assigning":   "PreparingRebalance",
	"reconciling": "CompletingRebalance",
	"stable":      "Stable",
}

// describeGroups describes each group asked for; one the coordinator
// does not have is Dead, as Kafka answers it.
func describeGroups(ctx context.Context, b Backend, req *kmsg.DescribeGroupsRequest) *kmsg.DescribeGroupsResponse {
	resp := kmsg.NewPtrDescribeGroupsResponse()
	for _, id := range req.Groups {
		g := kmsg.NewDescribeGroupsResponseGroup()
		g.Group, g.AuthorizedOperations = id, -2147483648 // not asked for, or not served
		d, err := b.DescribeGroup(ctx, id)
		switch code, msg := groupError(err); {
		case code == kerr.GroupIDNotFound.Code:
			g.State = "Dead"
		case err != nil:
			g.ErrorCode, g.ErrorMessage = code, kmsg.StringPtr(msg)
		default:
			g.State, g.ProtocolType, g.Protocol = groupStates[d.State], classicType, d.Assignor
			for _, m := range d.Members {
				gm := kmsg.NewDescribeGroupsResponseGroupMember()
				gm.MemberID, gm.ClientHost = m.MemberID, m.ClientAddress
				if m.InstanceID != "" {
					gm.InstanceID = kmsg.StringPtr(m.InstanceID)
				}
				meta := kmsg.NewConsumerMemberMetadata()
				meta.Topics = m.Topics
				gm.ProtocolMetadata = meta.AppendTo(nil)
				gm.MemberAssignment = encodeAssignment(m.Assigned)
				g.Members = append(g.Members, gm)
			}
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp
}

// listGroups lists the groups with committed offsets or members, all of
// consumers' protocol type. From v4 each group carries its classic state,
// from the listing itself, and the request may name the states to list
// (KIP-518, compared without regard to case, as Kafka parses them).
func listGroups(ctx context.Context, b Backend, req *kmsg.ListGroupsRequest) *kmsg.ListGroupsResponse {
	resp := kmsg.NewPtrListGroupsResponse()
	out, err := b.ListGroups(ctx)
	if err != nil {
		resp.ErrorCode, _ = groupError(err)
		return resp
	}
	for _, l := range out {
		g := kmsg.NewListGroupsResponseGroup()
		g.Group, g.ProtocolType, g.GroupState = l.Group, classicType, groupStates[l.State]
		if len(req.StatesFilter) > 0 && !slices.ContainsFunc(req.StatesFilter, func(s string) bool {
			return strings.EqualFold(s, g.GroupState)
		}) {
			continue
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp
}
