package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/quirelog/quire/broker/brokertest"
	"github.com/quirelog/quire/client"
)

// `quire topic elect-leaders` on a node leading its partitions reports
// each as already led by its preferred replica and succeeds; an unknown
// topic fails naming UNKNOWN_TOPIC_OR_PARTITION.
func TestCLITopicElectLeaders(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	ctx, cl := testClient(t, b.Addr())
	if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: "te", Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := runCLI(&out, "--brokers", b.Addr(), "topic", "elect-leaders", "te"); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), "already led by its preferred replica"); n != 2 {
		t.Fatalf("%d partitions reported already led, want 2: %s", n, out.String())
	}
	if err := runCLI(&out, "--brokers", b.Addr(), "topic", "elect-leaders", "tnone"); err == nil || !strings.Contains(err.Error(), "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Fatalf("unknown topic: %v", err)
	}
}
