package broker_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/broker/brokertest"
	"github.com/quirelog/quire/internal/poll"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/record"
)

// A compacted topic refuses a record without a key on both doors:
// INVALID_RECORD, saying why; keyed records go in.
func TestBrokerCompactedTopicRefusesKeylessRecords(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, func(c *broker.Config) {
		c.ListenAddr = "PLAINTEXT://127.0.0.1:0,KAFKA://127.0.0.1:0"
		c.KafkaListenerNames = "kafka"
	})
	addr, _ := b.ListenerAddr("KAFKA")
	c := dial(t, b)
	brokertest.WaitMetadataVersion(t, b, metadata.MetadataVersionCompaction)
	createTopic(t, c, "ckeys", 1, map[string]string{"cleanup.policy": "compact"})

	bld := record.NewBuilder(record.None)
	bld.Append(time.Now().UnixMilli(), nil, []byte("no key"), nil)
	res := produce(t, c, "ckeys", 0, bld.Build())
	wantInline(t, res.Error, quirev1.ErrorCode_INVALID_RECORD, false)
	if !strings.Contains(res.Error.Message, "key") {
		t.Fatalf("message %q does not say the key is missing", res.Error.Message)
	}
	if res := produce(t, c, "ckeys", 0, makeBatch(3, 10, "keyed")); res.Error != nil {
		t.Fatalf("keyed produce: %v", res.Error)
	}

	ctx := ctxT(t)
	prod := kafkaClient(t, addr, kgo.DefaultProduceTopic("ckeys"), kgo.RecordRetries(0), kgo.RecordDeliveryTimeout(10*time.Second))
	err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte("no key")}).FirstErr()
	if !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("keyless Kafka produce: %v, want INVALID_RECORD", err)
	}
	if err := prod.ProduceSync(ctx, &kgo.Record{Key: []byte("k"), Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// A real Kafka client writes a keyed changelog (overwrites and deletes)
// to a topic created with cleanup.policy=delete, the policy is changed
// to compact on the live topic through IncrementalAlterConfigs, the
// cleaner compacts it, and a fresh reader from offset 0 rebuilds exactly
// the table that was written, from fewer records than were written, at
// increasing offsets.
func TestBrokerKafkaCompactedChangelog(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, func(c *broker.Config) {
		c.ListenAddr = "PLAINTEXT://127.0.0.1:0,KAFKA://127.0.0.1:0"
		c.KafkaListenerNames = "kafka"
		c.LogCleanerBackoffMs = 20
	})
	addr, _ := b.ListenerAddr("KAFKA")
	brokertest.WaitMetadataVersion(t, b, metadata.MetadataVersionCompaction)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(kafkaClient(t, addr))
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"segment.bytes": ptr("4096")}, "changelog"); err != nil {
		t.Fatal(err)
	}
	prod := kafkaClient(t, addr, kgo.DefaultProduceTopic("changelog"), kgo.ProducerLinger(0))
	rng := rand.New(rand.NewSource(1))
	table := map[string]string{}
	written := 0
	for round := 0; round < 30; round++ {
		var recs []*kgo.Record
		for i := 0; i < 50; i++ {
			k := fmt.Sprintf("key-%d", rng.Intn(40))
			r := &kgo.Record{Key: []byte(k), Headers: []kgo.RecordHeader{{Key: "round", Value: []byte(fmt.Sprint(round))}}}
			if rng.Intn(8) == 0 {
				delete(table, k) // a tombstone
			} else {
				r.Value = []byte(fmt.Sprintf("%s@%d.%d", k, round, i))
				table[k] = string(r.Value)
			}
			recs = append(recs, r)
		}
		if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		written += len(recs)
	}
	resp, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Name: "cleanup.policy", Value: ptr("compact")},
		{Name: "min.cleanable.dirty.ratio", Value: ptr("0.01")},
	}, "changelog")
	if err == nil {
		err = resp[0].Err
	}
	if err != nil {
		t.Fatalf("alter cleanup.policy: %v", err)
	}

	read := func() (map[string]string, int, error) {
		cons := kafkaClient(t, addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"changelog": {0: kgo.NewOffset().AtStart()}}))
		defer cons.Close()
		got := map[string]string{}
		n, last := 0, int64(-1)
		end, err := adm.ListEndOffsets(ctx, "changelog")
		if err != nil {
			return nil, 0, err
		}
		hw, _ := end.Lookup("changelog", 0)
		for last+1 < hw.Offset {
			fs := cons.PollFetches(ctx)
			if err := ctx.Err(); err != nil {
				return nil, 0, err
			}
			var ferr error
			fs.EachError(func(_ string, _ int32, err error) { ferr = err })
			if ferr != nil {
				return nil, 0, ferr
			}
			for _, r := range fs.Records() {
				if r.Offset <= last {
					return nil, 0, fmt.Errorf("offset %d after %d", r.Offset, last)
				}
				last = r.Offset
				n++
				if r.Value == nil {
					delete(got, string(r.Key))
				} else {
					got[string(r.Key)] = string(r.Value)
				}
			}
		}
		return got, n, nil
	}
	poll.Until(t, "the cleaner to compact the changelog", func() error {
		_, n, err := read()
		if err != nil {
			t.Fatal(err)
		}
		if n >= written/2 {
			return fmt.Errorf("%d of the %d records written are left", n, written)
		}
		return nil
	})
	got, n, err := read()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(table) {
		t.Fatalf("rebuilt %d keys from %d records, wrote %d live keys", len(got), n, len(table))
	}
	for k, v := range table {
		if got[k] != v {
			t.Fatalf("key %s: rebuilt %q, wrote %q last", k, got[k], v)
		}
	}
}

func ptr[T any](v T) *T { return &v }
