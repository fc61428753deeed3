package testcluster_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/testcluster"
)

// withMetrics gives every node a metrics listener on a free loopback port.
func withMetrics() testcluster.Option {
	return testcluster.Config(func(_ int32, cfg *broker.Config) { cfg.MetricsListen = "127.0.0.1:0" })
}

// httpGet returns the status and body of GET path on node id's metrics
// listener.
func httpGet(ctx context.Context, c *testcluster.Cluster, id int32, path string) (int, string, error) {
	b := c.Node(id)
	if b == nil || b.MetricsAddr() == "" {
		return 0, "", fmt.Errorf("node %d has no metrics listener", id)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+b.MetricsAddr()+path, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// scrape reads node id's /metrics into series ("name{a="x",b="y"}", as
// exposed) and their values.
func scrape(ctx context.Context, c *testcluster.Cluster, id int32) (map[string]float64, error) {
	code, body, err := httpGet(ctx, c, id, "/metrics")
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("/metrics answered %d: %s", code, body)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("series line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out, sc.Err()
}

// series reads one series of node id; an absent one is an error.
func series(ctx context.Context, c *testcluster.Cluster, id int32, name string) (float64, error) {
	m, err := scrape(ctx, c, id)
	if err != nil {
		return 0, err
	}
	v, ok := m[name]
	if !ok {
		return 0, fmt.Errorf("node %d exposes no %s", id, name)
	}
	return v, nil
}

// wantSeries polls until node id's series name satisfies ok.
func wantSeries(t *testing.T, ctx context.Context, c *testcluster.Cluster, id int32, name string, what string, ok func(float64) bool) {
	t.Helper()
	c.Eventually(ctx, fmt.Sprintf("node %d %s %s", id, name, what), func() error {
		v, err := series(ctx, c, id, name)
		if err != nil {
			return err
		}
		if !ok(v) {
			return fmt.Errorf("%s = %v, want %s", name, v, what)
		}
		return nil
	})
}

// wantControllerSeries polls until the controller, as node from knows
// it, exposes series name satisfying ok, and returns the controller's id.
// A cluster-wide series is the controller's alone, and the controller may
// change while the test waits (an election after a node is cut off or
// heals): each poll asks whichever node is the controller then.
func wantControllerSeries(t *testing.T, ctx context.Context, c *testcluster.Cluster, from int32, name string, what string, ok func(float64) bool) int32 {
	t.Helper()
	var ctl int32
	c.Eventually(ctx, fmt.Sprintf("the controller's %s %s", name, what), func() error {
		id, _, known := c.Node(from).Metadata().Controller()
		if !known {
			return fmt.Errorf("node %d knows no controller", from)
		}
		if b := c.Node(id); b == nil || !b.Metadata().IsController() {
			return fmt.Errorf("node %d names controller %d, which is not (or no longer)", from, id)
		}
		v, err := series(ctx, c, id, name)
		if err != nil {
			return err
		}
		if !ok(v) {
			return fmt.Errorf("controller %d: %s = %v, want %s", id, name, v, what)
		}
		ctl = id
		return nil
	})
	return ctl
}

func eq(want float64) func(float64) bool { return func(v float64) bool { return v == want } }

func TestClusterMetricsISRShrinkAndStoppedBroker(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 3, withMetrics())
	ctx := testCtx(t)
	ctl := c.WaitController(ctx)
	createTopic(t, c, ctl, "r3", 1, 3)
	createTopic(t, c, ctl, "r1", 6, 1)
	leader, _ := c.WaitLeader(ctx, "r3", 0)
	const n = 5
	for i := range n {
		produceToLeader(t, c, "r3", 0, fmt.Sprintf("v%d", i))
	}
	wantSeries(t, ctx, c, leader, `quire_topic_records_in_total{topic="r3"}`, "= 5", eq(n))
	wantSeries(t, ctx, c, leader, `quire_partition_log_end_offset{partition="0",topic="r3"}`, "= 5", eq(n))
	wantSeries(t, ctx, c, leader, `quire_partition_high_watermark{partition="0",topic="r3"}`, "= 5", eq(n))
	wantSeries(t, ctx, c, leader, `quire_partition_isr_size{partition="0",topic="r3"}`, "= 3", eq(3))
	wantSeries(t, ctx, c, leader, `quire_under_replicated_partitions`, "= 0", eq(0))
	wantSeries(t, ctx, c, ctl, `quire_active_controller`, "= 1", eq(1))
	wantSeries(t, ctx, c, ctl, `quire_offline_partitions`, "= 0", eq(0))
	// Raft's own go-metrics: commit and apply latency of the metadata log.
	for _, name := range []string{"quire_raft_commitTime_count", "quire_raft_fsm_apply_count"} {
		wantSeries(t, ctx, c, ctl, name, "> 0", func(v float64) bool { return v > 0 })
	}
	shrinks, err := series(ctx, c, leader, "quire_isr_shrinks_total")
	if err != nil {
		t.Fatal(err)
	}
	// r3-0's records went to its followers: bytes served by the leader,
	// fetched by each follower.
	positive := func(v float64) bool { return v > 0 }
	wantSeries(t, ctx, c, leader, "quire_replication_bytes_out_total", "> 0", positive)
	for _, id := range c.IDs() {
		if id != leader {
			wantSeries(t, ctx, c, id, "quire_replication_bytes_in_total", "> 0", positive)
		}
	}
	elections, err := series(ctx, c, ctl, "quire_leader_elections_total")
	if err != nil {
		t.Fatal(err)
	}

	// The victim follows r3-0 and leads some of r1's partitions.
	img := c.Image(ctl)
	victim, led := int32(-1), 0
	for _, id := range c.IDs() {
		if id == ctl || id == leader {
			continue
		}
		led = 0
		for p := range int32(6) {
			if pi, ok := img.Partition("r1", p); ok && pi.Leader == id {
				led++
			}
		}
		if led > 0 {
			victim = id
			break
		}
	}
	if victim < 0 {
		t.Fatalf("no broker but the controller %d and r3's leader %d leads a partition of r1: %+v", ctl, leader, img.Topics())
	}
	for _, id := range c.IDs() {
		if id != ctl {
			wantSeries(t, ctx, c, id, `quire_active_controller`, "= 0", eq(0))
		}
	}
	c.Stop(victim)

	// The leader of r3-0 lost a follower: one ISR shrink, one
	// under-replicated partition; r1's partitions on the victim are offline.
	wantSeries(t, ctx, c, leader, "quire_isr_shrinks_total", fmt.Sprintf("= %v", shrinks+1), eq(shrinks+1))
	wantSeries(t, ctx, c, leader, "quire_under_replicated_partitions", "= 1", eq(1))
	wantSeries(t, ctx, c, leader, `quire_partition_under_replicated{partition="0",topic="r3"}`, "= 1", eq(1))
	wantSeries(t, ctx, c, leader, `quire_partition_isr_size{partition="0",topic="r3"}`, "= 2", eq(2))
	wantSeries(t, ctx, c, ctl, "quire_offline_partitions", fmt.Sprintf("= %d", led), eq(float64(led)))
	wantSeries(t, ctx, c, ctl, "quire_cluster_under_replicated_partitions", "= 1", eq(1))
	wantSeries(t, ctx, c, ctl, "quire_fenced_brokers", "= 1", eq(1))

	// Requests are counted by method and code.
	wantSeries(t, ctx, c, leader, `quire_requests_total{code="OK",rpc="quire.v1.Producer/ProduceRecords"}`, ">= 5",
		func(v float64) bool { return v >= n })

	// Back, the victim is elected again for the partitions of r1 it was
	// the only replica of: one clean election each.
	c.Restart(victim)
	wantControllerSeries(t, ctx, c, ctl, "quire_leader_elections_total", fmt.Sprintf("= %v", elections+float64(led)), eq(elections+float64(led)))
	wantControllerSeries(t, ctx, c, ctl, "quire_unclean_leader_elections_total", "= 0", eq(0))
}

func TestClusterMetricsReadinessWhileFenced(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 3, withMetrics())
	ctx := testCtx(t)
	ctl := c.WaitController(ctx)
	victim := ctl%3 + 1
	for _, id := range c.IDs() {
		c.Eventually(ctx, fmt.Sprintf("node %d ready", id), func() error {
			code, body, err := httpGet(ctx, c, id, "/readyz")
			if err != nil {
				return err
			}
			if code != http.StatusOK {
				return fmt.Errorf("/readyz %d: %s", code, body)
			}
			return nil
		})
	}
	c.Partition(victim)
	c.Eventually(ctx, "the partitioned node not ready", func() error {
		code, body, err := httpGet(ctx, c, victim, "/readyz")
		if err != nil {
			return err
		}
		if code != http.StatusServiceUnavailable || !strings.Contains(body, "not ready") {
			return fmt.Errorf("/readyz %d: %s", code, body)
		}
		return nil
	})
	wantSeries(t, ctx, c, victim, "quire_ready", "= 0", eq(0))
	// Alive all the same.
	if code, body, err := httpGet(ctx, c, victim, "/healthz"); err != nil || code != http.StatusOK {
		t.Fatalf("/healthz while partitioned: %d %q %v", code, body, err)
	}
	// The others see it fenced: the controller among them says so.
	if ctl = wantControllerSeries(t, ctx, c, victim%3+1, "quire_fenced_brokers", "= 1", eq(1)); ctl == victim {
		t.Fatalf("the partitioned node %d is the controller of the others", victim)
	}

	c.Heal()
	c.Eventually(ctx, "ready again after healing", func() error {
		code, body, err := httpGet(ctx, c, victim, "/readyz")
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("/readyz %d: %s", code, body)
		}
		return nil
	})
	wantControllerSeries(t, ctx, c, victim, "quire_fenced_brokers", "= 0", eq(0))
	wantSeries(t, ctx, c, victim, "quire_ready", "= 1", eq(1))
}
