package broker

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/auth"
	"github.com/quirelog/quire/config"
	"github.com/quirelog/quire/kafka"
	"github.com/quirelog/quire/request"
	"github.com/quirelog/quire/service"
)

// Listeners named in kafka.listener.names speak Kafka's wire protocol
// instead of gRPC (package kafka), for Kafka's own clients. They are
// registered and advertised like any listener, so a Kafka client's
// Metadata gives every broker's address on the listener it connected to;
// requests are answered by the request core, as the gRPC services' are.

// serveKafka serves the Kafka listeners until stopKafka, each with its
// security protocol (kafka_security.go).
func (b *Broker) serveKafka(l boundListener) error {
	lis, sasl, protocol, err := b.kafkaListener(l)
	if err != nil {
		return err
	}
	if protocol == config.ProtocolPlaintext && b.guard.authorize {
		b.logger.Warn("Kafka listener without TLS or SASL: its clients are User:ANONYMOUS, allowed what the ACLs allow that principal",
			"listener", l.name, "addr", l.lis.Addr().String())
	}
	if sasl != nil {
		err = b.kafka.ServeSASL(lis, sasl)
	} else {
		err = b.kafka.Serve(lis)
	}
	if errors.Is(err, kafka.ErrServerClosed) {
		return nil
	}
	return err
}

// kafkaMaxRequestBytes is Kafka's socket.request.max.bytes default. A
// Kafka producer fills a request with batches for many partitions up to
// its own limit (franz-go's is this one too), each batch still held to
// message.max.bytes by the produce path.
const kafkaMaxRequestBytes = 100 << 20

// newKafkaServer is the server of the Kafka listeners, answering through
// the request core.
func (b *Broker) newKafkaServer() *kafka.Server {
	return kafka.NewServer(kafka.Config{
		Backend:             kafkaBackend{b: b},
		ShareGroups:         b.cfg.GroupShareEnable,
		MaxRequestBytes:     max(kafkaMaxRequestBytes, service.MaxRequestBytes(b.cfg.MessageMaxBytes)),
		MaxConnections:      int(b.cfg.KafkaMaxConnections),
		MaxConnectionsPerIP: int(b.cfg.KafkaMaxConnectionsPerIP),
		Refused:             b.kafkaRefused(),
		// Tagged with the listener, as a gRPC call is, so Metadata gives
		// the addresses of this listener, and with the identity a TLS
		// client certificate gives (kafka_security.go).
		ConnContext: b.kafkaConnContext,
		Observe:     b.observeKafka(),
		Logger:      b.logger.Named("kafka"),
	})
}

// observeKafka counts each Kafka request with the gRPC calls, by API
// (quire_requests_total{rpc="kafka/Produce"}), under the gRPC code of its
// outcome (kafkaOutcome); nil, counting nothing, with
// metrics.requests.enable off.
func (b *Broker) observeKafka() func(api string, start time.Time, err error) {
	if !b.cfg.MetricsRequestsEnable {
		return nil
	}
	return func(api string, start time.Time, err error) {
		b.rpcStats.Observe(api, start, kafkaOutcome(err))
	}
}

// kafkaOutcome is a Kafka request's outcome as the statuses the request
// counts are kept by: OK for one answered, Unimplemented for an API or
// version not served, InvalidArgument for one that does not parse,
// Unknown for another that closed the connection.
func kafkaOutcome(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, kafka.ErrUnsupported):
		return status.Error(codes.Unimplemented, err.Error())
	case errors.Is(err, kafka.ErrMalformed):
		return status.Error(codes.InvalidArgument, err.Error())
	}
	return status.Error(codes.Unknown, err.Error())
}

// kafkaRefused counts each connection a Kafka listener closed at accept
// for a cap with the requests (quire_requests_total{rpc="kafka/Connection",
// code="ResourceExhausted"}); nil with metrics.requests.enable off.
func (b *Broker) kafkaRefused() func(reason string) {
	if !b.cfg.MetricsRequestsEnable {
		return nil
	}
	return func(reason string) {
		b.rpcStats.Observe("kafka/Connection", time.Now(), status.Errorf(codes.ResourceExhausted, "over %s", reason))
	}
}

