package kafka

import (
	"context"
	"fmt"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/quirelog/quire/request"
)

// Consumer groups in KIP-848's protocol (ConsumerGroupHeartbeat: the
// coordinator assigns, the members reconcile), which is the node's own,
// and committed offsets. Any node takes a group's requests and passes
// them to the coordinator, so FindCoordinator names the node asked.

// findCoordinator answers this node for every group key the caller may
// describe (GROUP_AUTHORIZATION_FAILED for another, as Kafka answers);
// the same for a transactional id (any node passes a transaction's calls
// to the coordinator on the controller).
func findCoordinator(ctx context.Context, b Backend, req *kmsg.FindCoordinatorRequest) *kmsg.FindCoordinatorResponse {
	resp := kmsg.NewPtrFindCoordinatorResponse()
	keys := req.CoordinatorKeys
	if req.Version < 4 {
		keys = []string{req.CoordinatorKey}
	}
	for _, k := range keys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key, c.NodeID, c.Port = k, -1, -1
		nodeID, host, port, code, msg := coordinatorOf(ctx, b, req.CoordinatorType, k)
		if code == 0 {
			c.NodeID, c.Host, c.Port = nodeID, host, port
		} else {
			c.ErrorCode, c.ErrorMessage = code, kmsg.StringPtr(msg)
		}
		resp.Coordinators = append(resp.Coordinators, c)
	}
	if req.Version < 4 && len(resp.Coordinators) == 1 {
		c := resp.Coordinators[0]
		resp.NodeID, resp.Host, resp.Port, resp.ErrorCode, resp.ErrorMessage = c.NodeID, c.Host, c.Port, c.ErrorCode, c.ErrorMessage
		resp.Coordinators = nil
	}
	return resp
}

// coordinatorOf is the coordinator of one key, or the error code and
// message to answer for it.
func coordinatorOf(ctx context.Context, b Backend, coordinatorType int8, key string) (int32, string, int32, int16, string) {
	var self Node
	var err error
	switch coordinatorType {
	case 0:
		self, err = b.Coordinator(ctx, key)
	case 1:
		self, err = b.TxnCoordinator(ctx, key)
	default:
		return -1, "", -1, invalidRequest, fmt.Sprintf("coordinator type %d is not one Kafka has (0 group, 1 transaction)", coordinatorType)
	}
	if err != nil {
		code, msg := coreError(err)
		return -1, "", -1, code, msg
	}
	host, p, err := net.SplitHostPort(self.Addr)
	var port int64
	if err == nil {
		port, err = strconv.ParseInt(p, 10, 32)
	}
	if err != nil {
		return -1, "", -1, kerr.CoordinatorNotAvailable.Code, "no address on this listener"
	}
	return self.ID, host, int32(port), 0, ""
}

// topicIDs maps topic ids to names and back, from the metadata: the
// group heartbeat names topics by id.
type topicIDs struct {
	names map[[16]byte]string
	ids   map[string][16]byte
}

func loadTopicIDs(ctx context.Context, b Backend) (topicIDs, error) {
	md, err := b.Metadata(ctx, &request.MetadataRequest{})
	if err != nil {
		return topicIDs{}, err
	}
	t := topicIDs{names: map[[16]byte]string{}, ids: map[string][16]byte{}}
	for _, tm := range md.Topics {
		if id := topicID(tm.Info.ID); id != ([16]byte{}) {
			t.names[id], t.ids[tm.Info.Name] = tm.Info.Name, id
		}
	}
	return t, nil
}

