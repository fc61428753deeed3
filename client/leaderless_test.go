package client_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/client"
	"github.com/quirelog/quire/internal/poll"
	"github.com/quirelog/quire/record"
)

// leaderlessParts is how many partitions topic "ll" of a leaderBroker
// has.
const leaderlessParts = 4

// leaderBroker is one broker (id 1) leading topic "ll", whose metadata
// answers follow a script by the number of the GetMetadata call (from
// 1): what the n-th answer says of the topic, as a node coming back
// after a crash does while it recovers (partitions without a leader, the
// broker still fenced, the topic not known yet). Produce requests are
// acknowledged, each partition's records numbered from 0.
type leaderBroker struct {
	quirev1.UnimplementedMetadataServer
	quirev1.UnimplementedProducerServer
	addr string

	script func(n int) metaAnswer

	mu      sync.Mutex
	calls   int
	next    [leaderlessParts]int64
	written [leaderlessParts]int
}

// metaAnswer is one scripted metadata answer: the partitions without a
// leader, whether the broker is fenced, a topic-level error, or no answer
// at all (block: the call waits until the client gives up on it).
type metaAnswer struct {
	leaderless []int32
	fenced     bool
	topicErr   quirev1.ErrorCode
	block      bool
}

func startLeaderBroker(t *testing.T, script func(n int) metaAnswer) *leaderBroker {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lb := &leaderBroker{addr: lis.Addr().String(), script: script}
	s := grpc.NewServer()
	quirev1.RegisterMetadataServer(s, lb)
	quirev1.RegisterProducerServer(s, lb)
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return lb
}

func (lb *leaderBroker) GetMetadata(ctx context.Context, _ *quirev1.GetMetadataRequest) (*quirev1.GetMetadataResponse, error) {
	lb.mu.Lock()
	lb.calls++
	a := lb.script(lb.calls)
	lb.mu.Unlock()
	if a.block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	tm := &quirev1.TopicMetadata{Name: "ll", TopicId: "ll"}
	if a.topicErr != quirev1.ErrorCode_NONE {
		tm.Error = &quirev1.Error{Code: a.topicErr, Message: "scripted " + a.topicErr.String(), Retriable: true}
	} else {
		for p := range int32(leaderlessParts) {
			leader := int32(1)
			for _, q := range a.leaderless {
				if q == p {
					leader = -1
				}
			}
			tm.Partitions = append(tm.Partitions, &quirev1.PartitionMetadata{Partition: p, Leader: leader, LeaderEpoch: 1,
				Replicas: []int32{1}, Isr: []int32{1}})
		}
	}
	return &quirev1.GetMetadataResponse{ClusterId: "leaderless", ControllerId: 1,
		Brokers: []*quirev1.Broker{{Id: 1, Address: lb.addr, Fenced: a.fenced}}, Topics: []*quirev1.TopicMetadata{tm}}, nil
}

func (lb *leaderBroker) InitProducerId(context.Context, *quirev1.InitProducerIdRequest) (*quirev1.InitProducerIdResponse, error) {
	return &quirev1.InitProducerIdResponse{ProducerId: 7}, nil
}

func (lb *leaderBroker) ProduceStream(stream quirev1.Producer_ProduceStreamServer) error {
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		resp := &quirev1.ProduceResponse{CorrelationId: req.CorrelationId}
		lb.mu.Lock()
		for _, p := range req.Partitions {
			res := &quirev1.PartitionProduceResult{Topic: p.Topic, Partition: p.Partition, LastOffset: -1}
			n := int64(0)
			if p.Partition >= 0 && p.Partition < leaderlessParts {
				_ = record.SplitBatches(p.Records, func(_ []byte, h record.Header) error {
					n += int64(h.LastOffsetDelta) + 1
					return nil
				})
				res.BaseOffset = lb.next[p.Partition]
				lb.next[p.Partition] += n
				lb.written[p.Partition]++
			} else {
				res.Error = &quirev1.Error{Code: quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, Message: "no such partition"}
			}
			resp.Partitions = append(resp.Partitions, res)
		}
		lb.mu.Unlock()
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}

