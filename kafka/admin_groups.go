package kafka

import (
	"context"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/quirelog/quire/request"
)

// deleteGroups deletes each group on its own: its committed offsets and
// the group itself, refused (NON_EMPTY_GROUP) while it has members.
func deleteGroups(ctx context.Context, b Backend, req *kmsg.DeleteGroupsRequest) *kmsg.DeleteGroupsResponse {
	resp := kmsg.NewPtrDeleteGroupsResponse()
	for _, g := range req.Groups {
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group = g
		if err := b.DeleteGroup(ctx, g); err != nil {
			code, msg := groupError(err)
			rg.ErrorCode, rg.ErrorMessage = code, msgPtr(msg)
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}

// consumerGroupStates are KIP-848's names of the coordinator's states.
var consumerGroupStates = map[string]string{
	"empty":       "Empty",
	"assigning":   "Assigning",
	"reconciling": "Reconciling",
	"stable":      "Stable",
}

// consumerGroupDescribe describes groups in KIP-848's terms: each
// member's epoch, subscription, assignment and target assignment. Every
// group the coordinator has is one (the classic protocol's members are
// members of the same groups); one it does not have is
// GROUP_ID_NOT_FOUND.
func consumerGroupDescribe(ctx context.Context, b Backend, req *kmsg.ConsumerGroupDescribeRequest) *kmsg.ConsumerGroupDescribeResponse {
	resp := kmsg.NewPtrConsumerGroupDescribeResponse()
	var ids map[string][16]byte // topic ids, looked up once a member has an assignment
	idOf := func(topic string) [16]byte {
		if ids == nil {
			ids = map[string][16]byte{}
			if md, err := b.Metadata(ctx, &request.MetadataRequest{}); err == nil {
				for _, t := range md.Topics {
					ids[t.Info.Name] = topicID(t.Info.ID)
				}
			}
		}
		return ids[topic]
	}
	assignment := func(parts map[string][]int32) kmsg.Assignment {
		a := kmsg.NewAssignment()
		topics := make([]string, 0, len(parts))
		for t := range parts {
			topics = append(topics, t)
		}
		slices.Sort(topics)
		for _, t := range topics {
			if len(parts[t]) == 0 {
				continue
			}
			tp := kmsg.NewAssignmentTopicPartition()
			tp.TopicID, tp.Topic, tp.Partitions = idOf(t), t, parts[t]
			a.TopicPartitions = append(a.TopicPartitions, tp)
		}
		return a
	}
	for _, id := range req.Groups {
		g := kmsg.NewConsumerGroupDescribeResponseGroup()
		g.Group, g.AuthorizedOperations = id, authorizedOpsAbsent
		d, err := b.DescribeGroup(ctx, id)
		if err != nil {
			code, msg := groupError(err)
			g.ErrorCode, g.ErrorMessage = code, msgPtr(msg)
			if code == kerr.GroupIDNotFound.Code {
				g.State = "Dead"
			}
			resp.Groups = append(resp.Groups, g)
			continue
		}
		g.State, g.Epoch, g.AssignmentEpoch, g.AssignorName = consumerGroupStates[d.State], d.GroupEpoch, d.AssignmentEpoch, d.Assignor
		if g.State == "" {
			g.State = strings.ToUpper(d.State[:min(1, len(d.State))]) + d.State[min(1, len(d.State)):]
		}
		for _, m := range d.Members {
			gm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
			gm.MemberID, gm.MemberEpoch, gm.ClientHost, gm.SubscribedTopics = m.MemberID, m.MemberEpoch, m.ClientAddress, m.Topics
			if gm.SubscribedTopics == nil {
				gm.SubscribedTopics = []string{}
			}
			if m.InstanceID != "" {
				gm.InstanceID = kmsg.StringPtr(m.InstanceID)
			}
			if m.Regex != "" {
				gm.SubscribedTopicRegex = kmsg.StringPtr(m.Regex)
			}
			gm.MemberType = 1 // consumer, KIP-848's protocol
			owned := partitionsOf(m.Assigned)
			gm.Assignment = assignment(owned)
			// The target: what it has, less what it must give up, plus
			// what it is yet to get.
			target := partitionsOf(m.Assigned)
			for t, ps := range partitionsOf(m.PendingRevocation) {
				target[t] = slices.DeleteFunc(target[t], func(p int32) bool { return slices.Contains(ps, p) })
			}
			for t, ps := range partitionsOf(m.PendingAssignment) {
				target[t] = append(target[t], ps...)
				slices.Sort(target[t])
			}
			gm.TargetAssignment = assignment(target)
			g.Members = append(g.Members, gm)
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp
}

// partitionsOf is an assignment by topic, its partition lists copied.
func partitionsOf(a *request.GroupAssignment) map[string][]int32 {
	out := map[string][]int32{}
	if a == nil {
		return out
	}
	for _, t := range a.Topics {
		out[t.Topic] = append(out[t.Topic], t.Partitions...)
	}
	return out
}
