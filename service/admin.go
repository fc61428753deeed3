package service

import (
	"context"
	"fmt"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/replica"
	"github.com/quirelog/quire/request"
)

// adminService implements quire.v1.Admin over the request core: writes
// are checked there, then forwarded to the controller; the call returns
// once this broker's view of the metadata includes the change.
type adminService struct {
	quirev1.UnimplementedAdminServer
	b *node
}

// validateTopicName applies Kafka's rule (request.ValidateTopicName).
func validateTopicName(name string) error { return request.ValidateTopicName(name) }

// CreateTopic, DeleteTopic, CreatePartitions, DescribeConfigs and
// AlterConfigs are the request core's (request/topics.go, configs.go),
// which authorizes them; these translate quire.v1 to and from its types.

func (s *adminService) CreateTopic(ctx context.Context, req *quirev1.CreateTopicRequest) (*quirev1.CreateTopicResponse, error) {
	in := &request.CreateTopicRequest{Name: req.Name, Configs: req.Configs, RequestID: req.RequestId, ValidateOnly: req.ValidateOnly}
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
			Partitions: br.Partitions, MaxPartitions: br.Info.MaxPartitions, Cordoned: br.Info.Cordoned,
			ReassignmentThrottle: br.Info.ReassignmentThrottle,
		})
	}
	return resp, nil
}

func (s *adminService) DescribeConfigs(ctx context.Context, req *quirev1.DescribeConfigsRequest) (*quirev1.DescribeConfigsResponse, error) {
	var (
		entries []request.ConfigEntry
		err     error
	)
	switch {
	case req.Group != "" && req.Topic != "":
		err = fmt.Errorf("%w: name a topic or a group, not both", replica.ErrInvalidRequest)
	case req.Group != "":
		entries, err = s.b.core.DescribeShareGroupConfigs(coreContext(ctx), req.Group)
	default:
		entries, err = s.b.core.DescribeConfigs(coreContext(ctx), req.Topic)
	}
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
	if req.Group != "" {
		if req.Topic != "" {
			return nil, toStatus(fmt.Errorf("%w: name a topic or a group, not both", replica.ErrInvalidRequest))
		}
		err := s.b.core.AlterShareGroupConfigs(coreContext(ctx), &request.AlterShareGroupConfigsRequest{Group: req.Group, Set: req.Set, Delete: req.Delete, ValidateOnly: req.ValidateOnly})
		if err != nil {
			return nil, toStatus(err)
		}
		return &quirev1.AlterConfigsResponse{}, nil
	}
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
	b *node
}

// GetMetadata is the request core's (request/metadata.go), which
// authorizes it: a topic named that the caller may not describe refuses
// the whole call. Each broker's address is the one on the listener the
// call came in on.
func (s *metadataService) GetMetadata(ctx context.Context, req *quirev1.GetMetadataRequest) (*quirev1.GetMetadataResponse, error) {
	md, err := s.b.core.Metadata(coreContext(ctx), &request.MetadataRequest{Topics: req.Topics, AllowAutoTopicCreation: req.AllowAutoTopicCreation,
		MinIndex: req.MinMetadataIndex, AllOrNothing: true})
	if err != nil {
		return nil, toStatus(err)
	}
	return metadataResponse(md, s.b.clientListener(ctx)), nil
}

// metadataResponse is the core's answer as quire.v1's, with each
// broker's address on listener.
func metadataResponse(md *request.MetadataResult, listener string) *quirev1.GetMetadataResponse {
	resp := &quirev1.GetMetadataResponse{ClusterId: md.ClusterID, ControllerId: md.ControllerID, MetadataIndex: md.Index, Stale: md.Stale}
	for _, br := range md.Brokers {
		resp.Brokers = append(resp.Brokers, &quirev1.Broker{Id: br.ID, Address: br.AddrFor(listener), Rack: br.Rack, Fenced: br.Fenced})
	}
	for _, t := range md.Topics {
		if t.Err != nil {
			resp.Topics = append(resp.Topics, &quirev1.TopicMetadata{Name: t.Info.Name, Error: toError(t.Err)})
			continue
		}
		tm := &quirev1.TopicMetadata{Name: t.Info.Name, TopicId: t.Info.ID, MaxMessageBytes: int32(t.MaxMessageBytes)}
		for _, p := range t.Info.Partitions {
			tm.Partitions = append(tm.Partitions, &quirev1.PartitionMetadata{
				Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, Replicas: p.Replicas, Isr: p.ISR,
			})
		}
		resp.Topics = append(resp.Topics, tm)
	}
	return resp
}

// topicDescriptions is the core's descriptions as quire.v1's.
func topicDescriptions(ds []request.TopicDescription) []*quirev1.TopicDescription {
	out := make([]*quirev1.TopicDescription, len(ds))
	for i, d := range ds {
		td := &quirev1.TopicDescription{Name: d.Name, TopicId: d.ID, Configs: d.Configs, Partitions: make([]*quirev1.PartitionDescription, len(d.Partitions))}
		for j, p := range d.Partitions {
			pd := &quirev1.PartitionDescription{Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, Replicas: p.Replicas, Isr: p.ISR,
				LogStartOffset: p.LogStartOffset, HighWatermark: p.HighWatermark, LogEndOffset: p.LogEndOffset, SizeBytes: p.SizeBytes,
				AddingReplicas: p.AddingReplicas, RemovingReplicas: p.RemovingReplicas}
			for _, o := range p.OfflineReplicas {
				pd.OfflineReplicas = append(pd.OfflineReplicas, &quirev1.OfflineReplica{BrokerId: o.BrokerID, Dir: o.Dir, Error: o.Error})
			}
			if p.DirtyRatio >= 0 {
				pd.OptionalDirtyRatio = &quirev1.PartitionDescription_DirtyRatio{DirtyRatio: p.DirtyRatio}
			}
			td.Partitions[j] = pd
		}
		out[i] = td
	}
	return out
}

// configSourcesV1 are the core's config sources as quire.v1's.
var configSourcesV1 = map[request.ConfigSource]quirev1.ConfigSource{
	request.SourceTopic:   quirev1.ConfigSource_CONFIG_SOURCE_TOPIC,
	request.SourceGroup:   quirev1.ConfigSource_CONFIG_SOURCE_GROUP,
	request.SourceBroker:  quirev1.ConfigSource_CONFIG_SOURCE_BROKER,
	request.SourceDefault: quirev1.ConfigSource_CONFIG_SOURCE_DEFAULT,
}
