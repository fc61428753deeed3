package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/broker/brokertest"
	"github.com/quirelog/quire/client"
)

// startGroupBroker starts a single broker with quick group timeouts and
// waits for the metadata level that has consumer groups.
func startGroupBroker(t *testing.T) *broker.Broker {
	t.Helper()
	br := brokertest.Start(t, func(c *broker.Config) {
		c.GroupConsumerSessionTimeoutMs, c.GroupConsumerHeartbeatIntervalMs = 3000, 100
	})
	brokertest.WaitMetadataVersion(t, br, 2)
	return br
}

// pollGroupErr polls g until Poll returns records or fails with
// something other than the poll's own deadline, and returns both.
func pollGroupErr(ctx context.Context, t *testing.T, g *client.GroupConsumer) ([]*client.Record, error) {
	t.Helper()
	var got []*client.Record
	for {
		pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		recs, err := g.Poll(pctx)
		cancel()
		got = append(got, recs...)
		if ctx.Err() != nil {
			t.Fatalf("no error from Poll (polled %d records, owns %v)", len(got), g.Assignment())
		}
		if len(got) > 0 || err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return got, err
		}
	}
}

// TestGroupConsumerOutOfRangeResetNone: a member with Reset NoReset whose
// committed offset is past the end of the log does not move elsewhere:
// Poll reports OFFSET_OUT_OF_RANGE naming the partition, the offset and
// the valid range, and keeps reporting it (nothing read) until the
// application Seeks; a Seek past the end is reported the same way. With
// the default Reset the same commit restarts at the log start.
func TestGroupConsumerOutOfRangeResetNone(t *testing.T) {
	t.Parallel()
	br := startGroupBroker(t)
	cl := newClient(t, br.Addr(), client.RecordPartitioner(client.ManualPartitioner()))
	ctx := testCtx(t)
	createTopic(t, cl, "goor", 1)
	produceTimed(t, cl, "goor", 3, time.Now())
	if err := cl.CommitOffsets(ctx, "none", client.OffsetCommit{Topic: "goor", Offset: 1000, LeaderEpoch: -1}); err != nil {
		t.Fatal(err)
	}
	g, err := cl.NewGroupConsumer(client.GroupConfig{Group: "none", Topics: []string{"goor"}, Reset: client.NoReset(), AutoCommitInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	wantOOR := func(what string, recs []*client.Record, err error, offset string) {
		t.Helper()
		if len(recs) != 0 {
			t.Fatalf("%s: polled %d records (from offset %d) with reset none", what, len(recs), recs[0].Offset)
		}
		if client.ErrorCode(err) != quirev1.ErrorCode_OFFSET_OUT_OF_RANGE || !strings.Contains(err.Error(), "goor/0") ||
			!strings.Contains(err.Error(), "offset "+offset+", valid offsets are 0 to 2 (log end 3)") {
			t.Fatalf("%s: Poll error %v, want OFFSET_OUT_OF_RANGE naming goor/0, offset %s and the range", what, err, offset)
		}
	}
	recs, err := pollGroupErr(ctx, t, g)
	wantOOR("committed offset past the end", recs, err, "1000")
	// Still not moved: reported again after the retry backoff.
	recs, err = pollGroupErr(ctx, t, g)
	wantOOR("again", recs, err, "1000")

	if err := g.Seek("goor", 0, 500); err != nil {
		t.Fatal(err)
	}
	recs, err = pollGroupErr(ctx, t, g)
	wantOOR("seek past the end", recs, err, "500")

	if err := g.Seek("goor", 0, 1); err != nil {
		t.Fatal(err)
	}
	var got []*client.Record
	pollUntil(ctx, t, g, &got, "records after a seek into the log", func([]error) bool { return len(got) >= 2 })
	if got[0].Offset != 1 || got[1].Offset != 2 || len(got) != 2 {
		t.Fatalf("after Seek to 1 polled %d records from %d, want offsets 1 and 2", len(got), got[0].Offset)
	}
	if err := g.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// The default reset (AtStart) restarts at the log start instead.
	if err := cl.CommitOffsets(ctx, "start", client.OffsetCommit{Topic: "goor", Offset: 1000, LeaderEpoch: -1}); err != nil {
		t.Fatal(err)
	}
	g2, err := cl.NewGroupConsumer(client.GroupConfig{Group: "start", Topics: []string{"goor"}, AutoCommitInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer g2.Close(ctx)
	got = nil
	pollUntil(ctx, t, g2, &got, "records after the reset to start", func([]error) bool { return len(got) >= 3 })
	if got[0].Offset != 0 {
		t.Fatalf("default reset: first offset %d, want 0", got[0].Offset)
	}
}
