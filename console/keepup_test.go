package console_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"testing"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/client"
	"github.com/quirelog/quire/internal/poll"
	"github.com/quirelog/quire/testcluster"
)

var keepUpTable = regexp.MustCompile(`(?s)<table id="(keep-up|groups)">.*?</table>`)

// TestConsoleGroupKeepUp: the group page and the group list show the
// coordinator's throughput figures for a group whose member commits:
// while it commits one record for every two produced, rates, a lag
// that does not drain and two members needed (the partition count);
// once it commits three for every one produced, a time to drain and
// one member needed.
func TestConsoleGroupKeepUp(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 1, testcluster.Config(func(_ int32, cfg *broker.Config) {
		cfg.GroupLagRefreshMs = 50
		cfg.GroupConsumerSessionTimeoutMs = 30000
		cfg.GroupConsumerHeartbeatIntervalMs = 100
	}))
	ctx := testCtx(t)
	c.WaitController(ctx)
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	cl, err := client.New(cctx, client.SeedBrokers(c.Addr(1)), client.Linger(0), client.RecordPartitioner(client.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	srv := serve(t, c.Addr(1))
	if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: "grow", Partitions: 2, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	c.WaitLeader(ctx, "grow", 0)
	c.WaitLeader(ctx, "grow", 1)
	produce := func(n int) error {
		recs := make([]*client.Record, n)
		for i := range recs {
			recs[i] = &client.Record{Topic: "grow", Partition: 0, Value: []byte("v")}
		}
		return cl.ProduceSync(ctx, recs...)
	}
	// A backlog the draining phase below cannot use up.
	if err := produce(2000); err != nil {
		t.Fatal(err)
	}
	g, err := cl.NewGroupConsumer(client.GroupConfig{Group: "scale", Topics: []string{"grow"}, AutoCommitInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = g.Leave(context.Background()) }()
	poll.Until(t, "the member owning both partitions", func() error {
		if n := len(g.Assignment()); n != 2 {
			return fmt.Errorf("the member owns %d partitions", n)
		}
		return nil
	})
	groups := quirev1.NewGroupsClient(c.Conn(1))
	committed := int64(0)
	// step produces p records and commits c more, as the member.
	step := func(p int, n int64) error {
		if err := produce(p); err != nil {
			return err
		}
		_, err := groups.CommitOffsets(ctx, &quirev1.CommitOffsetsRequest{Group: "scale", MemberId: g.MemberID(), MemberEpoch: g.Epoch(),
			Offsets: []*quirev1.OffsetCommit{{Topic: "grow", Partition: 0, Offset: committed + n}}})
		if err != nil {
			return fmt.Errorf("commit: %w", err)
		}
		committed += n
		return nil
	}
	page := func(path string) (string, error) {
		code, page := get(t, srv.URL+path)
		if code != http.StatusOK {
			return "", fmt.Errorf("%s: %d\n%s", path, code, page)
		}
		return page, nil
	}
	has := func(page string, wants ...string) error {
		for _, w := range wants {
			if !regexp.MustCompile(w).MatchString(page) {
				return fmt.Errorf("no %s in %s", w, keepUpTable.FindString(page))
			}
		}
		return nil
	}
	rate := `[0-9][0-9.]*[kM]?/s<`

	poll.Until(t, "a group falling behind: not draining, two members needed", func() error {
		if err := step(2, 1); err != nil {
			return err
		}
		p, err := page("/groups/scale")
		if err != nil {
			return err
		}
		if err := has(p, `id="consume-rate">`+rate, `id="produce-rate">`+rate, `id="keep-up-lag">[1-9][0-9]*<`,
			`id="drain">not draining<`, `id="members-needed">2<`, `id="members-now">1<`, `id="partitions">2<`); err != nil {
			return err
		}
		if p, err = page("/groups"); err != nil {
			return err
		}
		return has(p, `data-group="scale"`, `class="num consume-rate">`+rate, `class="num drain warn-text">not draining<`,
			`class="num members-needed warn-text">2<`)
	})

	poll.Until(t, "a group draining its lag: a time to drain, one member needed", func() error {
		if err := step(1, 3); err != nil {
			return err
		}
		p, err := page("/groups/scale")
		if err != nil {
			return err
		}
		return has(p, `id="consume-rate">`+rate, `id="produce-rate">`+rate,
			`id="drain">([0-9.]+ s|[0-9hms]+)<`, `id="members-needed">1<`, `id="members-now">1<`)
	})
}
