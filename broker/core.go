package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/quirelog/quire/api/internalv1"
	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/auth"
	"github.com/quirelog/quire/internal/rpcstats"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/request"
	"github.com/quirelog/quire/service"
	"github.com/quirelog/quire/sharegroup"
	"github.com/quirelog/quire/sharegroup/sharepeer"
	"github.com/quirelog/quire/sharegroup/sharestore"
)

// The request core (package request) serves the data path for both
// doors; the broker gives it the replicas, its view of the cluster, the
// error table, the ACLs and a Forwarder over the node-to-node
// connections, and its gRPC services translate quire.v1 to and from the
// core's types (produce.go, fetch.go, delete_records.go).

// newCore is the request core over this broker's replicas (b.rm).
func (b *Broker) newCore() (*request.Core, error) {
	cfg := request.Config{
		NodeID:          b.cfg.NodeID,
		Replicas:        b.rm,
		Cluster:         coreCluster{b},
		Forwarder:       coreForwarder{b},
		Logs:            coreForwarder{b},
		ProducerIDs:     coreCluster{b},
		Codes:           func(err error) int32 { return int32(service.Code(err)) },
		Checkpoint:      b.storage.Checkpoint,
		Observer:        b.queue,
		Partitioner:     b.sticky,
		MaxMessageBytes: b.topicMaxMessageBytes,
		Now:             b.clock.Now,
		LogDir:          b.cfg.DataDir,
	}
	if b.cfg.AutoCreateTopicsEnable {
		cfg.Creator = coreCluster{b}
	}
	if b.guard.authorize {
		cfg.Authorizer = coreAuthorizer{b}
	}

	// Groups and security administration (core_groups.go).
	cfg.Groups = coreGroups{b}
	cfg.OffsetLister = coreForwarder{b}
	cfg.Security = coreSecurity{b}
	// Topic and config administration (core_admin.go).
	cfg.Admin = b.adminConfig()
	// Transactions: the coordinator on the controller, through the
	// controller session.
	cfg.Transactions = b.cluster.fwd
	// Share groups: the share coordinator, in memory on this node, its
	// share-partitions' state saved in the metadata log
	// (sharegroup/sharestore), the other nodes asked and told about its
	// members (sharegroup/sharepeer).
	b.shareStates = sharestore.NewStates(b.cfg.NodeID, shareImages{b.cluster}, b.cluster.fwd, b.stop)
	if b.cfg.GroupShareEnable {
		scfg := b.cfg.ShareGroupConfig()
		scfg.Store = b.shareStates
		scfg.Configs = b.shareStates
		// A member's heartbeats reach one node, its fetches each
		// partition's leader.
		scfg.AdmitFetchers = true
		sc, err := sharegroup.New(scfg)
		if err != nil {
			return nil, fmt.Errorf("share groups: %w", err)
		}
		cfg.Shares = sc
		cfg.ShareCluster = sharepeer.New(sharepeer.Config{NodeID: b.cfg.NodeID, Node: sharePeerNode{b}, Logger: b.logger})
		cfg.ShareStore = sharestore.NewGroups(shareImages{b.cluster}, b.cluster.fwd)
		cfg.DeadLetterTopicPrefix = b.cfg.DeadLetterTopicPrefix
		if b.cfg.DeadLetterAutoCreate {
			cfg.DeadLetterCreator = coreCluster{b}
		}
	}

	return request.New(cfg)
}

// shareImages is sharestore.Images over the node's reconciled images.
type shareImages struct{ c *cluster }

func (s shareImages) Image() *metadata.Image { return s.c.image() }
func (s shareImages) WaitFor(ctx context.Context, cond func(*metadata.Image) bool) (*metadata.Image, error) {
	return s.c.waitFor(ctx, cond)
}

// sharePeerNode is sharepeer.Node over the image's brokers and the
// node-to-node connections.
type sharePeerNode struct{ b *Broker }

func (n sharePeerNode) Brokers() []metadata.BrokerInfo { return n.b.cluster.image().Brokers() }
func (n sharePeerNode) Conn(id int32) (grpc.ClientConnInterface, error) {
	cc, _, err := coreForwarder(n).conn(id)
	if err != nil {
		return nil, err
	}
	return cc, nil
}

