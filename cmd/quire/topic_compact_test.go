package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/quirelog/quire/broker/brokertest"
	"github.com/quirelog/quire/client"
	"github.com/quirelog/quire/metadata"
)

// TestCLITopicDescribeCompacted: topic describe shows a topic's
// cleanup.policy, and for a compacted topic each partition's dirty ratio,
// in the table and in --format json; a topic that is not compacted shows
// no dirty ratio.
func TestCLITopicDescribeCompacted(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	ctx, cl := testClient(t, b.Addr())
	if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: "kv", Partitions: 1, Configs: map[string]string{"cleanup.policy": "compact,delete"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: "plain", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	brokertest.WaitMetadataVersion(t, b, metadata.MetadataVersionProducerIDs)
	for i := 0; i < 3; i++ {
		r := client.StringRecord("kv", fmt.Sprint("v", i))
		r.Key = []byte("k")
		if err := cl.ProduceSync(ctx, r); err != nil {
			t.Fatal(err)
		}
	}

	var out bytes.Buffer
	if err := runCLI(&out, "--brokers", b.Addr(), "topic", "describe", "kv"); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "CLEANUP     compact,delete") || !strings.Contains(s, "DIRTY-RATIO") {
		t.Fatalf("describe kv:\n%s", s)
	}
	out.Reset()
	if err := runCLI(&out, "--brokers", b.Addr(), "topic", "describe", "kv", "--format", "json"); err != nil {
		t.Fatal(err)
	}
	var js struct {
		CleanupPolicy string `json:"cleanup_policy"`
		Partitions    []struct {
			DirtyRatio *float64 `json:"dirty_ratio"`
		} `json:"partitions"`
	}
	if err := json.Unmarshal(out.Bytes(), &js); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if js.CleanupPolicy != "compact,delete" || len(js.Partitions) != 1 || js.Partitions[0].DirtyRatio == nil {
		t.Fatalf("describe kv as json: %s", out.String())
	}
	out.Reset()
	if err := runCLI(&out, "--brokers", b.Addr(), "topic", "describe", "plain"); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "CLEANUP     delete") || strings.Contains(s, "DIRTY-RATIO") {
		t.Fatalf("describe plain:\n%s", s)
	}
}