// produceEach produces one record to each partition of "ll" and returns
// the callbacks' errors once all have run, with when each ran; it fails t
// if they have not within poll.Timeout (records parked for a leader and
// never sent nor failed).
func produceEach(t *testing.T, cl *client.Client) ([leaderlessParts]error, [leaderlessParts]time.Time) {
	t.Helper()
	var errs [leaderlessParts]error
	var at [leaderlessParts]time.Time
	var mu sync.Mutex
	done := make(chan struct{}, leaderlessParts)
	for p := range int32(leaderlessParts) {
		cl.Produce(testCtx(t), &client.Record{Topic: "ll", Partition: p, Value: []byte("v")}, func(r *client.Record, err error) {
			mu.Lock()
			errs[p], at[p] = err, time.Now()
			mu.Unlock()
			done <- struct{}{}
		})
	}
	deadline := time.NewTimer(poll.Timeout)
	defer deadline.Stop()
	for got := 0; got < leaderlessParts; got++ {
		select {
		case <-done:
		case <-deadline.C:
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("after %v, %d of %d records neither acknowledged nor failed (buffered: %d); outcomes %v",
				poll.Timeout, leaderlessParts-got, leaderlessParts, cl.BufferedRecords(), errs)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	return errs, at
}

// TestProducerLeaderlessPartitionsDelivered: records produced to
// partitions the metadata named without a leader (or whose leader was
// fenced, or whose topic the next answer did not know) are sent once a
// later answer names the leader: the client asks again as long as records
// wait for a leader, rather than at the next periodic refresh
// (MetadataMaxAge, 5 minutes by default, past the test's wait).
func TestProducerLeaderlessPartitionsDelivered(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		script func(n int) metaAnswer
	}{
		{"some partitions without a leader", func(n int) metaAnswer {
			if n == 1 {
				return metaAnswer{leaderless: []int32{1, 3}}
			}
			return metaAnswer{}
		}},
		{"every partition without a leader twice", func(n int) metaAnswer {
			if n <= 2 {
				return metaAnswer{leaderless: []int32{0, 1, 2, 3}}
			}
			return metaAnswer{}
		}},
		{"leader fenced", func(n int) metaAnswer {
			if n == 1 {
				return metaAnswer{fenced: true}
			}
			return metaAnswer{}
		}},
		{"then the topic unknown", func(n int) metaAnswer {
			switch n {
			case 1:
				return metaAnswer{leaderless: []int32{1, 3}}
			case 2, 3:
				return metaAnswer{topicErr: quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION}
			case 4:
				return metaAnswer{topicErr: quirev1.ErrorCode_LEADER_NOT_AVAILABLE}
			}
			return metaAnswer{}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			lb := startLeaderBroker(t, tc.script)
			cl := newClient(t, lb.addr, client.RecordPartitioner(client.ManualPartitioner()))
			errs, _ := produceEach(t, cl)
			for p, err := range errs {
				if err != nil {
					t.Errorf("partition %d: %v", p, err)
				}
			}
			lb.mu.Lock()
			defer lb.mu.Unlock()
			for p, n := range lb.next {
				if n != 1 {
					t.Errorf("partition %d got %d records, want 1", p, n)
				}
			}
		})
	}
}

// TestProducerLeaderlessDeliveryTimeout: records of a partition that never
// gets a leader fail at their delivery timeout with an error saying so,
// whether the metadata keeps answering without a leader or no metadata
// answer comes at all; those of the partitions with a leader are written.
func TestProducerLeaderlessDeliveryTimeout(t *testing.T) {
	t.Parallel()
	const timeout = 300 * time.Millisecond
	for _, tc := range []struct {
		name   string
		script func(n int) metaAnswer
	}{
		{"leader never named", func(int) metaAnswer { return metaAnswer{leaderless: []int32{1, 3}} }},
		{"no metadata answer after the first", func(n int) metaAnswer {
			if n == 1 {
				return metaAnswer{leaderless: []int32{1, 3}}
			}
			return metaAnswer{block: true}
		}},
		{"topic unknown after the first", func(n int) metaAnswer {
			if n == 1 {
				return metaAnswer{leaderless: []int32{1, 3}}
			}
			return metaAnswer{topicErr: quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			lb := startLeaderBroker(t, tc.script)
			cl := newClient(t, lb.addr, client.RecordPartitioner(client.ManualPartitioner()), client.DeliveryTimeout(timeout))
			start := time.Now()
			errs, at := produceEach(t, cl)
			for p, err := range errs {
				if p == 1 || p == 3 {
					if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "no leader") {
						t.Errorf("partition %d: %v, want a delivery timeout with no leader", p, err)
					}
					if d := at[p].Sub(start); d < timeout {
						t.Errorf("partition %d failed after %v, before its delivery timeout %v", p, d, timeout)
					}
					continue
				}
				if err != nil {
					t.Errorf("partition %d: %v", p, err)
				}
			}
			lb.mu.Lock()
			defer lb.mu.Unlock()
			if lb.written[1] != 0 || lb.written[3] != 0 {
				t.Errorf("partitions without a leader were sent records: %v", lb.written)
			}
		})
	}
}
