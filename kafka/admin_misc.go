package kafka

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	quirev1 "github.com/quirelog/quire/api/quirev1"
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
				ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = -1, -1 // no transactions
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
		resp.ErrorCode, _ = callError(err)
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
		if d.Error != nil {
			rd.ErrorCode = kerr.KafkaStorageError.Code
		}
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

// electLeaders answers from the metadata: a partition its preferred
// replica leads needs no election (ELECTION_NOT_NEEDED). The controller
// moves leadership back to the preferred replica on its own
// (auto.leader.rebalance.enable, every
// leader.imbalance.check.interval.seconds) once that replica is live and
// in sync; an election on demand is not served, and the answer says so
// for each partition that would need one. A null topic list is every
// partition.
func electLeaders(ctx context.Context, b Backend, req *kmsg.ElectLeadersRequest) *kmsg.ElectLeadersResponse {
	resp := kmsg.NewPtrElectLeadersResponse()
	in := &quirev1.GetMetadataRequest{}
	for _, t := range req.Topics {
		in.Topics = append(in.Topics, t.Topic)
	}
	md, err := b.Metadata(ctx, in)
	if err != nil {
		resp.ErrorCode, _ = callError(err)
		return resp
	}
	topics := map[string]*quirev1.TopicMetadata{}
	for _, t := range md.Topics {
		topics[t.Name] = t
	}
	asked := req.Topics
	if asked == nil {
		for _, t := range md.Topics {
			et := kmsg.NewElectLeadersRequestTopic()
			et.Topic = t.Name
			for _, p := range t.Partitions {
				et.Partitions = append(et.Partitions, p.Partition)
			}
			asked = append(asked, et)
		}
	}
	for _, t := range asked {
		rt := kmsg.NewElectLeadersResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewElectLeadersResponseTopicPartition()
			rp.Partition = p
			code, msg := electionOf(topics[t.Topic], t.Topic, p, req.ElectionType)
			rp.ErrorCode, rp.ErrorMessage = code, msgPtr(msg)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// electionOf is the answer for one partition of an ElectLeaders.
func electionOf(t *quirev1.TopicMetadata, topic string, p int32, typ int8) (int16, string) {
	switch {
	case t == nil:
		return kerr.UnknownTopicOrPartition.Code, fmt.Sprintf("unknown topic %q", topic)
	case t.Error != nil:
		return codeOf(t.Error), t.Error.Message
	case p < 0 || int(p) >= len(t.Partitions):
		return kerr.UnknownTopicOrPartition.Code, fmt.Sprintf("topic %q has no partition %d (it has %d)", topic, p, len(t.Partitions))
	case typ == electUnclean:
		return invalidRequest, fmt.Sprintf("%s-%d: unclean elections on demand are not served; set unclean.leader.election.enable "+
			"on the topic, and the controller elects a live out-of-sync replica when no in-sync one is left", topic, p)
	case typ != electPreferred:
		return invalidRequest, fmt.Sprintf("election type %d: preferred (0) and unclean (1) are the types", typ)
	}
	pm := t.Partitions[p]
	if len(pm.Replicas) > 0 && pm.Leader == pm.Replicas[0] {
		return kerr.ElectionNotNeeded.Code, fmt.Sprintf("%s-%d: its preferred replica %d leads it", topic, p, pm.Leader)
	}
	return kerr.PreferredLeaderNotAvailable.Code, fmt.Sprintf("%s-%d: an election on demand is not served; the controller moves "+
		"leadership back to the preferred replica on its own (auto.leader.rebalance.enable, every "+
		"leader.imbalance.check.interval.seconds) once that replica is live and in sync", topic, p)
}
