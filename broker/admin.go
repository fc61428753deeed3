package broker

import (
	"context"
	"fmt"
	"sort"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/request"
)

// adminService implements quire.v1.Admin. Writes are checked here, then
// forwarded to the controller; the call returns once this broker's view
// of the metadata includes the change.
type adminService struct {
	quirev1.UnimplementedAdminServer
	b *Broker
}

// validateTopicName applies Kafka's rule (request.ValidateTopicName).
func validateTopicName(name string) error { return request.ValidateTopicName(name) }

// CreateTopic, DeleteTopic, CreatePartitions, DescribeConfigs and
// AlterConfigs are the request core's (request/topics.go, configs.go),
// which authorizes them; these translate quire.v1 to and from its types.

func (s *adminService) CreateTopic(ctx context.Context, req *quirev1.CreateTopicRequest) (*quirev1.CreateTopicResponse, error) {
	in := &request.CreateTopicRequest{Name: req.Name, Configs: req.Configs, ValidateOnly: req.ValidateOnly}
	if req.OptionalPartitions != nil {
		n := req.GetPartitions()
		in.Partitions = &n
	}
	if req.OptionalReplicationFactor != nil {
		n := req.GetReplicationFactor()
		in.ReplicationFactor = &n
	}
	out, err := s.b.core.CreateTopic(coreContext(ctx), in)
	if err != nil {
		return nil, toStatus(err)
	}
	return &quirev1.CreateTopicResponse{Topic: topicDescriptions([]request.TopicDescription{out.Topic})[0], MetadataIndex: out.MetadataIndex}, nil
}

func (s *adminService) DeleteTopic(ctx context.Context, req *quirev1.DeleteTopicRequest) (*quirev1.DeleteTopicResponse, error) {
	index, err := s.b.core.DeleteTopic(coreContext(ctx), req.Name)
	if err != nil {
		return nil, toStatus(err)
	}
	return &quirev1.DeleteTopicResponse{MetadataIndex: index}, nil
}

// ListTopics, DescribeCluster, DescribeProducers and UnregisterBroker
// are the request core's too (request/cluster.go).

func (s *adminService) ListTopics(ctx context.Context, req *quirev1.ListTopicsRequest) (*quirev1.ListTopicsResponse, error) {
	resp := &quirev1.ListTopicsResponse{}
	for _, t := range s.b.core.ListTopics(coreContext(ctx)) {
		resp.Topics = append(resp.Topics, &quirev1.TopicListing{Name: t.Name, TopicId: t.ID, Partitions: t.Partitions, ReplicationFactor: t.ReplicationFactor})
	}
	return resp, nil
}

// DescribeTopics is the request core's, which authorizes it (Describe
// on each topic named; a listing leaves out what the caller may not
// describe).
func (s *adminService) DescribeTopics(ctx context.Context, req *quirev1.DescribeTopicsRequest) (*quirev1.DescribeTopicsResponse, error) {
	ds, err := s.b.core.DescribeTopics(coreContext(ctx), req.Names)
	if err != nil {
		return nil, toStatus(err)
	}
	return &quirev1.DescribeTopicsResponse{Topics: topicDescriptions(ds)}, nil
}

// DescribeCluster gives each broker's address on the listener the call
// came in on.
func (s *adminService) DescribeCluster(ctx context.Context, req *quirev1.DescribeClusterRequest) (*quirev1.DescribeClusterResponse, error) {
	d, err := s.b.core.DescribeCluster(coreContext(ctx))
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &quirev1.DescribeClusterResponse{ClusterId: d.ClusterID, ControllerId: d.ControllerID}
	listener := s.b.clientListener(ctx)
	for _, br := range d.Brokers {
		resp.Brokers = append(resp.Brokers, &quirev1.BrokerDescription{
			Id: br.Info.ID, Address: br.Info.AddrFor(listener), Rack: br.Info.Rack, Fenced: br.Info.Fenced, Controller: br.Controller,
			Partitions: br.Partitions, MaxPartitions: br.Info.MaxPartitions,
		})
	}
	return resp, nil
}

func (s *adminService) DescribeConfigs(ctx context.Context, req *quirev1.DescribeConfigsRequest) (*quirev1.DescribeConfigsResponse, error) {
	entries, err := s.b.core.DescribeConfigs(coreContext(ctx), req.Topic)
	if err != nil {
		return nil, toStatus(err)
	}
	out := make([]*quirev1.ConfigEntry, len(entries))
	for i, e := range entries {
		out[i] = &quirev1.ConfigEntry{Name: e.Name, Value: e.Value, Source: configSourcesV1[e.Source], Documentation: e.Documentation}
	}
	return &quirev1.DescribeConfigsResponse{Configs: out}, nil
}

