package console

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/client"
)

//go:embed web
var webFS embed.FS

// Config configures a console.
type Config struct {
	// Brokers are the seed brokers (host:port); any node of the cluster
	// will do, several ride out one being down.
	Brokers []string
	// Logger gets the console's events; nil discards them.
	Logger hclog.Logger
	// RequestTimeout bounds each call to the cluster made for a page
	// (default 10s).
	RequestTimeout time.Duration
	// SampleInterval is how often every group's lag and the cluster's
	// throughput are sampled for the charts, besides each time a group is
	// shown (default 15s; negative: only when a page shows them).
	SampleInterval time.Duration
	// RefreshInterval is how often an open page refreshes its figures in
	// place (default 5s).
	RefreshInterval time.Duration
	// Transport is how the console dials the brokers: TLS credentials
	// for a cluster with a TLS listener; nil dials in plaintext.
	Transport credentials.TransportCredentials
	// Auth authenticates every call (SCRAM user and password, see
	// client.SCRAMCredentials); nil sends none. It needs Transport.
	Auth credentials.PerRPCCredentials
	// MetricsURLs are brokers' metrics listeners (their /metrics), by
	// broker id or, where none is given, by address: the console reads
	// bytes in and out and records out from them (and the sizes on disk of
	// partitions whose leader did not answer DescribeTopics). Empty:
	// throughput comes from the offsets only (records in).
	MetricsURLs []MetricsTarget
	// TailStreamMax is how long one tail stream lasts (default 5m): the
	// page reconnects at once and goes on from where it was (the event id
	// carries its positions), so no connection is held forever.
	TailStreamMax time.Duration
}

func (c *Config) setDefaults() {
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 10 * time.Second
	}
	if c.SampleInterval == 0 {
		c.SampleInterval = 15 * time.Second
	}
	if c.TailStreamMax <= 0 {
		c.TailStreamMax = 5 * time.Minute
	}
	if c.RefreshInterval <= 0 {
		c.RefreshInterval = 5 * time.Second
	}
}

