package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/client"
	"github.com/quirelog/quire/record"
)

// windowBroker is a one-partition broker (topic "w") that keeps the
// sequence rules of a leader (a producer's last 5 batches recognised as
// duplicates, a gap refused as out of order, a new epoch from sequence 0)
// over a log of record values, and holds its answers: a request is
// answered only once hold requests are unanswered, or none came for
// quiet, or release was called, oldest first, so the client's window
// fills up and is measured.
// fault may make the n-th request fail: refused before the append, or
// appended and answered with an error as if the answer were lost.
// A second node (addNode) serves the same log: the partition's leader is
// leader, and while muted is set node 1 appends what it receives but does
// not answer (a leader paused after its followers copied the requests).
type windowBroker struct {
	quirev1.UnimplementedMetadataServer
	quirev1.UnimplementedProducerServer
	addr string

	mu       sync.Mutex
	hold     int
	released bool
	lastRecv time.Time
	fault    func(n int) (code quirev1.ErrorCode, appended bool)
	brokers  []*quirev1.Broker
	leader   int32
	muted    bool
	// received and answered by node 1 while muted
	mutedOut int

	log       []string
	epoch     int32
	window    []seqRange // the producer's last batches at epoch
	firstSeen map[[2]int32]string
	inits     int

	requests    int // received
	outstanding int // received, not answered
	maxOut      int
	outBatches  int // batches in unanswered requests
	maxBatches  int
	outOfOrder  int // requests answered OUT_OF_ORDER_SEQUENCE_NUMBER
	resentDiff  []string
	sentRecords map[string]bool // values seen in any request
}

type seqRange struct {
	first, last int32
	offset      int64
}

func startWindow(t *testing.T, hold int) *windowBroker {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	wb := &windowBroker{addr: lis.Addr().String(), hold: hold, firstSeen: map[[2]int32]string{}, sentRecords: map[string]bool{},
		brokers: []*quirev1.Broker{{Id: 1, Address: lis.Addr().String()}}, leader: 1}
	s := grpc.NewServer()
	quirev1.RegisterMetadataServer(s, wb)
	quirev1.RegisterProducerServer(s, windowNode{wb, 1})
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(func() {
		wb.release()
		s.Stop()
	})
	return wb
}

// windowNode is one node serving a windowBroker's log.
type windowNode struct {
	*windowBroker
	id int32
}

func (n windowNode) ProduceStream(stream quirev1.Producer_ProduceStreamServer) error {
	return n.windowBroker.produceStream(stream, n.id)
}

// addNode starts node 2 on the same log.
func (wb *windowBroker) addNode(t *testing.T) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	quirev1.RegisterMetadataServer(s, wb)
	quirev1.RegisterProducerServer(s, windowNode{wb, 2})
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(func() {
		wb.release()
		s.Stop()
	})
	wb.mu.Lock()
	wb.brokers = append(wb.brokers, &quirev1.Broker{Id: 2, Address: lis.Addr().String()})
	wb.mu.Unlock()
}

// release answers everything from now on.
func (wb *windowBroker) release() {
	wb.mu.Lock()
	wb.released = true
	wb.mu.Unlock()
}

func (wb *windowBroker) GetMetadata(context.Context, *quirev1.GetMetadataRequest) (*quirev1.GetMetadataResponse, error) {
	wb.mu.Lock()
	defer wb.mu.Unlock()
	return &quirev1.GetMetadataResponse{ClusterId: "window", ControllerId: 1, Brokers: wb.brokers, MetadataIndex: uint64(wb.leader),
		Topics: []*quirev1.TopicMetadata{{Name: "w", TopicId: "w", Partitions: []*quirev1.PartitionMetadata{
			{Partition: 0, Leader: wb.leader, LeaderEpoch: wb.leader, Replicas: []int32{1}, Isr: []int32{1}},
		}}},
	}, nil
}

func (wb *windowBroker) InitProducerId(_ context.Context, req *quirev1.InitProducerIdRequest) (*quirev1.InitProducerIdResponse, error) {
	wb.mu.Lock()
	defer wb.mu.Unlock()
	wb.inits++
	if req.GetProducerId() != 0 {
		return &quirev1.InitProducerIdResponse{ProducerId: 9, ProducerEpoch: req.ProducerEpoch + 1}, nil
	}
	return &quirev1.InitProducerIdResponse{ProducerId: 9}, nil
}

