package console_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/quirelog/quire/client"
	"github.com/quirelog/quire/testcluster"
)

var recordRow = regexp.MustCompile(`data-record="(\d+/\d+)"`)

// rowsOf returns the records a messages page shows, in order.
func rowsOf(page string) []string {
	var out []string
	for _, m := range recordRow.FindAllStringSubmatch(page, -1) {
		out = append(out, m[1])
	}
	return out
}

var linkRe = regexp.MustCompile(`<a href="([^"]+)" id="(older|newer)">`)

func linkOf(page, which string) string {
	for _, m := range linkRe.FindAllStringSubmatch(page, -1) {
		if m[2] == which {
			return html.UnescapeString(m[1])
		}
	}
	return ""
}

// rec names record i of the browse test: partition i%3, offset i/3.
func rec(i int) string { return fmt.Sprintf("%d/%d", i%3, i/3) }

func recs(is ...int) []string {
	out := make([]string, len(is))
	for j, i := range is {
		out[j] = rec(i)
	}
	return out
}

func span(from, to int) []int { // from down or up to to, inclusive
	var out []int
	step := 1
	if to < from {
		step = -1
	}
	for i := from; ; i += step {
		out = append(out, i)
		if i == to {
			return out
		}
	}
}

// TestConsoleMessages: the message browser pages both ways through a
// topic's records without a gap or a repeat, starts at the newest, an
// offset or a timestamp, filters by key, header and value; a record's
// page shows its headers and its value as JSON, UTF-8 or hex; the
// produce form produces after its confirmation.
func TestConsoleMessages(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 1)
	ctx := testCtx(t)
	c.WaitController(ctx)
	cl := newClient(t, c.Addr(1))
	if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: "browse", Partitions: 3, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 3; p++ {
		c.WaitLeader(ctx, "browse", p)
	}
	// Record i: partition i%3, a second after record i-1.
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	var rs []*client.Record
	for i := range 30 {
		r := &client.Record{Topic: "browse", Partition: int32(i % 3), Key: fmt.Appendf(nil, "k%d", i),
			Value: fmt.Appendf(nil, `{"n":%d,"name":"v-%d"}`, i, i), Timestamp: base.Add(time.Duration(i) * time.Second)}
		if i%5 == 0 {
			r.Headers = []client.RecordHeader{{Key: "kind", Value: []byte("five")}}
		}
		rs = append(rs, r)
	}
	mc := newManualClient(t, c.Addr(1))
	for _, r := range rs { // one at a time: offsets in the order above
		if err := mc.ProduceSync(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	srv := serve(t, c.Addr(1))
	u := srv.URL + "/topics/browse/messages"

	show := func(query string) []string {
		t.Helper()
		code, page := get(t, u+query)
		if code != http.StatusOK {
			t.Fatalf("%s: %d\n%s", query, code, page)
		}
		return rowsOf(page)
	}
	same := func(what string, got, want []string) {
		t.Helper()
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s: records %v, want %v", what, got, want)
		}
	}
	same("newest", show(""), recs(span(29, 0)...))

	// Pages of 7 back from the newest, then forward again: every record
	// once, in order.
	var seen []string
	next := u + "?limit=7"
	for pages := 0; next != ""; pages++ {
		if pages > 10 {
			t.Fatal("more than 10 pages of 7 for 30 records")
		}
		code, page := get(t, next)
		if code != http.StatusOK {
			t.Fatalf("%s: %d", next, code)
		}
		rows := rowsOf(page)
		if len(rows) == 0 && linkOf(page, "older") != "" {
			t.Fatalf("an empty page with an older link: %s", next)
		}
		seen = append(seen, rows...)
		next = linkOf(page, "older")
		if next != "" {
			next = srv.URL + next
		}
	}
	same("paged back from the newest", seen, recs(span(29, 0)...))
	seen = nil
	next = u + "?limit=8&from=oldest"
	for pages := 0; next != ""; pages++ {
		if pages > 10 {
			t.Fatal("more than 10 pages of 8 for 30 records")
		}
		_, page := get(t, next)
		seen = append(seen, rowsOf(page)...)
		next = linkOf(page, "newer")
		if next != "" {
			next = srv.URL + next
		}
	}
	same("paged forward from the oldest", seen, recs(span(0, 29)...))

	// An older page's newer link comes back to the newest.
	_, page := get(t, u+"?limit=10")
	_, older := get(t, srv.URL+linkOf(page, "older"))
	same("the second page", rowsOf(older), recs(span(19, 10)...))
	_, newer := get(t, srv.URL+linkOf(older, "newer"))
	same("newer than the second page", rowsOf(newer), recs(span(20, 29)...))

	same("key k17", show("?key=k17"), recs(17))
	same("key k17 in partition 1", show("?key=k17&partition=1"), nil)
	same("header kind=five", show("?header=kind%3Dfive&from=oldest"), recs(0, 5, 10, 15, 20, 25))
	same("header kind", show("?header=kind&limit=2"), recs(25, 20))
	same("value v-2", show("?value=v-2&from=oldest"), recs(append([]int{2}, span(20, 29)...)...))
	ts := url.QueryEscape(base.Add(25 * time.Second).UTC().Format("2006-01-02 15:04:05"))
	same("from a timestamp", show("?from=timestamp&ts="+ts), recs(span(25, 29)...))
	same("from a timestamp in ms", show(fmt.Sprintf("?from=timestamp&ts=%d", base.Add(27*time.Second).UnixMilli())), recs(27, 28, 29))
	same("partition 1 from offset 8", show("?partition=1&from=offset&offset=8"), recs(25, 28))

	for _, bad := range []struct{ query, want string }{
		{"?from=timestamp&ts=yesterday", `timestamp &#34;yesterday&#34;: give RFC 3339`},
		{"?from=offset&offset=-1", `offset &#34;-1&#34; is not a non-negative number`},
		{"?partition=x", `partition &#34;x&#34; is not a partition number`},
		{"?dir=older&pos=garbage", `pos &#34;garbage&#34;`},
		{"?limit=100000", `limit &#34;100000&#34;: give a number from 1 to 200`},
	} {
		code, page := get(t, u+bad.query)
		if code != http.StatusBadRequest || !strings.Contains(page, bad.want) {
			t.Errorf("%s: %d, want 400 saying %s\n%s", bad.query, code, bad.want, page)
		}
	}
	if code, page := get(t, u+"?partition=7"); code != http.StatusNotFound || !strings.Contains(page, "topic browse has 3 partitions: no partition 7") {
		t.Errorf("partition 7: %d\n%s", code, page)
	}
	if code, page := get(t, srv.URL+"/topics/nothing/messages"); code != http.StatusNotFound || !strings.Contains(page, "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Errorf("unknown topic: %d\n%s", code, page)
	}

	// Record 17's page: key, header-less, value as pretty JSON, UTF-8, hex.
	code, page := get(t, srv.URL+"/topics/browse/messages/2/5")
	if code != http.StatusOK {
		t.Fatalf("record 2/5: %d\n%s", code, page)
	}
	mustContain(t, page, "record 2/5", `<code class="utf8">k17</code>`, `data-as="json"`, "{\n  &#34;n&#34;: 17,\n  &#34;name&#34;: &#34;v-17&#34;\n}", "No headers.")
	_, page = get(t, srv.URL+"/topics/browse/messages/2/5?as=hex")
	mustContain(t, page, "record 2/5 as hex", `data-as="hex"`, "00000000  7b 22 6e 22 3a 31 37 2c")
	_, page = get(t, srv.URL+"/topics/browse/messages/2/5?as=utf8")
	mustContain(t, page, "record 2/5 as UTF-8", `data-as="utf8">{&#34;n&#34;:17,&#34;name&#34;:&#34;v-17&#34;}<`)
	_, page = get(t, srv.URL+"/topics/browse/messages/0/5") // record 15: a header
	mustContain(t, page, "record 0/5", `<tr class="header"><td>kind</td><td class="">five</td></tr>`)
	if code, page := get(t, srv.URL+"/topics/browse/messages/0/99"); code != http.StatusNotFound || !strings.Contains(page, "OFFSET_OUT_OF_RANGE") {
		t.Errorf("record 0/99: %d\n%s", code, page)
	}

	// Produce from the form: a confirmation first, then the record.
	form := url.Values{"topic": {"browse"}, "partition": {"1"}, "key": {"made"}, "value": {"\xff\x00 binary"},
		"headers": {"source=console\ntrace=abc"}}
	resp := post(t, srv.URL+"/actions/produce", form)
	if page := body(t, resp); resp.StatusCode != http.StatusOK || !strings.Contains(page, `name="confirm" value="yes"`) ||
		!strings.Contains(page, "partition 1, with key &#34;made&#34;, a value of 9 bytes and 2 headers") {
		t.Fatalf("unconfirmed produce: %d\n%s", resp.StatusCode, page)
	}
	if got := show("?partition=1&key=made"); len(got) != 0 {
		t.Fatalf("a record before the confirmation: %v", got)
	}
	form.Set("confirm", "yes")
	resp = post(t, srv.URL+"/actions/produce", form)
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/topics/browse/messages?partition=1&from=offset&offset=10&done=") {
		t.Fatalf("confirmed produce: %d, Location %q\n%s", resp.StatusCode, loc, body(t, resp))
	}
	same("the produced record", show("?partition=1&key=made"), []string{"1/10"})
	_, page = get(t, srv.URL+"/topics/browse/messages/1/10")
	mustContain(t, page, "the produced record", `data-as="hex"`, "ff 00 20 62 69 6e 61 72 79", "<td>source</td><td class=\"\">console</td>", "<td>trace</td>")
	_, page = get(t, srv.URL+"/topics/browse/messages/1/10?as=json")
	mustContain(t, page, "binary as JSON", `id="value-error">not JSON`)

	resp = post(t, srv.URL+"/actions/produce", url.Values{"topic": {"browse"}, "value": {"v"}, "headers": {"=nameless"}, "confirm": {"yes"}})
	if page := body(t, resp); resp.StatusCode != http.StatusBadRequest || !strings.Contains(page, "header line 1 (&#34;=nameless&#34;) has no name") ||
		strings.Contains(page, `name="confirm" value="yes"`) {
		t.Fatalf("a header without a name: %d\n%s", resp.StatusCode, page)
	}
	resp = post(t, srv.URL+"/actions/produce", url.Values{"topic": {"browse"}, "partition": {"9"}, "value": {"v"}, "confirm": {"yes"}})
	if page := body(t, resp); resp.StatusCode == http.StatusSeeOther || !strings.Contains(page, "browse/9") {
		t.Fatalf("produce to partition 9 of 3: %d\n%s", resp.StatusCode, page)
	}
}

// newManualClient is a client that produces each record to the partition
// it names.
func newManualClient(t *testing.T, addr string) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cl, err := client.New(ctx, client.SeedBrokers(addr), client.Linger(0), client.RecordPartitioner(client.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}