// Console serves the web console. Make one with New, serve its Handler,
// and Close it when done.
type Console struct {
	cfg   Config
	log   hclog.Logger
	pages map[string]*template.Template
	hist  *lagHistory
	thr   *throughput

	mu  sync.Mutex
	cl  *client.Client // nil until the cluster has answered once
	ccs []*grpc.ClientConn

	viewsMu sync.Mutex
	views   map[string]lastView // by page path: shown, marked stale, while the cluster cannot be reached

	ctx    context.Context // ended by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New returns a console for the cluster at cfg.Brokers. It does not wait
// for the cluster: a cluster that cannot be reached yet is shown as such on
// every page, and asked again on the next one.
func New(cfg Config) (*Console, error) {
	cfg.setDefaults()
	if len(cfg.Brokers) == 0 {
		return nil, errors.New("console: no brokers")
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	c := &Console{cfg: cfg, log: cfg.Logger, pages: pages, hist: newLagHistory(240)}
	if cfg.Auth != nil && cfg.Transport == nil {
		return nil, errors.New("console: a user's credentials are sent only over TLS: give the console the brokers' CA (TLS)")
	}
	c.thr = newThroughput(throughputSamples, cfg.MetricsURLs)
	for _, addr := range cfg.Brokers {
		cc, err := grpc.NewClient(addr, c.dialOpts()...)
		if err != nil {
			c.closeConns()
			return nil, fmt.Errorf("console: broker %q: %w", addr, err)
		}
		c.ccs = append(c.ccs, cc)
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	if cfg.SampleInterval > 0 {
		c.wg.Add(1)
		go c.sampleLoop()
	}
	return c, nil
}

// dialOpts are the gRPC options of every connection to the brokers.
func (c *Console) dialOpts() []grpc.DialOption {
	tc := c.cfg.Transport
	if tc == nil {
		tc = insecure.NewCredentials()
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(tc)}
	if c.cfg.Auth != nil {
		opts = append(opts, grpc.WithPerRPCCredentials(c.cfg.Auth))
	}
	return opts
}

// Close stops the lag sampler and closes the console's connections. Open
// tail streams end.
func (c *Console) Close() {
	c.cancel()
	c.wg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cl != nil {
		c.cl.Close()
		c.cl = nil
	}
	c.closeConns()
}

func (c *Console) closeConns() {
	for _, cc := range c.ccs {
		_ = cc.Close()
	}
	c.ccs = nil
}

// Handler serves the console's pages, its tail streams and its actions.
func (c *Console) Handler() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(webFS, "web/static")
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /{$}", c.overviewPage)
	mux.HandleFunc("GET /topics", c.topicsPage)
	mux.HandleFunc("GET /topics/{topic}", c.topicPage)
	mux.HandleFunc("GET /topics/{topic}/tail", c.tailPage)
	mux.HandleFunc("GET /api/tail/{topic}", c.tailStream)
	mux.HandleFunc("GET /topics/{topic}/messages", c.messagesPage)
	mux.HandleFunc("GET /topics/{topic}/messages/{partition}/{offset}", c.recordPage)
	mux.HandleFunc("GET /moves", c.movesPage)
	mux.HandleFunc("GET /throughput", c.throughputPage)
	mux.HandleFunc("GET /security", c.securityPage)
	mux.HandleFunc("GET /groups", c.groupsPage)
	mux.HandleFunc("GET /groups/{group}", c.groupPage)
	mux.HandleFunc("POST /actions/create-topic", c.createTopic)
	mux.HandleFunc("POST /actions/delete-topic", c.deleteTopic)
	mux.HandleFunc("POST /actions/add-partitions", c.addPartitions)
	mux.HandleFunc("POST /actions/delete-records", c.deleteRecords)
	mux.HandleFunc("POST /actions/reset-offsets", c.resetOffsets)
	mux.HandleFunc("POST /actions/produce", c.produceRecord)
	mux.HandleFunc("POST /actions/alter-configs", c.alterConfigs)
	mux.HandleFunc("POST /actions/create-acl", c.createACL)
	mux.HandleFunc("POST /actions/delete-acl", c.deleteACL)
	if !c.log.IsDebug() {
		return mux
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		mux.ServeHTTP(sw, r)
		c.log.Debug("served", "method", r.Method, "path", r.URL.RequestURI(), "code", sw.code, "took", time.Since(start).Round(time.Microsecond))
	})
}

// statusWriter keeps the status code of an answer, for the debug log.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

// Flush passes a tail stream's events on.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// client returns the Go client, making it on first use (or after the
// cluster could not be reached).
func (c *Console) client(ctx context.Context) (*client.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cl != nil {
		return c.cl, nil
	}
	if c.ctx.Err() != nil {
		return nil, client.ErrClosed
	}
	cl, err := client.New(ctx, client.SeedBrokers(c.cfg.Brokers...), client.ClientID("quire-console"),
		client.RequestTimeout(c.cfg.RequestTimeout), client.Logger(c.log), client.Idempotent(false),
		client.RecordPartitioner(formPartitioner()), client.Linger(0), client.DialOptions(c.dialOpts()...))
	if err != nil {
		return nil, fmt.Errorf("%w at %s: %w", errCannotReach, strings.Join(c.cfg.Brokers, ", "), err)
	}
	c.cl = cl
	return cl, nil
}

// formPartitioner sends a record to the partition it names (a form's
// partition field), else where Kafka's default partitioner would.
func formPartitioner() client.Partitioner {
	def := client.DefaultPartitioner(16384)
	return client.PartitionerFunc(func(r *client.Record, n int32) int32 {
		if r.Partition >= 0 {
			return r.Partition
		}
		return def.Partition(r, n)
	})
}

// call runs fn against the seed brokers in turn until one answers (any
// broker serves the calls the console makes this way: DescribeGroup and
// FetchRecordsMulti are passed on to where they belong). A failed call's
// status becomes a *client.Error with the broker's code and message.
func (c *Console) call(ctx context.Context, fn func(ctx context.Context, cc *grpc.ClientConn) error) error {
	c.mu.Lock()
	ccs := c.ccs
	c.mu.Unlock()
	if len(ccs) == 0 {
		return client.ErrClosed
	}
	var err error
	for _, cc := range ccs {
		if err = fn(ctx, cc); err == nil {
			return nil
		}
		if st, ok := status.FromError(err); !ok || st.Code() != codes.Unavailable || ctx.Err() != nil {
			break
		}
	}
	return statusError(err)
}

// statusError turns a gRPC status into the *client.Error it carries (the
// broker's code and message); other errors are returned as they are.
func statusError(err error) error {
	st, ok := status.FromError(err)
	if !ok || err == nil {
		return err
	}
	for _, d := range st.Details() {
		if pe, ok := d.(*quirev1.Error); ok {
			return &client.Error{Code: pe.GetCode(), Message: pe.GetMessage(), Retriable: pe.GetRetriable(),
				LeaderID: pe.GetLeaderId(), LeaderEpoch: pe.GetLeaderEpoch()}
		}
	}
	if st.Code() == codes.Unavailable {
		return fmt.Errorf("cannot reach the cluster: %s", st.Message())
	}
	return fmt.Errorf("%s: %s", st.Code(), st.Message())
}

// errorCode is the broker's code in err, NONE when it has none.
func errorCode(err error) quirev1.ErrorCode { return client.ErrorCode(err) }

func (c *Console) describeGroup(ctx context.Context, group string) (*quirev1.DescribeGroupResponse, error) {
	var out *quirev1.DescribeGroupResponse
	err := c.call(ctx, func(ctx context.Context, cc *grpc.ClientConn) error {
		var err error
		out, err = quirev1.NewGroupsClient(cc).DescribeGroup(ctx, &quirev1.DescribeGroupRequest{Group: group})
		return err
	})
	return out, err
}

func (c *Console) fetchRecords(ctx context.Context, req *quirev1.FetchRecordsMultiRequest) (*quirev1.FetchRecordsMultiResponse, error) {
	var out *quirev1.FetchRecordsMultiResponse
	err := c.call(ctx, func(ctx context.Context, cc *grpc.ClientConn) error {
		var err error
		out, err = quirev1.NewConsumerClient(cc).FetchRecordsMulti(ctx, req)
		return err
	})
	return out, err
}

// sampleLoop records every group's lag and the cluster's throughput on
// the sample interval (the throughput's baseline at once).
func (c *Console) sampleLoop() {
	defer c.wg.Done()
	t := time.NewTicker(c.cfg.SampleInterval)
	defer t.Stop()
	first := true
	for {
		if !first {
			select {
			case <-c.ctx.Done():
				return
			case <-t.C:
			}
		}
		ctx, cancel := context.WithTimeout(c.ctx, c.cfg.RequestTimeout)
		if err := c.sampleThroughput(ctx); err != nil {
			c.log.Debug("throughput sample failed", "error", err)
		}
		if !first {
			c.sampleAll(ctx)
		}
		first = false
		cancel()
	}
}

func (c *Console) sampleAll(ctx context.Context) {
	cl, err := c.client(ctx)
	if err != nil {
		return
	}
	groups, err := cl.ListGroups(ctx)
	if err != nil {
		return
	}
	for _, g := range groups {
		d, _ := c.describeGroup(ctx, g)
		if _, err := c.groupLag(g, d); err != nil {
			c.log.Debug("lag sample failed", "group", g, "error", err)
		}
	}
}
