package broker_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/broker/brokertest"
	"github.com/quirelog/quire/internal/poll"
)

func metricsGet(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, string(body)
}

func TestBrokerMetricsListenerServesAndStops(t *testing.T) {
	t.Parallel()
	cfg := brokertest.Config(t)
	cfg.MetricsListen = "127.0.0.1:0"
	b, err := broker.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	addr := b.MetricsAddr()
	if addr == "" {
		t.Fatal("no metrics listener with metrics.listen set")
	}
	if code, body := metricsGet(t, addr, "/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Fatalf("/healthz: %d %q", code, body)
	}
	if err := b.WaitReady(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	// Ready closes before the first heartbeat is answered; poll.
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, body := metricsGet(t, addr, "/readyz")
		if code == http.StatusOK && body == "ready\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz: %d %q", code, body)
		}
		time.Sleep(20 * time.Millisecond) // polling with a deadline
	}
	code, body := metricsGet(t, addr, "/metrics")
	for _, want := range []string{"\nquire_active_controller 1\n", "\nquire_ready 1\n", "\nquire_registered_brokers 1\n", "\ngo_goroutines "} {
		if code != http.StatusOK || !strings.Contains(body, want) {
			t.Fatalf("/metrics (%d) lacks %q", code, strings.TrimSpace(want))
		}
	}
	if code, _ := metricsGet(t, addr, "/debug/pprof/"); code != http.StatusNotFound {
		t.Fatalf("/debug/pprof/ answered %d without metrics.pprof.enable", code)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatalf("metrics listener %s still accepts after Shutdown", addr)
	}
}

func TestBrokerMetricsPprof(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, func(c *broker.Config) { c.MetricsListen, c.MetricsPprofEnable = "127.0.0.1:0", true })
	if code, body := metricsGet(t, b.MetricsAddr(), "/debug/pprof/"); code != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Fatalf("/debug/pprof/: %d", code)
	}
}

func TestBrokerMetricsListenInUse(t *testing.T) {
	t.Parallel()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	cfg := brokertest.Config(t)
	cfg.MetricsListen = lis.Addr().String()
	b, err := broker.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	err = b.Start()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if serr := b.Shutdown(ctx); serr != nil {
		t.Errorf("shutdown after a failed start: %v", serr)
	}
	if err == nil || !strings.Contains(err.Error(), "metrics.listen") {
		t.Fatalf("start with metrics.listen in use: %v, want an error naming metrics.listen", err)
	}
}

func TestBrokerConfigMetricsListenChecked(t *testing.T) {
	t.Parallel()
	c := broker.DefaultConfig()
	if c.MetricsListen != "" {
		t.Fatalf("metrics.listen defaults to %q, want off", c.MetricsListen)
	}
	if err := c.Set("metrics.listen", "no-port"); err == nil || !strings.Contains(err.Error(), "metrics.listen") {
		t.Fatalf("metrics.listen=no-port: %v", err)
	}
	if err := c.Set("metrics.listen", "127.0.0.1:9404"); err != nil {
		t.Fatal(err)
	}
}

// TestBrokerMetricsQueueTime: every partition appended and every
// partition read is counted in the produce and fetch queue-time
// histograms; with metrics.requests.enable off, none is. The replication
// stage histograms count the appends either way: on one node, each
// acks=all append is replicated and acked, the fetch delivers them, and
// no follower reads any.
func TestBrokerMetricsQueueTime(t *testing.T) {
	t.Parallel()
	for _, on := range []bool{true, false} {
		b, c := start(t, func(cfg *broker.Config) { cfg.MetricsListen, cfg.MetricsRequestsEnable = "127.0.0.1:0", on })
		name := fmt.Sprintf("q%v", on)
		createTopic(t, c, name, 2, nil)
		for range 3 {
			produce(t, c, name, 0, makeBatch(2, 10, "a"))
		}
		produce(t, c, name, 1, makeBatch(2, 10, "b"))
		if _, err := c.consumer.Fetch(ctxT(t), &quirev1.FetchRequest{Partitions: []*quirev1.FetchPartition{
			{Topic: name, Partition: 0}, {Topic: name, Partition: 1}}}); err != nil {
			t.Fatal(err)
		}
		_, body := metricsGet(t, b.MetricsAddr(), "/metrics")
		wantProduce, wantFetch := 4, 2
		if !on {
			wantProduce, wantFetch = 0, 0
		}
		for _, want := range []string{
			fmt.Sprintf("\nquire_request_queue_seconds_count{request=\"produce\"} %d\n", wantProduce),
			fmt.Sprintf("\nquire_request_queue_seconds_count{request=\"fetch\"} %d\n", wantFetch),
			"\nquire_replication_stage_seconds_count{stage=\"follower_read\"} 0\n",
			"\nquire_replication_stage_seconds_count{stage=\"replicated\"} 4\n",
			"\nquire_replication_stage_seconds_count{stage=\"acked\"} 4\n",
			"\nquire_replication_stage_seconds_count{stage=\"delivered\"} 4\n",
		} {
			if !strings.Contains(body, want) {
				t.Errorf("metrics.requests.enable=%v: /metrics lacks %q: %s", on, strings.TrimSpace(want), grepLines(body, "quire_request_queue_seconds_count")+"\n"+grepLines(body, "quire_replication_stage_seconds_count"))
			}
		}
	}
}