// consumerGroupHeartbeat joins, stays in or leaves a group.
func consumerGroupHeartbeat(ctx context.Context, b Backend, req *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
	resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	fail := func(err error) *kmsg.ConsumerGroupHeartbeatResponse {
		code, msg := groupError(err)
		resp.ErrorCode, resp.ErrorMessage = code, kmsg.StringPtr(msg)
		return resp
	}
	ids, err := loadTopicIDs(ctx, b)
	if err != nil {
		return fail(err)
	}
	in := &request.GroupHeartbeat{Group: req.Group, MemberID: req.MemberID, MemberEpoch: req.MemberEpoch,
		InstanceID: deref(req.InstanceID)}
	if req.SubscribedTopicNames != nil || req.SubscribedTopicRegex != nil {
		in.Subscription = &request.GroupSubscription{Topics: req.SubscribedTopicNames}
		if req.SubscribedTopicRegex != nil {
			in.Subscription.Regex = *req.SubscribedTopicRegex
		}
	}
	if req.Topics != nil {
		in.Owned = &request.GroupAssignment{}
		for _, t := range req.Topics {
			name, ok := ids.names[t.TopicID]
			if !ok {
				// Owned partitions left out would be taken as released
				// and given to others: unknown ids say "unchanged".
				in.Owned = nil
				break
			}
			in.Owned.Topics = append(in.Owned.Topics, request.GroupTopicPartitions{Topic: name, Partitions: t.Partitions})
		}
	}
	if req.RebalanceTimeoutMillis > 0 {
		in.RebalanceTimeoutMs = req.RebalanceTimeoutMillis
	}
	if req.ServerAssignor != nil {
		in.Assignor = *req.ServerAssignor
	}
	out, err := b.ConsumerGroupHeartbeat(ctx, in)
	if err != nil {
		return fail(err)
	}
	resp.MemberID, resp.MemberEpoch, resp.HeartbeatIntervalMillis = kmsg.StringPtr(out.MemberID), out.MemberEpoch, out.HeartbeatIntervalMs
	if out.Assignment != nil {
		a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
		for _, t := range out.Assignment.Topics {
			id, ok := ids.ids[t.Topic]
			if !ok {
				// Assigned a topic made since the ids were read.
				if ids, err = loadTopicIDs(ctx, b); err != nil {
					return fail(err)
				}
				if id, ok = ids.ids[t.Topic]; !ok {
					continue
				}
			}
			at := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
			at.TopicID, at.Partitions = id, t.Partitions
			if at.Partitions == nil {
				at.Partitions = []int32{}
			}
			a.Topics = append(a.Topics, at)
		}
		resp.Assignment = &a
	}
	return resp
}

