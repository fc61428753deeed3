package broker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/auth"
	"github.com/quirelog/quire/internal/errcode"
	"github.com/quirelog/quire/kafka"
	"github.com/quirelog/quire/request"
)

// Listeners named in kafka.listener.names speak Kafka's wire protocol
// instead of gRPC (package kafka), for Kafka's own clients. They are
// registered and advertised like any listener, so a Kafka client's
// Metadata gives every broker's address on the listener it connected to;
// requests are answered by the request core for the data path, the
// groups and the security administration, as the gRPC services' are, and
// by the gRPC services' handlers for the rest.

// kafkaListenerNames parses kafka.listener.names against the listeners:
// each must be one of them and none the inter-broker one (other nodes
// speak gRPC to it). Their security is kafka_security.go's.
func (c *Config) kafkaListenerNames(ls []listenerSpec, inter string) (map[string]bool, []error) {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: kafka.listener.names: %s", ErrInvalidConfig, fmt.Sprintf(format, args...)))
	}
	out := map[string]bool{}
	if strings.TrimSpace(c.KafkaListenerNames) == "" {
		return out, nil
	}
	names := map[string]bool{}
	for _, l := range ls {
		names[l.name] = true
	}
	for _, n := range strings.Split(c.KafkaListenerNames, ",") {
		n = strings.ToUpper(strings.TrimSpace(n))
		switch {
		case n == "":
			bad("empty entry in %q", c.KafkaListenerNames)
		case len(ls) > 0 && !names[n]:
			bad("%s is not one of the listeners (%s)", n, listenerNames(ls))
		case n == inter:
			bad("%s is the inter-broker listener, which other nodes reach over gRPC; name another listener for Kafka clients", n)
		default:
			out[n] = true
		}
	}
	return out, errs
}