// appendLocked applies the sequence rules to one request's batches.
func (wb *windowBroker) appendLocked(recs []byte, code quirev1.ErrorCode, appended bool) (int64, quirev1.ErrorCode) {
	type batch struct {
		h      record.Header
		values []string
	}
	var bs []batch
	_ = record.SplitBatches(recs, func(raw []byte, h record.Header) error {
		b := batch{h: h}
		_ = record.ForEachRecord(raw, func(r *record.Record) error {
			v := string(r.Value[:4]) // rNNN, then padding
			b.values = append(b.values, v)
			wb.sentRecords[v] = true
			return nil
		})
		// A batch sent again must carry what it carried the first time.
		key := [2]int32{int32(h.ProducerEpoch), h.BaseSequence}
		if h.ProducerID < 0 {
			// not numbered
		} else if first, ok := wb.firstSeen[key]; ok && first != b.values[0] {
			wb.resentDiff = append(wb.resentDiff, fmt.Sprintf("epoch %d seq %d: %q, first %q", key[0], key[1], b.values[0], first))
		} else if !ok {
			wb.firstSeen[key] = b.values[0]
		}
		bs = append(bs, b)
		return nil
	})
	if code != quirev1.ErrorCode_NONE && !appended {
		return -1, code
	}
	for _, w := range wb.window {
		if bs[0].h.ProducerID >= 0 && int32(bs[0].h.ProducerEpoch) == wb.epoch && w.first == bs[0].h.BaseSequence {
			return w.offset, code // a duplicate (of the whole request: the client resends groups)
		}
	}
	base := int64(len(wb.log))
	for _, b := range bs {
		h := b.h
		last := int32(-1)
		if len(wb.window) > 0 {
			last = wb.window[len(wb.window)-1].last
		}
		switch {
		case h.ProducerID < 0:
		case int32(h.ProducerEpoch) > wb.epoch && h.BaseSequence == 0:
			wb.epoch, wb.window = int32(h.ProducerEpoch), nil
		case int32(h.ProducerEpoch) == wb.epoch && h.BaseSequence == last+1:
		default:
			wb.outOfOrder++
			return -1, quirev1.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER
		}
		if h.ProducerID < 0 {
			wb.log = append(wb.log, b.values...)
			continue
		}
		wb.window = append(wb.window, seqRange{first: h.BaseSequence, last: h.BaseSequence + h.LastOffsetDelta, offset: int64(len(wb.log))})
		if len(wb.window) > 5 {
			wb.window = wb.window[1:]
		}
		wb.log = append(wb.log, b.values...)
	}
	return base, code
}

func (wb *windowBroker) produceStream(stream quirev1.Producer_ProduceStreamServer, node int32) error {
	type answer struct {
		resp    *quirev1.ProduceResponse
		batches int
		muted   bool // received by node 1 while muted
	}
	const quiet = 100 * time.Millisecond
	answers := make(chan answer, 64)
	sendDone := make(chan error, 1)
	go func() {
		var err error
		for a := range answers {
			wb.mu.Lock()
			for !wb.released && (a.muted || wb.outstanding < wb.hold && time.Since(wb.lastRecv) < quiet) {
				wb.mu.Unlock()
				time.Sleep(time.Millisecond) // the hold, not synchronisation
				wb.mu.Lock()
			}
			wb.outstanding-- // before the answer: the client may send the next at once
			wb.outBatches -= a.batches
			if a.muted {
				wb.mutedOut--
			}
			wb.mu.Unlock()
			if err == nil {
				err = stream.Send(a.resp)
			}
		}
		sendDone <- err
	}()
	defer func() {
		close(answers)
		<-sendDone
	}()
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		recs := req.Partitions[0].Records
		nb := 0
		_ = record.SplitBatches(recs, func([]byte, record.Header) error { nb++; return nil })
		wb.mu.Lock()
		wb.requests++
		code, appended := quirev1.ErrorCode_NONE, false
		if wb.fault != nil {
			code, appended = wb.fault(wb.requests)
		}
		base, code := wb.appendLocked(recs, code, appended)
		wb.outstanding++
		wb.outBatches += nb
		wb.maxOut = max(wb.maxOut, wb.outstanding)
		wb.maxBatches = max(wb.maxBatches, wb.outBatches)
		wb.lastRecv = time.Now()
		muted := node == 1 && wb.muted
		if muted {
			wb.mutedOut++
		}
		wb.mu.Unlock()
		res := &quirev1.PartitionProduceResult{Topic: "w", Partition: 0, BaseOffset: base, LastOffset: -1}
		if code != quirev1.ErrorCode_NONE {
			res.Error = &quirev1.Error{Code: code, Message: "scripted " + code.String(), Retriable: code != quirev1.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER}
		}
		answers <- answer{&quirev1.ProduceResponse{CorrelationId: req.CorrelationId, Partitions: []*quirev1.PartitionProduceResult{res}}, nb, muted}
	}
}

