package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/quirelog/quire/broker/brokertest"
	"github.com/quirelog/quire/client"
	"github.com/quirelog/quire/metadata"
)

// `quire group delete-offsets` deletes the named partition's offset and
// keeps the others; an unknown group fails with GROUP_ID_NOT_FOUND, and
// no --topic is refused.
func TestCLIGroupDeleteOffsets(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	ctx, cl := testClient(t, b.Addr())
	if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: "do", Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	brokertest.WaitMetadataVersion(t, b, metadata.MetadataVersionDeleteOffsets)
	if err := cl.CommitOffsets(ctx, "dog", client.OffsetCommit{Topic: "do", Partition: 0, Offset: 1, LeaderEpoch: -1},
		client.OffsetCommit{Topic: "do", Partition: 1, Offset: 2, LeaderEpoch: -1}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := runCLI(&out, "--brokers", b.Addr(), "group", "delete-offsets", "dog", "--topic", "do", "--partition", "1", "--format", "json"); err != nil {
		t.Fatal(err)
	}
	var res []struct {
		Topic     string `json:"topic"`
		Partition int32  `json:"partition"`
		Status    string `json:"status"`
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil || len(res) != 1 || res[0].Partition != 1 || res[0].Status != "OK" {
		t.Fatalf("%v: %s", err, out.String())
	}
	left, err := cl.FetchOffsets(ctx, "dog")
	if err != nil || len(left) != 1 || left[0].Partition != 0 {
		t.Fatalf("offsets left: %v %+v", err, left)
	}
	if err := runCLI(&out, "--brokers", b.Addr(), "group", "delete-offsets", "nobody", "--topic", "do"); err == nil || !strings.Contains(err.Error(), "GROUP_ID_NOT_FOUND") {
		t.Fatalf("unknown group: %v", err)
	}
	if err := runCLI(&out, "--brokers", b.Addr(), "group", "delete-offsets", "dog"); err == nil || !strings.Contains(err.Error(), "--topic") {
		t.Fatalf("no --topic: %v", err)
	}
}
