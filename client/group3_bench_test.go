package client_test

import (
	"context"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/client"
)

// BenchmarkGroupConsume3 reads b.N records of 100 bytes from a 3-partition
// topic (a third in each partition) on an in-process broker with three
// readers at once, each owning one partition: three partition consumers
// (PollFunc, one partition each: the baseline), three GroupConsumer
// members of one group (PollFunc), and three Subscribe streams of one
// group with raw_batches and a credit of 40,000 records and 32 MiB (above
// one producer batch, about 9,000 records, as docs/grpc-api.md
// recommends). The timer and the CPU count start once the three members
// own one partition each (the join is not timed; join-ms is how long
// the three took to get there), and stop when the three have read their
// partition to its end. Each reader's first reads come before the timer,
// as they would with the join untimed: a member fetches once assigned, a
// stream's messages are received (kept until the timer starts, at most
// its credit), and the partition consumers are started before it too and
// the timer waits for each one's first fetch. Records are counted when
// the reader handles them, after the timer starts.
//
//	go test ./client/ -run '^$' -bench 'BenchmarkGroupConsume3' -benchtime 1000000x -count 1
//
// (run it several times to interleave the variants, as the figures in
// docs/testing.md are.)
func BenchmarkGroupConsume3(b *testing.B) {
	const topic = "gbench3"
	setup := func(b *testing.B) (*broker3, map[int32]int64) {
		br, cl := groupBenchSetup(b, topic, true)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		ends, err := cl.ListOffsets(ctx, topic, client.AtEnd())
		if err != nil {
			b.Fatal(err)
		}
		var total int64
		for _, e := range ends {
			total += e
		}
		if len(ends) != 3 || total != int64(b.N) {
			b.Fatalf("end offsets %v, want 3 partitions holding %d records", ends, b.N)
		}
		return &broker3{addr: br.Addr(), cl: cl}, ends
	}
	// run reads with three readers at once, read(i) returning the records
	// reader i read or an error, and reports them.
	run := func(b *testing.B, cpu0 time.Duration, read func(i int) (int, error)) {
		var wg sync.WaitGroup
		counts, errs := make([]int, 3), make([]error, 3)
		for i := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				counts[i], errs[i] = read(i)
			}()
		}
		wg.Wait()
		b.StopTimer()
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
		reportRecords(b, counts[0]+counts[1]+counts[2], cpu0)
	}

	b.Run("partition-consumers", func(b *testing.B) {
		br, ends := setup(b)
		b.SetBytes(benchValueSize)
		conss := make([]*client.Consumer, 3)
		for p := range conss {
			cons, err := br.cl.NewConsumer(map[string]map[int32]client.Offset{topic: {int32(p): client.AtStart()}})
			if err != nil {
				b.Fatal(err)
			}
			defer cons.Close()
			conss[p] = cons
		}
		// As the members' and the streams' first reads come before the
		// timer, the consumers' first fetch comes back before it.
		for deadline := time.Now().Add(time.Minute); ; {
			ready := 0
			for p, cons := range conss {
				if cons.HighWatermark(topic, int32(p)) >= 0 {
					ready++
				}
			}
			if ready == 3 {
				break
			}
			if time.Now().After(deadline) {
				b.Fatal("the 3 consumers have no fetch back")
			}
			time.Sleep(time.Millisecond) // polling the first fetches
		}
		b.ResetTimer()
		cpu0 := cpuTime()
		run(b, cpu0, func(p int) (int, error) {
			got := 0
			for int64(got) < ends[int32(p)] {
				n, err := conss[p].PollFunc(context.Background(), func(*client.Record) {})
				if err != nil {
					return got, err
				}
				got += n
			}
			return got, nil
		})
	})

	b.Run("group-consumers", func(b *testing.B) {
		br, ends := setup(b)
		b.SetBytes(benchValueSize)
		joined := time.Now()
		gs := make([]*client.GroupConsumer, 3)
		for i := range gs {
			g, err := br.cl.NewGroupConsumer(client.GroupConfig{Group: fmt.Sprint("gb3-", b.N), Topics: []string{topic}})
			if err != nil {
				b.Fatal(err)
			}
			defer g.Close(context.Background())
			gs[i] = g
		}
		owned := make([]int32, 3)
		for deadline := time.Now().Add(time.Minute); ; {
			seen := map[int32]bool{}
			for i, g := range gs {
				if a := g.Assignment(); len(a) == 1 {
					owned[i] = a[0].Partition
					seen[a[0].Partition] = true
				}
			}
			if len(seen) == 3 {
				break
			}
			if time.Now().After(deadline) {
				b.Fatal("the 3 members do not own one partition each")
			}
			time.Sleep(time.Millisecond) // polling the assignments
		}
		joinMs := float64(time.Since(joined).Microseconds()) / 1000
		b.ResetTimer()
		cpu0 := cpuTime()
		run(b, cpu0, func(i int) (int, error) {
			got := 0
			for int64(got) < ends[owned[i]] {
				n, err := gs[i].PollFunc(context.Background(), func(*client.Record) {})
				if err != nil {
					return got, err
				}
				got += n
			}
			return got, nil
		})
		b.ReportMetric(joinMs, "join-ms")
	})

	b.Run("subscribe-raw", func(b *testing.B) {
		br, ends := setup(b)
		b.SetBytes(benchValueSize)
		joined := time.Now()
		group := fmt.Sprint("sb3-", b.N)
		type state struct {
			mu    sync.Mutex
			owned []int32 // the partitions of the last assignment
		}
		states := make([]*state, 3)
		streams := make([]grpc.BidiStreamingClient[quirev1.SubscribeRequest, quirev1.SubscribeResponse], 3)
		events := make([]chan *quirev1.SubscribeResponse, 3)
		recvErrs := make([]chan error, 3)
		for i := range streams {
			stream, err := quirev1.NewGroupsClient(bareConn(b, br.addr)).Subscribe(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			if err := stream.Send(&quirev1.SubscribeRequest{Request: &quirev1.SubscribeRequest_Start{Start: &quirev1.SubscribeStart{
				Group: group, Subscription: &quirev1.GroupSubscription{Topics: []string{topic}}, Batches: true, RawBatches: true,
				MaxOutstandingRecords: 40000, MaxOutstandingBytes: 32 << 20, Format: quirev1.RecordFormat_RECORD_FORMAT_BYTES}}}); err != nil {
				b.Fatal(err)
			}
			streams[i], states[i] = stream, &state{}
			// Received on a goroutine of its own, so that the reader
			// can wait for the start while messages come.
			events[i], recvErrs[i] = make(chan *quirev1.SubscribeResponse, 64), make(chan error, 1)
			go func() {
				defer close(events[i])
				for {
					resp, err := stream.Recv()
					if err != nil {
						if err != io.EOF {
							recvErrs[i] <- err
						}
						return
					}
					if a := resp.GetAssignment(); a != nil {
						var ps []int32
						for _, t := range a.Owned.GetTopics() {
							ps = append(ps, t.Partitions...)
						}
						states[i].mu.Lock()
						states[i].owned = ps
						states[i].mu.Unlock()
					}
					events[i] <- resp
				}
			}()
		}
		owned := make([]int32, 3)
		for deadline := time.Now().Add(time.Minute); ; {
			seen := map[int32]bool{}
			for i, s := range states {
				s.mu.Lock()
				if len(s.owned) == 1 {
					owned[i] = s.owned[0]
					seen[s.owned[0]] = true
				}
				s.mu.Unlock()
			}
			if len(seen) == 3 {
				break
			}
			if time.Now().After(deadline) {
				b.Fatal("the 3 streams do not own one partition each")
			}
			time.Sleep(time.Millisecond) // polling the assignments
		}
		joinMs := float64(time.Since(joined).Microseconds()) / 1000
		var closed sync.WaitGroup
		b.ResetTimer()
		cpu0 := cpuTime()
		run(b, cpu0, func(i int) (int, error) {
			stream, p := streams[i], owned[i]
			next, got := int64(0), 0
			var rec client.Record
			for next < ends[p] {
				var resp *quirev1.SubscribeResponse
				select {
				case resp = <-events[i]:
				case err := <-recvErrs[i]:
					return got, err
				}
				if resp == nil {
					return got, fmt.Errorf("stream %d ended at offset %d of partition %d", i, next, p)
				}
				rb := resp.GetRawBatch()
				if rb == nil || rb.Partition != p {
					// an assignment, or a batch of a partition the
					// stream owned before the group was stable
					continue
				}
				err := decodeRawBatch(rb, &rec, func() {
					if rec.Offset >= next {
						next = rec.Offset + 1
						got++
					}
				})
				if err != nil {
					return got, err
				}
				if err := stream.Send(&quirev1.SubscribeRequest{Request: &quirev1.SubscribeRequest_Ack{Ack: &quirev1.SubscribeAck{
					Partitions: []*quirev1.AckedOffsets{{Topic: rb.Topic, Partition: rb.Partition, NextOffset: rb.NextOffset}}}}}); err != nil {
					return got, err
				}
			}
			// A clean close, the stream read to its end, untimed: the
			// member commits and leaves while the broker is up.
			closed.Add(1)
			go func() {
				defer closed.Done()
				_ = stream.CloseSend()
				for range events[i] {
				}
			}()
			return got, nil
		})
		b.ReportMetric(joinMs, "join-ms")
		closed.Wait()
	})
}

type broker3 struct {
	addr string
	cl   *client.Client
}
