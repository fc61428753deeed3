package kafka

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/quirelog/quire/request"
)

// Partition reassignment (KIP-455) through the request core, which takes
// the whole request or none of it: a refused request carries its one
// error at the top and on every partition it named.

// alterPartitionAssignments starts, replaces or cancels (null replicas)
// reassignments. With allow_replication_factor_change false (v1), a
// target of another size than the partition's replicas is
// INVALID_REPLICATION_FACTOR, and nothing starts.
func alterPartitionAssignments(ctx context.Context, b Backend, req *kmsg.AlterPartitionAssignmentsRequest) *kmsg.AlterPartitionAssignmentsResponse {
	resp := kmsg.NewPtrAlterPartitionAssignmentsResponse()
	var targets []request.ReassignmentTarget
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			targets = append(targets, request.ReassignmentTarget{Topic: t.Topic, Partition: p.Partition, Replicas: p.Replicas, Cancel: p.Replicas == nil})
		}
	}
	answer := func(code int16, msg string) *kmsg.AlterPartitionAssignmentsResponse {
		resp.ErrorCode, resp.ErrorMessage = code, msgPtr(msg)
		for _, t := range req.Topics {
			rt := kmsg.NewAlterPartitionAssignmentsResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.ErrorMessage = p.Partition, code, msgPtr(msg)
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	if len(targets) == 0 {
		return answer(0, "")
	}
	ctx, cancel := withTimeout(ctx, req.TimeoutMillis)
	defer cancel()
	if req.Version >= 1 && !req.AllowReplicationFactorChange {
		pending, err := b.ListPartitionReassignments(ctx, nil)
		if err != nil {
			code, msg := coreError(err)
			return answer(code, msg)
		}
		if msg := replicationFactorChange(ctx, b, targets, pending); msg != "" {
			return answer(kerr.InvalidReplicationFactor.Code, msg)
		}
	}
	if err := b.AlterPartitionReassignments(ctx, targets); err != nil {
		code, msg := coreError(err)
		return answer(code, msg)
	}
	return answer(0, "")
}

// replicationFactorChange names the first target whose size differs from
// its partition's replication factor (the target of a pending
// reassignment counts), "" when none does.
func replicationFactorChange(ctx context.Context, b Backend, targets []request.ReassignmentTarget, pending []request.PendingReassignment) string {
	for _, t := range targets {
		if t.Cancel {
			continue
		}
		md, err := b.Metadata(ctx, &request.MetadataRequest{Topics: []string{t.Topic}})
		if err != nil || len(md.Topics) != 1 {
			continue // the core answers an unknown partition
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