// produceOneByOne produces n records, one per batch, each once the
// broker has seen the one before the one before (a record fills its batch,
// the next one seals it and the sink sends it alone: the client lingers
// over the open batch), and returns their outcomes once all are called
// back.
func produceOneByOne(t *testing.T, cl *client.Client, wb *windowBroker, n int) (offsets []int64, errs []error, order []int) {
	t.Helper()
	ctx := testCtx(t)
	var mu sync.Mutex
	offsets, errs = make([]int64, n), make([]error, n)
	pad := make([]byte, 700) // with windowOpts, one record per batch
	var wg sync.WaitGroup
	wg.Add(n)
	for i := range n {
		v := fmt.Sprintf("r%03d", i)
		cl.Produce(ctx, &client.Record{Topic: "w", Partition: 0, Value: append([]byte(v), pad...)}, func(r *client.Record, err error) {
			mu.Lock()
			offsets[i], errs[i] = r.Offset, err
			order = append(order, i)
			mu.Unlock()
			wg.Done()
		})
		for i > 0 {
			prev := fmt.Sprintf("r%03d", i-1)
			wb.mu.Lock()
			seen := wb.sentRecords[prev]
			wb.mu.Unlock()
			if seen {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("record %d never reached the broker", i-1)
			}
			time.Sleep(time.Millisecond) // polling, with the test's deadline
		}
	}
	wb.release()
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	return offsets, errs, order
}

// windowOpts make every record a batch of its own, sent once the next
// record fills the next batch.
func windowOpts() []client.Opt {
	return []client.Opt{client.BatchMaxBytes(1024), client.Linger(time.Hour)}
}

// checkLog fails unless the broker's log holds r000..r(n-1) once each, in
// order, and every record was called back in order with its offset.
func checkLog(t *testing.T, wb *windowBroker, n int, offsets []int64, errs []error, order []int) {
	t.Helper()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("record %d: %v", i, errs[i])
		}
		if offsets[i] != int64(i) {
			t.Fatalf("record %d acknowledged at offset %d", i, offsets[i])
		}
		if order[i] != i {
			t.Fatalf("callback %d was record %d's: not in the order produced", i, order[i])
		}
	}
	wb.mu.Lock()
	defer wb.mu.Unlock()
	if len(wb.log) != n {
		t.Fatalf("log of %d records, want %d: %v", len(wb.log), n, wb.log)
	}
	for i, v := range wb.log {
		if want := fmt.Sprintf("r%03d", i); v != want {
			t.Fatalf("offset %d holds %s, want %s", i, v, want)
		}
	}
	if len(wb.resentDiff) > 0 {
		t.Fatalf("a sequence sent again with other records: %v", wb.resentDiff)
	}
}

// TestProducerWindowInFlight: a partition has up to
// MaxInFlightPerPartition requests in flight, 5 by default with
// idempotence (and at most 5 batches), 1 without; more than 5 with
// idempotence is refused by New.
func TestProducerWindowInFlight(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts []client.Opt
		want int
	}{
		{"idempotent default", nil, 5},
		{"not idempotent default", []client.Opt{client.Idempotent(false)}, 1},
		{"idempotent 3", []client.Opt{client.MaxInFlightPerPartition(3)}, 3},
		{"not idempotent 8", []client.Opt{client.Idempotent(false), client.MaxInFlightPerPartition(8)}, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wb := startWindow(t, tc.want)
			cl := newClient(t, wb.addr, append(windowOpts(), tc.opts...)...)
			const n = 40
			offsets, errs, order := produceOneByOne(t, cl, wb, n)
			checkLog(t, wb, n, offsets, errs, order)
			wb.mu.Lock()
			defer wb.mu.Unlock()
			if wb.maxOut != tc.want {
				t.Fatalf("at most %d requests in flight, want %d", wb.maxOut, tc.want)
			}
			if tc.want <= 5 && wb.maxBatches > 5 {
				t.Fatalf("%d batches in flight", wb.maxBatches)
			}
			if reqs, _ := client.PeakInFlight(cl); reqs != tc.want {
				t.Fatalf("the producer counted %d requests in flight at most, want %d", reqs, tc.want)
			}
		})
	}
	for _, n := range []int{0, 6} {
		_, err := client.New(testCtx(t), client.SeedBrokers("127.0.0.1:1"), client.MaxInFlightPerPartition(n))
		if err == nil || !strings.Contains(err.Error(), "MaxInFlightPerPartition") {
			t.Fatalf("MaxInFlightPerPartition(%d) with idempotence: %v", n, err)
		}
	}
}

