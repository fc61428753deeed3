package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/quirelog/quire/request"
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

// DescribeShareGroupOffsets (90) and AlterShareGroupOffsets (91,
// KIP-932) over the core's calls of the same names: the share-partition
// start offsets of share groups (and their lag, from version 1, from
// the high watermark of the partition's leader wherever it is), and
// setting them for a group with no members (kafka-share-groups.sh
// --reset-offsets). A group with members is NON_EMPTY_GROUP; a topic
// refused or unknown, or an offset out of range, is refused in its
// partitions' results.

const (
	describeShareGroupOffsetsKey = 90
	alterShareGroupOffsetsKey    = 91
)

func init() {
	versions = append(versions,
		kmsg.ApiVersionsResponseApiKey{ApiKey: describeShareGroupOffsetsKey, MinVersion: 0, MaxVersion: 1},
		kmsg.ApiVersionsResponseApiKey{ApiKey: alterShareGroupOffsetsKey, MinVersion: 0, MaxVersion: 0})
	schemas[describeShareGroupOffsetsKey] = apiSchema{0, strct[kmsg.DescribeShareGroupOffsetsRequest](
		arr(strct[kmsg.DescribeShareGroupOffsetsRequestGroup](
			fld(kString), // group id
			arr(strct[kmsg.DescribeShareGroupOffsetsRequestGroupTopic]( // null: every topic
				fld(kString), // topic
				fld(kInt32s), // partitions
			)),
		)),
	)}
	schemas[alterShareGroupOffsetsKey] = apiSchema{0, strct[kmsg.AlterShareGroupOffsetsRequest](
		fld(kString), // group id
		arr(strct[kmsg.AlterShareGroupOffsetsRequestTopic](
			fld(kString), // topic
			arr(strct[kmsg.AlterShareGroupOffsetsRequestTopicPartition](
				fld(kInt32), // partition
				fld(kInt64), // start offset
			)),
		)),
	)}
}

func describeShareGroupOffsets(ctx context.Context, b Backend, req *kmsg.DescribeShareGroupOffsetsRequest) *kmsg.DescribeShareGroupOffsetsResponse {
	resp := kmsg.NewPtrDescribeShareGroupOffsetsResponse()
	var ids topicIDs
	idsLoaded := false
	for _, g := range req.Groups {
		rg := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
		rg.GroupID = g.GroupID
		var topics []request.ShareOffsetTopic
		if g.Topics != nil {
			topics = make([]request.ShareOffsetTopic, len(g.Topics))
			for i, t := range g.Topics {
				topics[i] = request.ShareOffsetTopic{Topic: t.Topic, Partitions: t.Partitions}
				if topics[i].Partitions == nil {
					topics[i].Partitions = []int32{}
				}
			}
		}
		res, err := b.DescribeShareGroupOffsets(ctx, g.GroupID, topics)
		if err != nil {
			code, msg := groupError(err)
			rg.ErrorCode, rg.ErrorMessage = code, msgPtr(msg)
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		if !idsLoaded {
			ids, _ = loadTopicIDs(ctx, b)
			idsLoaded = true
		}
		at := map[string]int{}
		for _, r := range res {
			i, ok := at[r.Topic]
			if !ok {
				rt := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
				rt.Topic, rt.TopicID = r.Topic, ids.ids[r.Topic]
				i = len(rg.Topics)
				at[r.Topic] = i
				rg.Topics = append(rg.Topics, rt)
			}
			if r.Partition < 0 {
				continue // a topic refused with no partitions named
			}
			rp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
			rp.Partition, rp.StartOffset, rp.LeaderEpoch, rp.Lag = r.Partition, r.StartOffset, r.LeaderEpoch, r.Lag
			if r.Err != nil {
				code, msg := coreError(r.Err)
				rp.ErrorCode, rp.ErrorMessage = code, msgPtr(msg)
			}
			rg.Topics[i].Partitions = append(rg.Topics[i].Partitions, rp)
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}

func alterShareGroupOffsets(ctx context.Context, b Backend, req *kmsg.AlterShareGroupOffsetsRequest) *kmsg.AlterShareGroupOffsetsResponse {
	resp := kmsg.NewPtrAlterShareGroupOffsetsResponse()
	var offsets []request.ShareStartOffset
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			offsets = append(offsets, request.ShareStartOffset{Topic: t.Topic, Partition: p.Partition, StartOffset: p.StartOffset})
		}
	}
	res, err := b.AlterShareGroupOffsets(ctx, req.GroupID, offsets)
	if err != nil {
		code, msg := groupError(err)
		resp.ErrorCode, resp.ErrorMessage = code, msgPtr(msg)
		return resp
	}
	ids, _ := loadTopicIDs(ctx, b)
	at := map[string]int{}
	for _, r := range res {
		i, ok := at[r.Topic]
		if !ok {
			rt := kmsg.NewAlterShareGroupOffsetsResponseTopic()
			rt.Topic, rt.TopicID = r.Topic, ids.ids[r.Topic]
			i = len(resp.Topics)
			at[r.Topic] = i
			resp.Topics = append(resp.Topics, rt)
		}
		rp := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
		rp.Partition = r.Partition
		if r.Err != nil {
			code, msg := coreError(r.Err)
			rp.ErrorCode, rp.ErrorMessage = code, msgPtr(msg)
		}
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
	}
	return resp
}
