package console

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/client"
)

func TestConsoleLagChart(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1000, 0)
	ch := lagChart([]lagSample{{t0, 0}, {t0.Add(5 * time.Second), 10}, {t0.Add(10 * time.Second), 5}}, t0.Add(10*time.Second))
	if ch.Points != "0.0,120.0 300.0,0.0 600.0,60.0" || ch.Max != 10 || ch.Last != 5 || ch.Span != "10s" {
		t.Fatalf("chart %+v", ch)
	}
	if ch := lagChart(nil, t0); ch.Samples != 0 || ch.Points != "" {
		t.Fatalf("empty chart %+v", ch)
	}
	if ch := lagChart([]lagSample{{t0, 0}}, t0); !strings.HasSuffix(ch.Points, " 600,120.0") {
		t.Fatalf("one sample of lag 0 is not a flat line at the bottom: %q", ch.Points)
	}
}

func TestConsoleLagHistory(t *testing.T) {
	t.Parallel()
	h := newLagHistory(3)
	t0 := time.Unix(1000, 0)
	h.add("g", t0, 1)
	h.add("g", t0.Add(100*time.Millisecond), 2) // within a second: replaces
	for i := int64(1); i <= 4; i++ {
		h.add("g", t0.Add(time.Duration(i)*time.Second), 10+i)
	}
	got := h.get("g")
	if len(got) != 3 || got[0].Lag != 12 || got[2].Lag != 14 {
		t.Fatalf("history %+v", got)
	}
	if len(h.get("other")) != 0 {
		t.Fatal("another group has samples")
	}
}

func TestConsoleTailPositions(t *testing.T) {
	t.Parallel()
	ps := positions{2: 7, 0: 3}
	if ps.String() != "0:3,2:7" {
		t.Fatalf("positions %q", ps.String())
	}
	back, ok := parsePositions(ps.String())
	if !ok || len(back) != 2 || back[0] != 3 || back[2] != 7 {
		t.Fatalf("parsed %v %v", back, ok)
	}
	for _, bad := range []string{"", "x", "0:-1", "-1:0", "0:1,", "0:1:2"} {
		if _, ok := parsePositions(bad); ok {
			t.Errorf("parsePositions(%q) accepted", bad)
		}
	}
}

func TestConsoleShowBytes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   []byte
		text string
		hex  bool
	}{
		{[]byte("héllo\tworld\n"), "héllo\tworld\n", false},
		{[]byte{0xff, 0x00}, "ff00", true},
		{[]byte("a\x00b"), "610062", true},
		{[]byte{}, "", false},
	} {
		got := show(c.in, false)
		if got.Text != c.text || got.Hex != c.hex {
			t.Errorf("show(%q) = %+v", c.in, got)
		}
	}
	if show(nil, true) != nil {
		t.Error("null is not nil")
	}
}

// TestConsoleCannotReachSaysItOnce: the line of an unreachable cluster
// names the brokers once, whatever error it comes from.
func TestConsoleCannotReachSaysItOnce(t *testing.T) {
	t.Parallel()
	c := &Console{cfg: Config{Brokers: []string{"a:1", "b:2"}}}
	for _, err := range []error{
		statusError(status.Error(codes.Unavailable, "connection refused")),
		fmt.Errorf("%w at a:1, b:2: dial failed", errCannotReach),
		context.DeadlineExceeded,
	} {
		if !unreachable(err) {
			t.Errorf("%v: not taken for an unreachable cluster", err)
		}
		msg := c.cannotReach(err)
		if !strings.HasPrefix(msg, "cannot reach the cluster at a:1, b:2") || strings.Count(msg, "cannot reach") != 1 {
			t.Errorf("%v: %q", err, msg)
		}
	}
	if unreachable(&client.Error{Code: quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, Message: "no topic"}) {
		t.Error("a broker's answer taken for an unreachable cluster")
	}
}

// TestConsoleKeepUpText: the throughput figures in words, a drain time
// of -1 told apart as not draining (every figure known, consumed no
// faster than produced) or unknown.
func TestConsoleKeepUpText(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   *quirev1.GroupThroughput
		want keepUp
	}{
		{"no answer", nil, keepUp{Consume: "–", Produce: "–", Lag: -1, Drain: "–", Needed: -1}},
		{"caught up", &quirev1.GroupThroughput{Lag: 0, ConsumeRate: 5, ProduceRate: 5, DrainSeconds: 0, Members: 1, Partitions: 3, MembersNeeded: 1},
			keepUp{Consume: "5/s", Produce: "5/s", Lag: 0, Drain: "caught up", Needed: 1, Members: 1, Partitions: 3}},
		{"draining", &quirev1.GroupThroughput{Lag: 1200, ConsumeRate: 350, ProduceRate: 300, DrainSeconds: 24, Members: 2, Partitions: 6, MembersNeeded: 2},
			keepUp{Consume: "350/s", Produce: "300/s", Lag: 1200, Drain: "24s", Needed: 2, Members: 2, Partitions: 6}},
		{"not draining", &quirev1.GroupThroughput{Lag: 90, ConsumeRate: 0.5, ProduceRate: 12500, DrainSeconds: -1, Members: 1, Partitions: 4, MembersNeeded: 4},
			keepUp{Consume: "0.5/s", Produce: "12.5k/s", Lag: 90, Drain: "not draining", Needed: 4, Members: 1, Partitions: 4, NotDraining: true, Short: true}},
		{"rates unknown", &quirev1.GroupThroughput{Lag: 90, ConsumeRate: -1, ProduceRate: -1, DrainSeconds: -1, Members: 1, Partitions: 4, MembersNeeded: -1},
			keepUp{Consume: "–", Produce: "–", Lag: 90, Drain: "–", Needed: -1, Members: 1, Partitions: 4}},
	} {
		if got := keepUpOf(tc.in); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
