package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/quirelog/quire/broker/brokertest"
	"github.com/quirelog/quire/client"
)

// TestCLITopicDeleteRecords: --before N on one partition, hw on all,
// each partition's new log start printed; refusals make the command fail
// with the partition's reason in its row; bad flags are refused before
// anything is asked.
func TestCLITopicDeleteRecords(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	ctx, cl := testClient(t, b.Addr())
	if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: "dr", Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	manual, err := client.New(ctx, client.SeedBrokers(b.Addr()), client.RecordPartitioner(client.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer manual.Close()
	var rs []*client.Record
	for i := range 10 { // 5 to each partition
		rs = append(rs, &client.Record{Topic: "dr", Partition: int32(i % 2), Value: []byte(fmt.Sprint(i))})
	}
	if err := manual.ProduceSync(ctx, rs...); err != nil {
		t.Fatal(err)
	}
	cli := func(args ...string) (string, error) {
		out, _, err := runCLIStdin("", append([]string{"--brokers", b.Addr()}, args...)...)
		return out, err
	}

	out, err := cli("topic", "delete-records", "dr", "--partition", "1", "--before", "2")
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 2 || strings.Join(strings.Fields(lines[1]), " ") != "1 2 OK" {
		t.Fatalf("table: %q", out)
	}
	out, err = cli("--format", "json", "topic", "delete-records", "dr", "--before", "hw")
	if err != nil {
		t.Fatal(err)
	}
	var got []struct {
		Partition    int32  `json:"partition"`
		LowWatermark int64  `json:"low_watermark"`
		Error        string `json:"error"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(got) != 2 || got[0].LowWatermark != 5 || got[1].LowWatermark != 5 || got[0].Error != "" || got[1].Error != "" {
		t.Fatalf("--before hw on both partitions: %s", out)
	}
	starts, err := cl.ListOffsets(ctx, "dr", client.AtStart())
	if err != nil || starts[0] != 5 || starts[1] != 5 {
		t.Fatalf("log starts after the deletion: %v, %v", starts, err)
	}

	out, err = cli("topic", "delete-records", "dr", "--partition", "0,5", "--before", "9")
	if err == nil || !strings.Contains(err.Error(), "2 of 2 partitions of dr not done") ||
		!strings.Contains(out, "above the high watermark 5") || !strings.Contains(out, "partition 5 of topic \"dr\" (it has 2)") {
		t.Fatalf("above the HW and a partition that does not exist: printed %q, error %v", out, err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"dr"}, "--before is required"},
		{[]string{"dr", "--before", "-3"}, `--before "-3": want an offset (0 or more) or hw`},
		{[]string{"dr", "--before", "soon"}, `--before "soon"`},
		{[]string{"nope", "--before", "1"}, `topic "nope" does not exist`},
	} {
		out, err := cli(append([]string{"topic", "delete-records"}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: printed %q, error %v; want an error with %q", tc.args, out, err, tc.want)
		}
	}
}
