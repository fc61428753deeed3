package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/quirelog/quire/request"
)

// neverFlexible is the flexibleFrom of an API with no flexible version.
const neverFlexible int16 = 1<<15 - 1

// offsetDelete removes a group's committed offsets of the partitions
// named (Kafka's OffsetDelete, API 47), each on its own: a partition of
// a topic a member is subscribed to is GROUP_SUBSCRIBED_TO_TOPIC, one of
// an unknown topic UNKNOWN_TOPIC_OR_PARTITION; a refusal of the whole
// group (GROUP_ID_NOT_FOUND, GROUP_AUTHORIZATION_FAILED, the coordinator
// out of reach) is the answer's top-level code, with no partitions, as
// Kafka answers it.
func offsetDelete(ctx context.Context, b Backend, req *kmsg.OffsetDeleteRequest) *kmsg.OffsetDeleteResponse {
	resp := kmsg.NewPtrOffsetDeleteResponse()
	in := &request.DeleteOffsetsRequest{Group: req.Group}
	for _, t := range req.Topics {
		if len(t.Partitions) == 0 {
			continue // asks for none (to the backend, none named is all)
		}
		dt := request.TopicPartitions{Topic: t.Topic, Partitions: make([]int32, len(t.Partitions))}
		for i, p := range t.Partitions {
			dt.Partitions[i] = p.Partition
		}
		in.Topics = append(in.Topics, dt)
	}
	if len(in.Topics) == 0 {
		return resp
	}
	out, err := b.DeleteOffsets(ctx, in)
	if err != nil {
		resp.ErrorCode, _ = groupError(err)
		return resp
	}
	byTopic := map[string]int{}
	for _, r := range out {
		i, ok := byTopic[r.Topic]
		if !ok {
			i = len(resp.Topics)
			byTopic[r.Topic] = i
			rt := kmsg.NewOffsetDeleteResponseTopic()
			rt.Topic = r.Topic
			resp.Topics = append(resp.Topics, rt)
		}
		rp := kmsg.NewOffsetDeleteResponseTopicPartition()
		rp.Partition = r.Partition
		if r.Err != nil {
			rp.ErrorCode, _ = coreError(r.Err)
		}
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
	}
	return resp
}

// offsetDeleteSchema is OffsetDelete's request layout (v0, never
// flexible).
var offsetDeleteSchema = apiSchema{neverFlexible, strct[kmsg.OffsetDeleteRequest](
	fld(kString), // group
	arr(strct[kmsg.OffsetDeleteRequestTopic](
		fld(kString), // topic
		arr(strct[kmsg.OffsetDeleteRequestTopicPartition](
			fld(kInt32), // partition
		)),
	)),
)}
