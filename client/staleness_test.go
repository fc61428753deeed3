package client_test

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/client"
	"github.com/quirelog/quire/record"
)

// scriptedBroker answers metadata as told (its own image: an index, stale
// or not, and who leads topic "st") and hands every produce request to
// onProduce, which answers it (nil: success).
type scriptedBroker struct {
	quirev1.UnimplementedMetadataServer
	quirev1.UnimplementedProducerServer
	addr string

	mu        sync.Mutex
	peers     []*quirev1.Broker // every broker, as this one's image has them
	index     uint64
	stale     bool
	leader    int32
	onProduce func(n int, req *quirev1.ProduceRequest) *quirev1.Error
	// hangUp, when it says so for the nth request, ends the stream
	// without answering it.
	hangUp   func(n int) bool
	produces atomic.Int32
	// extra is a second topic the broker serves, led like "st", in the
	// answers that name it (empty: none), from the (extraHidden+1)th of
	// them on (a topic created after the first asks).
	extra       string
	extraHidden int
	extraAsks   int
}

func startScripted(t *testing.T) *scriptedBroker {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sb := &scriptedBroker{addr: lis.Addr().String()}
	s := grpc.NewServer()
	quirev1.RegisterMetadataServer(s, sb)
	quirev1.RegisterProducerServer(s, sb)
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return sb
}

func (sb *scriptedBroker) set(index uint64, stale bool, leader int32) {
	sb.mu.Lock()
	sb.index, sb.stale, sb.leader = index, stale, leader
	sb.mu.Unlock()
}

func (sb *scriptedBroker) GetMetadata(_ context.Context, req *quirev1.GetMetadataRequest) (*quirev1.GetMetadataResponse, error) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	topics := []string{"st"}
	if sb.extra != "" && slices.Contains(req.GetTopics(), sb.extra) {
		if sb.extraAsks++; sb.extraAsks > sb.extraHidden {
			topics = append(topics, sb.extra)
		}
	}
	resp := &quirev1.GetMetadataResponse{ClusterId: "scripted", ControllerId: 1, Brokers: sb.peers,
		MetadataIndex: sb.index, Stale: sb.stale}
	for _, name := range topics {
		resp.Topics = append(resp.Topics, &quirev1.TopicMetadata{Name: name, TopicId: name, Partitions: []*quirev1.PartitionMetadata{
			{Partition: 0, Leader: sb.leader, LeaderEpoch: int32(sb.index), Replicas: []int32{1, 2}, Isr: []int32{1, 2}},
		}})
	}
	return resp, nil
}

// InitProducerId gives every idempotent producer id 7, epoch 0.
func (sb *scriptedBroker) InitProducerId(context.Context, *quirev1.InitProducerIdRequest) (*quirev1.InitProducerIdResponse, error) {
	return &quirev1.InitProducerIdResponse{ProducerId: 7}, nil
}

func (sb *scriptedBroker) ProduceStream(stream quirev1.Producer_ProduceStreamServer) error {
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		n := int(sb.produces.Add(1))
		if sb.hangUp != nil && sb.hangUp(n) {
			return status.Error(codes.Unavailable, "scripted hang-up")
		}
		var e *quirev1.Error
		if sb.onProduce != nil {
			e = sb.onProduce(n, req)
		}
		resp := &quirev1.ProduceResponse{CorrelationId: req.CorrelationId}
		for _, p := range req.Partitions {
			resp.Partitions = append(resp.Partitions, &quirev1.PartitionProduceResult{Topic: p.Topic, Partition: p.Partition, Error: e})
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}

// scriptedPair is two brokers that know each other as ids 1 and 2.
func scriptedPair(t *testing.T) (*scriptedBroker, *scriptedBroker) {
	a, b := startScripted(t), startScripted(t)
	peers := []*quirev1.Broker{{Id: 1, Address: a.addr}, {Id: 2, Address: b.addr}}
	a.peers, b.peers = peers, peers
	return a, b
}

// TestClientMetadataNewestImageWins: of two brokers, one answers from an
// older image that names itself leader (a broker cut off from the
// controller), the other from a newer one naming the replaced leader. The
// client routes to the newer image's leader whichever broker it asks first,
// and prefers an answer not marked stale to one that is.
func TestClientMetadataNewestImageWins(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name             string
		aIndex, bIndex   uint64
		aStale, bStale   bool
		aLeader, bLeader int32
		wantA            bool // the produce reaches a
	}{
		{name: "higher index", aIndex: 10, bIndex: 20, aLeader: 1, bLeader: 2},
		{name: "higher index first", aIndex: 20, bIndex: 10, aLeader: 1, bLeader: 2, wantA: true},
		{name: "not stale over a higher stale index", aIndex: 30, bIndex: 20, aStale: true, aLeader: 1, bLeader: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := scriptedPair(t)
			a.set(tc.aIndex, tc.aStale, tc.aLeader)
			b.set(tc.bIndex, tc.bStale, tc.bLeader)
			for _, seeds := range [][]string{{a.addr, b.addr}, {b.addr, a.addr}} {
				a.produces.Store(0)
				b.produces.Store(0)
				// Both answer: a grace as long as the test's deadline
				// keeps a loaded machine's slow answer from being left out.
				cl, err := client.New(testCtx(t), client.SeedBrokers(seeds...), client.RequiredAcks(client.LeaderAck),
					client.MetadataGrace(time.Minute))
				if err != nil {
					t.Fatal(err)
				}
				if err := cl.ProduceSync(testCtx(t), &client.Record{Topic: "st", Partition: 0, Value: []byte("v")}); err != nil {
					cl.Close()
					t.Fatal(err)
				}
				cl.Close()
				gotA := a.produces.Load() > 0
				if gotA != tc.wantA || a.produces.Load()+b.produces.Load() != 1 {
					t.Errorf("seeds %v: produces reached a %d times, b %d times; want the %s", seeds,
						a.produces.Load(), b.produces.Load(), map[bool]string{true: "first", false: "second"}[tc.wantA])
				}
			}
		})
	}
}

