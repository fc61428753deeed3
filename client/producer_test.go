package client_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker/brokertest"
	"github.com/quirelog/quire/client"
	"github.com/quirelog/quire/partitioner"
)

func TestProducerOrderingPerPartition(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	cl := newClient(t, b.Addr(), client.RequiredAcks(client.LeaderAck), client.BatchMaxBytes(4096))
	createTopic(t, cl, "order", 3)
	const n = 6000
	var mu sync.Mutex
	lastOffset := map[int32]int64{0: -1, 1: -1, 2: -1}
	lastSeq := map[int32]int{0: -1, 1: -1, 2: -1}
	var wg sync.WaitGroup
	wg.Add(n)
	ctx := testCtx(t)
	for i := 0; i < n; i++ {
		r := &client.Record{Topic: "order", Key: []byte(fmt.Sprint("k", i%10)), Value: []byte(fmt.Sprint(i))}
		cl.Produce(ctx, r, func(r *client.Record, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Errorf("record %s: %v", r.Value, err)
				return
			}
			var seq int
			fmt.Sscan(string(r.Value), &seq)
			if r.Offset != lastOffset[r.Partition]+1 || seq <= lastSeq[r.Partition] {
				t.Errorf("partition %d: record %d at offset %d after offset %d / record %d",
					r.Partition, seq, r.Offset, lastOffset[r.Partition], lastSeq[r.Partition])
			}
			lastOffset[r.Partition], lastSeq[r.Partition] = r.Offset, seq
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	recs := consumeN(t, cl, "order", []int32{0, 1, 2}, client.AtStart(), n)
	prev := map[int32]int{0: -1, 1: -1, 2: -1}
	for _, r := range recs {
		var seq int
		fmt.Sscan(string(r.Value), &seq)
		if seq <= prev[r.Partition] {
			t.Fatalf("consumed %d after %d on partition %d", seq, prev[r.Partition], r.Partition)
		}
		prev[r.Partition] = seq
		if want := partitioner.KeyPartition(r.Key, 3); r.Partition != want {
			t.Fatalf("key %s on partition %d, want %d", r.Key, r.Partition, want)
		}
	}
}

func TestProducerLingerBatchesRecords(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	cl := newClient(t, b.Addr(), client.Linger(time.Hour), client.RecordPartitioner(client.ManualPartitioner()))
	createTopic(t, cl, "linger", 1)
	ctx := testCtx(t)
	var wg sync.WaitGroup
	wg.Add(100)
	for i := 0; i < 100; i++ {
		cl.Produce(ctx, client.StringRecord("linger", fmt.Sprint(i)), func(_ *client.Record, err error) {
			if err != nil {
				t.Error(err)
			}
			wg.Done()
		})
	}
	// Nothing is sent while the batch lingers, so nothing is acknowledged.
	if got := cl.BufferedRecords(); got != 100 {
		t.Fatalf("buffered %d, want 100 while lingering", got)
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	hs := rawBatches(t, b.Addr(), "linger", 0)
	if len(hs) != 1 || hs[0].NumRecords != 100 {
		t.Fatalf("got %d batches (%+v), want one of 100 records", len(hs), hs)
	}
}

func TestProducerBatchMaxBytesSplitsBatches(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	cl := newClient(t, b.Addr(), client.Linger(time.Hour), client.BatchMaxBytes(2048),
		client.RecordPartitioner(client.ManualPartitioner()))
	createTopic(t, cl, "split", 1)
	ctx := testCtx(t)
	value := make([]byte, 100)
	for i := 0; i < 100; i++ {
		cl.Produce(ctx, &client.Record{Topic: "split", Value: value}, nil)
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	hs := rawBatches(t, b.Addr(), "split", 0)
	total := int32(0)
	for _, h := range hs {
		if h.Size() > 2048 {
			t.Fatalf("batch of %d bytes exceeds 2048", h.Size())
		}
		total += h.NumRecords
	}
	if total != 100 || len(hs) < 5 {
		t.Fatalf("%d records in %d batches, want 100 in ≥5", total, len(hs))
	}
	// A record that cannot fit in an empty batch fails at once.
	err := cl.ProduceSync(ctx, &client.Record{Topic: "split", Value: make([]byte, 4096)})
	if !errors.Is(err, client.ErrRecordTooLarge) {
		t.Fatalf("oversized record: %v", err)
	}
}

// TestProducerBatchFollowsTopicMaxMessageBytes: without BatchMaxBytes a
// topic's batches follow its max.message.bytes from metadata, both ways:
// a 3 MiB record goes to a topic that takes 4 MiB batches, and a topic
// limited to 2048 bytes gets batches that fit.
func TestProducerBatchFollowsTopicMaxMessageBytes(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	cl := newClient(t, b.Addr(), client.RecordPartitioner(client.ManualPartitioner()))
	ctx := testCtx(t)
	for name, max := range map[string]string{"big": "4194304", "small": "2048"} {
		if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: name, Partitions: 1, Configs: map[string]string{"max.message.bytes": max}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.ProduceSync(ctx, &client.Record{Topic: "big", Value: make([]byte, 3<<20)}); err != nil {
		t.Fatalf("3 MiB record to a topic of max.message.bytes 4 MiB: %v", err)
	}
	for i := 0; i < 100; i++ {
		cl.Produce(ctx, &client.Record{Topic: "small", Value: make([]byte, 100)}, nil)
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	total := int32(0)
	for _, h := range rawBatches(t, b.Addr(), "small", 0) {
		if h.Size() > 2048 {
			t.Fatalf("batch of %d bytes on a topic of max.message.bytes 2048", h.Size())
		}
		total += h.NumRecords
	}
	if total != 100 {
		t.Fatalf("%d records on small, want 100", total)
	}
	err := cl.ProduceSync(ctx, &client.Record{Topic: "small", Value: make([]byte, 4096)})
	if !errors.Is(err, client.ErrRecordTooLarge) || !strings.Contains(err.Error(), "max.message.bytes") {
		t.Fatalf("oversized record: %v", err)
	}
}

// TestProducerRequestFarOverBrokerLimit: a batch a topic allows but more
// than twice the broker's request limit, which the broker's gRPC server
// refuses unread with no quire.v1.Error, fails as MESSAGE_TOO_LARGE naming
// the key to raise, as a request nearer the limit does.
func TestProducerRequestFarOverBrokerLimit(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	cl := newClient(t, b.Addr(), client.RecordPartitioner(client.ManualPartitioner()))
	ctx := testCtx(t)
	if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: "huge", Partitions: 1, Configs: map[string]string{"max.message.bytes": "33554432"}}); err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{9 << 20, 20 << 20} {
		err := cl.ProduceSync(ctx, &client.Record{Topic: "huge", Value: make([]byte, size)})
		if client.ErrorCode(err) != quirev1.ErrorCode_MESSAGE_TOO_LARGE || !strings.Contains(err.Error(), "raise message.max.bytes") ||
			!strings.Contains(err.Error(), "limit of 8388608 bytes") {
			t.Errorf("a %d-byte record: %v", size, err)
		}
	}
}

func TestPartitionerPlacement(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	cl := newClient(t, b.Addr())
	createTopic(t, cl, "place", 7)
	ctx := testCtx(t)
	// Kafka's UtilsTest murmur2 vectors: the partition is
	// toPositive(murmur2(key)) % 7, as the Java client computes it.
	known := map[string]int32{
		"21":                         (-973932308 & 0x7fffffff) % 7,
		"foobar":                     (-790332482 & 0x7fffffff) % 7,
		"a-little-bit-long-string":   (-985981536 & 0x7fffffff) % 7,
		"a-little-bit-longer-string": (-1486304829 & 0x7fffffff) % 7,
		"abc":                        479470107 % 7,
	}
	for key, want := range known {
		r := client.KeyStringRecord("place", key, "v")
		if err := cl.ProduceSync(ctx, r); err != nil {
			t.Fatal(err)
		}
		if r.Partition != want {
			t.Errorf("key %q on partition %d, want %d", key, r.Partition, want)
		}
		r2 := client.KeyStringRecord("place", key, "again")
		if err := cl.ProduceSync(ctx, r2); err != nil || r2.Partition != r.Partition {
			t.Errorf("key %q moved from %d to %d (%v)", key, r.Partition, r2.Partition, err)
		}
	}

	// A pluggable partitioner.
	custom := newClient(t, b.Addr(), client.RecordPartitioner(client.PartitionerFunc(
		func(r *client.Record, n int32) int32 { return int32(len(r.Value)) % n })))
	r := client.StringRecord("place", "abcde") // 5 % 7
	if err := custom.ProduceSync(ctx, r); err != nil || r.Partition != 5 {
		t.Fatalf("custom partitioner: partition %d, %v", r.Partition, err)
	}
	// Explicit partitions, and one out of range.
	manual := newClient(t, b.Addr(), client.RecordPartitioner(client.ManualPartitioner()))
	r = &client.Record{Topic: "place", Partition: 6, Value: []byte("x")}
	if err := manual.ProduceSync(ctx, r); err != nil || r.Partition != 6 {
		t.Fatalf("manual: partition %d, %v", r.Partition, err)
	}
	err := manual.ProduceSync(ctx, &client.Record{Topic: "place", Partition: 7, Value: []byte("x")})
	if !errors.Is(err, client.ErrNoSuchPartition) {
		t.Fatalf("partition 7 of 7: %v", err)
	}

	// Keyless records stick to a partition for a batch's worth of bytes.
	sticky := newClient(t, b.Addr(), client.BatchMaxBytes(4096))
	var recs []*client.Record
	for i := 0; i < 200; i++ {
		recs = append(recs, &client.Record{Topic: "place", Value: make([]byte, 100)})
	}
	if err := sticky.ProduceSync(ctx, recs...); err != nil {
		t.Fatal(err)
	}
	switches, used := 0, map[int32]bool{}
	for i, r := range recs {
		used[r.Partition] = true
		if i > 0 && r.Partition != recs[i-1].Partition {
			switches++
		}
	}
	// 200 records of ~121 bytes are ~24 KB: about 6 runs of 4 KB.
	if switches < 3 || switches > 12 || len(used) < 2 {
		t.Fatalf("sticky: %d switches over %d partitions", switches, len(used))
	}
}

func TestProducerFlushAndClose(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	cl, err := client.New(testCtx(t), client.SeedBrokers(b.Addr()), client.Linger(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	createTopic(t, cl, "close", 2)
	ctx := testCtx(t)
	var mu sync.Mutex
	var acked, failed int
	cb := func(_ *client.Record, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			failed++
		} else {
			acked++
		}
	}
	for i := 0; i < 10; i++ {
		cl.Produce(ctx, client.StringRecord("close", fmt.Sprint(i)), cb)
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if acked != 10 || failed != 0 {
		t.Fatalf("after Flush: %d acked, %d failed", acked, failed)
	}
	mu.Unlock()
	// Close sends what lingers before it returns.
	for i := 0; i < 10; i++ {
		cl.Produce(ctx, client.StringRecord("close", fmt.Sprint(i)), cb)
	}
	cl.Close()
	mu.Lock()
	if acked != 20 || failed != 0 {
		t.Fatalf("after Close: %d acked, %d failed", acked, failed)
	}
	mu.Unlock()
	err = cl.ProduceSync(ctx, client.StringRecord("close", "late"))
	if !errors.Is(err, client.ErrClosed) {
		t.Fatalf("produce after Close: %v", err)
	}
	cl.Close() // idempotent
	check := newClient(t, b.Addr())
	consumeN(t, check, "close", []int32{0, 1}, client.AtStart(), 20)
}

func TestProducerBufferFull(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	ctx := testCtx(t)
	// Errors when full.
	cl := newClient(t, b.Addr(), client.Linger(time.Hour), client.MaxBufferedBytes(1000), client.BlockOnBufferFull(false))
	createTopic(t, cl, "full", 1)
	var full, ok int
	for i := 0; i < 50; i++ {
		err, done := tryProduce(ctx, cl, client.StringRecord("full", "0123456789012345678901234567890123456789"))
		switch {
		case !done:
			ok++
		case errors.Is(err, client.ErrBufferFull):
			full++
		default:
			t.Fatal(err)
		}
	}
	if full == 0 || ok == 0 || ok > 20 {
		t.Fatalf("%d accepted, %d refused with a 1000-byte buffer", ok, full)
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err, done := tryProduce(ctx, cl, client.StringRecord("full", "room again")); done {
		t.Fatalf("after Flush: %v", err)
	}

	// Blocks when full, until ctx ends or room is made.
	bl := newClient(t, b.Addr(), client.Linger(time.Hour), client.MaxBufferedBytes(1000))
	// Fill the buffer: each Produce returns at once until one blocks, which
	// then fails with its context's deadline.
	blocked := false
	for i := 0; i < 40 && !blocked; i++ {
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		err, done := tryProduce(short, bl, client.StringRecord("full", "0123456789012345678901234567890123456789"))
		cancel()
		if done {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("blocked produce: %v, want deadline exceeded", err)
			}
			blocked = true
		}
	}
	if !blocked || bl.BufferedRecords() > 20 {
		t.Fatalf("never blocked (%d buffered)", bl.BufferedRecords())
	}
	returned := make(chan struct{})
	acked := make(chan error, 1)
	go func() {
		bl.Produce(ctx, client.StringRecord("full", "waits"), func(_ *client.Record, err error) { acked <- err })
		close(returned)
	}()
	select {
	case <-returned:
		t.Fatal("Produce returned while the buffer was full")
	default:
	}
	if err := bl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	<-returned
	if err := bl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-acked; err != nil {
		t.Fatal(err)
	}
}

func TestProducerRetriesAcrossBrokerRestart(t *testing.T) {
	t.Parallel()
	cfg := brokertest.Config(t)
	b1 := brokertest.StartConfig(t, cfg)
	addr := b1.Addr()
	cl := newClient(t, addr, client.RequiredAcks(client.AllISRAcks), client.DeliveryTimeout(50*time.Second),
		client.RequestTimeout(5*time.Second))
	createTopic(t, cl, "restart", 2)
	ctx := testCtx(t)
	for i := 0; i < 10; i++ {
		if err := cl.ProduceSync(ctx, client.KeyStringRecord("restart", fmt.Sprint(i), "before")); err != nil {
			t.Fatal(err)
		}
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	if err := b1.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	// Produce while the broker is down: the records wait and retry.
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := 0; i < 20; i++ {
		wg.Add(1)
		cl.Produce(ctx, client.KeyStringRecord("restart", fmt.Sprint(i), "during"), func(_ *client.Record, err error) {
			if err != nil {
				errs <- err
			}
			wg.Done()
		})
	}
	cfg.ListenAddr = addr
	brokertest.StartConfig(t, cfg)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("record failed across restart: %v", err)
	}
	consumeN(t, cl, "restart", []int32{0, 1}, client.AtStart(), 30)
}

// TestProducerCloseRacingProduce closes clients while goroutines produce
// flat out: every Produce, whether it returns before, during or after
// Close, ends in exactly one callback (an ack, or a failure such as
// ErrClosed), one made after Close returned fails with ErrClosed before
// Produce returns, and Close leaves nothing buffered. Which Produce calls
// straddle which step of Close is up to the scheduler; the worst case, a
// record reaching its partition after Close failed the partitions, is
// replayed step by step by TestProducerCloseRacingProduceAfterFailAll.
func TestProducerCloseRacingProduce(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	const topic = "close-race"
	createTopic(t, newClient(t, b.Addr()), topic, 4)
	ctx := testCtx(t)
	const iters, producers, afterClose = 12, 4, 20
	var total, failed atomic.Int64
	for iter := 0; iter < iters; iter++ {
		// Produced flat out, the buffer seldom empties: the delivery
		// timeout bounds Close's flush.
		cl, err := client.New(ctx, client.SeedBrokers(b.Addr()),
			client.RetryBackoff(20*time.Millisecond), client.DeliveryTimeout(250*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, client.StringRecord(topic, "warm")); err != nil {
			t.Fatal(err)
		}
		type call struct {
			n   atomic.Int32
			err error // set before n
		}
		var (
			pending sync.WaitGroup // one per Produce, done by its first callback
			extra   atomic.Int64   // callbacks past the first
			issued  atomic.Int64
			closed  atomic.Bool // Close returned
			errs    = make(chan error, producers)
		)
		closeAt := int64(50 + iter*250) // vary what is in flight when Close starts
		reached := make(chan struct{})
		var prodWG sync.WaitGroup
		for g := 0; g < producers; g++ {
			prodWG.Add(1)
			go func() {
				defer prodWG.Done()
				for late := 0; late < afterClose; {
					after := closed.Load()
					c := new(call)
					pending.Add(1)
					if issued.Add(1) == closeAt {
						close(reached)
					}
					cl.Produce(ctx, client.StringRecord(topic, fmt.Sprint(g)), func(_ *client.Record, err error) {
						c.err = err
						if c.n.Add(1) != 1 {
							extra.Add(1)
							return
						}
						if err != nil {
							failed.Add(1)
						}
						pending.Done()
					})
					if after {
						late++
						if c.n.Load() != 1 || !errors.Is(c.err, client.ErrClosed) {
							errs <- fmt.Errorf("Produce after Close: %d callbacks before it returned, error %v; want 1, ErrClosed", c.n.Load(), c.err)
							return
						}
					}
				}
			}()
		}
		<-reached
		cl.Close()
		closed.Store(true)
		prodWG.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("iteration %d: %v", iter, err)
		}
		done := make(chan struct{})
		go func() {
			pending.Wait()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Fatalf("iteration %d: of %d records produced around Close, some never got a callback (%d still buffered)",
				iter, issued.Load(), cl.BufferedRecords())
		}
		if n := extra.Load(); n != 0 {
			t.Fatalf("iteration %d: %d callbacks past the first", iter, n)
		}
		if n := cl.BufferedRecords(); n != 0 {
			t.Fatalf("iteration %d: BufferedRecords after Close = %d, want 0", iter, n)
		}
		total.Add(issued.Load())
	}
	t.Logf("%d records produced around %d Closes, %d failed", total.Load(), iters, failed.Load())
}

// tryProduce produces r and reports whether its callback already ran
// (with which error) by the time Produce returned.
func tryProduce(ctx context.Context, cl *client.Client, r *client.Record) (error, bool) {
	ch := make(chan error, 1)
	cl.Produce(ctx, r, func(_ *client.Record, err error) { ch <- err })
	select {
	case err := <-ch:
		return err, true
	default:
		return nil, false
	}
}

// TestProducerLargeBatchesKeepRequestsUnderLimit: batches of a topic with
// a large max.message.bytes, ready on two partitions at once, go in
// separate requests rather than one over the broker's 8 MiB limit.
func TestProducerLargeBatchesKeepRequestsUnderLimit(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	cl := newClient(t, b.Addr(), client.RecordPartitioner(client.ManualPartitioner()), client.Linger(time.Hour))
	ctx := testCtx(t)
	if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: "wide", Partitions: 2, Configs: map[string]string{"max.message.bytes": "5242880"}}); err != nil {
		t.Fatal(err)
	}
	value := make([]byte, 4<<20+512<<10)
	errs := make(chan error, 2)
	for p := int32(0); p < 2; p++ {
		cl.Produce(ctx, &client.Record{Topic: "wide", Partition: p, Value: value}, func(_ *client.Record, err error) { errs <- err })
	}
	if err := cl.Flush(ctx); err != nil { // both batches ready at once
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if err := <-errs; err != nil {
			t.Fatalf("two 4.5 MiB records on two partitions: %v", err)
		}
	}
}