func grepLines(body, prefix string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// scrape reads the broker's /metrics into metric families.
func scrape(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	code, body := metricsGet(t, addr, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// sample finds the metric of family name whose labels include want (name
// to value); nil when there is none.
func sample(fams map[string]*dto.MetricFamily, name string, want map[string]string) *dto.Metric {
	f := fams[name]
	if f == nil {
		return nil
	}
next:
	for _, m := range f.GetMetric() {
		for k, v := range want {
			found := false
			for _, l := range m.GetLabel() {
				if l.GetName() == k && l.GetValue() == v {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		return m
	}
	return nil
}

// requestCount is how many calls of rpc (e.g. "quire.v1.Producer/Produce")
// the request histogram holds.
func requestCount(t *testing.T, addr, rpc string) uint64 {
	t.Helper()
	m := sample(scrape(t, addr), "quire_request_duration_seconds", map[string]string{"rpc": rpc, "type": "unary"})
	if m == nil {
		return 0
	}
	return m.GetHistogram().GetSampleCount()
}

// TestBrokerMetricsStreamedRequests: every request message of a
// ProduceStream, and every response of a FetchStream, adds one
// observation to the histogram of the unary Produce and Fetch calls, as
// the unary calls themselves do.
func TestBrokerMetricsStreamedRequests(t *testing.T) {
	t.Parallel()
	b, c := start(t, func(cfg *broker.Config) { cfg.MetricsListen, cfg.MetricsRequestsEnable = "127.0.0.1:0", true })
	createTopic(t, c, "st", 1, nil)
	addr := b.MetricsAddr()
	produce(t, c, "st", 0, makeBatch(2, 10, "u")) // one unary call
	const produceRPC, fetchRPC = "quire.v1.Producer/Produce", "quire.v1.Consumer/Fetch"
	poll.True(t, "the unary produce counted", func() bool { return requestCount(t, addr, produceRPC) == 1 })

	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	stream, err := c.producer.ProduceStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const n = 7
	for i := range n {
		acks := int32(1)
		if i == n-1 {
			acks = 0 // not answered: counted once appended
		}
		req := &quirev1.ProduceRequest{OptionalAcks: &quirev1.ProduceRequest_Acks{Acks: acks}, CorrelationId: int64(i),
			Partitions: []*quirev1.PartitionRecords{{Topic: "st", Partition: 0, Records: makeBatch(1, 10, fmt.Sprint("s", i))}}}
		if err := stream.Send(req); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n - 1 {
		resp, err := stream.Recv()
		if err != nil || resp.Partitions[0].Error != nil {
			t.Fatalf("stream response %d: %v %v", i, err, resp)
		}
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != io.EOF {
		t.Fatalf("stream end: %v", err)
	}
	poll.Until(t, "each streamed produce counted as a Produce call", func() error {
		if got := requestCount(t, addr, produceRPC); got != 1+n {
			return fmt.Errorf("%d Produce observations, want %d", got, 1+n)
		}
		return nil
	})

	fetches := requestCount(t, addr, fetchRPC)
	fs, err := c.consumer.FetchStream(ctx, &quirev1.FetchRequest{MaxWaitMs: 5000, Partitions: []*quirev1.FetchPartition{{Topic: "st", Partition: 0}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Recv(); err != nil {
		t.Fatal(err)
	}
	produce(t, c, "st", 0, makeBatch(1, 10, "more"))
	if _, err := fs.Recv(); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "each streamed fetch response counted as a Fetch call", func() error {
		if got := requestCount(t, addr, fetchRPC); got != fetches+2 {
			return fmt.Errorf("%d Fetch observations, want %d", got, fetches+2)
		}
		return nil
	})
}

// TestBrokerMetricsClientBytes: a produce adds its batch bytes to
// quire_bytes_in_total, a fetch the bytes it read to
// quire_bytes_out_total.
func TestBrokerMetricsClientBytes(t *testing.T) {
	t.Parallel()
	b, c := start(t, func(cfg *broker.Config) { cfg.MetricsListen = "127.0.0.1:0" })
	createTopic(t, c, "cb", 1, nil)
	counter := func(name string) float64 {
		m := sample(scrape(t, b.MetricsAddr()), name, nil)
		if m == nil {
			t.Fatalf("no %s", name)
		}
		return m.GetCounter().GetValue()
	}
	if in, out := counter("quire_bytes_in_total"), counter("quire_bytes_out_total"); in != 0 || out != 0 {
		t.Fatalf("before any traffic: %v bytes in, %v out", in, out)
	}
	batch := makeBatch(3, 50, "x")
	produce(t, c, "cb", 0, batch)
	if in := counter("quire_bytes_in_total"); in != float64(len(batch)) {
		t.Fatalf("%v bytes in after a produce of %d", in, len(batch))
	}
	resp, err := c.consumer.Fetch(ctxT(t), &quirev1.FetchRequest{Partitions: []*quirev1.FetchPartition{{Topic: "cb", Partition: 0}}})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(resp.Partitions[0].Records); n != len(batch) {
		t.Fatalf("fetched %d bytes, produced %d", n, len(batch))
	}
	if out := counter("quire_bytes_out_total"); out != float64(len(batch)) {
		t.Fatalf("%v bytes out after a fetch of %d", out, len(batch))
	}
}
