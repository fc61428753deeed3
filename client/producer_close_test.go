package client

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quirelog/quire/broker/brokertest"
	"github.com/quirelog/quire/internal/poll"
)

// TestProducerCloseRacingProduceAfterFailAll replays, step by step, a
// Produce that reserved buffer room before Close and reaches its
// partition only after Close failed what the partitions held and stopped
// the sinks: its callback must still run, once, with ErrClosed, and its
// room must be given back. It also checks that nothing Close waits for is
// started once Close has waited (a sink for a broker a late metadata
// refresh names, the metadata load of a topic not produced to before).
func TestProducerCloseRacingProduceAfterFailAll(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The delivery timeout bounds Close's flush, which waits for the
	// reserved record that is in no batch yet.
	cl, err := New(ctx, SeedBrokers(b.Addr()), RetryBackoff(20*time.Millisecond), DeliveryTimeout(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const topic = "close-after-failall"
	if _, err := cl.CreateTopic(ctx, TopicSpec{Name: topic, Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	// Each try has the 200 ms delivery timeout, which a loaded machine
	// can run out: tried until one is delivered.
	poll.Until(t, "a first record delivered", func() error { return cl.ProduceSync(ctx, StringRecord(topic, "warm")) })

	// produce, up to add: room reserved, partition chosen.
	p := cl.prod
	r := StringRecord(topic, "late")
	size := r.size()
	if err := p.reserve(ctx, int64(size)); err != nil {
		t.Fatal(err)
	}
	pt, err := p.topic(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	pp := (*pt.parts.Load())[1]
	r.Partition, r.Timestamp = 1, time.Now()

	cl.Close()

	calls := 0
	var got error
	pp.add(p, r, func(_ *Record, err error) { calls++; got = err }, size, time.Time{}, p.cfg.batchMaxBytes)
	if calls != 1 || !errors.Is(got, ErrClosed) {
		t.Fatalf("record added after Close: %d callbacks (want 1), error %v (want ErrClosed)", calls, got)
	}
	if n := cl.BufferedRecords(); n != 0 {
		t.Fatalf("BufferedRecords after Close = %d, want 0", n)
	}
	pp.mu.Lock()
	held := pp.cur != nil || len(pp.sealed) > 0
	pp.mu.Unlock()
	if held {
		t.Fatal("partition holds a batch after Close")
	}

	// Nothing is started after Close waited (goleak in TestMain would see
	// a leaked goroutine; the WaitGroup must not grow after Wait).
	if s := p.sinkFor(brokerMeta{id: 999, addr: b.Addr()}); s != nil {
		t.Fatal("sinkFor started a sink after Close")
	}
	if _, err := p.topic(ctx, "never-produced-to"); !errors.Is(err, ErrClosed) {
		t.Fatalf("topic load after Close: %v, want ErrClosed", err)
	}
	p.topicsMu.RLock()
	_, loading := p.topics["never-produced-to"]
	p.topicsMu.RUnlock()
	if loading {
		t.Fatal("a topic load was started after Close")
	}
}