// coreCluster is request.Cluster and request.TopicCreator over the
// broker's metadata image and controller session.
type coreCluster struct{ b *Broker }

func (c coreCluster) Topic(name string) (metadata.TopicInfo, bool) {
	return c.b.cluster.image().Topic(name)
}
func (c coreCluster) Topics() []metadata.TopicInfo { return c.b.cluster.image().Topics() }
func (c coreCluster) Broker(id int32) (metadata.BrokerInfo, bool) {
	return c.b.cluster.image().Broker(id)
}
func (c coreCluster) SessionLost() bool                  { return c.b.cluster.sessionLost() }
func (c coreCluster) SessionDeadline() (time.Time, bool) { return c.b.cluster.sessionDeadline() }
func (c coreCluster) AllocateProducerIDs(ctx context.Context) (metadata.ProducerIDBlock, error) {
	return c.b.cluster.allocateProducerIDs(ctx)
}
func (c coreCluster) NextProducerID() int64 { return c.b.cluster.image().NextProducerID() }
func (c coreCluster) AutoCreateTopic(ctx context.Context, topic string) (metadata.TopicInfo, error) {
	return c.b.autoCreateTopic(ctx, topic, nil)
}
func (c coreCluster) CreateDeadLetterTopic(ctx context.Context, topic string, configs map[string]string) (metadata.TopicInfo, error) {
	t, err := c.b.autoCreateTopic(ctx, topic, configs)
	if err != nil {
		c.b.logger.Warn("could not create a share group's dead-letter topic; its dead letters wait for it", "topic", topic, "error", err)
	}
	return t, err
}

// coreAuthorizer evaluates against the node's current ACLs.
type coreAuthorizer struct{ b *Broker }

func (z coreAuthorizer) Authorize(r auth.Request) bool { return z.b.authorizer().Authorize(r) }
func (z coreAuthorizer) AuthorizeAny(principal string, op auth.Operation, rt auth.ResourceType) bool {
	return z.b.authorizer().AuthorizeAny(principal, op, rt)
}

// coreForwarder is request.Forwarder over the node-to-node connections:
// one gRPC call per leader, marked as passed on (route.go).
type coreForwarder struct{ b *Broker }

func (f coreForwarder) conn(leader int32) (*grpc.ClientConn, string, error) {
	addr, ok := f.b.cluster.brokerAddr(leader)
	if !ok {
		return nil, "", fmt.Errorf("%w: broker %d has no address", request.ErrLeaderUnreachable, leader)
	}
	cc, err := f.b.cluster.peer(addr)
	if err != nil {
		return nil, addr, fmt.Errorf("%w: %s: %v", request.ErrLeaderUnreachable, addr, err)
	}
	return cc, addr, nil
}

func (f coreForwarder) Produce(ctx context.Context, leader int32, req *request.ProduceRequest) ([]request.ProduceResult, error) {
	cc, addr, err := f.conn(leader)
	if err != nil {
		return nil, err
	}
	in := &quirev1.ProduceRequest{OptionalAcks: &quirev1.ProduceRequest_Acks{Acks: req.Acks}, TimeoutMs: int32(req.Timeout.Milliseconds()),
		Partitions: make([]*quirev1.PartitionRecords, len(req.Partitions)), TransactionalId: req.TransactionalID, VerifyPartitions: req.VerifyPartitions}
	for i, p := range req.Partitions {
		in.Partitions[i] = &quirev1.PartitionRecords{Topic: p.Topic, Partition: p.Partition, Records: p.Records}
	}
	resp, err := quirev1.NewProducerClient(cc).Produce(f.b.forwardContext(ctx), in, grpc.MaxCallRecvMsgSize(request.MaxSendBytes))
	if err != nil {
		f.b.logger.Debug("a produce passed on to the leader got no answer", "leader", addr, "error", err)
		return nil, err
	}
	if req.Acks == 0 {
		return make([]request.ProduceResult, len(req.Partitions)), nil
	}
	out := make([]request.ProduceResult, len(resp.Partitions))
	for i, p := range resp.Partitions {
		out[i] = request.ProduceResult{Topic: p.Topic, Partition: p.Partition, BaseOffset: p.BaseOffset, LastOffset: p.LastOffset,
			LogAppendTime: p.LogAppendTimeMs, LogStartOffset: p.LogStartOffset, Err: service.FromError(p.Error)}
	}
	return out, nil
}

