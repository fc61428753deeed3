package client_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/client"
)

// laggingBroker answers metadata from its own image: at index, with
// topic "new" only from index 10 on. Like a broker older than
// min_metadata_index it ignores the field. It creates topics as the
// controller would, answering index 10.
type laggingBroker struct {
	quirev1.UnimplementedMetadataServer
	quirev1.UnimplementedConsumerServer
	quirev1.UnimplementedAdminServer
	addr  string
	index uint64
	peers []*quirev1.Broker
}

func (lb *laggingBroker) GetMetadata(_ context.Context, req *quirev1.GetMetadataRequest) (*quirev1.GetMetadataResponse, error) {
	resp := &quirev1.GetMetadataResponse{ClusterId: "lag", ControllerId: 1, Brokers: lb.peers, MetadataIndex: lb.index}
	for _, name := range req.Topics {
		if name == "new" && lb.index >= 10 {
			resp.Topics = append(resp.Topics, &quirev1.TopicMetadata{Name: name, TopicId: name,
				Partitions: []*quirev1.PartitionMetadata{{Partition: 0, Leader: 1, Replicas: []int32{1}, Isr: []int32{1}}}})
			continue
		}
		resp.Topics = append(resp.Topics, &quirev1.TopicMetadata{Name: name,
			Error: &quirev1.Error{Code: quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, Message: "unknown topic " + name}})
	}
	return resp, nil
}

func (lb *laggingBroker) CreateTopic(_ context.Context, req *quirev1.CreateTopicRequest) (*quirev1.CreateTopicResponse, error) {
	return &quirev1.CreateTopicResponse{Topic: &quirev1.TopicDescription{Name: req.Name}, MetadataIndex: 10}, nil
}

// TestClientReadsItsOwnTopicCreation: after CreateTopic, the client's
// metadata refreshes take no answer older than the create, so the topic
// is there even when the brokers it asks first have not applied it (two
// of three here, and a refresh asks two).
func TestClientReadsItsOwnTopicCreation(t *testing.T) {
	t.Parallel()
	bs := []*laggingBroker{{index: 5}, {index: 5}, {index: 10}}
	var peers []*quirev1.Broker
	for i, b := range bs {
		b.addr = serveFake(t, b, b, nil, func(s *grpc.Server) { quirev1.RegisterAdminServer(s, b) })
		peers = append(peers, &quirev1.Broker{Id: int32(i + 1), Address: b.addr})
	}
	for _, b := range bs {
		b.peers = peers
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := client.New(ctx, client.SeedBrokers(bs[0].addr), client.RequestTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: "new"}); err != nil {
		t.Fatal(err)
	}
	// Each refresh starts asking at another broker: every pair comes up.
	for range 6 {
		if n, err := cl.PartitionCount(ctx, "new"); err != nil || n != 1 {
			t.Fatalf("PartitionCount after the create: %d, %v", n, err)
		}
	}
}
