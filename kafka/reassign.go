package kafka

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/quirelog/quire/request"
)

// Partition reassignment (KIP-455) through the request core, answered
// partition by partition as Kafka's controller answers it: each refused
// partition has its own error code and message, the others go ahead, and
// the top-level error is kept for what refuses the whole request
// (authorization, no controller).

// alterPartitionAssignments starts, replaces or cancels (null replicas)
// reassignments. With allow_replication_factor_change false (v1), a
// target of another size than the partition's replicas is that
// partition's INVALID_REPLICATION_FACTOR.
func alterPartitionAssignments(ctx context.Context, b Backend, req *kmsg.AlterPartitionAssignmentsRequest) *kmsg.AlterPartitionAssignmentsResponse {
	resp := kmsg.NewPtrAlterPartitionAssignmentsResponse()
	var targets []request.ReassignmentTarget
	for _, t := range req.Topics {
		rt := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			targets = append(targets, request.ReassignmentTarget{Topic: t.Topic, Partition: p.Partition, Replicas: p.Replicas, Cancel: p.Replicas == nil})
			rp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			rp.Partition = p.Partition
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	// answers[i] is the answer of targets[i], the topics' partitions in
	// the request's order.
	var answers []*kmsg.AlterPartitionAssignmentsResponseTopicPartition
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			answers = append(answers, &resp.Topics[i].Partitions[j])
		}
	}
	whole := func(code int16, msg string) *kmsg.AlterPartitionAssignmentsResponse {
		resp.ErrorCode, resp.ErrorMessage = code, msgPtr(msg)
		for _, a := range answers {
			a.ErrorCode, a.ErrorMessage = code, msgPtr(msg)
		}
		return resp
	}
	if len(targets) == 0 {
		return resp
	}
	ctx, cancel := withTimeout(ctx, req.TimeoutMillis)
	defer cancel()
	asked := make([]int, 0, len(targets)) // the targets passed to the core
	if req.Version >= 1 && !req.AllowReplicationFactorChange {
		pending, err := b.ListPartitionReassignments(ctx, nil)
		if err != nil {
			return whole(coreError(err))
		}
		for i, t := range targets {
			if msg := replicationFactorChange(ctx, b, t, pending); msg != "" {
				answers[i].ErrorCode, answers[i].ErrorMessage = kerr.InvalidReplicationFactor.Code, msgPtr(msg)
				continue
			}
			asked = append(asked, i)
		}
	} else {
		for i := range targets {
			asked = append(asked, i)
		}
	}
	if len(asked) == 0 {
		return resp
	}
	send := make([]request.ReassignmentTarget, len(asked))
	for j, i := range asked {
		send[j] = targets[i]
	}
	res, err := b.AlterPartitionReassignments(ctx, send)
	if err != nil {
		return whole(coreError(err))
	}
	for j, i := range asked {
		if j < len(res) && res[j].Err != nil {
			code, msg := coreError(res[j].Err)
			answers[i].ErrorCode, answers[i].ErrorMessage = code, msgPtr(msg)
		}
	}
	return resp
}

// replicationFactorChange says how t's size differs from its
// partition's replication factor (the target of a pending reassignment
// counts), "" when it does not.
func replicationFactorChange(ctx context.Context, b Backend, t request.ReassignmentTarget, pending []request.PendingReassignment) string {
	if t.Cancel {
		return ""
	}
	md, err := b.Metadata(ctx, &request.MetadataRequest{Topics: []string{t.Topic}})
	if err != nil || len(md.Topics) != 1 {
		return "" // the core answers an unknown partition
	}
	for _, p := range md.Topics[0].Info.Partitions {
		if p.Partition != t.Partition {
			continue
		}
		rf := len(p.Replicas)
		for _, r := range pending {
			if r.Topic == t.Topic && r.Partition == t.Partition {
				rf = len(r.TargetReplicas())
			}
		}
		if len(t.Replicas) != rf {
			return fmt.Sprintf("%s-%d: %d replicas for a replication factor of %d, and the request does not allow a change", t.Topic, t.Partition, len(t.Replicas), rf)
		}
	}
	return ""
}

// listPartitionReassignments answers the pending reassignments of the
// partitions named, or every one for a null topic list.
func listPartitionReassignments(ctx context.Context, b Backend, req *kmsg.ListPartitionReassignmentsRequest) *kmsg.ListPartitionReassignmentsResponse {
	resp := kmsg.NewPtrListPartitionReassignmentsResponse()
	var topics []request.PartitionsOf
	for _, t := range req.Topics {
		if len(t.Partitions) == 0 {
			continue // a topic naming no partition asks for none
		}
		topics = append(topics, request.PartitionsOf{Topic: t.Topic, Partitions: t.Partitions})
	}
	if req.Topics != nil && len(topics) == 0 {
		return resp
	}
	ctx, cancel := withTimeout(ctx, req.TimeoutMillis)
	defer cancel()
	pending, err := b.ListPartitionReassignments(ctx, topics)
	if err != nil {
		code, msg := coreError(err)
		resp.ErrorCode, resp.ErrorMessage = code, msgPtr(msg)
		return resp
	}
	byTopic := map[string]int{}
	for _, p := range pending {
		i, ok := byTopic[p.Topic]
		if !ok {
			i = len(resp.Topics)
			byTopic[p.Topic] = i
			rt := kmsg.NewListPartitionReassignmentsResponseTopic()
			rt.Topic = p.Topic
			resp.Topics = append(resp.Topics, rt)
		}
		rp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
		rp.Partition, rp.Replicas, rp.AddingReplicas, rp.RemovingReplicas = p.Partition, p.Replicas, p.AddingReplicas, p.RemovingReplicas
		if rp.AddingReplicas == nil {
			rp.AddingReplicas = []int32{}
		}
		if rp.RemovingReplicas == nil {
			rp.RemovingReplicas = []int32{}
		}
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
	}
	return resp
}
