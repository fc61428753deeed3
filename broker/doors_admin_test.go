package broker_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

// Topic and config administration through both doors, for
// TestDoorsAnswerAlike's table: steps create (arg: partitions),
// deletetopic, partitions (arg: the new total), alter (arg: retention.ms
// to set; -1 sets a key no topic has), configs (answers retention.ms
// as its offset), meta (the topic's metadata; answers its partition
// count) and elect (the preferred replica of the partition).

// unknownRetentionKey is a key no topic has: the broker key, which the
// topic key retention.ms defaults to.
const unknownRetentionKey = "log.retention.ms"

func alterSet(arg int64) (string, string) {
	if arg < 0 {
		return unknownRetentionKey, "1000"
	}
	return "retention.ms", strconv.FormatInt(arg, 10)
}

// retention is a config value as a door's offset; -1 if it is not a
// number.
func retention(v string) int64 {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return -1
	}
	return n
}

func (g grpcDoor) runAdmin(t *testing.T, ctx context.Context, topic string, s doorOp) (doorAnswer, bool) {
	switch s.op {
	case "create":
		resp, err := g.c.admin.CreateTopic(ctx, &quirev1.CreateTopicRequest{Name: topic,
			OptionalPartitions: &quirev1.CreateTopicRequest_Partitions{Partitions: int32(s.arg)}})
		if err != nil {
			return doorAnswer{code: grpcCode(t, err, nil), offset: -1}, true
		}
		return doorAnswer{offset: int64(len(resp.Topic.Partitions))}, true
	case "deletetopic":
		_, err := g.c.admin.DeleteTopic(ctx, &quirev1.DeleteTopicRequest{Name: topic})
		return doorAnswer{code: grpcCode(t, err, nil)}, true
	case "partitions":
		_, err := g.c.admin.CreatePartitions(ctx, &quirev1.CreatePartitionsRequest{Topic: topic, TotalCount: int32(s.arg)})
		return doorAnswer{code: grpcCode(t, err, nil)}, true
	case "alter":
		k, v := alterSet(s.arg)
		_, err := g.c.admin.AlterConfigs(ctx, &quirev1.AlterConfigsRequest{Topic: topic, Set: map[string]string{k: v}})
		return doorAnswer{code: grpcCode(t, err, nil)}, true
	case "meta":
		resp, err := g.c.meta.GetMetadata(ctx, &quirev1.GetMetadataRequest{Topics: []string{topic}})
		if err != nil {
			return doorAnswer{code: grpcCode(t, err, nil), offset: -1}, true
		}
		if tm := resp.Topics[0]; tm.Error != nil {
			return doorAnswer{code: grpcCode(t, nil, tm.Error), offset: -1}, true
		}
		return doorAnswer{offset: int64(len(resp.Topics[0].Partitions))}, true
	case "elect":
		resp, err := g.c.admin.ElectLeaders(ctx, &quirev1.ElectLeadersRequest{Topics: []*quirev1.ElectLeadersTopic{{Topic: topic, Partitions: []int32{s.partition}}}})
		if err != nil {
			return doorAnswer{code: grpcCode(t, err, nil), offset: -1}, true
		}
		return doorAnswer{code: grpcCode(t, nil, resp.Partitions[0].Error)}, true
	case "configs":
		resp, err := g.c.admin.DescribeConfigs(ctx, &quirev1.DescribeConfigsRequest{Topic: topic})
		if err != nil {
			return doorAnswer{code: grpcCode(t, err, nil), offset: -1}, true
		}
		for _, e := range resp.Configs {
			if e.Name == "retention.ms" {
				return doorAnswer{offset: retention(e.Value)}, true
			}
		}
		t.Fatalf("configs of %s: no retention.ms in %v", topic, resp.Configs)
	}
	return doorAnswer{}, false
}

func (k kafkaDoor) runAdmin(t *testing.T, ctx context.Context, topic string, s doorOp) (doorAnswer, bool) {
	switch s.op {
	case "create":
		req := kmsg.NewPtrCreateTopicsRequest()
		req.Version, req.TimeoutMillis = 5, 30000
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, int32(s.arg), -1
		req.Topics = append(req.Topics, rt)
		r := k.send(t, ctx, req).(*kmsg.CreateTopicsResponse).Topics[0]
		if r.ErrorCode != 0 {
			return doorAnswer{code: int32(r.ErrorCode), offset: -1}, true
		}
		return doorAnswer{offset: int64(r.NumPartitions)}, true
	case "deletetopic":
		req := kmsg.NewPtrDeleteTopicsRequest()
		req.Version, req.TimeoutMillis = 4, 30000
		// The client sends the highest version both ends serve: the
		// topic is named both ways, by name before v6 and in Topics
		// since.
		req.TopicNames = []string{topic}
		rt := kmsg.NewDeleteTopicsRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		r := k.send(t, ctx, req).(*kmsg.DeleteTopicsResponse).Topics[0]
		return doorAnswer{code: int32(r.ErrorCode)}, true
	case "partitions":
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.Version, req.TimeoutMillis = 1, 30000
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = topic, int32(s.arg)
		req.Topics = append(req.Topics, rt)
		r := k.send(t, ctx, req).(*kmsg.CreatePartitionsResponse).Topics[0]
		return doorAnswer{code: int32(r.ErrorCode)}, true
	case "alter":
		key, v := alterSet(s.arg)
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, topic
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = key, kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(v)
		rr.Configs = append(rr.Configs, c)
		req.Resources = append(req.Resources, rr)
		r := k.send(t, ctx, req).(*kmsg.IncrementalAlterConfigsResponse).Resources[0]
		return doorAnswer{code: int32(r.ErrorCode)}, true
	case "meta":
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 12
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		r := k.send(t, ctx, req).(*kmsg.MetadataResponse).Topics[0]
		if r.ErrorCode != 0 {
			return doorAnswer{code: int32(r.ErrorCode), offset: -1}, true
		}
		return doorAnswer{offset: int64(len(r.Partitions))}, true
	case "elect":
		req := kmsg.NewPtrElectLeadersRequest()
		req.Version, req.TimeoutMillis = 2, 30000
		rt := kmsg.NewElectLeadersRequestTopic()
		rt.Topic, rt.Partitions = topic, []int32{s.partition}
		req.Topics = append(req.Topics, rt)
		resp := k.send(t, ctx, req).(*kmsg.ElectLeadersResponse)
		if resp.ErrorCode != 0 {
			return doorAnswer{code: int32(resp.ErrorCode), offset: -1}, true
		}
		return doorAnswer{code: int32(resp.Topics[0].Partitions[0].ErrorCode)}, true
	case "configs":
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.Version = 1
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName, rr.ConfigNames = kmsg.ConfigResourceTypeTopic, topic, []string{"retention.ms"}
		req.Resources = append(req.Resources, rr)
		r := k.send(t, ctx, req).(*kmsg.DescribeConfigsResponse).Resources[0]
		if r.ErrorCode != 0 {
			return doorAnswer{code: int32(r.ErrorCode), offset: -1}, true
		}
		if len(r.Configs) != 1 || r.Configs[0].Value == nil {
			t.Fatalf("configs of %s: %+v, want retention.ms", topic, r.Configs)
		}
		return doorAnswer{offset: retention(*r.Configs[0].Value)}, true
	}
	return doorAnswer{}, false
}
