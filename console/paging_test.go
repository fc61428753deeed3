package console_test

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/quirelog/quire/client"
	"github.com/quirelog/quire/testcluster"
)

var topicRowRe = regexp.MustCompile(`data-topic="([^"]+)"`)

// TestConsoleTopicsPaged: the topic and group lists come a page of 50 at
// a time, in name order, with links to the next and previous pages and a
// name filter; the overview still counts every topic.
func TestConsoleTopicsPaged(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 1)
	ctx := testCtx(t)
	c.WaitController(ctx)
	cl := newClient(t, c.Addr(1))
	const n = 55
	for i := range n {
		if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: fmt.Sprintf("t%02d", i), Partitions: 1, ReplicationFactor: 1}); err != nil {
			t.Fatal(err)
		}
		if err := cl.CommitOffsets(ctx, fmt.Sprintf("g%02d", i), client.OffsetCommit{Topic: fmt.Sprintf("t%02d", i), Partition: 0, Offset: 0, LeaderEpoch: -1}); err != nil {
			t.Fatal(err)
		}
	}
	srv := serve(t, c.Addr(1))
	rows := func(path string) ([]string, string) {
		t.Helper()
		code, page := get(t, srv.URL+path)
		if code != http.StatusOK {
			t.Fatalf("%s: %d\n%s", path, code, page)
		}
		var out []string
		for _, m := range topicRowRe.FindAllStringSubmatch(page, -1) {
			out = append(out, m[1])
		}
		return out, page
	}
	first, page := rows("/topics")
	if len(first) != 50 || first[0] != "t00" || first[49] != "t49" {
		t.Fatalf("first page: %v", first)
	}
	mustContain(t, page, "first page", "page 1 of 2 (55)", `<a href="/topics?page=2" id="next-page">`)
	second, page := rows("/topics?page=2")
	if strings.Join(second, " ") != "t50 t51 t52 t53 t54" {
		t.Fatalf("second page: %v", second)
	}
	mustContain(t, page, "second page", `<a href="/topics?page=1" id="prev-page">`, "<td>1</td><td>1</td>\n  <td>0</td><td>0</td><td>0</td>")
	if got, _ := rows("/topics?q=5"); strings.Join(got, " ") != "t05 t15 t25 t35 t45 t50 t51 t52 t53 t54" {
		t.Fatalf("filtered: %v", got)
	}
	_, page = get(t, srv.URL+"/")
	mustContain(t, page, "overview", fmt.Sprintf(`id="n-topics">%d<`, n))

	groupRe := regexp.MustCompile(`data-group="([^"]+)"`)
	_, page = get(t, srv.URL+"/groups?page=2")
	var groups []string
	for _, m := range groupRe.FindAllStringSubmatch(page, -1) {
		groups = append(groups, m[1])
	}
	if strings.Join(groups, " ") != "g50 g51 g52 g53 g54" {
		t.Fatalf("groups page 2: %v", groups)
	}
	mustContain(t, page, "groups page 2", "page 2 of 2 (55)")
}
