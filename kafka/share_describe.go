package kafka

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/quirelog/quire/request"
)

// ShareGroupDescribe (77, KIP-932) over the core's ShareGroupDescribe:
// each group as this node serves it, its members and their assignment
// (every partition of the topics each subscribes to: a share group
// divides records, not partitions). A group this node does not serve is
// GROUP_ID_NOT_FOUND, state Dead.

const shareGroupDescribeKey = 77

func init() {
	versions = append(versions, kmsg.ApiVersionsResponseApiKey{ApiKey: shareGroupDescribeKey, MinVersion: 1, MaxVersion: 1})
	schemas[shareGroupDescribeKey] = apiSchema{0, strct[kmsg.ShareGroupDescribeRequest](
		fld(kStrings), // group ids
		fld(kInt8),    // include authorized operations
	)}
}

// shareAssignor is the assignor Kafka's share groups name: every member
// gets every partition.
const shareAssignor = "simple"

func shareGroupDescribe(ctx context.Context, b Backend, req *kmsg.ShareGroupDescribeRequest) *kmsg.ShareGroupDescribeResponse {
	resp := kmsg.NewPtrShareGroupDescribeResponse()
	var topics map[string]kmsg.ShareGroupDescribeResponseGroupMemberAssignmentTopicPartition
	assigned := func(names []string) kmsg.ShareGroupDescribeResponseGroupMemberAssignment {
		if topics == nil {
			topics = map[string]kmsg.ShareGroupDescribeResponseGroupMemberAssignmentTopicPartition{}
			if md, err := b.Metadata(ctx, &request.MetadataRequest{}); err == nil {
				for _, t := range md.Topics {
					tp := kmsg.NewShareGroupDescribeResponseGroupMemberAssignmentTopicPartition()
					tp.TopicID, tp.Topic = topicID(t.Info.ID), t.Info.Name
					for _, p := range t.Info.Partitions {
						tp.Partitions = append(tp.Partitions, p.Partition)
					}
					slices.Sort(tp.Partitions)
					topics[t.Info.Name] = tp
				}
			}
		}
		a := kmsg.NewShareGroupDescribeResponseGroupMemberAssignment()
		for _, n := range names {
			if tp, ok := topics[n]; ok && len(tp.Partitions) > 0 {
				a.TopicPartitions = append(a.TopicPartitions, tp)
			}
		}
		return a
	}
	for _, id := range req.GroupIDs {
		g := kmsg.NewShareGroupDescribeResponseGroup()
		g.GroupID, g.AuthorizedOperations = id, authorizedOpsAbsent
		d, err := b.ShareGroupDescribe(ctx, id)
		if err != nil {
			code, msg := groupError(err)
			g.ErrorCode, g.ErrorMessage = code, msgPtr(msg)
			if code == kerr.GroupIDNotFound.Code {
				g.GroupState = "Dead"
			}
			resp.Groups = append(resp.Groups, g)
			continue
		}
		g.GroupState, g.Assignor = "Empty", shareAssignor
		if len(d.Members) > 0 {
			g.GroupState = "Stable"
		}
		for _, m := range d.Members {
			gm := kmsg.NewShareGroupDescribeResponseGroupMember()
			gm.MemberID, gm.MemberEpoch, gm.SubscribedTopicNames = m.MemberID, m.Epoch, slices.Clone(m.Topics)
			if gm.SubscribedTopicNames == nil {
				gm.SubscribedTopicNames = []string{}
			}
			gm.Assignment = assigned(m.Topics)
			g.GroupEpoch = max(g.GroupEpoch, m.Epoch)
			g.Members = append(g.Members, gm)
		}
		g.AssignmentEpoch = g.GroupEpoch
		resp.Groups = append(resp.Groups, g)
	}
	return resp
}
