package sharee2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// delivery is one record a member got.
type delivery struct {
	member int
	rec    *kgo.Record
}

// TestFranzShareE2E: QUIRE_SHARE_MEMBERS franz-go share members of group
// QUIRE_SHARE_GROUP read topic QUIRE_SHARE_TOPIC (one partition, made by
// the script) at the node's Kafka listener QUIRE_SHARE_ADDR, each
// accepting what it polls and waiting for the broker to confirm the
// acceptance. The script writes QUIRE_SHARE_RECORDS records "1".."N"
// once the members fetch (share.auto.offset.reset is latest). Every
// record must be delivered exactly once, with delivery count 1, its
// acceptance confirmed, and at least two members must have read some.
func TestFranzShareE2E(t *testing.T) {
	addr := os.Getenv("QUIRE_SHARE_ADDR")
	if addr == "" {
		t.Skip("run by scripts/e2e_kafka.sh, which sets QUIRE_SHARE_ADDR to a node's Kafka listener")
	}
	topic, group := os.Getenv("QUIRE_SHARE_TOPIC"), os.Getenv("QUIRE_SHARE_GROUP")
	members, err1 := strconv.Atoi(os.Getenv("QUIRE_SHARE_MEMBERS"))
	records, err2 := strconv.Atoi(os.Getenv("QUIRE_SHARE_RECORDS"))
	if topic == "" || group == "" || err1 != nil || err2 != nil || members < 2 || records < 1 {
		t.Fatalf("QUIRE_SHARE_TOPIC %q, _GROUP %q, _MEMBERS (%v, at least 2) and _RECORDS (%v) must be set", topic, group, err1, err2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()

	got := make(chan delivery, 1024)
	var (
		mu      sync.Mutex
		ackErrs []string
	)
	rctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for m := range members {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ShareGroup(group), kgo.ConsumeTopics(topic), kgo.ShareMaxRecords(10),
			kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
				mu.Lock()
				defer mu.Unlock()
				for _, r := range rs {
					if r.Err != nil {
						ackErrs = append(ackErrs, fmt.Sprintf("member %d: %s-%d: %v", m, r.Topic, r.Partition, r.Err))
					}
				}
			}))
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			defer cl.Close() // leaves the group
			for rctx.Err() == nil {
				fs := cl.PollFetches(rctx)
				fs.EachError(func(tp string, p int32, err error) {
					if rctx.Err() == nil {
						t.Logf("member %d: %s-%d: %v", m, tp, p, err)
					}
				})
				recs := fs.Records()
				if len(recs) == 0 {
					continue
				}
				cl.MarkAcks(kgo.AckAccept, recs...)
				if err := cl.FlushAcks(rctx); err != nil {
					if rctx.Err() == nil {
						t.Errorf("member %d: flush acks: %v", m, err)
					}
					return
				}
				for _, r := range recs {
					got <- delivery{m, r}
				}
			}
		})
	}
	defer func() {
		stop()
		wg.Wait()
	}()

	byValue := map[string]int64{}
	perMember := make([]int, members)
	for len(byValue) < records {
		select {
		case d := <-got:
			v := string(d.rec.Value)
			if off, ok := byValue[v]; ok {
				t.Fatalf("%q delivered twice: at offset %d, then at %d to member %d", v, off, d.rec.Offset, d.member)
			}
			if n, err := strconv.Atoi(v); err != nil || n < 1 || n > records {
				t.Fatalf("offset %d holds %q, not one of 1..%d", d.rec.Offset, v, records)
			}
			if c := d.rec.DeliveryCount(); c != 1 {
				t.Fatalf("%q (offset %d) has delivery count %d", v, d.rec.Offset, c)
			}
			byValue[v] = d.rec.Offset
			perMember[d.member]++
		case <-ctx.Done():
			t.Fatalf("%d of %d records accepted in time (per member %v)", len(byValue), records, perMember)
		}
	}
	stop()
	wg.Wait()
	close(got)
	for d := range got {
		t.Fatalf("%q (offset %d) delivered again to member %d", d.rec.Value, d.rec.Offset, d.member)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ackErrs) > 0 {
		t.Fatalf("acceptances refused: %v", ackErrs)
	}
	readers := 0
	for _, n := range perMember {
		if n > 0 {
			readers++
		}
	}
	if readers < 2 {
		t.Fatalf("only one member read: %v", perMember)
	}
	fmt.Printf("franz-go share: %d records accepted once by %d members (per member %v)\n", records, members, perMember)
}
