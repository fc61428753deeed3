package console_test

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/quirelog/quire/client"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/testcluster"
)

var bytesLeftRE = regexp.MustCompile(`data-broker="(\d+)">broker \d+: [^/]+ / <span class="bytes-left">([^<]+)</span>`)

// TestConsoleMoves: a move held back by a one-byte-a-second throttle is
// listed on the moves page with its replicas, the broker being added and
// the bytes it has still to fetch; with the throttle lifted it completes
// and leaves the page.
func TestConsoleMoves(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 3)
	ctx := testCtx(t)
	c.WaitController(ctx)
	c.WaitMetadataVersion(ctx, metadata.MetadataVersionReassignment)
	cl := newClient(t, c.Addr(1), c.Addr(2))
	if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: "moving", Partitions: 1, ReplicationFactor: 2}); err != nil {
		t.Fatal(err)
	}
	c.WaitLeader(ctx, "moving", 0)
	// One batch a record: a throttled replica's fetch takes at least
	// one whole batch, so records written as one batch could all be
	// copied by its first fetch and leave no bytes to show.
	for i := range 64 {
		rec := &client.Record{Topic: "moving", Partition: 0, Value: []byte(strings.Repeat(fmt.Sprint(i%10), 1024))}
		if err := cl.ProduceSync(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	srv := serve(t, c.Addr(1), c.Addr(2), c.Addr(3))
	code, page := get(t, srv.URL+"/moves")
	if code != http.StatusOK {
		t.Fatalf("moves: %d\n%s", code, page)
	}
	mustContain(t, page, "moves page", `href="/moves" class="on">Moves<`, `id="n-moves">0<`, "No partition is being reassigned.")

	p, _ := c.Image(1).Partition("moving", 0)
	var added int32
	for _, id := range c.IDs() {
		if !slices.Contains(p.Replicas, id) {
			added = id
		}
	}
	to := []int32{p.Replicas[0], added}
	if err := cl.SetReassignmentThrottle(ctx, 1, false); err != nil {
		t.Fatal(err)
	}
	if err := cl.AlterPartitionReassignments(ctx, []client.ReassignmentTarget{{Topic: "moving", Partition: 0, Replicas: to}}); err != nil {
		t.Fatal(err)
	}
	// The new replica is created and its broker answers for it: its
	// bytes left are the leader's log, less the little the throttle let
	// through.
	c.Eventually(ctx, "the move on the moves page with the bytes left", func() error {
		_, page = get(t, srv.URL+"/moves")
		if !strings.Contains(page, `id="n-moves">1<`) || !strings.Contains(page, `data-topic="moving" data-partition="0"`) {
			return fmt.Errorf("no move listed:\n%s", page)
		}
		m := bytesLeftRE.FindStringSubmatch(page)
		if m == nil {
			return fmt.Errorf("no adding replica listed:\n%s", page)
		}
		if m[1] != fmt.Sprint(added) {
			return fmt.Errorf("adding broker %s, want %d", m[1], added)
		}
		if m[2] == "–" || m[2] == "0 B" {
			return fmt.Errorf("bytes left %q", m[2])
		}
		return nil
	})
	mustContain(t, page, "moves page", fmt.Sprintf(`<td class="adding">%d</td><td class="removing">%d</td>`, added, p.Replicas[1]),
		`KiB</b>`)
	pending, err := cl.ListPartitionReassignments(ctx, "moving")
	if err != nil || len(pending) != 1 || len(pending[0].Adding) != 1 {
		t.Fatalf("pending %+v %v", pending, err)
	}
	if a := pending[0].Adding[0]; a.BrokerID != added || a.BytesLeft <= 0 || a.BytesLeft > pending[0].LeaderSizeBytes ||
		a.BytesLeft != pending[0].LeaderSizeBytes-a.SizeBytes {
		t.Fatalf("adding replica %+v, leader's log %d bytes", a, pending[0].LeaderSizeBytes)
	}

	if err := cl.SetReassignmentThrottle(ctx, 0, true); err != nil {
		t.Fatal(err)
	}
	c.Eventually(ctx, "the move completed and gone from the moves page", func() error {
		_, page = get(t, srv.URL+"/moves")
		if !strings.Contains(page, "No partition is being reassigned.") {
			return fmt.Errorf("still listed:\n%s", page)
		}
		return nil
	})
	if p, _ := c.Image(1).Partition("moving", 0); !slices.Equal(p.Replicas, to) {
		t.Fatalf("replicas %v after the move, want %v", p.Replicas, to)
	}
}
