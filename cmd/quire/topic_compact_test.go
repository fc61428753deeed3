package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/broker/brokertest"
	"github.com/quirelog/quire/client"
	"github.com/quirelog/quire/internal/poll"
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
	brokertest.WaitMetadataVersion(t, b, metadata.MetadataVersionCompaction)
	if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: "kv", Partitions: 1, Configs: map[string]string{"cleanup.policy": "compact,delete"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: "plain", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
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

// The Go client's consumer reads a compacted partition from its start
// across the gaps the cleaner left (and over empty batches) to the high
// watermark, and the records it gets rebuild the table written; and
// quire consume prints the same records.
func TestCLIConsumeCompacted(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, func(c *broker.Config) { c.LogCleanerBackoffMs = 20 })
	ctx, cl := testClient(t, b.Addr())
	brokertest.WaitMetadataVersion(t, b, metadata.MetadataVersionCompaction)
	if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: "kc", Partitions: 1, Configs: map[string]string{
		"cleanup.policy": "compact", "segment.bytes": "300", "min.cleanable.dirty.ratio": "0.01"}}); err != nil {
		t.Fatal(err)
	}
	table := map[string]string{}
	for i := 0; i < 120; i++ {
		r := client.StringRecord("kc", fmt.Sprint("v", i))
		r.Key = []byte(fmt.Sprint("k", i%7))
		if i%13 == 0 {
			r.Value = nil // a tombstone
			delete(table, string(r.Key))
		} else {
			table[string(r.Key)] = string(r.Value)
		}
		if err := cl.ProduceSync(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	read := func() (map[string]string, int, string) {
		cons, err := cl.NewConsumer(map[string]map[int32]client.Offset{"kc": {0: client.AtStart()}})
		if err != nil {
			t.Fatal(err)
		}
		defer cons.Close()
		got := map[string]string{}
		n, last := 0, int64(-1)
		var lines strings.Builder
		for last+1 < 120 {
			recs, err := cons.Poll(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				if r.Offset <= last {
					t.Fatalf("offset %d after %d", r.Offset, last)
				}
				last = r.Offset
				n++
				fmt.Fprintf(&lines, "%d %s %s\n", r.Offset, r.Key, r.Value)
				if r.Value == nil {
					delete(got, string(r.Key))
				} else {
					got[string(r.Key)] = string(r.Value)
				}
			}
		}
		return got, n, lines.String()
	}
	// Until the cleaner is done: nothing dirty left (no pass under way
	// or to come, so the reads below see the same records).
	poll.Until(t, "the cleaner to compact kc", func() error {
		ds, err := cl.DescribeTopics(ctx, "kc")
		if err != nil {
			return err
		}
		if r := ds[0].Partitions[0].DirtyRatio; r == nil || *r != 0 {
			return fmt.Errorf("dirty ratio %v", r)
		}
		if _, n, _ := read(); n >= 60 {
			return fmt.Errorf("%d records of 120 left", n)
		}
		return nil
	})
	got, n, lines := read()
	if len(got) != len(table) {
		t.Fatalf("rebuilt %v from %d records, wrote %v", got, n, table)
	}
	for k, v := range table {
		if got[k] != v {
			t.Fatalf("key %s: read %q, wrote %q last", k, got[k], v)
		}
	}
	var out bytes.Buffer
	if err := runCLI(&out, "--brokers", b.Addr(), "consume", "kc", "-o", "start", "-n", fmt.Sprint(n), "-f", "%o %k %v\n"); err != nil {
		t.Fatal(err)
	}
	if out.String() != lines {
		t.Fatalf("quire consume printed\n%s\nthe client read\n%s", out.String(), lines)
	}
}
