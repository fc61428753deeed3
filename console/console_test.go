package console_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/client"
	"github.com/quirelog/quire/console"
	"github.com/quirelog/quire/internal/poll"
	"github.com/quirelog/quire/internal/testparallel"
	"github.com/quirelog/quire/testcluster"
)

func TestMain(m *testing.M) {
	testparallel.Raise()
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("google.golang.org/grpc/internal/grpcsync.(*CallbackSerializer).run"),
		goleak.IgnoreTopFunction("github.com/hashicorp/raft.(*deferError).Error"),
	)
}

// testCtx bounds a whole test: only to stop a hang.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// serve starts a console for the brokers on an httptest server.
func serve(t *testing.T, brokers ...string) *httptest.Server {
	t.Helper()
	c, err := console.New(console.Config{Brokers: brokers, RequestTimeout: 5 * time.Second, SampleInterval: -1,
		TailStreamMax: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c.Handler())
	t.Cleanup(func() { c.Close(); srv.Close() })
	return srv
}

func newClient(t *testing.T, addrs ...string) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cl, err := client.New(ctx, client.SeedBrokers(addrs...), client.Linger(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// noRedirect is an HTTP client that shows redirects instead of following
// them.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	Timeout: 20 * time.Second}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := noRedirect.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// get2 is get's page, which must answer 200.
func get2(t *testing.T, url string) string {
	t.Helper()
	code, page := get(t, url)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d\n%s", url, code, page)
	}
	return page
}

func post(t *testing.T, u string, form url.Values) *http.Response {
	t.Helper()
	resp, err := noRedirect.PostForm(u, form)
	if err != nil {
		t.Fatalf("POST %s: %v", u, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func body(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mustContain(t *testing.T, page, what string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(page, w) {
			t.Errorf("%s lacks %q", what, w)
		}
	}
}

// TestConsoleClusterPages: the overview lists every broker and names the
// controller; the topic page shows each partition's replicas, ISR and
// high watermark; stopping a node shows its partitions under-replicated.
func TestConsoleClusterPages(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 3)
	ctx := testCtx(t)
	ctl := c.WaitController(ctx)
	cl := newClient(t, c.Addr(1))
	if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: "orders", Partitions: 2, ReplicationFactor: 3}); err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 2; p++ {
		c.WaitLeader(ctx, "orders", p)
	}
	var recs []*client.Record
	for i := range 7 {
		recs = append(recs, &client.Record{Topic: "orders", Partition: 0, Value: fmt.Appendf(nil, "r%d", i)})
	}
	if err := cl.ProduceSync(ctx, recs...); err != nil {
		t.Fatal(err)
	}
	srv := serve(t, c.Addr(2), c.Addr(1))

	code, page := get(t, srv.URL+"/")
	if code != http.StatusOK {
		t.Fatalf("overview: %d\n%s", code, page)
	}
	mustContain(t, page, "overview", `id="n-brokers">3<`, `id="n-topics">1<`, `id="n-partitions">2<`, `id="n-under-replicated">0<`, "<th>Budget</th>")
	for _, id := range c.IDs() {
		mustContain(t, page, "overview", fmt.Sprintf(`data-broker="%d"`, id), "<td>"+c.Addr(id)+"</td>")
	}
	mustContain(t, page, "overview", fmt.Sprintf("<td>%d</td><td>%s</td><td>–</td>\n  <td>serving</td>\n  <td>active controller</td>", ctl, c.Addr(ctl)))

	// The high watermarks the API answers, partition by partition.
	td, err := cl.DescribeTopics(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	total := int64(0)
	for _, pd := range td[0].Partitions {
		total += pd.HighWatermark
	}
	if total != 7 {
		t.Fatalf("high watermarks sum to %d, want 7", total)
	}
	// Each leader's log size on disk: a batch has 61 bytes of header at
	// least; a partition without records has none.
	for _, pd := range td[0].Partitions {
		if pd.HighWatermark > 0 && pd.SizeBytes < 61 || pd.HighWatermark == 0 && pd.SizeBytes != 0 {
			t.Errorf("partition %d: %d records in %d bytes", pd.Partition, pd.HighWatermark, pd.SizeBytes)
		}
	}
	// Every node answers the leaders' sizes, its own or asked of them.
	for _, id := range c.IDs() {
		res, err := quirev1.NewAdminClient(c.Conn(id)).DescribeTopics(ctx, &quirev1.DescribeTopicsRequest{Names: []string{"orders"}})
		if err != nil {
			t.Fatal(err)
		}
		for _, pd := range res.GetTopics()[0].GetPartitions() {
			if want := td[0].Partitions[pd.GetPartition()].SizeBytes; pd.GetSizeBytes() != want {
				t.Errorf("node %d: partition %d is %d bytes, want %d", id, pd.GetPartition(), pd.GetSizeBytes(), want)
			}
		}
	}
	poll.Until(t, "topic page", func() error {
		_, page := get(t, srv.URL+"/topics/orders")
		for _, pd := range td[0].Partitions {
			row := fmt.Sprintf(`data-partition="%d">`, pd.Partition)
			i := strings.Index(page, row)
			if i < 0 {
				return errors.New("no row for partition " + row)
			}
			rest := page[i:]
			if want := fmt.Sprintf(`class="num hw">%d<`, pd.HighWatermark); !strings.Contains(rest[:strings.Index(rest, "</tr>")], want) {
				return fmt.Errorf("partition %d row lacks %s: %s", pd.Partition, want, rest[:strings.Index(rest, "</tr>")])
			}
		}
		for _, pd := range td[0].Partitions {
			if want := fmt.Sprintf(`data-partition="%d">`, pd.Partition); !strings.Contains(page[strings.Index(page, want):], `class="num size">`+sizeOf(pd.SizeBytes)+"<") {
				return fmt.Errorf("partition %d does not show its size %d", pd.Partition, pd.SizeBytes)
			}
		}
		if !strings.Contains(page, "<td>1, 2, 3</td>") && !strings.Contains(page, "<td>2, 3, 1</td>") && !strings.Contains(page, "<td>3, 1, 2</td>") {
			return errors.New("no replica list of all three nodes")
		}
		return nil
	})
	_, page = get(t, srv.URL+"/topics")
	mustContain(t, page, "topics", `data-topic="orders"`, `<td>2</td><td>3</td>`, `<td>7</td>`)

	// A compacted topic's page shows its policy and each partition's
	// dirty ratio; a topic that is not compacted shows no ratio.
	mustContain(t, get2(t, srv.URL+"/topics/orders"), "topic page", `id="cleanup-policy">delete<`)
	if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: "changelog", Partitions: 1, ReplicationFactor: 3,
		Configs: map[string]string{"cleanup.policy": "compact"}}); err != nil {
		t.Fatal(err)
	}
	c.WaitLeader(ctx, "changelog", 0)
	dirty := regexp.MustCompile(`data-partition="0">(?s:.*?)<td class="num dirty">([0-9]\.[0-9]{2})</td>`)
	poll.Until(t, "the compacted topic's page with its dirty ratio", func() error {
		_, page := get(t, srv.URL+"/topics/changelog")
		if !strings.Contains(page, `id="cleanup-policy">compact<`) || !strings.Contains(page, "<th>Dirty ratio</th>") {
			return errors.New("no cleanup.policy compact nor dirty ratio column")
		}
		if m := dirty.FindStringSubmatch(page); m == nil {
			return errors.New("partition 0 shows no dirty ratio")
		}
		return nil
	})
	if page := get2(t, srv.URL+"/topics/orders"); strings.Contains(page, "Dirty ratio") {
		t.Error("the page of a topic that is not compacted shows a dirty ratio")
	}

	// Stop a node that is not the controller: every partition loses it
	// from its ISR, and the overview lists them under-replicated.
	stop := int32(1)
	for stop == ctl || c.Addr(stop) == c.Addr(2) {
		stop++
	}
	c.Stop(stop)
	poll.Until(t, "under-replicated partitions", func() error {
		_, page := get(t, srv.URL+"/")
		if !strings.Contains(page, `id="n-under-replicated">3<`) || !strings.Contains(page, `class="warn under-replicated" data-partition="orders/0"`) {
			return errors.New("overview does not show orders/0, orders/1 and changelog/0 under-replicated")
		}
		return nil
	})
	_, page = get(t, srv.URL+"/topics/orders")
	mustContain(t, page, "topic page", `class="partition warn"`, "under-replicated")
}

// TestConsoleGroupsActionsTail runs against one node: a group's lag, the
// actions with and without confirmation, and the tail stream.
func TestConsoleGroupsActionsTail(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 1)
	ctx := testCtx(t)
	c.WaitController(ctx)
	cl := newClient(t, c.Addr(1))
	srv := serve(t, c.Addr(1))
	if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: "events", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	c.WaitLeader(ctx, "events", 0)

	t.Run("lag", func(t *testing.T) {
		var recs []*client.Record
		for i := range 5 {
			recs = append(recs, &client.Record{Topic: "events", Value: fmt.Appendf(nil, "e%d", i), Timestamp: time.Now().Add(-time.Minute)})
		}
		if err := cl.ProduceSync(ctx, recs...); err != nil {
			t.Fatal(err)
		}
		if err := cl.CommitOffsets(ctx, "readers", client.OffsetCommit{Topic: "events", Partition: 0, Offset: 2, LeaderEpoch: -1}); err != nil {
			t.Fatal(err)
		}
		code, page := get(t, srv.URL+"/groups/readers")
		if code != http.StatusOK {
			t.Fatalf("group page: %d\n%s", code, page)
		}
		mustContain(t, page, "group page", `data-partition="events/0"`, `class="num committed">2<`, `class="num hw">5<`,
			`class="num lag">3<`, `class="num stable-lag">3<`, `id="total-lag">3<`, `id="lag-chart"`, `id="state">empty<`)
		// The record at the committed offset is a minute old.
		if !strings.Contains(page, `class="num lag-seconds">1m0s<`) && !strings.Contains(page, `class="num lag-seconds">1m1s<`) {
			i := strings.Index(page, "lag-seconds")
			t.Errorf("lag in seconds is not about a minute: %s", page[i:i+40])
		}
		_, page = get(t, srv.URL+"/groups")
		mustContain(t, page, "groups page", `data-group="readers"`, `class="num lag">3<`)
	})

	t.Run("reset", func(t *testing.T) {
		form := url.Values{"group": {"readers"}, "topic": {"events"}, "to": {"end"}}
		resp := post(t, srv.URL+"/actions/reset-offsets", form)
		if page := body(t, resp); resp.StatusCode != http.StatusOK || !strings.Contains(page, `name="confirm" value="yes"`) {
			t.Fatalf("unconfirmed reset: %d, no confirmation form\n%s", resp.StatusCode, page)
		}
		if got, _ := cl.FetchOffsets(ctx, "readers"); len(got) != 1 || got[0].Offset != 2 {
			t.Fatalf("offsets changed before confirmation: %+v", got)
		}
		form.Set("confirm", "yes")
		resp = post(t, srv.URL+"/actions/reset-offsets", form)
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("confirmed reset: %d\n%s", resp.StatusCode, body(t, resp))
		}
		if got, err := cl.FetchOffsets(ctx, "readers"); err != nil || len(got) != 1 || got[0].Offset != 5 {
			t.Fatalf("offsets after reset to end: %+v, %v", got, err)
		}
		_, page := get(t, srv.URL+"/groups/readers")
		mustContain(t, page, "group page after reset", `class="num lag">0<`)
	})

	t.Run("members", func(t *testing.T) {
		g, err := cl.NewGroupConsumer(client.GroupConfig{Group: "live", Topics: []string{"events"}})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close(ctx)
		poll.Until(t, "the member on the group page", func() error {
			code, page := get(t, srv.URL+"/groups/live")
			if code != http.StatusOK {
				return fmt.Errorf("%d", code)
			}
			for _, want := range []string{`<td class="mono">` + g.MemberID() + `</td>`, "<td>events [0]</td>", `id="state">stable<`} {
				if !strings.Contains(page, want) {
					return errors.New("no " + want)
				}
			}
			if strings.Contains(page, `action="/actions/reset-offsets"`) {
				return errors.New("a reset form for a group with a member")
			}
			return nil
		})
		// Its offsets cannot be reset while it has a member.
		resp := post(t, srv.URL+"/actions/reset-offsets", url.Values{"group": {"live"}, "topic": {"events"}, "to": {"start"}, "confirm": {"yes"}})
		if page := body(t, resp); resp.StatusCode == http.StatusSeeOther || !strings.Contains(page, "group live has members (1): only an empty group") {
			t.Fatalf("reset of a group with a member: %d\n%s", resp.StatusCode, page)
		}
	})

	t.Run("topic actions", func(t *testing.T) {
		form := url.Values{"name": {"made-here"}, "partitions": {"2"}, "replication_factor": {"1"}, "confirm": {"yes"}}
		resp := post(t, srv.URL+"/actions/create-topic", form)
		if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/topics/made-here?done=") {
			t.Fatalf("create: %d, Location %q\n%s", resp.StatusCode, resp.Header.Get("Location"), body(t, resp))
		}
		if n, err := cl.PartitionCount(ctx, "made-here"); err != nil || n != 2 {
			t.Fatalf("created topic: %d partitions, %v", n, err)
		}
		// Again: the broker's refusal, in its words, on the page.
		resp = post(t, srv.URL+"/actions/create-topic", form)
		page := body(t, resp)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(page, "TOPIC_ALREADY_EXISTS") {
			t.Fatalf("second create: %d\n%s", resp.StatusCode, page)
		}
		resp = post(t, srv.URL+"/actions/create-topic", url.Values{"name": {"x"}, "partitions": {"zero"}, "confirm": {"yes"}})
		if page := body(t, resp); resp.StatusCode != http.StatusBadRequest || !strings.Contains(page, `partitions must be a positive number, not &#34;zero&#34;`) {
			t.Fatalf("bad partitions: %d\n%s", resp.StatusCode, page)
		}

		resp = post(t, srv.URL+"/actions/add-partitions", url.Values{"name": {"made-here"}, "total": {"4"}, "confirm": {"yes"}})
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("add partitions: %d\n%s", resp.StatusCode, body(t, resp))
		}
		poll.Until(t, "4 partitions", func() error {
			if td, err := cl.DescribeTopics(ctx, "made-here"); err != nil || len(td) != 1 || len(td[0].Partitions) != 4 {
				return fmt.Errorf("%+v %v", td, err)
			}
			return nil
		})

		// Delete records: below each partition's HW, then refusals.
		var recs []*client.Record
		for i := range 8 {
			recs = append(recs, &client.Record{Topic: "made-here", Value: []byte(fmt.Sprint(i))})
		}
		if err := cl.ProduceSync(ctx, recs...); err != nil {
			t.Fatal(err)
		}
		resp = post(t, srv.URL+"/actions/delete-records", url.Values{"name": {"made-here"}, "before": {""}, "confirm": {"yes"}})
		if resp.StatusCode != http.StatusSeeOther || !strings.Contains(resp.Header.Get("Location"), "?done=") {
			t.Fatalf("delete records: %d\n%s", resp.StatusCode, body(t, resp))
		}
		resp.Body.Close()
		starts, err := cl.ListOffsets(ctx, "made-here", client.AtStart())
		if err != nil {
			t.Fatal(err)
		}
		ends, err := cl.ListOffsets(ctx, "made-here", client.AtEnd())
		if err != nil {
			t.Fatal(err)
		}
		if len(starts) != 4 || !maps.Equal(starts, ends) || sumOffsets(ends) != 8 {
			t.Fatalf("after deleting below the HW: starts %v, ends %v", starts, ends)
		}
		resp = post(t, srv.URL+"/actions/delete-records", url.Values{"name": {"made-here"}, "before": {"999"}, "confirm": {"yes"}})
		if page := body(t, resp); resp.StatusCode == http.StatusSeeOther || !strings.Contains(page, "OFFSET_OUT_OF_RANGE") {
			t.Fatalf("delete records above the HW: %d\n%s", resp.StatusCode, page)
		}
		resp = post(t, srv.URL+"/actions/delete-records", url.Values{"name": {"made-here"}, "before": {"-5"}, "confirm": {"yes"}})
		if page := body(t, resp); resp.StatusCode != http.StatusBadRequest || !strings.Contains(page, `the offset must be a non-negative number, not &#34;-5&#34;`) {
			t.Fatalf("delete records below -5: %d\n%s", resp.StatusCode, page)
		}

		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/actions/delete-topic", strings.NewReader("name=made-here&confirm=yes"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", "http://elsewhere.example")
		resp, err = noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("cross-origin delete: %d, want 403", resp.StatusCode)
		}
		resp = post(t, srv.URL+"/actions/delete-topic", url.Values{"name": {"made-here"}, "confirm": {"yes"}})
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("delete: %d\n%s", resp.StatusCode, body(t, resp))
		}
		code, page := get(t, srv.URL+"/topics/made-here")
		if code != http.StatusNotFound || !strings.Contains(page, "UNKNOWN_TOPIC_OR_PARTITION") {
			t.Fatalf("deleted topic's page: %d\n%s", code, page)
		}
	})

	t.Run("tail", func(t *testing.T) {
		tctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(tctx, http.MethodGet, srv.URL+"/api/tail/events?from=end", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
			t.Fatalf("content type %q", ct)
		}
		events := readEvents(resp.Body)
		ev := <-events
		if ev.name != "start" || ev.id != "0:5" {
			t.Fatalf("first event %+v, want start at 0:5", ev)
		}
		rec := &client.Record{Topic: "events", Key: []byte("k"), Value: []byte{0xff, 0x00, 0x10},
			Headers: []client.RecordHeader{{Key: "h", Value: []byte("v")}}}
		if err := cl.ProduceSync(ctx, rec); err != nil {
			t.Fatal(err)
		}
		ev = <-events
		if ev.name != "record" || ev.id != "0:6" {
			t.Fatalf("event %+v, want the record", ev)
		}
		var got struct {
			Offset int64
			Key    struct{ Text string }
			Value  struct {
				Text string
				Hex  bool
			}
			Headers []struct {
				Key   string
				Value struct{ Text string }
			}
		}
		if err := json.Unmarshal([]byte(ev.data), &got); err != nil {
			t.Fatal(err)
		}
		if got.Offset != 5 || got.Key.Text != "k" || got.Value.Text != "ff0010" || !got.Value.Hex ||
			len(got.Headers) != 1 || got.Headers[0].Key != "h" || got.Headers[0].Value.Text != "v" {
			t.Fatalf("record %s", ev.data)
		}

		// A page reconnecting with its last event id goes on from there.
		req, _ = http.NewRequestWithContext(tctx, http.MethodGet, srv.URL+"/api/tail/events", nil)
		req.Header.Set("Last-Event-ID", "0:3")
		resp2, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp2.Body.Close()
		events = readEvents(resp2.Body)
		if ev := <-events; ev.name != "start" || ev.id != "0:3" {
			t.Fatalf("resumed stream starts with %+v", ev)
		}
		for _, want := range []string{"0:4", "0:5", "0:6"} {
			if ev := <-events; ev.name != "record" || ev.id != want {
				t.Fatalf("resumed stream: %+v, want record %s", ev, want)
			}
		}

		// A topic that does not exist: the stream says so in words and
		// keeps trying.
		req, _ = http.NewRequestWithContext(tctx, http.MethodGet, srv.URL+"/api/tail/no-such-topic", nil)
		resp3, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp3.Body.Close()
		events = readEvents(resp3.Body)
		for range 2 {
			if ev := <-events; ev.name != "problem" || !strings.Contains(ev.data, "UNKNOWN_TOPIC_OR_PARTITION") {
				t.Fatalf("tail of an unknown topic: %+v", ev)
			}
		}

		code, page := get(t, srv.URL+"/api/tail/events?from=offset&offset=minus")
		if code != http.StatusBadRequest || !strings.Contains(page, `offset "minus" is not a non-negative number`) {
			t.Fatalf("bad offset: %d %s", code, page)
		}
	})

	t.Run("cluster lost", func(t *testing.T) {
		c.Stop(1)
		code, page := get(t, srv.URL+"/")
		if code != http.StatusBadGateway {
			t.Errorf("overview with the node stopped: %d, want 502", code)
		}
		mustContain(t, page, "overview with the node stopped", `role="alert"`, "cannot reach the cluster at ", "Trying again every", `data-refresh="5000"`, `class="stale"`)
		if strings.Contains(page, "Every partition has its full set of in-sync replicas") {
			t.Errorf("overview with the node stopped claims the partitions are healthy:\n%s", page)
		}
		c.Restart(1)
		poll.Until(t, "the overview once the node is back", func() error {
			if code, page := get(t, srv.URL+"/"); code != http.StatusOK || !strings.Contains(page, `id="n-brokers">1<`) {
				return fmt.Errorf("%d", code)
			}
			return nil
		})
	})
}

