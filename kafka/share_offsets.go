package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteShareGroupOffsets (92, KIP-932) over the core's
// DeleteShareGroupOffsets: an empty share group's saved state on the
// topics named goes, its members then reading them from
// share.auto.offset.reset. A group with members is NON_EMPTY_GROUP, one
// unknown GROUP_ID_NOT_FOUND, an unknown topic refused in its result.

const deleteShareGroupOffsetsKey = 92

func init() {
	versions = append(versions, kmsg.ApiVersionsResponseApiKey{ApiKey: deleteShareGroupOffsetsKey, MinVersion: 0, MaxVersion: 0})
	schemas[deleteShareGroupOffsetsKey] = apiSchema{0, strct[kmsg.DeleteShareGroupOffsetsRequest](
		fld(kString), // group id
		arr(strct[kmsg.DeleteShareGroupOffsetsRequestTopic](
			fld(kString), // topic
		)),
	)}
}

func deleteShareGroupOffsets(ctx context.Context, b Backend, req *kmsg.DeleteShareGroupOffsetsRequest) *kmsg.DeleteShareGroupOffsetsResponse {
	resp := kmsg.NewPtrDeleteShareGroupOffsetsResponse()
	topics := make([]string, len(req.Topics))
	for i, t := range req.Topics {
		topics[i] = t.Topic
	}
	res, err := b.DeleteShareGroupOffsets(ctx, req.GroupID, topics)
	if err != nil {
		code, msg := groupError(err)
		resp.ErrorCode, resp.ErrorMessage = code, msgPtr(msg)
		return resp
	}
	ids, _ := loadTopicIDs(ctx, b)
	for _, r := range res {
		rt := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
		rt.Topic, rt.TopicID = r.Topic, ids.ids[r.Topic]
		if r.Err != nil {
			code, msg := coreError(r.Err)
			rt.ErrorCode, rt.ErrorMessage = code, msgPtr(msg)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
