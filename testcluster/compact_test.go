package testcluster_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/record"
	"github.com/quirelog/quire/storage"
	"github.com/quirelog/quire/testcluster"
)

// compactWrite is one record written to the compacted topic.
type compactWrite struct {
	key   string
	value []byte // nil: a tombstone
}

// TestClusterCompactedTopicConverges writes keyed records (overwrites
// and tombstones) to a compacted topic replicated on three nodes, kills
// the leader halfway and brings it back, and checks that every replica
// has been cleaned (by its own cleaner) to a log meeting the compaction
// guarantees: offsets increasing, the latest write of every key there
// (a tombstone for a deleted key), any offset two replicas both hold the
// same record; that a follower whose log was lost copies the cleaned
// log, gaps and all; and that a consumer reading from offset 0 at the
// leader rebuilds exactly the table written, from fewer records than
// were.
func TestClusterCompactedTopicConverges(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 3, withMetrics(), testcluster.Config(func(_ int32, cfg *broker.Config) {
		cfg.LogCleanerBackoffMs = 50
	}))
	ctx := testCtx(t)
	c.WaitImage(ctx, func(img *metadata.Image) bool { return img.MetadataVersion() >= metadata.MetadataVersionCompaction })
	createTopicWith(t, c, 1, "table", 1, 3, map[string]string{"cleanup.policy": "compact", "segment.bytes": "2048", "min.insync.replicas": "2",
		"min.cleanable.dirty.ratio": "0.01"})
	c.WaitLeader(ctx, "table", 0)

	rng := rand.New(rand.NewSource(1))
	var writes []compactWrite
	last := map[string]compactWrite{}
	write := func(n int) {
		for range n {
			b := record.NewBuilder(record.Codec(rng.Intn(2)))
			var batch []compactWrite
			for j := 0; j < 1+rng.Intn(3); j++ {
				w := compactWrite{key: fmt.Sprintf("key-%d", rng.Intn(25))}
				if rng.Intn(8) != 0 {
					w.value = []byte(fmt.Sprintf("%s=%d", w.key, len(writes)+j))
				}
				b.Append(time.Now().UnixMilli(), []byte(w.key), w.value, []record.RecordHeader{{Key: "n", Value: []byte(strconv.Itoa(len(writes) + j))}})
				batch = append(batch, w)
			}
			raw := b.Build()
			c.Eventually(ctx, "produce", func() error {
				leader, _ := c.WaitLeader(ctx, "table", 0)
				resp, err := quirev1.NewProducerClient(c.Conn(leader)).Produce(ctx, &quirev1.ProduceRequest{
					OptionalAcks: &quirev1.ProduceRequest_Acks{Acks: -1}, TimeoutMs: 3000,
					Partitions: []*quirev1.PartitionRecords{{Topic: "table", Partition: 0, Records: raw}},
				})
				if err != nil {
					return err
				}
				if e := resp.Partitions[0].Error; e != nil {
					if !e.Retriable {
						t.Fatalf("produce: %v", e)
					}
					return errors.New(e.Message)
				}
				return nil
			})
			for _, w := range batch {
				writes = append(writes, w)
				last[w.key] = w
			}
		}
	}
	write(120)
	leader, _ := c.WaitLeader(ctx, "table", 0)
	c.Kill(leader)
	write(120)
	c.Restart(leader)
	// A consumer that starts now reads from offset 0 while the last
	// writes go on and the replicas clean, to the end of the log: it must
	// see, for every key written before it started, that key's latest
	// write then or a later one. (A later write may have let the cleaner
	// remove the earlier one, so it reads on to the end of the writes.)
	before := make(map[string]int, len(last))
	for i, w := range writes {
		before[w.key] = i
	}
	startHW := waitInSync(t, c, "table")
	reading := make(chan readDuringClean, 1)
	end := make(chan int64, 1)
	go func() { reading <- readCompactedFrom0(ctx, c, end) }()
	write(80)
	end <- waitInSync(t, c, "table")
	during := <-reading
	if during.err != nil {
		t.Fatalf("reading from 0 while cleaning: %v", during.err)
	}
	seenN := 0
	for _, ns := range during.seen {
		seenN += len(ns)
	}
	t.Logf("a consumer that started reading from 0 at log end %d, while the replicas cleaned, read %d records", startHW, seenN)
	for k, i := range before {
		if !slices.ContainsFunc(during.seen[k], func(n int) bool { return n >= i }) {
			t.Fatalf("a consumer started after write %d of key %s read only writes %v of it", i, k, during.seen[k])
		}
	}
	leo := waitInSync(t, c, "table")

	// Every replica's own cleaner compacts it: nothing dirty is left
	// below the active segment.
	series := `{partition="0",topic="table"}`
	waitCleaned := func() {
		c.Eventually(ctx, "every replica cleaned", func() error {
			for _, id := range c.Running() {
				m, err := scrape(ctx, c, id)
				if err != nil {
					return err
				}
				if p := m["quire_log_cleaner_passes_total"+series]; p < 1 {
					return fmt.Errorf("node %d: %v passes", id, p)
				}
				if r := m["quire_log_cleaner_dirty_ratio"+series]; r != 0 {
					return fmt.Errorf("node %d: dirty ratio %v", id, r)
				}
			}
			return nil
		})
	}
	waitCleaned()

	// A follower that lost its log copies the leader's, cleaned, with
	// its gaps, from offset 0.
	leader, _ = c.WaitLeader(ctx, "table", 0)
	follower := c.IDs()[0]
	if follower == leader {
		follower = c.IDs()[1]
	}
	c.Stop(follower)
	if err := os.RemoveAll(filepath.Join(c.Dir(follower), "table-0")); err != nil {
		t.Fatal(err)
	}
	c.Restart(follower)
	if got := waitInSync(t, c, "table"); got != leo {
		t.Fatalf("log end %d after the follower's restart, was %d", got, leo)
	}
	waitCleaned()

	// A consumer from offset 0 at the leader rebuilds the table.
	leader, _ = c.WaitLeader(ctx, "table", 0)
	cons := quirev1.NewConsumerClient(c.Conn(leader))
	table := map[string]string{}
	read := 0
	prev := int64(-1)
	for off := int64(0); off < leo; {
		resp, err := cons.Fetch(ctx, &quirev1.FetchRequest{Partitions: []*quirev1.FetchPartition{{Topic: "table", Offset: off}}})
		if err != nil {
			t.Fatal(err)
		}
		p := resp.Partitions[0]
		if p.Error != nil {
			t.Fatalf("fetch at %d: %v", off, p.Error)
		}
		if len(p.Records) == 0 {
			t.Fatalf("fetch at %d below the high watermark %d returned nothing", off, leo)
		}
		err = record.SplitBatches(p.Records, func(b []byte, h record.Header) error {
			off = h.NextOffset()
			return record.ForEachRecord(b, func(r *record.Record) error {
				if r.Offset <= prev {
					return fmt.Errorf("offset %d after %d", r.Offset, prev)
				}
				prev = r.Offset
				read++
				if r.Value == nil {
					delete(table, string(r.Key))
				} else {
					table[string(r.Key)] = string(r.Value)
				}
				return nil
			})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	live := 0
	for k, w := range last {
		if w.value == nil {
			if _, ok := table[k]; ok {
				t.Fatalf("deleted key %s read back as %q", k, table[k])
			}
			continue
		}
		live++
		if table[k] != string(w.value) {
			t.Fatalf("key %s: read %q, wrote %q last", k, table[k], w.value)
		}
	}
	if len(table) != live || read >= len(writes) {
		t.Fatalf("read %d records into %d keys; wrote %d records, %d live keys", read, len(table), len(writes), live)
	}

	// Each replica on its own, stopped and opened from its directory.
	ids := c.Running()
	for _, id := range ids {
		c.Stop(id)
	}
	byOffset := map[int64][]byte{}
	for _, id := range ids {
		l, err := storage.OpenLog(filepath.Join(c.Dir(id), "table-0"), "table", 0, storage.DefaultLogConfig(), 0, storage.Options{})
		if err != nil {
			t.Fatalf("node %d: %v", id, err)
		}
		latest := map[string][]byte{}
		seen := map[string]bool{}
		prev := int64(-1)
		for off := l.LogStartOffset(); off < l.LogEndOffset(); {
			res, err := l.Read(off, 1<<20, math.MaxInt64)
			if err != nil || len(res.Batches) == 0 {
				t.Fatalf("node %d: read at %d: %d bytes, %v", id, off, len(res.Batches), err)
			}
			err = record.SplitBatches(res.Batches, func(b []byte, h record.Header) error {
				off = h.NextOffset()
				return record.ForEachRecord(b, func(r *record.Record) error {
					if r.Offset <= prev {
						return fmt.Errorf("offset %d after %d", r.Offset, prev)
					}
					prev = r.Offset
					enc := append(append(append([]byte{}, r.Key...), 0), r.Value...)
					if other, ok := byOffset[r.Offset]; ok && !bytes.Equal(other, enc) {
						return fmt.Errorf("offset %d differs between replicas", r.Offset)
					}
					byOffset[r.Offset] = enc
					latest[string(r.Key)], seen[string(r.Key)] = r.Value, true
					return nil
				})
			})
			if err != nil {
				t.Fatalf("node %d: %v", id, err)
			}
		}
		if l.LogEndOffset() != leo {
			t.Fatalf("node %d: log end %d, the cluster's %d", id, l.LogEndOffset(), leo)
		}
		for k, w := range last {
			if !seen[k] || !bytes.Equal(latest[k], w.value) || (latest[k] == nil) != (w.value == nil) {
				t.Fatalf("node %d: key %s ends with %q (%v), wrote %q last", id, k, latest[k], seen[k], w.value)
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// readDuringClean is what readCompactedFrom0 read: for each key, the
// write numbers (the records' "n" header) it saw, in offset order.
type readDuringClean struct {
	seen map[string][]int
	err  error
}

// readCompactedFrom0 reads the compacted topic from offset 0 up to the
// log end end sends (it reads while that is not known yet) at
// its leader, a few records a fetch so that the cleaners swap segments
// under it, following the leader as it moves.
func readCompactedFrom0(ctx context.Context, c *testcluster.Cluster, end <-chan int64) readDuringClean {
	out := readDuringClean{seen: map[string][]int{}}
	prev := int64(-1)
	to := int64(math.MaxInt64)
	for off := int64(0); off < to; {
		select {
		case to = <-end:
		default:
		}
		if err := ctx.Err(); err != nil {
			return readDuringClean{err: fmt.Errorf("at offset %d of %d: %w", off, to, err)}
		}
		leader, _ := c.WaitLeader(ctx, "table", 0)
		resp, err := quirev1.NewConsumerClient(c.Conn(leader)).Fetch(ctx, &quirev1.FetchRequest{MaxWaitMs: 100, MinBytes: 1,
			Partitions: []*quirev1.FetchPartition{{Topic: "table", Offset: off, MaxBytes: 1}}})
		if err != nil {
			continue // the leader stopping or moving: ask again
		}
		p := resp.Partitions[0]
		if p.Error != nil {
			if !p.Error.Retriable {
				return readDuringClean{err: fmt.Errorf("fetch at %d: %v", off, p.Error)}
			}
			continue
		}
		err = record.SplitBatches(p.Records, func(b []byte, h record.Header) error {
			off = h.NextOffset()
			return record.ForEachRecord(b, func(r *record.Record) error {
				if r.Offset <= prev {
					return fmt.Errorf("offset %d after %d", r.Offset, prev)
				}
				prev = r.Offset
				for _, hd := range r.Headers {
					if hd.Key == "n" {
						n, err := strconv.Atoi(string(hd.Value))
						if err != nil {
							return fmt.Errorf("offset %d: header n %q", r.Offset, hd.Value)
						}
						out.seen[string(r.Key)] = append(out.seen[string(r.Key)], n)
					}
				}
				return nil
			})
		})
		if err != nil {
			return readDuringClean{err: err}
		}
	}
	return out
}
