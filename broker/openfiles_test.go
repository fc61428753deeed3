package broker_test

import (
	"fmt"
	"testing"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

// TestBrokerServesMorePartitionsThanItKeepsFilesOpen: with
// log.open.files.max at its least (16), a node hosting 20 partitions of 3
// segments each (180 segment files) takes produces on every partition and
// serves every record, before and after a restart.
func TestBrokerServesMorePartitionsThanItKeepsFilesOpen(t *testing.T) {
	const parts, rounds = 20, 3
	cfg := brokerConfig(t)
	cfg.LogOpenFilesMax = 16
	b := startConfig(t, cfg)
	c := dial(t, b)
	// Every produced batch is larger than a segment: one segment each.
	createTopic(t, c, "many", parts, map[string]string{"segment.bytes": "1024"})
	produceRound := func(round int) {
		for p := int32(0); p < parts; p++ {
			if r := produce(t, c, "many", p, makeBatch(10, 100, fmt.Sprintf("p%d-r%d", p, round))); r.Error != nil {
				t.Fatalf("produce to partition %d: %v", p, r.Error)
			}
		}
	}
	// fetchAll reads every partition from offset 0, a segment at a time.
	fetchAll := func(wantRecords int) {
		t.Helper()
		for p := int32(0); p < parts; p++ {
			off, n := int64(0), 0
			for {
				resp, err := c.consumer.Fetch(ctxT(t), &quirev1.FetchRequest{Partitions: []*quirev1.FetchPartition{
					{Topic: "many", Partition: p, Offset: off}}})
				if err != nil {
					t.Fatalf("fetch partition %d at %d: %v", p, off, err)
				}
				fp := resp.Partitions[0]
				if fp.Error != nil {
					t.Fatalf("fetch partition %d at %d: %v", p, off, fp.Error)
				}
				if len(fp.Records) == 0 {
					break
				}
				k, first, last := countRecords(t, fp.Records)
				if first != off {
					t.Fatalf("partition %d: fetch at %d starts at %d", p, off, first)
				}
				n += k
				off = last + 1
			}
			if n != wantRecords {
				t.Fatalf("partition %d: %d records, want %d", p, n, wantRecords)
			}
		}
	}
	for r := 0; r < rounds; r++ {
		produceRound(r)
	}
	fetchAll(10 * rounds)
	stop(t, b)

	b = startConfig(t, cfg)
	c = dial(t, b)
	fetchAll(10 * rounds)
	produceRound(rounds)
	fetchAll(10 * (rounds + 1))
}
