package client_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker/brokertest"
	"github.com/quirelog/quire/client"
	"github.com/quirelog/quire/record"
)

// batchHeaders fetches the headers of every batch of topic-p up to end.
func batchHeaders(t *testing.T, addr, topic string, p int32, end int64) []record.Header {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	var out []record.Header
	for off := int64(0); off < end; {
		resp, err := quirev1.NewConsumerClient(cc).Fetch(testCtx(t), &quirev1.FetchRequest{
			Partitions: []*quirev1.FetchPartition{{Topic: topic, Partition: p, Offset: off}}})
		if err != nil {
			t.Fatal(err)
		}
		recs := resp.Partitions[0].Records
		if len(recs) == 0 {
			t.Fatalf("no batches at %d of %d", off, end)
		}
		if err := record.SplitBatches(recs, func(_ []byte, h record.Header) error {
			if h.NextOffset() > off {
				out = append(out, h)
				off = h.NextOffset()
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// By default every batch carries the producer's id and epoch and the
// partition's sequences, consecutive from 0; Idempotent(false) sends none.
func TestProducerIdempotentByDefault(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	for _, on := range []bool{true, false} {
		opts := []client.Opt{client.BatchMaxBytes(2048)}
		if !on {
			opts = append(opts, client.Idempotent(false))
		}
		cl := newClient(t, b.Addr(), opts...)
		topic := fmt.Sprint("idem-", on)
		createTopic(t, cl, topic, 1)
		var rs []*client.Record
		for i := 0; i < 300; i++ {
			rs = append(rs, &client.Record{Topic: topic, Partition: 0, Value: []byte(fmt.Sprintf("%04d-%0100d", i, 0))})
		}
		if err := cl.ProduceSync(testCtx(t), rs...); err != nil {
			t.Fatal(err)
		}
		hs := batchHeaders(t, b.Addr(), topic, 0, 300)
		if len(hs) < 2 {
			t.Fatalf("%d batches: want several", len(hs))
		}
		next := int32(0)
		for _, h := range hs {
			if !on {
				if h.ProducerID != -1 || h.BaseSequence != -1 {
					t.Fatalf("idempotence off: batch with producer %d sequence %d", h.ProducerID, h.BaseSequence)
				}
				continue
			}
			if h.ProducerID < 0 || h.ProducerEpoch != 0 || h.BaseSequence != next {
				t.Fatalf("batch at %d: producer %d epoch %d sequence %d, want sequence %d", h.BaseOffset, h.ProducerID, h.ProducerEpoch, h.BaseSequence, next)
			}
			next += h.NumRecords
		}
	}
}

func TestProducerIdempotentNeedsAcksAll(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	_, err := client.New(testCtx(t), client.SeedBrokers(b.Addr()), client.Idempotent(true), client.RequiredAcks(client.LeaderAck))
	if err == nil {
		t.Fatal("Idempotent(true) with acks=1 accepted")
	}
	// Left unset, acks=1 turns it off.
	cl := newClient(t, b.Addr(), client.RequiredAcks(client.LeaderAck))
	createTopic(t, cl, "acks1", 1)
	if err := cl.ProduceSync(testCtx(t), &client.Record{Topic: "acks1", Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	if hs := batchHeaders(t, b.Addr(), "acks1", 0, 1); hs[0].ProducerID != -1 {
		t.Fatalf("acks=1 batch with producer id %d", hs[0].ProducerID)
	}
}

// dropResponses breaks the produce stream instead of delivering a
// response, for the first n responses: the broker wrote the batches, the
// client does not know it and retries them.
type dropResponses struct{ left atomic.Int32 }

func (d *dropResponses) opt() client.Opt {
	return client.DialOptions(grpc.WithChainStreamInterceptor(
		func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			cs, err := streamer(ctx, desc, cc, method, opts...)
			if err != nil || method != quirev1.Producer_ProduceStream_FullMethodName {
				return cs, err
			}
			return &droppingStream{ClientStream: cs, d: d}, nil
		}))
}

type droppingStream struct {
	grpc.ClientStream
	d *dropResponses
}

func (s *droppingStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err == nil && s.d.left.Add(-1) >= 0 {
		return status.Error(codes.Unavailable, "response lost")
	}
	return err
}

// Retries of batches the broker wrote, after lost responses, are answered
// with the original offsets: the log holds each record once, in order.
func TestProducerIdempotentRetryWritesOnce(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	var drop dropResponses
	drop.left.Store(5)
	cl := newClient(t, b.Addr(), drop.opt(), client.BatchMaxBytes(1024))
	createTopic(t, cl, "retry", 1)
	const n = 200
	var mu sync.Mutex
	offsets := map[int64]int{}
	var wg sync.WaitGroup
	wg.Add(n)
	for i := 0; i < n; i++ {
		cl.Produce(testCtx(t), &client.Record{Topic: "retry", Partition: 0, Value: []byte(fmt.Sprintf("%04d-%060d", i, 0))}, func(r *client.Record, err error) {
			defer wg.Done()
			if err != nil {
				t.Errorf("record %d: %v", i, err)
				return
			}
			mu.Lock()
			offsets[r.Offset] = i
			mu.Unlock()
		})
	}
	wg.Wait()
	if drop.left.Load() >= 0 {
		t.Fatalf("only %d responses dropped", 5-drop.left.Load())
	}
	for off := int64(0); off < n; off++ {
		if i, ok := offsets[off]; !ok || i != int(off) {
			var hs []string
			for _, h := range batchHeaders(t, b.Addr(), "retry", 0, n) {
				hs = append(hs, fmt.Sprintf("%d+%d seq %d", h.BaseOffset, h.NumRecords, h.BaseSequence))
			}
			t.Fatalf("offset %d: acknowledged for record %d (%v) of %d acknowledged; the log's batches: %v", off, i, ok, len(offsets), hs)
		}
	}
	recs := consumeN(t, cl, "retry", []int32{0}, client.AtStart(), n)
	for i, r := range recs {
		if want := fmt.Sprintf("%04d-%060d", i, 0); string(r.Value) != want || r.Offset != int64(i) {
			t.Fatalf("offset %d: %q", r.Offset, r.Value[:4])
		}
	}
	hs := batchHeaders(t, b.Addr(), "retry", 0, n)
	if last := hs[len(hs)-1]; last.NextOffset() != n {
		t.Fatalf("log ends at %d, want %d", last.NextOffset(), n)
	}
}

// swallowResponses never delivers a produce response.
type swallowResponses struct{}

func (swallowResponses) opt() client.Opt {
	return client.DialOptions(grpc.WithChainStreamInterceptor(
		func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			cs, err := streamer(ctx, desc, cc, method, opts...)
			if err != nil || method != quirev1.Producer_ProduceStream_FullMethodName {
				return cs, err
			}
			return &swallowingStream{ClientStream: cs, ctx: ctx}, nil
		}))
}

type swallowingStream struct {
	grpc.ClientStream
	ctx context.Context
}

func (s *swallowingStream) RecvMsg(any) error {
	<-s.ctx.Done()
	return s.ctx.Err()
}

// A batch sent and never answered within the delivery timeout is reported
// as of unknown outcome, not retried under a new sequence.
func TestProducerIdempotentUnknownOutcome(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	// Timeouts a loaded machine does not run out on the calls that are
	// answered (the client's first metadata, the create): only the
	// swallowed produce runs them out.
	cl := newClient(t, b.Addr(), swallowResponses{}.opt(), client.DeliveryTimeout(5*time.Second), client.RequestTimeout(2*time.Second))
	createTopic(t, newClient(t, b.Addr()), "unknown", 1)
	err := cl.ProduceSync(testCtx(t), &client.Record{Topic: "unknown", Partition: 0, Value: []byte("v")})
	if !errors.Is(err, client.ErrUnknownOutcome) {
		t.Fatalf("got %v, want ErrUnknownOutcome", err)
	}
}