// DescribeLogs asks broker br for its logs with DescribeLogs.
func (f coreForwarder) DescribeLogs(ctx context.Context, br metadata.BrokerInfo, refs []request.LogRef) ([]request.LogDescription, error) {
	in := make([]*pb.LogPartitionRef, len(refs))
	for i, r := range refs {
		in[i] = &pb.LogPartitionRef{Topic: r.Topic, Partition: r.Partition}
	}
	logs, err := f.b.cluster.describeLogs(ctx, br.Addr, in)
	if err != nil {
		f.b.logger.Debug("cannot ask a broker for its logs", "broker", br.ID, "addr", br.Addr, "error", err)
		return nil, err
	}
	out := make([]request.LogDescription, len(logs))
	for i, l := range logs {
		out[i] = request.LogDescription{Topic: l.Topic, Partition: l.Partition, Hosted: l.Hosted, Leader: l.Leader, LeaderEpoch: l.LeaderEpoch,
			LogStartOffset: l.LogStartOffset, HighWatermark: l.HighWatermark, LogEndOffset: l.LogEndOffset, Dir: l.Dir, Failure: l.Failure,
			SizeBytes: l.SizeBytes, Compacted: l.Compacted, DirtyRatio: l.DirtyRatio, LastStableOffset: lastStable(l)}
	}
	return out, nil
}

func (f coreForwarder) DeleteRecords(ctx context.Context, leader int32, timeout time.Duration, parts []request.DeleteRecordsPartition) ([]request.DeleteRecordsResult, error) {
	cc, _, err := f.conn(leader)
	if err != nil {
		return nil, err
	}
	in := &quirev1.DeleteRecordsRequest{TimeoutMs: int32(max(timeout.Milliseconds(), 1))}
	for _, p := range parts {
		in.Partitions = append(in.Partitions, &quirev1.DeleteRecordsPartition{Topic: p.Topic, Partition: p.Partition, Offset: p.Offset})
	}
	resp, err := quirev1.NewAdminClient(cc).DeleteRecords(f.b.forwardContext(ctx), in)
	if status.Code(err) == codes.DeadlineExceeded {
		return nil, fmt.Errorf("%w: %v", ErrRequestTimedOut, err)
	}
	if err != nil {
		return nil, err
	}
	out := make([]request.DeleteRecordsResult, len(resp.Partitions))
	for i, p := range resp.Partitions {
		out[i] = request.DeleteRecordsResult{Topic: p.Topic, Partition: p.Partition, LowWatermark: p.LowWatermark, Err: service.FromError(p.Error)}
	}
	return out, nil
}

// autoCreateTopic creates topic with the broker's defaults and the topic
// configs given (or finds it created by someone else) and waits until
// this broker's view has it.
func (b *Broker) autoCreateTopic(ctx context.Context, topic string, configs map[string]string) (metadata.TopicInfo, error) {
	if err := request.ValidateTopicName(topic); err != nil {
		return metadata.TopicInfo{}, err
	}
	_, err := b.cluster.fwd.CreateTopic(ctx, metadata.TopicSpec{
		Name:              topic,
		Partitions:        b.cfg.NumPartitions,
		ReplicationFactor: b.cfg.DefaultReplicationFactor,
		Configs:           configs,
	})
	switch {
	case err == nil:
		b.logger.Info("auto-created topic", "topic", topic, "partitions", b.cfg.NumPartitions)
	case !errors.Is(err, metadata.ErrTopicExists):
		return metadata.TopicInfo{}, fmt.Errorf("auto-create topic %q: %w", topic, err)
	}
	img, err := b.cluster.waitFor(ctx, func(img *metadata.Image) bool { _, ok := img.Topic(topic); return ok })
	if err != nil {
		return metadata.TopicInfo{}, fmt.Errorf("%w: topic %q is being created", ErrLeaderNotAvailable, topic)
	}
	t, _ := img.Topic(topic)
	return t, nil
}

