package chaos

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/quirelog/quire/client"
	"github.com/quirelog/quire/internal/poll"
	"github.com/quirelog/quire/testcluster"
)

// TestChaosTxnReaderReportsShortRead: the live read_committed reader
// that is stopped before it has read every partition's sentinel says so
// (its reads are what the checker's live-read checks check); one that
// reads every sentinel ends by itself, without an error.
func TestChaosTxnReaderReportsShortRead(t *testing.T) {
	c := testcluster.New(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c.WaitController(ctx)
	cl, err := client.New(ctx, client.SeedBrokers(c.Addr(c.IDs()[0])), client.RetryBackoff(20*time.Millisecond),
		client.RecordPartitioner(client.ManualPartitioner()), client.ReadCommitted())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const parts = 2
	if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: txnTopic, Partitions: parts, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	write := func(value string) {
		t.Helper()
		var recs []*client.Record
		for p := range int32(parts) {
			recs = append(recs, &client.Record{Topic: txnTopic, Partition: p, Value: []byte(value)})
		}
		if err := cl.ProduceSync(ctx, recs...); err != nil {
			t.Fatal(err)
		}
	}
	write("v")
	h := NewHistory(nil)
	readCtx, stopRead := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- txnReader(readCtx, h, cl, parts) }()
	poll.Until(t, "the reader to read the first records", func() error {
		if n := len(h.Events()); n < parts {
			return fmt.Errorf("%d reads", n)
		}
		return nil
	})
	stopRead()
	if err := <-errc; err == nil || !strings.Contains(err.Error(), "before the end of 2 of 2 partitions") {
		t.Fatalf("reader stopped short of the sentinels: %v, want an error saying so", err)
	}

	write(txnSentinel)
	h = NewHistory(nil)
	if err := txnReader(ctx, h, cl, parts); err != nil {
		t.Fatalf("reader through the sentinels: %v; read %+v", err, h.Events())
	}
	if n := len(h.Events()); n != 2*parts {
		t.Fatalf("the reader recorded %d reads, want %d: %+v", n, 2*parts, h.Events())
	}
}
