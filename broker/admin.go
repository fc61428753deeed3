package broker

import (
	"context"
	"fmt"
	"math"
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

func (s *adminService) CreateTopic(ctx context.Context, req *quirev1.CreateTopicRequest) (*quirev1.CreateTopicResponse, error) {
	b := s.b
	if err := validateTopicName(req.Name); err != nil {
		return nil, toStatus(err)
	}
	partitions := b.cfg.NumPartitions
	if req.OptionalPartitions != nil {
		if req.GetPartitions() <= 0 {
			return nil, toStatus(fmt.Errorf("%w: topic %q: partitions must be positive, got %d", ErrInvalidPartitions, req.Name, req.GetPartitions()))
		}
		partitions = req.GetPartitions()
	}
	rf := int32(b.cfg.DefaultReplicationFactor)
	if req.OptionalReplicationFactor != nil {
		if n := req.GetReplicationFactor(); n <= 0 || n > math.MaxInt16 {
			return nil, toStatus(fmt.Errorf("%w: topic %q: replication factor must be between 1 and %d, got %d",
				ErrInvalidReplicationFactor, req.Name, math.MaxInt16, n))
		}
		rf = req.GetReplicationFactor()
	}
	img := b.cluster.image()
	if live := liveBrokers(img); live == 0 {
		// A cluster still starting (no broker registered and unfenced
		// yet): retriable, unlike a replication factor too large.
		return nil, toStatus(fmt.Errorf("%w: topic %q: no live brokers yet; the cluster is starting",
			ErrBrokersNotReady, req.Name))
	} else if int(rf) > live {
		return nil, toStatus(fmt.Errorf("%w: topic %q: replication factor %d is larger than the %d live broker(s)",
			ErrInvalidReplicationFactor, req.Name, rf, live))
	}
	if err := validateTopicConfigs(req.Configs); err != nil {
		return nil, toStatus(fmt.Errorf("topic %q: %w", req.Name, err))
	}
	if _, ok := img.Topic(req.Name); ok {
		return nil, toStatus(fmt.Errorf("%w: topic %q", metadata.ErrTopicExists, req.Name))
	}
	spec := metadata.TopicSpec{Name: req.Name, Partitions: partitions, ReplicationFactor: int16(rf), Configs: req.Configs}
	// The controller's own checks (the per-request cap, each chosen
	// broker's budget) on this broker's image: a validate-only request
	// gets the answer the real one would, and the real one is refused
	// here without a round trip. The controller checks again.
	if _, err := metadata.PlanTopic(img, spec); err != nil {
		return nil, toStatus(err)
	}
	if req.ValidateOnly {
		return &quirev1.CreateTopicResponse{Topic: &quirev1.TopicDescription{Name: req.Name, Configs: req.Configs}}, nil
	}
	info, err := b.cluster.fwd.CreateTopic(ctx, spec)
	if err != nil {
		return nil, toStatus(fmt.Errorf("create topic %q: %w", req.Name, err))
	}
	b.logger.Info("created topic", "topic", req.Name, "partitions", partitions, "replication_factor", rf)
	img, err = b.cluster.waitFor(ctx, func(img *metadata.Image) bool {
		t, ok := img.Topic(req.Name)
		return ok && t.ID == info.ID
	})
	if err != nil {
		return nil, toStatus(fmt.Errorf("create topic %q: waiting for the metadata: %w", req.Name, err))
	}
	t, _ := img.Topic(req.Name)
	return &quirev1.CreateTopicResponse{Topic: b.describeTopic(ctx, img, t), MetadataIndex: img.Index()}, nil
}

func (s *adminService) DeleteTopic(ctx context.Context, req *quirev1.DeleteTopicRequest) (*quirev1.DeleteTopicResponse, error) {
	b := s.b
	if err := validateTopicName(req.Name); err != nil {
		return nil, toStatus(err)
	}
	if !b.cfg.DeleteTopicEnable {
		return nil, toStatus(fmt.Errorf("%w: topic deletion is disabled (delete.topic.enable=false)", ErrPolicyViolation))
	}
	if _, ok := b.cluster.image().Topic(req.Name); !ok {
		return nil, toStatus(unknownTopic(req.Name))
	}
	if err := b.cluster.fwd.DeleteTopic(ctx, req.Name); err != nil {
		return nil, toStatus(fmt.Errorf("delete topic %q: %w", req.Name, err))
	}
	b.logger.Info("deleted topic", "topic", req.Name)
	img, err := b.cluster.waitFor(ctx, func(img *metadata.Image) bool { _, ok := img.Topic(req.Name); return !ok })
	if err != nil {
		return nil, toStatus(fmt.Errorf("delete topic %q: waiting for the metadata: %w", req.Name, err))
	}
	return &quirev1.DeleteTopicResponse{MetadataIndex: img.Index()}, nil
}

func (s *adminService) ListTopics(ctx context.Context, req *quirev1.ListTopicsRequest) (*quirev1.ListTopicsResponse, error) {
	resp := &quirev1.ListTopicsResponse{}
	for _, t := range s.b.cluster.image().Topics() {
		rf := 0
		if len(t.Partitions) > 0 {
			rf = len(t.Partitions[0].Replicas)
		}
		resp.Topics = append(resp.Topics, &quirev1.TopicListing{
			Name: t.Name, TopicId: t.ID, Partitions: int32(len(t.Partitions)), ReplicationFactor: int32(rf),
		})
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

// describeTopic is describeTopics for one topic.
func (b *Broker) describeTopic(ctx context.Context, _ *metadata.Image, t metadata.TopicInfo) *quirev1.TopicDescription {
	return b.describeTopics(ctx, []metadata.TopicInfo{t})[0]
}

func (s *adminService) DescribeCluster(ctx context.Context, req *quirev1.DescribeClusterRequest) (*quirev1.DescribeClusterResponse, error) {
	c := s.b.cluster
	resp := &quirev1.DescribeClusterResponse{ClusterId: c.clusterID(), ControllerId: c.controllerID()}
	listener := s.b.clientListener(ctx)
	img := c.image()
	hosted := img.HostedReplicas()
	for _, br := range img.Brokers() {
		resp.Brokers = append(resp.Brokers, &quirev1.BrokerDescription{
			Id: br.ID, Address: br.AddrFor(listener), Rack: br.Rack, Fenced: br.Fenced, Controller: c.isVoter(br.ID),
			Partitions: int32(hosted[br.ID]), MaxPartitions: br.MaxPartitions,
		})
	}
	sort.Slice(resp.Brokers, func(i, j int) bool { return resp.Brokers[i].Id < resp.Brokers[j].Id })
	return resp, nil
}

func (s *adminService) DescribeConfigs(ctx context.Context, req *quirev1.DescribeConfigsRequest) (*quirev1.DescribeConfigsResponse, error) {
	t, ok := s.b.cluster.image().Topic(req.Topic)
	if !ok {
		return nil, toStatus(unknownTopic(req.Topic))
	}
	return &quirev1.DescribeConfigsResponse{Configs: s.b.cluster.defaults.describe(t.Configs)}, nil
}

func (s *adminService) AlterConfigs(ctx context.Context, req *quirev1.AlterConfigsRequest) (*quirev1.AlterConfigsResponse, error) {
	b := s.b
	if _, ok := b.cluster.image().Topic(req.Topic); !ok {
		return nil, toStatus(unknownTopic(req.Topic))
	}
	if len(req.Set) == 0 && len(req.Delete) == 0 {
		return nil, toStatus(fmt.Errorf("%w: nothing to set or delete", ErrInvalidRequest))
	}
	if err := validateTopicConfigs(req.Set); err != nil {
		return nil, toStatus(fmt.Errorf("topic %q: %w", req.Topic, err))
	}
	for _, k := range req.Delete {
		if _, ok := topicKeyIndex[k]; !ok {
			return nil, toStatus(fmt.Errorf("topic %q: %w: unknown topic config %q%s", req.Topic, ErrInvalidConfig, k, unknownTopicKeyHint(k)))
		}
		if _, ok := req.Set[k]; ok {
			return nil, toStatus(fmt.Errorf("topic %q: %w: %q is both set and deleted", req.Topic, ErrInvalidConfig, k))
		}
	}
	if req.ValidateOnly {
		return &quirev1.AlterConfigsResponse{}, nil
	}
	if err := b.cluster.fwd.AlterConfigs(ctx, req.Topic, req.Set, req.Delete); err != nil {
		return nil, toStatus(fmt.Errorf("alter configs of topic %q: %w", req.Topic, err))
	}
	b.logger.Info("altered topic configs", "topic", req.Topic, "set", req.Set, "delete", req.Delete)
	_, err := b.cluster.waitFor(ctx, func(img *metadata.Image) bool {
		t, ok := img.Topic(req.Topic)
		if !ok {
			return true
		}
		for k, v := range req.Set {
			if t.Configs[k] != v {
				return false
			}
		}
		for _, k := range req.Delete {
			if _, ok := t.Configs[k]; ok {
				return false
			}
		}
		return true
	})
	if err != nil {
		return nil, toStatus(fmt.Errorf("alter configs of topic %q: waiting for the metadata: %w", req.Topic, err))
	}
	return &quirev1.AlterConfigsResponse{}, nil
}

func (s *adminService) CreatePartitions(ctx context.Context, req *quirev1.CreatePartitionsRequest) (*quirev1.CreatePartitionsResponse, error) {
	b := s.b
	img := b.cluster.image()
	t, ok := img.Topic(req.Topic)
	if !ok {
		return nil, toStatus(unknownTopic(req.Topic))
	}
	if int(req.TotalCount) <= len(t.Partitions) {
		return nil, toStatus(fmt.Errorf("%w: topic %q has %d partitions; the new total %d must be larger",
			ErrInvalidPartitions, req.Topic, len(t.Partitions), req.TotalCount))
	}
	// As in CreateTopic: the controller's checks, so that validate_only
	// answers what the real request would.
	if _, _, err := metadata.PlanPartitions(img, req.Topic, req.TotalCount); err != nil {
		return nil, toStatus(err)
	}
	if req.ValidateOnly {
		return &quirev1.CreatePartitionsResponse{Topic: b.describeTopic(ctx, img, t)}, nil
	}
	if err := b.cluster.fwd.CreatePartitions(ctx, req.Topic, req.TotalCount); err != nil {
		return nil, toStatus(fmt.Errorf("create partitions of topic %q: %w", req.Topic, err))
	}
	b.logger.Info("created partitions", "topic", req.Topic, "total", req.TotalCount)
	img, err := b.cluster.waitFor(ctx, func(img *metadata.Image) bool {
		t, ok := img.Topic(req.Topic)
		return !ok || len(t.Partitions) >= int(req.TotalCount)
	})
	if err != nil {
		return nil, toStatus(fmt.Errorf("create partitions of topic %q: waiting for the metadata: %w", req.Topic, err))
	}
	t, ok = img.Topic(req.Topic)
	if !ok {
		return nil, toStatus(unknownTopic(req.Topic))
	}
	return &quirev1.CreatePartitionsResponse{Topic: b.describeTopic(ctx, img, t), MetadataIndex: img.Index()}, nil
}

// UnregisterBroker removes a broker that is gone for good (see the
// controller's checks: not a voter, fenced and silent past the session
// timeout). Its partitions keep it as a replica; it leaves every ISR.
func (s *adminService) UnregisterBroker(ctx context.Context, req *quirev1.UnregisterBrokerRequest) (*quirev1.UnregisterBrokerResponse, error) {
	b := s.b
	if req.BrokerId < 0 {
		return nil, toStatus(fmt.Errorf("%w: broker id %d", ErrInvalidRequest, req.BrokerId))
	}
	if req.BrokerId == b.cfg.NodeID {
		return nil, toStatus(fmt.Errorf("%w: broker %d cannot unregister itself", metadata.ErrBrokerNotRemovable, req.BrokerId))
	}
	if _, ok := b.cluster.image().Broker(req.BrokerId); !ok {
		return nil, toStatus(fmt.Errorf("%w: %d", metadata.ErrUnknownBroker, req.BrokerId))
	}
	if err := b.cluster.fwd.UnregisterBroker(ctx, req.BrokerId); err != nil {
		return nil, toStatus(fmt.Errorf("unregister broker %d: %w", req.BrokerId, err))
	}
	b.logger.Info("unregistered broker", "broker", req.BrokerId)
	if _, err := b.cluster.waitFor(ctx, func(img *metadata.Image) bool { _, ok := img.Broker(req.BrokerId); return !ok }); err != nil {
		return nil, toStatus(fmt.Errorf("unregister broker %d: waiting for the metadata: %w", req.BrokerId, err))
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
