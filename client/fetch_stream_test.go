package client_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/quirelog/quire/broker/brokertest"
	"github.com/quirelog/quire/client"
)

// TestConsumerStreamsManyResponses reads two partitions through many
// small fetch responses (FetchStream with pooled broker buffers, the
// client's hand decoder) while records are still being produced, and
// checks every record in order, values kept across polls.
func TestConsumerStreamsManyResponses(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	cl := newClient(t, b.Addr(), client.RecordPartitioner(client.ManualPartitioner()),
		client.FetchMaxWait(20*time.Millisecond), client.FetchMaxPartitionBytes(8<<10), client.Linger(time.Millisecond))
	createTopic(t, cl, "many", 2)
	const perPart = 20000
	produced := make(chan error, 1)
	go func() {
		var recs []*client.Record
		for i := range perPart {
			for p := range int32(2) {
				recs = append(recs, &client.Record{Topic: "many", Partition: p, Value: []byte(fmt.Sprintf("p%d-%d-%0100d", p, i, i))})
			}
			if len(recs) == 2000 {
				if err := cl.ProduceSync(testCtx(t), recs...); err != nil {
					produced <- err
					return
				}
				recs = nil
			}
		}
		produced <- nil
	}()
	cons, err := cl.NewConsumer(map[string]map[int32]client.Offset{"many": {0: client.AtStart(), 1: client.AtStart()}})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	ctx := testCtx(t)
	type keptValue struct {
		p      int32
		offset int64
		v      []byte
	}
	var kept []keptValue
	next := [2]int64{}
	for next[0] < perPart || next[1] < perPart {
		recs, err := cons.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if want := fmt.Sprintf("p%d-%d-%0100d", r.Partition, next[r.Partition], next[r.Partition]); r.Offset != next[r.Partition] || string(r.Value) != want {
				t.Fatalf("partition %d: offset %d value %q, want offset %d value %q", r.Partition, r.Offset, r.Value, next[r.Partition], want)
			}
			next[r.Partition]++
			if r.Offset%1000 == 0 {
				kept = append(kept, keptValue{r.Partition, r.Offset, r.Value})
			}
		}
	}
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	// Values handed out earlier still hold their records.
	for _, k := range kept {
		if want := fmt.Sprintf("p%d-%d-%0100d", k.p, k.offset, k.offset); string(k.v) != want {
			t.Fatalf("kept value of %d/%d: %q, want %q", k.p, k.offset, k.v, want)
		}
	}
	if len(kept) != 2*perPart/1000 {
		t.Fatalf("%d values kept", len(kept))
	}
}