// TestProducerBatchesFailByTheirOwnDeadline: a request holding an old
// batch (past its delivery timeout) and a young one fails with a
// retriable error. The old batch fails; the young one is sent again and
// delivered, rather than failing with the oldest batch of its request.
func TestProducerBatchesFailByTheirOwnDeadline(t *testing.T) {
	t.Parallel()
	a, _ := scriptedPair(t)
	a.set(1, false, 1)
	const delivery = 2 * time.Second
	var start time.Time
	release1 := make(chan struct{})
	var batches2, batches3 atomic.Int32
	count := func(req *quirev1.ProduceRequest, into *atomic.Int32) {
		_ = record.SplitBatches(req.Partitions[0].Records, func([]byte, record.Header) error { into.Add(1); return nil })
	}
	a.onProduce = func(n int, req *quirev1.ProduceRequest) *quirev1.Error {
		timedOut := &quirev1.Error{Code: quirev1.ErrorCode_REQUEST_TIMED_OUT, Message: "scripted timeout", Retriable: true}
		switch n {
		case 1: // a first record, held until the other two are produced
			<-release1
		case 2: // old and young, answered once old's delivery timeout passed
			count(req, &batches2)
			time.Sleep(time.Until(start.Add(delivery + 50*time.Millisecond)))
			return timedOut
		case 3:
			count(req, &batches3)
		}
		return nil
	}
	// One record per batch, one request in flight (acks=1's default).
	cl := newClient(t, a.addr, client.RequiredAcks(client.LeaderAck), client.DeliveryTimeout(delivery),
		client.RetryBackoff(10*time.Millisecond), client.BatchMaxBytes(1024))
	ctx := testCtx(t)
	value := func(s string) []byte { return append([]byte(s), make([]byte, 700)...) }
	errs := make(chan error, 3)
	cb := func(_ *client.Record, err error) { errs <- err }
	cl.Produce(ctx, &client.Record{Topic: "st", Partition: 0, Value: value("first")}, cb)
	for a.produces.Load() < 1 {
		if ctx.Err() != nil {
			t.Fatal("first request never arrived")
		}
		time.Sleep(time.Millisecond)
	}
	// old and young wait behind the first request until it is answered;
	// young, produced a quarter of the delivery timeout after old, has
	// that much time left when old's runs out.
	start = time.Now()
	cl.Produce(ctx, &client.Record{Topic: "st", Partition: 0, Value: value("old")}, cb)
	time.Sleep(time.Until(start.Add(delivery / 4)))
	cl.Produce(ctx, &client.Record{Topic: "st", Partition: 0, Value: value("young")}, cb)
	close(release1)
	if err := <-errs; err != nil {
		t.Fatalf("first record: %v", err)
	}
	old, young := <-errs, <-errs
	if old == nil {
		t.Errorf("the record past its delivery timeout succeeded")
	}
	if young != nil {
		t.Errorf("the young record failed with the old one: %v", young)
	}
	if got := batches2.Load(); got != 2 {
		t.Errorf("second request held %d batches, want old's and young's", got)
	}
	if got := batches3.Load(); got != 1 {
		t.Errorf("third request held %d batches, want young's alone", got)
	}
}

// TestClientUnknownTopicAskedAgain: a broker's metadata holds a topic a
// moment after the controller created it. A producer whose first
// metadata answers lack the topic asks again rather than failing the
// record; one that never appears fails with UNKNOWN_TOPIC_OR_PARTITION
// once the brokers have kept saying so.
func TestClientUnknownTopicAskedAgain(t *testing.T) {
	t.Parallel()
	a, _ := scriptedPair(t)
	a.set(5, false, 1)
	a.extra, a.extraHidden = "late", 2
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := client.New(ctx, client.SeedBrokers(a.addr), client.RetryBackoff(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &client.Record{Topic: "late", Value: []byte("v")}); err != nil {
		t.Fatalf("produce to a topic the metadata holds from its third answer on: %v", err)
	}
	a.mu.Lock()
	asks := a.extraAsks
	a.mu.Unlock()
	if asks < 3 {
		t.Fatalf("metadata naming the topic asked %d times, want at least 3", asks)
	}
	err = cl.ProduceSync(ctx, &client.Record{Topic: "never", Value: []byte("v")})
	if client.ErrorCode(err) != quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION {
		t.Fatalf("produce to a topic that never appears: %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
	}
}