// offsetCommit commits a group's offsets, all or none: every partition
// gets the call's code. A member commits under its id and epoch (the
// generation field, in KIP-848's versions, the generation a classic
// member was given, which is its epoch); a client with no member id
// commits as no member. classic is a connection that speaks the classic
// group protocol, whose members rejoin on a commit at an epoch passed
// (REBALANCE_IN_PROGRESS, not KIP-848's STALE_MEMBER_EPOCH), as do those
// of any commit before v9.
func offsetCommit(ctx context.Context, b Backend, req *kmsg.OffsetCommitRequest, classic bool) *kmsg.OffsetCommitResponse {
	resp := kmsg.NewPtrOffsetCommitResponse()
	in := &request.CommitOffsetsRequest{Group: req.Group}
	if req.MemberID != "" {
		in.MemberID, in.MemberEpoch = req.MemberID, req.Generation
	}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			oc := request.OffsetCommit{Topic: t.Topic, Partition: p.Partition, Offset: p.Offset, LeaderEpoch: -1}
			if req.Version >= 6 && p.LeaderEpoch >= 0 {
				oc.LeaderEpoch = p.LeaderEpoch
			}
			if p.Metadata != nil {
				oc.Metadata = *p.Metadata
			}
			in.Offsets = append(in.Offsets, oc)
		}
	}
	code := int16(0)
	if len(in.Offsets) > 0 {
		if _, err := b.CommitOffsets(ctx, in); err != nil {
			if classic || req.Version < 9 {
				// Before v9 only the classic protocol commits as a
				// member; from v9 either may.
				code = classicError(err)
			} else {
				code, _ = groupError(err)
			}
		}
	}
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// offsetFetch reads groups' committed offsets: of the partitions named,
// -1 for one never committed, or every committed one for no topic list.
func offsetFetch(ctx context.Context, b Backend, req *kmsg.OffsetFetchRequest) *kmsg.OffsetFetchResponse {
	resp := kmsg.NewPtrOffsetFetchResponse()
	if req.Version < 8 {
		g := fetchGroup(ctx, b, req.Group, req.Topics != nil, groupTopics(req.Topics))
		resp.ErrorCode = g.ErrorCode
		if req.Version < 2 && g.ErrorCode != 0 {
			// No group-level error before v2: Kafka gives it to every
			// partition asked for (v0 and v1 always name them).
			return offsetFetchFailed(req, g.ErrorCode)
		}
		for _, t := range g.Topics {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata, rp.ErrorCode = p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	for _, rg := range req.Groups {
		l := topicList{parts: map[string][]int32{}}
		for _, t := range rg.Topics {
			l.add(t.Topic, t.Partitions)
		}
		resp.Groups = append(resp.Groups, fetchGroup(ctx, b, rg.Group, rg.Topics != nil, l))
	}
	return resp
}

// offsetFetchFailed is the answer before v2 to a fetch the group failed:
// each partition asked for with offset -1 and the group's error.
func offsetFetchFailed(req *kmsg.OffsetFetchRequest, code int16) *kmsg.OffsetFetchResponse {
	resp := kmsg.NewPtrOffsetFetchResponse()
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetFetchResponseTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch, rp.ErrorCode = p, -1, -1, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// topicList is the partitions asked for, topics in request order.
type topicList struct {
	order []string
	parts map[string][]int32
}

// add asks for partitions of topic, keeping the topics' first order.
func (l *topicList) add(topic string, parts []int32) {
	if _, ok := l.parts[topic]; !ok {
		l.order = append(l.order, topic)
	}
	l.parts[topic] = append(l.parts[topic], parts...)
}

func groupTopics(ts []kmsg.OffsetFetchRequestTopic) topicList {
	l := topicList{parts: map[string][]int32{}}
	for _, t := range ts {
		l.add(t.Topic, t.Partitions)
	}
	return l
}

// fetchGroup is one group's answer; named false asks for every committed
// offset.
func fetchGroup(ctx context.Context, b Backend, group string, named bool, want topicList) kmsg.OffsetFetchResponseGroup {
	g := kmsg.NewOffsetFetchResponseGroup()
	g.Group = group
	var parts []request.GroupPartition
	if named {
		for _, t := range want.order {
			for _, p := range want.parts[t] {
				parts = append(parts, request.GroupPartition{Topic: t, Partition: p})
			}
		}
		if len(parts) == 0 {
			return g
		}
	}
	out, err := b.FetchOffsets(ctx, group, parts)
	if err != nil {
		g.ErrorCode, _ = groupError(err)
		return g
	}
	type key = partKey
	got := map[key]*request.CommittedOffset{}
	byTopic := map[string][]int32{}
	var order []string
	for i, o := range out {
		got[key{o.Topic, o.Partition}] = &out[i]
		if _, ok := byTopic[o.Topic]; !ok {
			order = append(order, o.Topic)
		}
		byTopic[o.Topic] = append(byTopic[o.Topic], o.Partition)
	}
	if named {
		order, byTopic = want.order, want.parts
	}
	for _, t := range order {
		gt := kmsg.NewOffsetFetchResponseGroupTopic()
		gt.Topic = t
		for _, p := range byTopic[t] {
			gp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
			gp.Partition, gp.Offset, gp.LeaderEpoch = p, -1, -1
			if o := got[key{t, p}]; o != nil {
				gp.Offset, gp.LeaderEpoch, gp.Metadata = o.Offset, o.LeaderEpoch, kmsg.StringPtr(o.Metadata)
				if o.Offset < 0 {
					gp.LeaderEpoch = -1
				}
			}
			gt.Partitions = append(gt.Partitions, gp)
		}
		g.Topics = append(g.Topics, gt)
	}
	return g
}
