package service

import (
	"context"
	"errors"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/internal/rpcstats"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/request"
	"github.com/quirelog/quire/subscribe"
)

// Node is what the services need of the node beyond the request core.
type Node interface {
	// ClientListener names the listener the call of ctx came in on.
	ClientListener(ctx context.Context) string
	// Features is the finalized metadata.version, the range this node
	// supports and every registered broker as this node's image has them.
	Features() (finalized int32, own metadata.VersionRange, brokers []metadata.BrokerInfo)
	// UpdateFeatures has the controller finalize metadata.version at
	// level (or higher) and returns the level once this node's image has
	// it.
	UpdateFeatures(ctx context.Context, level int32) (int32, error)
}

// Config is what New needs.
type Config struct {
	NodeID int32
	Core   *request.Core
	Node   Node
	// Subscriber is what a Subscribe stream's group member uses of the
	// node (package subscribe).
	Subscriber subscribe.Broker
	// Queue times requests on their way in; nil times none.
	Queue *rpcstats.Queue
	// Calls counts each request that comes as a message of a stream
	// (ProduceStream, FetchStream) as a call of its unary method; nil
	// (metrics.requests.enable off) counts none.
	Calls  *rpcstats.Stats
	Logger hclog.Logger
	// Stop is closed as the node shuts down: the streams end.
	Stop <-chan struct{}
}

// Services are the public quire.v1 services of one node.
type Services struct {
	b *node
}

// node is the node as the services see it.
type node struct {
	nodeID     int32
	core       *request.Core
	n          Node
	subscriber subscribe.Broker
	queue      *rpcstats.Queue
	calls      *rpcstats.Stats
	logger     hclog.Logger
	stop       <-chan struct{}
}

// New returns the services over cfg.Core.
func New(cfg Config) (*Services, error) {
	if cfg.Core == nil || cfg.Node == nil || cfg.Subscriber == nil || cfg.Stop == nil {
		return nil, errors.New("service: Config needs Core, Node, Subscriber and Stop")
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	return &Services{b: &node{nodeID: cfg.NodeID, core: cfg.Core, n: cfg.Node, subscriber: cfg.Subscriber, queue: cfg.Queue, calls: cfg.Calls,
		logger: cfg.Logger, stop: cfg.Stop}}, nil
}

// Register registers the services on r, each service description passed
// through wrap first (the node's request size limit: WithRequestLimit).
// r's codec must be TransportOptions' (codec.go): Fetch and FetchStream
// answer messages only it encodes (fetch_buf.go).
func (s *Services) Register(r grpc.ServiceRegistrar, wrap func(*grpc.ServiceDesc) *grpc.ServiceDesc) {
	b := s.b
	r.RegisterService(wrap(&quirev1.Admin_ServiceDesc), &adminService{b: b})
	r.RegisterService(wrap(&quirev1.Producer_ServiceDesc), &producerService{b: b})
	r.RegisterService(wrap(withPooledFetch(&quirev1.Consumer_ServiceDesc)), &consumerService{b: b}) // fetch_buf.go
	r.RegisterService(wrap(&quirev1.Metadata_ServiceDesc), &metadataService{b: b})
	r.RegisterService(wrap(&quirev1.Groups_ServiceDesc), &groupService{b: b})
	r.RegisterService(wrap(&quirev1.Transactions_ServiceDesc), &transactionsService{b: b})
	r.RegisterService(wrap(&quirev1.Security_ServiceDesc), &securityService{b: b})
}

func (b *node) clientListener(ctx context.Context) string { return b.n.ClientListener(ctx) }

// observeCall counts one call of the unary method fullMethod that came as
// a message of a stream (ProduceStream, FetchStream), from its arrival at
// start to its answer, when the node counts calls: the method's histogram
// then holds every produce and fetch, however sent.
func (b *node) observeCall(fullMethod string, start time.Time, err error) {
	if b.calls != nil && !start.IsZero() {
		b.calls.Observe(fullMethod, start, err)
	}
}

// callStart is the time a request message arrived, for observeCall; zero
// (nothing to time) when the node counts no calls.
func (b *node) callStart() time.Time {
	if b.calls == nil {
		return time.Time{}
	}
	return time.Now()
}