// topicMaxMessageBytes is the largest batch topic t accepts: its
// max.message.bytes, else the broker's message.max.bytes.
func (b *Broker) topicMaxMessageBytes(t metadata.TopicInfo) int {
	if tc, err := b.cfg.TopicDefaults().Resolve(t.Configs); err == nil {
		return int(tc.MaxMessageBytes)
	}
	return int(b.cfg.MessageMaxBytes)
}

// allocateProducerIDs asks the controller for a block of producer ids at
// this broker's current registration.
func (c *cluster) allocateProducerIDs(ctx context.Context) (metadata.ProducerIDBlock, error) {
	var epoch int64
	if lc := c.lifecycle.Load(); lc != nil {
		epoch = lc.Epoch()
	}
	if epoch == 0 {
		return metadata.ProducerIDBlock{}, fmt.Errorf("%w: broker %d is not registered yet", ErrBrokersNotReady, c.cfg.NodeID)
	}
	if c.image().MetadataVersion() < metadata.MetadataVersionProducerIDs {
		// The controller raises the level by itself once every broker
		// supports it, shortly after they register: give it that long
		// before the call fails naming the brokers that hold it back.
		wctx, cancel := context.WithTimeout(ctx, levelWait)
		_, _ = c.waitFor(wctx, func(img *metadata.Image) bool {
			return img.MetadataVersion() >= metadata.MetadataVersionProducerIDs
		})
		cancel()
	}
	return c.fwd.AllocateProducerIDs(ctx, c.cfg.NodeID, epoch)
}

// levelWait bounds the wait for metadata.version 2 before producer ids
// are asked for.
const levelWait = 5 * time.Second

// wireError is a partition's refusal in a controller's answer as the
// core's, its code as it came; nil for none.
func wireError(e *quirev1.Error) *request.Error {
	if e == nil {
		return nil
	}
	return service.FromError(e).(*request.Error)
}

// registerServices registers the quire.v1 services (package service)
// over the request core; each refuses a request over the node's limit
// with a quire.v1.Error (service.WithRequestLimit).
func (b *Broker) registerServices() error {
	svcs, err := service.New(service.Config{NodeID: b.cfg.NodeID, Core: b.core, Node: serviceNode{b}, Subscriber: newSubscribeBroker(b),
		Queue: b.queue, Calls: b.callStats(), Logger: b.logger, Stop: b.stop})
	if err != nil {
		return err
	}
	limit := service.MaxRequestBytes(b.cfg.MessageMaxBytes)
	svcs.Register(b.server, func(sd *grpc.ServiceDesc) *grpc.ServiceDesc { return service.WithRequestLimit(sd, limit) })
	return nil
}

// serviceNode is what the services need of the broker beyond the core.
type serviceNode struct{ b *Broker }

func (n serviceNode) ClientListener(ctx context.Context) string { return n.b.clientListener(ctx) }

func (n serviceNode) Features() (int32, metadata.VersionRange, []metadata.BrokerInfo) {
	img := n.b.cluster.image()
	return img.MetadataVersion(), n.b.cluster.node.MetadataVersions(), img.Brokers()
}

func (n serviceNode) UpdateFeatures(ctx context.Context, level int32) (int32, error) {
	got, err := n.b.cluster.fwd.UpdateMetadataVersion(ctx, level)
	if err != nil {
		return 0, err
	}
	if _, err := n.b.cluster.waitFor(ctx, func(img *metadata.Image) bool { return img.MetadataVersion() >= got }); err != nil {
		return 0, fmt.Errorf("waiting for the metadata: %w", err)
	}
	return got, nil
}

// callStats is what counts the requests streamed to the services, nil
// with metrics.requests.enable off.
func (b *Broker) callStats() *rpcstats.Stats {
	if !b.cfg.MetricsRequestsEnable {
		return nil
	}
	return b.rpcStats
}
