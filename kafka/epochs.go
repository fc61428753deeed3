package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetForLeaderEpoch (KIP-101, KIP-320): a consumer that was reading
// from a leader now replaced asks, for the epoch of the last records it
// read, where that epoch ends in the new leader's log; an end below its
// position means the log was truncated under it (records it read are
// gone), which it reports or resets from. Only the leader answers, from
// its log's leader-epoch cache (the leader epoch checkpoint); any replica
// id (v3) is served alike, Quire's followers replicating over their own
// protocol.

// offsetForLeaderEpochKey is OffsetForLeaderEpoch's API key.
const offsetForLeaderEpochKey = 23

func init() {
	schemas[offsetForLeaderEpochKey] = apiSchema{4, strct[kmsg.OffsetForLeaderEpochRequest](
		fld(kInt32).since(3), // replica id
		arr(strct[kmsg.OffsetForLeaderEpochRequestTopic](
			fld(kString), // topic
			arr(strct[kmsg.OffsetForLeaderEpochRequestTopicPartition](
				fld(kInt32),          // partition
				fld(kInt32).since(2), // current leader epoch
				fld(kInt32),          // leader epoch
			)),
		)),
	)}
}

// offsetForLeaderEpoch answers each partition's end offset of the epoch
// asked: the largest epoch at or below it that the leader's log has, and
// where it ends (where the next starts, or the log end for the latest);
// -1 and -1, with no error, for an epoch older than the log's first one
// it knows or newer than its latest, as Kafka answers. A client's current
// leader epoch (v2) older than the leader's is FENCED_LEADER_EPOCH, newer
// UNKNOWN_LEADER_EPOCH; a replica not the leader NOT_LEADER_OR_FOLLOWER.
func offsetForLeaderEpoch(ctx context.Context, b Backend, req *kmsg.OffsetForLeaderEpochRequest) *kmsg.OffsetForLeaderEpochResponse {
	resp := kmsg.NewPtrOffsetForLeaderEpochResponse()
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			rp.Partition, rp.LeaderEpoch, rp.EndOffset = p.Partition, -1, -1
			current := int32(-1)
			if req.Version >= 2 {
				current = p.CurrentLeaderEpoch
			}
			epoch, end, err := b.OffsetForLeaderEpoch(ctx, t.Topic, p.Partition, current, p.LeaderEpoch)
			if err != nil {
				rp.ErrorCode, _ = coreError(err)
			} else {
				rp.LeaderEpoch, rp.EndOffset = epoch, end
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