// serveKafka serves the Kafka listeners until stopKafka, each with its
// security protocol (kafka_security.go).
func (b *Broker) serveKafka(l boundListener) error {
	lis, sasl, protocol, err := b.kafkaListener(l)
	if err != nil {
		return err
	}
	if protocol == protoPlaintext && b.guard.authorize {
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
// the request core and the gRPC services' handlers.
func (b *Broker) newKafkaServer(producer *producerService, consumer *consumerService) *kafka.Server {
	return kafka.NewServer(kafka.Config{
		Backend: kafkaBackend{b: b, producer: producer, consumer: consumer, meta: &metadataService{b: b},
			admin: &adminService{b: b}},
		MaxRequestBytes:     max(kafkaMaxRequestBytes, maxRequestBytes(&b.cfg)),
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
// (quire_requests_total{rpc="kafka/Produce"}); nil, counting nothing,
// with metrics.requests.enable off.
func (b *Broker) observeKafka() func(api string, start time.Time, err error) {
	if !b.cfg.MetricsRequestsEnable {
		return nil
	}
	return b.rpcStats.Observe
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

// kafkaBackend is kafka.Backend over the request core (data path,
// groups, security administration) and the gRPC services' handlers (the
// rest).
type kafkaBackend struct {
	b        *Broker
	producer *producerService
	consumer *consumerService
	meta     *metadataService
	admin    *adminService
}

var _ kafka.Backend = kafkaBackend{}

// Each call below is made under the ACLs when the authorizer is on: by
// the request core, or (Metadata) per topic (kafka_authz.go).

// Metadata is the request core's, each topic refused answered alone
// (TOPIC_AUTHORIZATION_FAILED) while the others are answered, as Kafka
// does; it leaves out the brokers with no address on the client's
// listener (their inter-broker address speaks gRPC) and fenced ones.
func (k kafkaBackend) Metadata(ctx context.Context, req *quirev1.GetMetadataRequest) (*quirev1.GetMetadataResponse, error) {
	md, err := k.b.core.Metadata(coreContext(ctx), &request.MetadataRequest{Topics: req.Topics, AllowAutoTopicCreation: req.AllowAutoTopicCreation,
		MinIndex: req.MinMetadataIndex})
	if err != nil {
		return nil, toStatus(err)
	}
	listener := k.b.clientListener(ctx)
	kept := md.Brokers[:0]
	for _, br := range md.Brokers {
		if br.Fenced {
			continue
		}
		for _, e := range br.Endpoints {
			if e.Listener == listener {
				kept = append(kept, br)
				break
			}
		}
	}
	md.Brokers = kept
	return metadataResponse(md, listener), nil
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
			return k.b.core.Produce(coreContext(ctx), &r)
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
			return k.b.core.Fetch(coreContext(ctx), &r)
		})
}

func (k kafkaBackend) ListOffsets(ctx context.Context, parts []request.ListOffsetsPartition) ([]request.ListOffsetsResult, error) {
	return byTopic(ctx, k, auth.OpDescribe, parts, func(p request.ListOffsetsPartition) string { return p.Topic },
		func(p request.ListOffsetsPartition, err error) request.ListOffsetsResult {
			return request.ListOffsetsResult{Topic: p.Topic, Partition: p.Partition, Offset: -1, Timestamp: -1, LeaderEpoch: -1, Err: err}
		},
		func(parts []request.ListOffsetsPartition) ([]request.ListOffsetsResult, error) {
			return k.b.core.ListOffsets(coreContext(ctx), parts)
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
			return k.b.core.DeleteRecords(coreContext(ctx), &r)
		})
}

// Coordinator is this broker on the client's listener: a group's calls
// go to the coordinator from any node. The core refuses it for a group
// the caller may not describe.
func (k kafkaBackend) Coordinator(ctx context.Context, group string) (*quirev1.Broker, error) {
	if err := k.b.core.AuthorizeFindCoordinator(coreContext(ctx), group); err != nil {
		return nil, err
	}
	return k.self(ctx)
}

// self is this broker on the client's listener.
func (k kafkaBackend) self(ctx context.Context) (*quirev1.Broker, error) {
	listener := k.b.clientListener(ctx)
	if info, ok := k.b.cluster.image().Broker(k.b.cfg.NodeID); ok {
		for _, e := range info.Endpoints {
			if e.Listener == listener {
				return &quirev1.Broker{Id: info.ID, Address: e.Addr, Rack: info.Rack}, nil
			}
		}
	}
	msg := fmt.Sprintf("broker %d is not registered with a %s listener yet", k.b.cfg.NodeID, listener)
	return nil, errcode.Status(codes.Unavailable, &quirev1.Error{Code: quirev1.ErrorCode_COORDINATOR_NOT_AVAILABLE, Message: msg,
		Retriable: true, LeaderId: -1, LeaderEpoch: -1})
}

// The group calls go straight to the request core, as the gRPC
// service's do (request/groups.go).

func (k kafkaBackend) ConsumerGroupHeartbeat(ctx context.Context, hb *request.GroupHeartbeat) (*request.GroupHeartbeatResult, error) {
	hb.ClientAddress = clientHost(ctx)
	return k.b.core.ConsumerGroupHeartbeat(coreContext(ctx), hb)
}

func (k kafkaBackend) DescribeGroup(ctx context.Context, group string) (*request.GroupDescription, error) {
	return k.b.core.DescribeGroup(coreContext(ctx), group)
}

func (k kafkaBackend) ListGroups(ctx context.Context) ([]request.GroupListing, error) {
	return k.b.core.ListGroups(coreContext(ctx))
}

func (k kafkaBackend) CommitOffsets(ctx context.Context, req *request.CommitOffsetsRequest) (time.Time, error) {
	return k.b.core.CommitOffsets(coreContext(ctx), req)
}

func (k kafkaBackend) FetchOffsets(ctx context.Context, group string, parts []request.GroupPartition) ([]request.CommittedOffset, error) {
	return k.b.core.FetchOffsets(coreContext(ctx), group, parts)
}

func (k kafkaBackend) InitProducerID(ctx context.Context, req request.InitProducerIDRequest) (request.InitProducerIDResult, error) {
	return k.b.core.InitProducerID(coreContext(ctx), req)
}

// OffsetForLeaderEpoch: clients' truncation detection after a leader
// change (KIP-320), answered by the partition's leader from its log's
// leader-epoch cache.

func (k kafkaBackend) OffsetForLeaderEpoch(ctx context.Context, topic string, partition, currentLeaderEpoch, epoch int32) (int32, int64, error) {
	return k.b.core.OffsetForLeaderEpoch(coreContext(ctx), topic, partition, currentLeaderEpoch, epoch)
}
