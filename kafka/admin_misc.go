package kafka

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/quirelog/quire/request"
)

// describeProducers lists the idempotent producers of each partition
// asked for that this broker leads; a partition led elsewhere gets
// NOT_LEADER_OR_FOLLOWER, so a client asks its leader (as it does of
// Kafka).
func describeProducers(ctx context.Context, b Backend, req *kmsg.DescribeProducersRequest) *kmsg.DescribeProducersResponse {
	resp := kmsg.NewPtrDescribeProducersResponse()
	for _, t := range req.Topics {
		rt := kmsg.NewDescribeProducersResponseTopic()
		rt.Topic = t.Topic
		out, err := b.DescribeProducers(ctx, t.Topic, t.Partitions)
		if err != nil {
			code, msg := coreError(err)
			for _, p := range t.Partitions {
				rp := kmsg.NewDescribeProducersResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.ErrorMessage = p, code, msgPtr(msg)
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		for _, pp := range out {
			rp := kmsg.NewDescribeProducersResponseTopicPartition()
			rp.Partition = pp.Partition
			if pp.Err != nil {
				code, msg := coreError(pp.Err)
				rp.ErrorCode, rp.ErrorMessage = code, msgPtr(msg)
			}
			for _, pr := range pp.Producers {
				ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
				ap.ProducerID, ap.ProducerEpoch, ap.LastSequence, ap.LastTimestamp = pr.ProducerID, int32(pr.ProducerEpoch), pr.LastSequence, pr.LastTimestamp
				ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = pr.CoordinatorEpoch, pr.TxnStartOffset
				rp.ActiveProducers = append(rp.ActiveProducers, ap)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// describeLogDirs describes this broker's log directories, with the
// replicas of the topics asked for (all for a null list) in each.
func describeLogDirs(ctx context.Context, b Backend, req *kmsg.DescribeLogDirsRequest) *kmsg.DescribeLogDirsResponse {
	resp := kmsg.NewPtrDescribeLogDirsResponse()
	dirs, err := b.LogDirs(ctx)
	if err != nil {
		resp.ErrorCode, _ = coreError(err)
		return resp
	}
	var want map[string]map[int32]bool
	if req.Topics != nil {
		want = map[string]map[int32]bool{}
		for _, t := range req.Topics {
			if want[t.Topic] == nil {
				want[t.Topic] = map[int32]bool{}
			}
			for _, p := range t.Partitions {
				want[t.Topic][p] = true
			}
		}
	}
	for _, d := range dirs {
		rd := kmsg.NewDescribeLogDirsResponseDir()
		rd.Dir, rd.TotalBytes, rd.UsableBytes = d.Path, d.TotalBytes, d.UsableBytes
		index := map[string]int{}
		for _, p := range d.Partitions {
			if want != nil && !want[p.Topic][p.Partition] {
				continue
			}
			i, ok := index[p.Topic]
			if !ok {
				rt := kmsg.NewDescribeLogDirsResponseDirTopic()
				rt.Topic = p.Topic
				i = len(rd.Topics)
				index[p.Topic] = i
				rd.Topics = append(rd.Topics, rt)
			}
			rp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
			rp.Partition, rp.Size, rp.OffsetLag = p.Partition, p.Size, p.OffsetLag
			rd.Topics[i].Partitions = append(rd.Topics[i].Partitions, rp)
		}
		resp.Dirs = append(resp.Dirs, rd)
	}
	return resp
}

// Kafka's election types.
const (
	electPreferred = 0
	electUnclean   = 1
)

// electLeaders has the controller move each partition's leadership to
// its preferred (first) replica now (Backend.ElectLeaders): a partition it
// leads already is ELECTION_NOT_NEEDED, one whose preferred replica is not
// alive or not in sync PREFERRED_LEADER_NOT_AVAILABLE. A null topic list
// is every partition. Unclean elections on demand are not served: the
// controller elects a live out-of-sync replica on its own where
// unclean.leader.election.enable allows, so they are INVALID_REQUEST.
func electLeaders(ctx context.Context, b Backend, req *kmsg.ElectLeadersRequest) *kmsg.ElectLeadersResponse {
	resp := kmsg.NewPtrElectLeadersResponse()
	if req.ElectionType != electPreferred {
		msg := fmt.Sprintf("election type %d: preferred (0) and unclean (1) are the types", req.ElectionType)
		if req.ElectionType == electUnclean {
			msg = "unclean elections on demand are not served; set unclean.leader.election.enable " +
				"on the topic, and the controller elects a live out-of-sync replica when no in-sync one is left"
		}
		for _, t := range req.Topics {
			rt := kmsg.NewElectLeadersResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewElectLeadersResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.ErrorMessage = p, invalidRequest, msgPtr(fmt.Sprintf("%s-%d: %s", t.Topic, p, msg))
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		if req.Topics == nil {
			resp.ErrorCode = invalidRequest
		}
		return resp
	}
	var in []request.TopicPartitions
	for _, t := range req.Topics {
		if len(t.Partitions) == 0 {
			continue // a topic naming no partition asks for none
		}
		in = append(in, request.TopicPartitions{Topic: t.Topic, Partitions: t.Partitions})
	}
	if req.Topics != nil && len(in) == 0 {
		return resp
	}
	ctx, cancel := withTimeout(ctx, req.TimeoutMillis)
	defer cancel()
	out, err := b.ElectLeaders(ctx, in)
	if err != nil {
		// At the top (v1 on) and on each partition asked, as v0 has no
		// top-level code.
		code, msg := coreError(err)
		resp.ErrorCode = code
		for _, t := range in {
			rt := kmsg.NewElectLeadersResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewElectLeadersResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.ErrorMessage = p, code, msgPtr(msg)
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	byTopic := map[string]int{}
	for _, r := range out {
		i, ok := byTopic[r.Topic]
		if !ok {
			i = len(resp.Topics)
			byTopic[r.Topic] = i
			rt := kmsg.NewElectLeadersResponseTopic()
			rt.Topic = r.Topic
			resp.Topics = append(resp.Topics, rt)
		}
		rp := kmsg.NewElectLeadersResponseTopicPartition()
		rp.Partition = r.Partition
		if r.Err != nil {
			code, msg := coreError(r.Err)
			rp.ErrorCode, rp.ErrorMessage = code, msgPtr(msg)
		}
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
	}
	return resp
}
