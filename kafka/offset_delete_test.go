package kafka

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/request"
)

func (f *fakeBackend) DeleteOffsets(context.Context, *request.DeleteOffsetsRequest) ([]request.PartitionResult, error) {
	return nil, errUnimplemented()
}

// offsetDeleteBackend answers DeleteOffsets: group "gone" is unknown;
// otherwise topic "busy" is subscribed to, and the others deleted.
type offsetDeleteBackend struct {
	fakeBackend
	got *request.DeleteOffsetsRequest
}

func (o *offsetDeleteBackend) DeleteOffsets(_ context.Context, req *request.DeleteOffsetsRequest) ([]request.PartitionResult, error) {
	o.got = req
	if req.Group == "gone" {
		return nil, coreErr(&quirev1.Error{Code: quirev1.ErrorCode_GROUP_ID_NOT_FOUND, Message: "no group gone"})
	}
	var resp []request.PartitionResult
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			r := request.PartitionResult{Topic: t.Topic, Partition: p}
			if t.Topic == "busy" {
				r.Err = &request.Error{Code: int32(quirev1.ErrorCode_GROUP_SUBSCRIBED_TO_TOPIC), Message: "subscribed"}
			}
			resp = append(resp, r)
		}
	}
	return resp, nil
}

// OffsetDelete v0 is advertised, reaches the backend with each topic's
// partitions, and answers each partition's code, or the group's at the
// top.
func TestKafkaOffsetDelete(t *testing.T) {
	backend := &offsetDeleteBackend{}
	_, k := startServer(t, backend)
	av := roundTrip[*kmsg.ApiVersionsResponse](k, kmsg.NewPtrApiVersionsRequest())
	advertised := false
	for _, a := range av.ApiKeys {
		if a.ApiKey == 47 && a.MinVersion == 0 && a.MaxVersion == 0 {
			advertised = true
		}
	}
	if !advertised {
		t.Fatal("ApiVersions does not advertise OffsetDelete v0")
	}

	req := kmsg.NewPtrOffsetDeleteRequest()
	req.Group = "g"
	for _, topic := range []string{"free", "busy"} {
		rt := kmsg.NewOffsetDeleteRequestTopic()
		rt.Topic = topic
		for _, p := range []int32{0, 1} {
			rp := kmsg.NewOffsetDeleteRequestTopicPartition()
			rp.Partition = p
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	resp := roundTrip[*kmsg.OffsetDeleteResponse](k, req)
	if backend.got.Group != "g" || len(backend.got.Topics) != 2 || len(backend.got.Topics[1].Partitions) != 2 {
		t.Fatalf("backend got %v", backend.got)
	}
	if resp.ErrorCode != 0 || len(resp.Topics) != 2 {
		t.Fatalf("answer %+v", resp)
	}
	for _, rt := range resp.Topics {
		want := int16(0)
		if rt.Topic == "busy" {
			want = kerr.GroupSubscribedToTopic.Code
		}
		if len(rt.Partitions) != 2 || rt.Partitions[0].ErrorCode != want || rt.Partitions[1].ErrorCode != want {
			t.Fatalf("topic %s: %+v, want code %d", rt.Topic, rt.Partitions, want)
		}
	}

	req.Group = "gone"
	resp = roundTrip[*kmsg.OffsetDeleteResponse](k, req)
	if resp.ErrorCode != kerr.GroupIDNotFound.Code || len(resp.Topics) != 0 {
		t.Fatalf("unknown group: %+v", resp)
	}
}
