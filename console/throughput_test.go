package console_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/client"
	"github.com/quirelog/quire/console"
	"github.com/quirelog/quire/internal/poll"
	"github.com/quirelog/quire/testcluster"
)

// TestConsoleThroughputConfigs runs against one node with a metrics
// listener: records in from the high watermarks and bytes in and out from
// the metrics, per topic and per broker, on charts with a time axis; the
// partitions' sizes on disk; the lag chart's time axis; a config edit
// validated by the broker before its confirmation; the security page.
func TestConsoleThroughputConfigs(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 1, testcluster.Config(func(_ int32, cfg *broker.Config) { cfg.MetricsListen = "127.0.0.1:0" }))
	ctx := testCtx(t)
	c.WaitController(ctx)
	cl := newClient(t, c.Addr(1))
	if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: "flow", Partitions: 2, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	c.WaitLeader(ctx, "flow", 0)
	c.WaitLeader(ctx, "flow", 1)
	con, err := console.New(console.Config{Brokers: []string{c.Addr(1)}, RequestTimeout: 5 * time.Second, SampleInterval: -1,
		MetricsURLs: []console.MetricsTarget{{Broker: "1", URL: "http://" + c.Node(1).MetricsAddr() + "/metrics"}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(con.Handler())
	t.Cleanup(func() { con.Close(); srv.Close() })

	// The first view takes the baseline: no rates yet.
	code, page := get(t, srv.URL+"/throughput")
	if code != http.StatusOK {
		t.Fatalf("throughput: %d\n%s", code, page)
	}
	mustContain(t, page, "throughput before traffic", `id="no-samples"`)

	produce := func(n int) {
		var rs []*client.Record
		for i := range n {
			rs = append(rs, &client.Record{Topic: "flow", Value: []byte(strings.Repeat("x", 100) + fmt.Sprint(i))})
		}
		if err := cl.ProduceSync(ctx, rs...); err != nil {
			t.Fatal(err)
		}
	}
	produce(200)
	// Read them, for bytes out.
	cons, err := cl.NewConsumer(map[string]map[int32]client.Offset{"flow": {0: client.AtStart(), 1: client.AtStart()}})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	got := 0
	for got < 200 {
		recs, err := cons.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got += len(recs)
	}

	rateRe := regexp.MustCompile(`id="total-records-in">([^<]+)<`)
	poll.Until(t, "a sample with the records in", func() error {
		_, page = get(t, srv.URL+"/throughput")
		m := rateRe.FindStringSubmatch(page)
		if m == nil || m[1] == "0/s" || m[1] == "–" {
			return fmt.Errorf("records in: %v", m)
		}
		return nil
	})
	mustContain(t, page, "throughput", `id="records-chart"`, `id="bytes-chart"`, `class="label xtick"`, `data-broker="1"`,
		`id="broker-records-1"`, `<tr data-topic="flow">`, "/s</td>")
	if strings.Contains(page, `id="total-bytes-in">–<`) || strings.Contains(page, `id="total-bytes-out">–<`) {
		t.Errorf("bytes in or out unknown with the broker's metrics:\n%s", page)
	}
	if !regexp.MustCompile(`<polyline points="[0-9., ]+" class="line">`).MatchString(page) {
		t.Errorf("no line on the charts:\n%s", page)
	}

	// The topic page: each partition's size on disk and the topic's charts.
	_, page = get(t, srv.URL+"/topics/flow")
	mustContain(t, page, "topic page", `id="topic-records-chart"`, "Size on disk: the leader's log")
	if n := strings.Count(page, `class="num size">–<`); n != 0 {
		t.Errorf("%d partitions without a size on disk:\n%s", n, page)
	}
	if !regexp.MustCompile(`class="num size">\d+(\.\d)? (B|KiB)<`).MatchString(page) {
		t.Errorf("no size in bytes on the topic page")
	}

	// The lag chart has a time axis.
	if err := cl.CommitOffsets(ctx, "flow-readers", client.OffsetCommit{Topic: "flow", Partition: 0, Offset: 1, LeaderEpoch: -1}); err != nil {
		t.Fatal(err)
	}
	_, page = get(t, srv.URL+"/groups/flow-readers")
	mustContain(t, page, "group page", `id="lag-chart"`, `class="label xtick"`)

	// A config edit: checked by the broker, confirmed, done.
	form := url.Values{"name": {"flow"}, "key": {"retention.ms"}, "value": {"3600000"}}
	resp := post(t, srv.URL+"/actions/alter-configs", form)
	if page := body(t, resp); resp.StatusCode != http.StatusOK ||
		!strings.Contains(page, "Set retention.ms of topic &#34;flow&#34; from 604800000 (the default) to 3600000.") ||
		!strings.Contains(page, `name="confirm" value="yes"`) {
		t.Fatalf("unconfirmed config edit: %d\n%s", resp.StatusCode, page)
	}
	form.Set("confirm", "yes")
	resp = post(t, srv.URL+"/actions/alter-configs", form)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("confirmed config edit: %d\n%s", resp.StatusCode, body(t, resp))
	}
	if v, src := configOf(ctx, t, cl, "flow", "retention.ms"); v != "3600000" || src != "topic" {
		t.Fatalf("retention.ms after the edit: %s (%s)", v, src)
	}
	_, page = get(t, srv.URL+"/topics/flow")
	mustContain(t, page, "topic page after the edit", `<tr class="set"><td title=`, "<td>3600000</td><td>topic</td>")
	for _, bad := range []struct {
		form url.Values
		want string
	}{
		{url.Values{"name": {"flow"}, "key": {"retention.ms"}, "value": {"soon"}}, "the broker refuses it: INVALID_CONFIG"},
		{url.Values{"name": {"flow"}, "key": {"no.such.config"}, "value": {"1"}}, "topic flow has no config &#34;no.such.config&#34;"},
		{url.Values{"name": {"flow"}, "key": {"retention.ms"}}, "a value for retention.ms is required"},
	} {
		resp := post(t, srv.URL+"/actions/alter-configs", bad.form)
		if page := body(t, resp); resp.StatusCode != http.StatusBadRequest || !strings.Contains(page, bad.want) || strings.Contains(page, `name="confirm"`) {
			t.Errorf("%v: %d, want 400 saying %q and no confirmation\n%s", bad.form, resp.StatusCode, bad.want, page)
		}
	}
	if v, _ := configOf(ctx, t, cl, "flow", "retention.ms"); v != "3600000" {
		t.Fatalf("retention.ms changed by a refused edit: %s", v)
	}
	resp = post(t, srv.URL+"/actions/alter-configs", url.Values{"name": {"flow"}, "key": {"retention.ms"}, "reset": {"yes"}, "confirm": {"yes"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("config reset: %d\n%s", resp.StatusCode, body(t, resp))
	}
	if v, src := configOf(ctx, t, cl, "flow", "retention.ms"); v != "604800000" || src == "topic" {
		t.Fatalf("retention.ms after the reset: %s (%s)", v, src)
	}

	// Security: who the console is, no users, no ACLs.
	code, page = get(t, srv.URL+"/security")
	if code != http.StatusOK {
		t.Fatalf("security: %d\n%s", code, page)
	}
	mustContain(t, page, "security page", `id="principal">User:ANONYMOUS<`, "No users.", "No ACLs.")
}

func configOf(ctx context.Context, t *testing.T, cl *client.Client, topic, key string) (value, source string) {
	t.Helper()
	entries, err := cl.DescribeConfigs(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name == key {
			return e.Value, e.Source
		}
	}
	t.Fatal(errors.New("no config " + key))
	return "", ""
}
