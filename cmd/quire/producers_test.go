package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/quirelog/quire/broker/brokertest"
	"github.com/quirelog/quire/client"
)

// TestCLITopicDescribeProducers: after an idempotent produce, topic
// describe --producers lists the producer on the partition it wrote, with
// the last sequence and offset of its batch; bad input gets clear errors.
func TestCLITopicDescribeProducers(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	ctx, cl := testClient(t, b.Addr())
	if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: "prods", Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	var rs []*client.Record
	for i := range 10 { // keyless: all to one partition (sticky)
		rs = append(rs, &client.Record{Topic: "prods", Value: []byte(fmt.Sprint(i))})
	}
	if err := cl.ProduceSync(ctx, rs...); err != nil {
		t.Fatal(err)
	}
	out, _, err := runCLIStdin("", "--brokers", b.Addr(), "--format", "json", "topic", "describe", "--producers", "prods")
	if err != nil {
		t.Fatal(err)
	}
	var got []struct {
		Partition int32 `json:"partition"`
		Producers []struct {
			ProducerID    int64 `json:"producer_id"`
			ProducerEpoch int16 `json:"producer_epoch"`
			LastSequence  int32 `json:"last_sequence"`
			LastOffset    int64 `json:"last_offset"`
		} `json:"producers"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(got) != 2 || got[0].Partition != 0 || got[1].Partition != 1 || len(got[0].Producers)+len(got[1].Producers) != 1 {
		t.Fatalf("want one producer on one of the two partitions: %s", out)
	}
	written := got[0]
	if len(written.Producers) == 0 {
		written = got[1]
	}
	if p := written.Producers[0]; p.ProducerID < 0 || p.LastSequence != 9 || p.LastOffset != 9 {
		t.Fatalf("partition %d's producer: %+v, want last sequence 9 at offset 9", written.Partition, p)
	}
	out, _, err = runCLIStdin("", "--brokers", b.Addr(), "topic", "describe", "--producers", "prods", "--partition", fmt.Sprint(written.Partition))
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 2 || !strings.Contains(lines[0], "PRODUCER-ID") ||
		!strings.HasPrefix(lines[1], fmt.Sprint(written.Partition)+" ") || !strings.HasSuffix(lines[1], " 9") {
		t.Fatalf("table: %q", out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"nope"}, `topic "nope" does not exist`},
		{[]string{"prods", "--partition", "2"}, "no partition 2 in topic prods, which has 2 (0 to 1)"},
		{[]string{"prods", "--partition", "-1"}, "no partition -1 in topic prods"},
	} {
		args := append([]string{"--brokers", b.Addr(), "topic", "describe", "--producers"}, tc.args...)
		out, _, err := runCLIStdin("", args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: printed %q, error %v; want an error with %q", tc.args, out, err, tc.want)
		}
	}
}
