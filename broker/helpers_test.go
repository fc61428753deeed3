package broker_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/broker/brokertest"
	"github.com/quirelog/quire/internal/testparallel"
	"github.com/quirelog/quire/record"
)

func TestMain(m *testing.M) {
	testparallel.Raise()
	goleak.VerifyTestMain(m,
		// grpc's and glog's package-level goroutines.
		goleak.IgnoreTopFunction("google.golang.org/grpc/internal/grpcsync.(*CallbackSerializer).run"),
		goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"),
	)
}

// clients are typed stubs over one connection to a broker.
type clients struct {
	admin    quirev1.AdminClient
	producer quirev1.ProducerClient
	consumer quirev1.ConsumerClient
	meta     quirev1.MetadataClient
	conn     *grpc.ClientConn
}

func dial(t testing.TB, b *broker.Broker) *clients {
	t.Helper()
	cc, err := grpc.NewClient(b.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return &clients{
		admin:    quirev1.NewAdminClient(cc),
		producer: quirev1.NewProducerClient(cc),
		consumer: quirev1.NewConsumerClient(cc),
		meta:     quirev1.NewMetadataClient(cc),
		conn:     cc,
	}
}

// start runs a dev broker with a client connection.
func start(t testing.TB, opts ...func(*broker.Config)) (*broker.Broker, *clients) {
	t.Helper()
	b := brokertest.Start(t, opts...)
	return b, dial(t, b)
}

func noAutoCreate(c *broker.Config) { c.AutoCreateTopicsEnable = false }

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func createTopic(t testing.TB, c *clients, name string, partitions int32, configs map[string]string) *quirev1.TopicDescription {
	t.Helper()
	resp, err := c.admin.CreateTopic(ctxT(t), &quirev1.CreateTopicRequest{Name: name, OptionalPartitions: &quirev1.CreateTopicRequest_Partitions{Partitions: partitions}, Configs: configs})
	if err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
	return resp.Topic
}

// makeBatch builds one uncompressed batch of n records of valueSize bytes.
func makeBatch(n, valueSize int, prefix string) []byte {
	b := record.NewBuilder(record.None)
	ts := time.Now().UnixMilli()
	for i := 0; i < n; i++ {
		v := make([]byte, valueSize)
		copy(v, fmt.Sprintf("%s-%d", prefix, i))
		b.Append(ts, []byte(fmt.Sprintf("k%d", i)), v, nil)
	}
	return b.Build()
}

// wantStatus checks a whole-call error: gRPC code and quire error code in
// the details, and that the message mentions each of mentions.
func wantStatus(t testing.TB, err error, code codes.Code, ec quirev1.ErrorCode, mentions ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want %v/%v, got success", code, ec)
	}
	st := status.Convert(err)
	if st.Code() != code {
		t.Fatalf("want code %v, got %v: %v", code, st.Code(), st.Message())
	}
	var qe *quirev1.Error
	for _, d := range st.Details() {
		if e, ok := d.(*quirev1.Error); ok {
			qe = e
		}
	}
	if qe == nil {
		t.Fatalf("no quire.v1.Error in the details of %v", err)
	}
	if qe.Code != ec {
		t.Fatalf("want error code %v, got %v (%s)", ec, qe.Code, qe.Message)
	}
	for _, m := range mentions {
		if !strings.Contains(st.Message(), m) {
			t.Fatalf("message %q does not mention %q", st.Message(), m)
		}
	}
}

// wantInline checks a per-partition error.
func wantInline(t testing.TB, e *quirev1.Error, ec quirev1.ErrorCode, retriable bool) {
	t.Helper()
	if e == nil {
		t.Fatalf("want inline error %v, got none", ec)
	}
	if e.Code != ec || e.Retriable != retriable {
		t.Fatalf("want inline %v retriable=%v, got %v retriable=%v (%s)", ec, retriable, e.Code, e.Retriable, e.Message)
	}
}

func produce(t testing.TB, c *clients, topic string, p int32, batches []byte) *quirev1.PartitionProduceResult {
	t.Helper()
	resp, err := c.producer.Produce(ctxT(t), &quirev1.ProduceRequest{
		OptionalAcks: &quirev1.ProduceRequest_Acks{Acks: -1},
		Partitions:   []*quirev1.PartitionRecords{{Topic: topic, Partition: p, Records: batches}},
	})
	if err != nil {
		t.Fatalf("produce: %v", err)
	}
	return resp.Partitions[0]
}

func brokerConfig(t testing.TB) broker.Config { return brokertest.Config(t) }

func startConfig(t testing.TB, cfg broker.Config) *broker.Broker {
	t.Helper()
	return brokertest.StartConfig(t, cfg)
}

func stop(t testing.TB, b *broker.Broker) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := b.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
}