// kafkaBackend is kafka.Backend over the request core.
type kafkaBackend struct {
	b *Broker
}

var _ kafka.Backend = kafkaBackend{}

// Each call below is made under the ACLs when the authorizer is on, by
// the request core; a call naming partitions answers a topic refused on
// its own (kafka_bytopic.go).

// Metadata is the request core's, each topic refused answered alone
// (TOPIC_AUTHORIZATION_FAILED) while the others are answered, as Kafka
// does; it leaves out the brokers with no address on the client's
// listener (their inter-broker address speaks gRPC) and fenced ones.
func (k kafkaBackend) Metadata(ctx context.Context, req *request.MetadataRequest) (*request.MetadataResult, error) {
	md, err := k.b.core.Metadata(service.CoreContext(ctx), req)
	if err != nil {
		return nil, err
	}
	listener := k.b.clientListener(ctx)
	kept := md.Brokers[:0]
	for _, br := range md.Brokers {
		if br.Fenced {
			continue
		}
		for _, e := range br.Endpoints {
			if e.Listener == listener {
				br.Addr = e.Addr
				kept = append(kept, br)
				break
			}
		}
	}
	md.Brokers = kept
	return md, nil
}

// Produce, Fetch, ListOffsets and DeleteRecords go straight to the
// request core, as the gRPC services' do: the same checks, ACLs and
// errors (but for a topic the ACLs refuse, answered on its own as Kafka
// does: byTopic), and a fetch's batches from the log into the Kafka response
// with nothing in between. A Kafka client's own request is routed to
// the leaders, as a plain gRPC client's is.
func (k kafkaBackend) Produce(ctx context.Context, req *request.ProduceRequest) ([]request.ProduceResult, error) {
	req.Received = k.b.queue.Received()
	return byTopic(ctx, k, auth.OpWrite, req.Partitions, func(p request.ProducePartition) string { return p.Topic },
		func(p request.ProducePartition, err error) request.ProduceResult {
			return request.ProduceResult{Topic: p.Topic, Partition: p.Partition, BaseOffset: -1, Err: err}
		},
		func(parts []request.ProducePartition) ([]request.ProduceResult, error) {
			r := *req
			r.Partitions = parts
			return k.b.core.Produce(service.CoreContext(ctx), &r)
		})
}

func (k kafkaBackend) Fetch(ctx context.Context, req *request.FetchRequest) ([]request.FetchResult, error) {
	req.Received = k.b.queue.Received()
	return byTopic(ctx, k, auth.OpRead, req.Partitions, func(p request.FetchPartition) string { return p.Topic },
		func(p request.FetchPartition, err error) request.FetchResult {
			return request.FetchResult{FetchPartition: p, HighWatermark: -1, LogEndOffset: -1, LogStartOffset: -1, Err: err}
		},
		func(parts []request.FetchPartition) ([]request.FetchResult, error) {
			r := *req
			r.Partitions = parts
			return k.b.core.Fetch(service.CoreContext(ctx), &r)
		})
}

func (k kafkaBackend) ListOffsets(ctx context.Context, parts []request.ListOffsetsPartition) ([]request.ListOffsetsResult, error) {
	return byTopic(ctx, k, auth.OpDescribe, parts, func(p request.ListOffsetsPartition) string { return p.Topic },
		func(p request.ListOffsetsPartition, err error) request.ListOffsetsResult {
			return request.ListOffsetsResult{Topic: p.Topic, Partition: p.Partition, Offset: -1, Timestamp: -1, LeaderEpoch: -1, Err: err}
		},
		func(parts []request.ListOffsetsPartition) ([]request.ListOffsetsResult, error) {
			return k.b.core.ListOffsets(service.CoreContext(ctx), parts)
		})
}

