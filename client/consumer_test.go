package client_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker/brokertest"
	"github.com/quirelog/quire/client"
)

// produceTimed writes n records to partition 0 of topic, record i with
// timestamp base+i seconds, key k<i>, value v<i> and one header.
func produceTimed(t *testing.T, cl *client.Client, topic string, n int, base time.Time) {
	t.Helper()
	var recs []*client.Record
	for i := 0; i < n; i++ {
		recs = append(recs, &client.Record{Topic: topic, Partition: 0, Key: []byte(fmt.Sprint("k", i)),
			Value: []byte(fmt.Sprint("v", i)), Timestamp: base.Add(time.Duration(i) * time.Second),
			Headers: []client.RecordHeader{{Key: "i", Value: []byte(fmt.Sprint(i))}}})
	}
	if err := cl.ProduceSync(testCtx(t), recs...); err != nil {
		t.Fatal(err)
	}
}

func TestConsumerStartPositions(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	cl := newClient(t, b.Addr(), client.RecordPartitioner(client.ManualPartitioner()), client.FetchMaxWait(50*time.Millisecond))
	createTopic(t, cl, "pos", 1)
	base := time.UnixMilli(1_700_000_000_000)
	produceTimed(t, cl, "pos", 100, base)

	check := func(name string, recs []*client.Record, first int64) {
		t.Helper()
		for i, r := range recs {
			want := first + int64(i)
			if r.Offset != want || string(r.Value) != fmt.Sprint("v", want) || string(r.Key) != fmt.Sprint("k", want) ||
				!r.Timestamp.Equal(base.Add(time.Duration(want)*time.Second)) || r.Topic != "pos" || r.Partition != 0 ||
				len(r.Headers) != 1 || r.Headers[0].Key != "i" || !bytes.Equal(r.Headers[0].Value, []byte(fmt.Sprint(want))) {
				t.Fatalf("%s: record %d = %+v, want offset %d", name, i, r, want)
			}
		}
	}
	check("start", consumeN(t, cl, "pos", []int32{0}, client.AtStart(), 100), 0)
	check("exact", consumeN(t, cl, "pos", []int32{0}, client.At(57), 43), 57)
	check("timestamp", consumeN(t, cl, "pos", []int32{0}, client.AtTimestamp(base.Add(30*time.Second)), 70), 30)
	check("timestamp between", consumeN(t, cl, "pos", []int32{0}, client.AtTimestamp(base.Add(30500*time.Millisecond)), 69), 31)

	// End (and a timestamp past every record) see only later records.
	for _, start := range []client.Offset{client.AtEnd(), client.AtTimestamp(base.Add(time.Hour))} {
		cons, err := cl.NewConsumer(map[string]map[int32]client.Offset{"pos": {0: start}})
		if err != nil {
			t.Fatal(err)
		}
		ctx := testCtx(t)
		var got []*client.Record
		for len(got) == 0 {
			if err := cl.ProduceSync(ctx, &client.Record{Topic: "pos", Value: []byte("later")}); err != nil {
				t.Fatal(err)
			}
			pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			got, _ = cons.Poll(pctx)
			cancel()
		}
		if got[0].Offset < 100 || string(got[0].Value) != "later" {
			t.Fatalf("%v: first record %+v, want a later one", start, got[0])
		}
		cons.Close()
	}
}

func TestConsumerOutOfRangeResetsToStart(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	cl := newClient(t, b.Addr(), client.RecordPartitioner(client.ManualPartitioner()))
	createTopic(t, cl, "oor", 1)
	produceTimed(t, cl, "oor", 10, time.Now())
	recs := consumeN(t, cl, "oor", []int32{0}, client.At(1000), 10)
	if recs[0].Offset != 0 {
		t.Fatalf("after reset first offset %d", recs[0].Offset)
	}
}

// TestConsumerOutOfRangeResetNone: with ConsumeResetNone an offset past
// the end is reported with the valid range, not silently moved.
func TestConsumerOutOfRangeResetNone(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	cl := newClient(t, b.Addr(), client.RecordPartitioner(client.ManualPartitioner()), client.ConsumeResetNone())
	createTopic(t, cl, "oornone", 1)
	produceTimed(t, cl, "oornone", 3, time.Now())
	cons, err := cl.NewConsumer(map[string]map[int32]client.Offset{"oornone": {0: client.At(1000000)}})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	recs, err := cons.Poll(testCtx(t))
	if len(recs) != 0 || client.ErrorCode(err) != quirev1.ErrorCode_OFFSET_OUT_OF_RANGE ||
		!strings.Contains(err.Error(), "offset 1000000, valid offsets are 0 to 2 (log end 3)") {
		t.Fatalf("poll past the end: %d records, %v", len(recs), err)
	}
}

// TestConsumerOutOfRangeResetLatest: ConsumeResetOffset(AtEnd) restarts
// past every record kept.
func TestConsumerOutOfRangeResetLatest(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	cl := newClient(t, b.Addr(), client.RecordPartitioner(client.ManualPartitioner()), client.ConsumeResetOffset(client.AtEnd()))
	createTopic(t, cl, "oorlatest", 1)
	produceTimed(t, cl, "oorlatest", 3, time.Now())
	cons, err := cl.NewConsumer(map[string]map[int32]client.Offset{"oorlatest": {0: client.At(1000000)}})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	ctx := testCtx(t)
	var got []*client.Record
	for len(got) == 0 {
		if err := cl.ProduceSync(ctx, &client.Record{Topic: "oorlatest", Value: []byte("later")}); err != nil {
			t.Fatal(err)
		}
		pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		got, _ = cons.Poll(pctx)
		cancel()
	}
	if got[0].Offset < 3 || string(got[0].Value) != "later" {
		t.Fatalf("after reset to latest, first record %+v", got[0])
	}
}

func TestConsumerFollowsAndPipelines(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	cl := newClient(t, b.Addr(), client.RequiredAcks(client.LeaderAck), client.BatchMaxBytes(16<<10),
		client.FetchMaxPartitionBytes(32<<10))
	createTopic(t, cl, "follow", 4)
	cons, err := cl.NewConsumer(map[string]map[int32]client.Offset{"follow": {0: client.AtStart(), 1: client.AtStart(),
		2: client.AtStart(), 3: client.AtStart()}})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	ctx := testCtx(t)
	const n = 20000
	go func() {
		for i := 0; i < n; i++ {
			cl.Produce(ctx, &client.Record{Topic: "follow", Key: []byte(fmt.Sprint(i % 97)), Value: make([]byte, 50)}, nil)
		}
	}()
	next := map[int32]int64{}
	got := 0
	for got < n {
		recs, err := cons.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if r.Offset != next[r.Partition] {
				t.Fatalf("partition %d: offset %d, want %d", r.Partition, r.Offset, next[r.Partition])
			}
			next[r.Partition]++
		}
		got += len(recs)
	}
	if got != n {
		t.Fatalf("got %d records, want %d", got, n)
	}
}

func TestConsumerUnknownPartitionReported(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	cl := newClient(t, b.Addr())
	if _, err := cl.ListOffsets(testCtx(t), "nope", client.AtEnd()); err == nil {
		t.Fatal("ListOffsets on a missing topic succeeded")
	}
}
