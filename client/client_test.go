package client_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/broker/brokertest"
	"github.com/quirelog/quire/client"
	"github.com/quirelog/quire/internal/testparallel"
	"github.com/quirelog/quire/record"
)

// exampleAddr is the broker the Example functions talk to; TestMain starts
// it because examples get no *testing.T.
var exampleAddr string

func TestMain(m *testing.M) {
	testparallel.Raise()
	dir, err := os.MkdirTemp("", "quire-client-example")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cfg := broker.DevConfig(dir)
	cfg.ListenAddr = "127.0.0.1:0"
	cfg.MetricsListen = ""
	cfg.RaftHeartbeatTimeout = 100 * time.Millisecond
	cfg.Logger = hclog.NewNullLogger()
	b, err := broker.New(cfg)
	if err == nil {
		err = b.Start()
	}
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = b.WaitReady(ctx)
		cancel()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "start example broker:", err)
		os.Exit(1)
	}
	exampleAddr = b.Addr()
	code := m.Run()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	_ = b.Shutdown(ctx)
	cancel()
	_ = os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// testCtx bounds a whole test: only to stop a hang, far above what the
// slowest takes on a loaded machine with other tests running beside it.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func newClient(t *testing.T, addr string, opts ...client.Opt) *client.Client {
	t.Helper()
	cl, err := client.New(testCtx(t), append([]client.Opt{client.SeedBrokers(addr),
		client.RetryBackoff(20 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatalf("client.New: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func createTopic(t *testing.T, cl *client.Client, name string, partitions int32) {
	t.Helper()
	if _, err := cl.CreateTopic(testCtx(t), client.TopicSpec{Name: name, Partitions: partitions}); err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
}

// consumeN reads n records from the partitions, starting at start.
func consumeN(t *testing.T, cl *client.Client, topic string, parts []int32, start client.Offset, n int) []*client.Record {
	t.Helper()
	assign := map[int32]client.Offset{}
	for _, p := range parts {
		assign[p] = start
	}
	cons, err := cl.NewConsumer(map[string]map[int32]client.Offset{topic: assign})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	ctx := testCtx(t)
	var out []*client.Record
	for len(out) < n {
		recs, err := cons.Poll(ctx)
		if err != nil {
			t.Fatalf("poll after %d of %d records: %v", len(out), n, err)
		}
		out = append(out, recs...)
	}
	if len(out) != n {
		t.Fatalf("consumed %d records, want %d", len(out), n)
	}
	return out
}

// rawBatches fetches partition p from offset 0 with a plain gRPC call and
// returns the batch headers, to see how the producer batched.
func rawBatches(t *testing.T, addr, topic string, p int32) []record.Header {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	resp, err := quirev1.NewConsumerClient(cc).Fetch(testCtx(t), &quirev1.FetchRequest{MaxBytes: 64 << 20,
		Partitions: []*quirev1.FetchPartition{{Topic: topic, Partition: p, MaxBytes: 64 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	var hs []record.Header
	for _, r := range resp.GetPartitions() {
		if err := record.SplitBatches(r.GetRecords(), func(_ []byte, h record.Header) error {
			hs = append(hs, h)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	return hs
}

func TestClientNeedsSeeds(t *testing.T) {
	t.Parallel()
	if _, err := client.New(context.Background()); !errors.Is(err, client.ErrNoBrokers) {
		t.Fatalf("New without seeds: %v, want ErrNoBrokers", err)
	}
}

func TestClientUnreachableSeedFails(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if _, err := client.New(ctx, client.SeedBrokers("127.0.0.1:1")); err == nil {
		t.Fatal("New against a closed port succeeded")
	}
}

func TestClientAdminTopicLifecycle(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	cl := newClient(t, b.Addr())
	ctx := testCtx(t)

	d, err := cl.CreateTopic(ctx, client.TopicSpec{Name: "admin-t", Partitions: 3, Configs: map[string]string{"retention.ms": "60000"}})
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "admin-t" || len(d.Partitions) != 3 {
		t.Fatalf("created %+v", d)
	}
	_, err = cl.CreateTopic(ctx, client.TopicSpec{Name: "admin-t", Partitions: 3})
	if client.ErrorCode(err) != quirev1.ErrorCode_TOPIC_ALREADY_EXISTS {
		t.Fatalf("second create: %v, want TOPIC_ALREADY_EXISTS", err)
	}
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Message == "" {
		t.Fatalf("error %v carries no server message", err)
	}

	ls, err := cl.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, l := range ls {
		found = found || (l.Name == "admin-t" && l.Partitions == 3)
	}
	if !found {
		t.Fatalf("list %+v lacks admin-t with 3 partitions", ls)
	}

	ds, err := cl.DescribeTopics(ctx, "admin-t")
	if err != nil || len(ds) != 1 {
		t.Fatalf("describe: %v %+v", err, ds)
	}
	for _, p := range ds[0].Partitions {
		if p.Leader < 0 && len(p.Replicas) == 0 {
			t.Fatalf("partition %+v has no replicas", p)
		}
	}
	if ds[0].Configs["retention.ms"] != "60000" {
		t.Fatalf("configs %v", ds[0].Configs)
	}

	if err := cl.AlterConfigs(ctx, "admin-t", map[string]string{"retention.ms": "120000"}); err != nil {
		t.Fatal(err)
	}
	entries, err := cl.DescribeConfigs(ctx, "admin-t")
	if err != nil {
		t.Fatal(err)
	}
	got := ""
	for _, e := range entries {
		if e.Name == "retention.ms" {
			got = e.Value + "/" + e.Source
		}
	}
	if got != "120000/topic" {
		t.Fatalf("retention.ms after alter = %q", got)
	}

	d, err = cl.CreatePartitions(ctx, "admin-t", 5)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := cl.PartitionCount(ctx, "admin-t"); err != nil || n != 5 {
		t.Fatalf("partition count after add: %d, %v (%+v)", n, err, d)
	}

	cd, err := cl.DescribeCluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(cd.Brokers) != 1 || cd.Brokers[0].Address != b.Addr() || cd.ControllerID != cd.Brokers[0].ID {
		t.Fatalf("cluster %+v", cd)
	}

	if err := cl.DeleteTopic(ctx, "admin-t"); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.PartitionCount(ctx, "admin-t"); client.ErrorCode(err) != quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION {
		t.Fatalf("after delete: %v", err)
	}
}

// TestClientUnknownTopicDefinitive: a producer that allows auto-creation,
// against a broker that does not, fails at once with the broker's answer
// rather than retrying until the delivery timeout; EnsureTopic likewise,
// and creates the topic on a broker that allows it.
func TestClientUnknownTopicDefinitive(t *testing.T) {
	t.Parallel()
	off := brokertest.Start(t, func(c *broker.Config) { c.AutoCreateTopicsEnable = false })
	cl := newClient(t, off.Addr(), client.AllowAutoTopicCreation(), client.DeliveryTimeout(50*time.Second))
	ctx, cancel := context.WithTimeout(testCtx(t), 20*time.Second)
	defer cancel()
	err := cl.ProduceSync(ctx, client.StringRecord("missing", "v"))
	if client.ErrorCode(err) != quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION || ctx.Err() != nil ||
		!strings.Contains(err.Error(), "auto.create.topics.enable is false") {
		t.Fatalf("produce to a missing topic: %v (ctx %v)", err, ctx.Err())
	}
	if _, created, err := cl.EnsureTopic(ctx, "missing"); created || client.ErrorCode(err) != quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION {
		t.Fatalf("EnsureTopic with auto-create off: created %v, %v", created, err)
	}

	on := brokertest.Start(t)
	cl = newClient(t, on.Addr())
	n, created, err := cl.EnsureTopic(ctx, "fresh")
	if err != nil || !created || n < 1 {
		t.Fatalf("EnsureTopic with auto-create on: %d %v %v", n, created, err)
	}
	if _, created, err := cl.EnsureTopic(ctx, "fresh"); err != nil || created {
		t.Fatalf("EnsureTopic of an existing topic: created %v, %v", created, err)
	}
}