// TestProducerWindowResendsInOrder: with 5 requests in flight, one is
// refused (NOT_LEADER_OR_FOLLOWER) and the ones behind it are refused as
// out of order, as a broker missing the first must; another is written
// and its answer lost (REQUEST_TIMED_OUT). The producer sends them again
// in order with the same sequences, under the same epoch: the
// application sees no error, the log holds every record once, in order.
func TestProducerWindowResendsInOrder(t *testing.T) {
	t.Parallel()
	wb := startWindow(t, 5)
	wb.fault = func(n int) (quirev1.ErrorCode, bool) {
		switch n {
		case 8, 20:
			return quirev1.ErrorCode_NOT_LEADER_OR_FOLLOWER, false
		case 14:
			return quirev1.ErrorCode_REQUEST_TIMED_OUT, true
		}
		return quirev1.ErrorCode_NONE, false
	}
	cl := newClient(t, wb.addr, append(windowOpts(), client.RetryBackoff(time.Millisecond))...)
	const n = 60
	offsets, errs, order := produceOneByOne(t, cl, wb, n)
	checkLog(t, wb, n, offsets, errs, order)
	wb.mu.Lock()
	defer wb.mu.Unlock()
	if wb.outOfOrder == 0 {
		t.Fatal("no request was refused as out of order: the window was not exercised")
	}
	if wb.inits != 1 || wb.epoch != 0 {
		t.Fatalf("%d InitProducerId calls, epoch %d: the refusals behind a failed request moved the producer to a new epoch", wb.inits, wb.epoch)
	}
}

// TestProducerWindowNewEpochAfterLostState: the broker forgets the
// producer (as after expiry) with requests in flight: the first refusal,
// with nothing unsettled ahead of it, moves the producer to its next epoch
// and everything behind goes again under it, from sequence 0, in order.
func TestProducerWindowNewEpochAfterLostState(t *testing.T) {
	t.Parallel()
	wb := startWindow(t, 5)
	wb.fault = func(n int) (quirev1.ErrorCode, bool) {
		if n == 12 {
			wb.window = nil // the producer's state is lost; what follows is a gap
		}
		return quirev1.ErrorCode_NONE, false
	}
	cl := newClient(t, wb.addr, append(windowOpts(), client.RetryBackoff(time.Millisecond))...)
	const n = 40
	offsets, errs, order := produceOneByOne(t, cl, wb, n)
	checkLog(t, wb, n, offsets, errs, order)
	wb.mu.Lock()
	defer wb.mu.Unlock()
	if wb.epoch != 1 || wb.inits != 2 {
		t.Fatalf("epoch %d after %d InitProducerId calls, want epoch 1 after 2", wb.epoch, wb.inits)
	}
}

// TestProducerWindowLeavesAReplacedLeader: with 5 requests in flight to a
// leader that stops answering (it appended them, as a leader paused after
// its followers copied them), the metadata then naming another leader,
// the producer gives the 5 requests up and sends their batches to the new
// leader, in order, with the same sequences: the new leader recognises
// them as duplicates and answers with their first offsets. The old
// leader's late answers, once it resumes, are dropped. The log holds
// every record once, in order; callbacks run in the order produced; no
// more than 5 batches are ever unresolved.
func TestProducerWindowLeavesAReplacedLeader(t *testing.T) {
	t.Parallel()
	wb := startWindow(t, 5)
	wb.addNode(t)
	const mutedAt = 10
	wb.fault = func(n int) (quirev1.ErrorCode, bool) {
		if n == mutedAt {
			wb.muted = true // from this request on, node 1 does not answer
		}
		return quirev1.ErrorCode_NONE, false
	}
	ctx := testCtx(t)
	moved := make(chan struct{})
	go func() {
		defer close(moved)
		for ctx.Err() == nil {
			wb.mu.Lock()
			if wb.mutedOut == 5 {
				// The window is full of requests node 1 holds: the
				// cluster replaces it.
				wb.leader = 2
				wb.mu.Unlock()
				return
			}
			wb.mu.Unlock()
			time.Sleep(time.Millisecond) // polling the fake broker, with the test's deadline
		}
	}()
	cl := newClient(t, wb.addr, append(windowOpts(), client.RetryBackoff(time.Millisecond),
		client.RequestTimeout(time.Minute))...)
	const n = 40
	offsets, errs, order := produceOneByOne(t, cl, wb, n)
	<-moved
	checkLog(t, wb, n, offsets, errs, order)
	if _, batches := client.PeakInFlight(cl); batches > 5 {
		t.Fatalf("%d batches of the partition in flight at once", batches)
	}
	wb.mu.Lock()
	defer wb.mu.Unlock()
	if wb.leader != 2 {
		t.Fatal("the leader was never replaced: the test did not fill the window at node 1")
	}
	if wb.inits != 1 || wb.epoch != 0 {
		t.Fatalf("%d InitProducerId calls, epoch %d: the move cost the producer its epoch", wb.inits, wb.epoch)
	}
}