func (s *adminService) AlterConfigs(ctx context.Context, req *quirev1.AlterConfigsRequest) (*quirev1.AlterConfigsResponse, error) {
	err := s.b.core.AlterConfigs(coreContext(ctx), &request.AlterConfigsRequest{Topic: req.Topic, Set: req.Set, Delete: req.Delete, ValidateOnly: req.ValidateOnly})
	if err != nil {
		return nil, toStatus(err)
	}
	return &quirev1.AlterConfigsResponse{}, nil
}

func (s *adminService) CreatePartitions(ctx context.Context, req *quirev1.CreatePartitionsRequest) (*quirev1.CreatePartitionsResponse, error) {
	out, err := s.b.core.CreatePartitions(coreContext(ctx), &request.CreatePartitionsRequest{Topic: req.Topic, TotalCount: req.TotalCount, ValidateOnly: req.ValidateOnly})
	if err != nil {
		return nil, toStatus(err)
	}
	return &quirev1.CreatePartitionsResponse{Topic: topicDescriptions([]request.TopicDescription{out.Topic})[0], MetadataIndex: out.MetadataIndex}, nil
}

func (s *adminService) UnregisterBroker(ctx context.Context, req *quirev1.UnregisterBrokerRequest) (*quirev1.UnregisterBrokerResponse, error) {
	if err := s.b.core.UnregisterBroker(coreContext(ctx), req.BrokerId); err != nil {
		return nil, toStatus(err)
	}
	return &quirev1.UnregisterBrokerResponse{}, nil
}

// metadataService implements quire.v1.Metadata.
type metadataService struct {
	quirev1.UnimplementedMetadataServer
	b *Broker
}

// maxMetadataWait bounds how long GetMetadata waits for the image to
// reach the index a client asks for.
const maxMetadataWait = 5 * time.Second

func (s *metadataService) GetMetadata(ctx context.Context, req *quirev1.GetMetadataRequest) (*quirev1.GetMetadataResponse, error) {
	b := s.b
	img := b.cluster.image()
	if want := req.MinMetadataIndex; img.Index() < want {
		until := time.Now().Add(maxMetadataWait)
		if dl, ok := ctx.Deadline(); ok {
			// Answer before the caller gives up, so it hears why.
			if dl = dl.Add(-min(time.Until(dl)/10, 100*time.Millisecond)); dl.Before(until) {
				until = dl
			}
		}
		wctx, cancel := context.WithDeadline(ctx, until)
		newer, err := b.cluster.waitFor(wctx, func(img *metadata.Image) bool { return img.Index() >= want })
		cancel()
		if newer != nil {
			img = newer
		}
		if err != nil {
			return nil, toStatus(fmt.Errorf("%w: broker %d's metadata is at index %d, the request asks for %d or newer",
				ErrRequestTimedOut, b.cfg.NodeID, img.Index(), want))
		}
	}
	resp := &quirev1.GetMetadataResponse{ClusterId: b.cluster.clusterID(), ControllerId: b.cluster.controllerID()}
	var topics []metadata.TopicInfo
	var missing []*quirev1.TopicMetadata
	if len(req.Topics) == 0 {
		topics = img.Topics()
	}
	for _, name := range req.Topics {
		t, ok := img.Topic(name)
		if !ok && req.AllowAutoTopicCreation && b.cfg.AutoCreateTopicsEnable {
			var err error
			if t, err = b.autoCreateTopic(ctx, name); err != nil {
				missing = append(missing, &quirev1.TopicMetadata{Name: name, Error: toError(err)})
				continue
			}
			img = b.cluster.image()
			ok = true
		}
		if !ok {
			err := unknownTopic(name)
			if req.AllowAutoTopicCreation {
				err = fmt.Errorf("%w, and auto.create.topics.enable is false on broker %d", err, b.cfg.NodeID)
			}
			missing = append(missing, &quirev1.TopicMetadata{Name: name, Error: toError(err)})
			continue
		}
		topics = append(topics, t)
	}
	resp.MetadataIndex, resp.Stale = img.Index(), b.cluster.sessionLost()
	listener := b.clientListener(ctx)
	for _, br := range img.Brokers() {
		resp.Brokers = append(resp.Brokers, &quirev1.Broker{Id: br.ID, Address: br.AddrFor(listener), Rack: br.Rack, Fenced: br.Fenced})
	}
	sort.Slice(resp.Brokers, func(i, j int) bool { return resp.Brokers[i].Id < resp.Brokers[j].Id })
	for _, t := range topics {
		tm := &quirev1.TopicMetadata{Name: t.Name, TopicId: t.ID, MaxMessageBytes: int32(b.topicMaxMessageBytes(t))}
		for _, p := range t.Partitions {
			tm.Partitions = append(tm.Partitions, &quirev1.PartitionMetadata{
				Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, Replicas: p.Replicas, Isr: p.ISR,
			})
		}
		resp.Topics = append(resp.Topics, tm)
	}
	resp.Topics = append(resp.Topics, missing...)
	return resp, nil
}