func (k kafkaBackend) DeleteRecords(ctx context.Context, req *request.DeleteRecordsRequest) ([]request.DeleteRecordsResult, error) {
	return byTopic(ctx, k, auth.OpDelete, req.Partitions, func(p request.DeleteRecordsPartition) string { return p.Topic },
		func(p request.DeleteRecordsPartition, err error) request.DeleteRecordsResult {
			return request.DeleteRecordsResult{Topic: p.Topic, Partition: p.Partition, LowWatermark: -1, Err: err}
		},
		func(parts []request.DeleteRecordsPartition) ([]request.DeleteRecordsResult, error) {
			r := *req
			r.Partitions = parts
			return k.b.core.DeleteRecords(service.CoreContext(ctx), &r)
		})
}

// Coordinator is the broker Kafka's clients are sent to for group's
// calls on the client's listener (groupCoordinator). Any node serves a
// group's calls (the coordinator itself runs on the controller), but
// Kafka's clients take a group to have one coordinator, whose ListGroups
// lists it: an admin client that asks every broker and merges the
// answers (librdkafka's, Java's) would list a group once per broker if
// each named itself. The core refuses it for a group the caller may not
// describe.
func (k kafkaBackend) Coordinator(ctx context.Context, group string) (kafka.Node, error) {
	if err := k.b.core.AuthorizeFindCoordinator(service.CoreContext(ctx), group); err != nil {
		return kafka.Node{}, err
	}
	return k.coordinatorFor(ctx, group)
}

// coordinatorFor is the broker named as the coordinator of key (a group
// or a transactional id) on the client's listener (groupCoordinator);
// with none, the core's COORDINATOR_NOT_AVAILABLE, which clients retry.
func (k kafkaBackend) coordinatorFor(ctx context.Context, key string) (kafka.Node, error) {
	listener := k.b.clientListener(ctx)
	if c, ok := k.groupCoordinator(key, listener); ok {
		return c, nil
	}
	return kafka.Node{}, &request.Error{Code: int32(quirev1.ErrorCode_COORDINATOR_NOT_AVAILABLE),
		Message: fmt.Sprintf("no live broker is registered with a %s listener yet", listener), LeaderID: -1, LeaderEpoch: -1}
}

// groupCoordinator is the one broker named for group on listener: of the
// live (unfenced) brokers registered with that listener, sorted by id,
// the one a hash of the group picks, so that every node names the same
// one while they see the same brokers, and groups spread over them as
// Kafka's do over its brokers. A broker fenced or gone hands its groups
// to the others, as a Kafka coordinator's failure does.
func (k kafkaBackend) groupCoordinator(group, listener string) (kafka.Node, bool) {
	var live []kafka.Node
	for _, info := range k.b.cluster.image().Brokers() {
		if info.Fenced {
			continue
		}
		for _, e := range info.Endpoints {
			if e.Listener == listener {
				live = append(live, kafka.Node{ID: info.ID, Addr: e.Addr})
				break
			}
		}
	}
	if len(live) == 0 {
		return kafka.Node{}, false
	}
	h := fnv.New32a()
	h.Write([]byte(group))
	return live[h.Sum32()%uint32(len(live))], true
}

// The group calls go straight to the request core, as the gRPC
// service's do (request/groups.go).

func (k kafkaBackend) ConsumerGroupHeartbeat(ctx context.Context, hb *request.GroupHeartbeat) (*request.GroupHeartbeatResult, error) {
	hb.ClientAddress = service.ClientHost(ctx)
	return k.b.core.ConsumerGroupHeartbeat(service.CoreContext(ctx), hb)
}

// The share-group calls go to the request core, whose share coordinator
// is this node's (docs/share-groups.md).

func (k kafkaBackend) ShareGroupHeartbeat(ctx context.Context, hb *request.ShareHeartbeat) (*request.ShareHeartbeatResult, error) {
	return k.b.core.ShareGroupHeartbeat(service.CoreContext(ctx), hb)
}