type event struct{ name, id, data string }

// readEvents parses a server-sent event stream; the channel closes with
// the stream.
func readEvents(r io.Reader) <-chan event {
	out := make(chan event, 16)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(r)
		var ev event
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.name != "" {
					out <- ev
				}
				ev = event{}
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "id: "):
				ev.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "data: "):
				ev.data = strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	return out
}

// TestConsoleClusterUnreachable: with no cluster to talk to, every page
// says so in words and refreshes itself to try again.
func TestConsoleClusterUnreachable(t *testing.T) {
	t.Parallel()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close() // nothing listens there now
	srv := serve(t, addr)
	for _, path := range []string{"/", "/topics", "/topics/x", "/groups", "/groups/g"} {
		code, page := get(t, srv.URL+path)
		if code != http.StatusBadGateway {
			t.Errorf("%s: %d, want 502", path, code)
		}
		mustContain(t, page, path, "cannot reach the cluster at "+addr, `role="alert"`, `data-refresh="5000"`, "Trying again every")
	}
}

// sizeOf is a size as the topic page shows it (below 1 KiB).
func sizeOf(n int64) string { return fmt.Sprintf("%d B", n) }

func sumOffsets(m map[int32]int64) int64 {
	var n int64
	for _, o := range m {
		n += o
	}
	return n
}
