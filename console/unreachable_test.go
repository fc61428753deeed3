package console_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/quirelog/quire/client"
	"github.com/quirelog/quire/internal/poll"
	"github.com/quirelog/quire/testcluster"
)

// TestConsoleClusterGoneStale: once the only broker stops, the pages that
// showed the cluster say "cannot reach the cluster at …", show the last
// good view marked stale, and make no health claim (no green "every
// partition has its full set of in-sync replicas", no 0 brokers); when the
// broker is back, the pages are fresh again.
func TestConsoleClusterGoneStale(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 1)
	ctx := testCtx(t)
	c.WaitController(ctx)
	cl := newClient(t, c.Addr(1))
	if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: "events", Partitions: 2, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	c.WaitLeader(ctx, "events", 0)
	c.WaitLeader(ctx, "events", 1)
	cl.Close()
	srv := serve(t, c.Addr(1))

	const healthy = "Every partition has its full set of in-sync replicas"
	code, page := get(t, srv.URL+"/")
	if code != http.StatusOK {
		t.Fatalf("overview with the broker up: %d\n%s", code, page)
	}
	mustContain(t, page, "overview, broker up", healthy, `id="n-brokers">1<`, `id="n-partitions">2<`)
	for _, path := range []string{"/topics", "/topics/events", "/groups"} {
		if code, page := get(t, srv.URL+path); code != http.StatusOK || !strings.Contains(page, "events") && path != "/groups" {
			t.Fatalf("%s with the broker up: %d\n%s", path, code, page)
		}
	}

	c.Stop(1)
	for _, path := range []string{"/", "/topics", "/topics/events", "/groups"} {
		code, page := get(t, srv.URL+path)
		if code != http.StatusBadGateway {
			t.Errorf("%s with the broker stopped: %d, want 502", path, code)
		}
		mustContain(t, page, path+" with the broker stopped", "cannot reach the cluster at "+c.Addr(1), `role="alert"`, "Trying again every")
		for _, claim := range []string{healthy, `id="n-brokers">0<`, "0 brokers"} {
			if strings.Contains(page, claim) {
				t.Errorf("%s with the broker stopped claims %q:\n%s", path, claim, page)
			}
		}
		switch path {
		case "/":
			// The last good view, marked stale: the broker and the topic's
			// partitions as they were.
			mustContain(t, page, path+" stale", `class="stale"`, "last view", `id="n-brokers">1<`, `id="n-partitions">2<`)
		case "/topics", "/topics/events":
			mustContain(t, page, path+" stale", `class="stale"`, "last view", "events")
		}
	}

	c.Restart(1)
	poll.True(t, "the overview fresh again", func() bool {
		code, page := get(t, srv.URL+"/")
		return code == http.StatusOK && strings.Contains(page, healthy) && !strings.Contains(page, `class="stale"`)
	})
}

// TestConsoleNoController: with one of two controllers stopped the node
// asked knows no active controller; the overview says so, shows the
// brokers' states as unknown and makes no health claim.
func TestConsoleNoController(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 2)
	c.WaitController(testCtx(t))
	srv := serve(t, c.Addr(1))
	if code, page := get(t, srv.URL+"/"); code != http.StatusOK || strings.Contains(page, "no active controller") {
		t.Fatalf("overview with the quorum whole: %d\n%s", code, page)
	}
	c.Stop(2)
	var page string
	poll.True(t, "the overview to see no controller", func() bool {
		_, page = get(t, srv.URL+"/")
		return strings.Contains(page, "no active controller")
	})
	mustContain(t, page, "overview without a controller", `role="alert"`, "unknown (no controller)")
	for _, claim := range []string{"Every partition has its full set of in-sync replicas", "<td>serving</td>", "<td>fenced</td>"} {
		if strings.Contains(page, claim) {
			t.Errorf("overview without a controller claims %q", claim)
		}
	}
}