func (k kafkaBackend) ShareFetch(ctx context.Context, req *request.ShareFetchRequest) ([]request.ShareFetchResult, error) {
	return k.b.core.ShareFetch(service.CoreContext(ctx), req)
}

func (k kafkaBackend) ShareAcknowledge(ctx context.Context, group, member string, parts []request.SharePartition) ([]request.ShareAckResult, error) {
	return k.b.core.ShareAcknowledge(service.CoreContext(ctx), group, member, parts)
}

func (k kafkaBackend) ShareRelease(ctx context.Context, group, member string, parts []request.SharePartition) error {
	return k.b.core.ShareRelease(service.CoreContext(ctx), group, member, parts)
}

func (k kafkaBackend) ShareLockDuration(group string) time.Duration {
	return k.b.core.ShareLockDuration(group)
}

func (k kafkaBackend) ShareGroupDescribe(ctx context.Context, group string) (*request.ShareGroupDescription, error) {
	return k.b.core.ShareGroupDescribe(service.CoreContext(ctx), group)
}

func (k kafkaBackend) DescribeShareGroupOffsets(ctx context.Context, group string, topics []request.ShareOffsetTopic) ([]request.ShareOffset, error) {
	return k.b.core.DescribeShareGroupOffsets(service.CoreContext(ctx), group, topics)
}

func (k kafkaBackend) AlterShareGroupOffsets(ctx context.Context, group string, offsets []request.ShareStartOffset) ([]request.ShareOffset, error) {
	return k.b.core.AlterShareGroupOffsets(service.CoreContext(ctx), group, offsets)
}

func (k kafkaBackend) DeleteShareGroupOffsets(ctx context.Context, group string, topics []string) ([]request.ShareTopicResult, error) {
	return k.b.core.DeleteShareGroupOffsets(service.CoreContext(ctx), group, topics)
}

func (k kafkaBackend) DescribeGroup(ctx context.Context, group string) (*request.GroupDescription, error) {
	return k.b.core.DescribeGroup(service.CoreContext(ctx), group)
}

// ListGroups lists the groups FindCoordinator names this broker for on
// the client's listener, as a Kafka broker lists those it coordinates:
// Kafka's admin clients ask every broker and merge the lists.
func (k kafkaBackend) ListGroups(ctx context.Context) ([]request.GroupListing, error) {
	out, err := k.b.core.ListGroups(service.CoreContext(ctx))
	if err != nil {
		return nil, err
	}
	listener := k.b.clientListener(ctx)
	mine := out[:0]
	for _, g := range out {
		if c, ok := k.groupCoordinator(g.Group, listener); ok && c.ID == k.b.cfg.NodeID {
			mine = append(mine, g)
		}
	}
	return mine, nil
}

func (k kafkaBackend) CommitOffsets(ctx context.Context, req *request.CommitOffsetsRequest) (time.Time, error) {
	return k.b.core.CommitOffsets(service.CoreContext(ctx), req)
}

func (k kafkaBackend) FetchOffsets(ctx context.Context, group string, parts []request.GroupPartition) ([]request.CommittedOffset, error) {
	return k.b.core.FetchOffsets(service.CoreContext(ctx), group, parts)
}

func (k kafkaBackend) InitProducerID(ctx context.Context, req request.InitProducerIDRequest) (request.InitProducerIDResult, error) {
	return k.b.core.InitProducerID(service.CoreContext(ctx), req)
}

// OffsetForLeaderEpoch: clients' truncation detection after a leader
// change (KIP-320), answered by the partition's leader from its log's
// leader-epoch cache.

func (k kafkaBackend) OffsetForLeaderEpoch(ctx context.Context, topic string, partition, currentLeaderEpoch, epoch int32) (int32, int64, error) {
	return k.b.core.OffsetForLeaderEpoch(service.CoreContext(ctx), topic, partition, currentLeaderEpoch, epoch)
}
