package client_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/client"
	"github.com/quirelog/quire/record"
)

// pfRecords is how many records each partition of the fake's topic "pf"
// holds.
const pfRecords = 10

// pfBroker is one broker leading topic "pf" (partitions 0 and 1, each
// with pfRecords records) and coordinating its groups: the join gets
// both partitions; once revoke is set, heartbeats are answered with the
// assignment without that partition (the same epoch, as KIP-848 revokes).
// It logs the heartbeats' owned partitions and the commits, in order.
type pfBroker struct {
	quirev1.UnimplementedMetadataServer
	quirev1.UnimplementedConsumerServer
	quirev1.UnimplementedGroupsServer
	addr string

	mu     sync.Mutex
	revoke int32 // -1 none
	events []string
}

func (b *pfBroker) log(format string, args ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.events = append(b.events, fmt.Sprintf(format, args...))
}

func (b *pfBroker) eventLog() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.events)
}

func (b *pfBroker) GetMetadata(context.Context, *quirev1.GetMetadataRequest) (*quirev1.GetMetadataResponse, error) {
	return &quirev1.GetMetadataResponse{ClusterId: "pf", ControllerId: 1,
		Brokers: []*quirev1.Broker{{Id: 1, Address: b.addr}},
		Topics: []*quirev1.TopicMetadata{{Name: "pf", TopicId: "pf", Partitions: []*quirev1.PartitionMetadata{
			{Partition: 0, Leader: 1, Replicas: []int32{1}, Isr: []int32{1}},
			{Partition: 1, Leader: 1, Replicas: []int32{1}, Isr: []int32{1}},
		}}},
	}, nil
}

func (b *pfBroker) FetchOffsets(_ context.Context, in *quirev1.FetchOffsetsRequest) (*quirev1.FetchOffsetsResponse, error) {
	resp := &quirev1.FetchOffsetsResponse{}
	for _, p := range in.Partitions {
		resp.Offsets = append(resp.Offsets, &quirev1.CommittedOffset{Topic: p.Topic, Partition: p.Partition, Offset: -1})
	}
	return resp, nil
}

func (b *pfBroker) ListOffsets(_ context.Context, in *quirev1.ListOffsetsRequest) (*quirev1.ListOffsetsResponse, error) {
	resp := &quirev1.ListOffsetsResponse{}
	for _, p := range in.Partitions {
		off := int64(0)
		if p.TimestampMs == -1 {
			off = pfRecords
		}
		resp.Partitions = append(resp.Partitions, &quirev1.ListOffsetsResult{Topic: p.Topic, Partition: p.Partition, Offset: off})
	}
	return resp, nil
}

// Fetch answers each partition with its records from the offset asked
// for, in one batch; at the end it waits the request's max wait first.
func (b *pfBroker) Fetch(ctx context.Context, in *quirev1.FetchRequest) (*quirev1.FetchResponse, error) {
	resp := &quirev1.FetchResponse{}
	for _, p := range in.Partitions {
		r := &quirev1.FetchPartitionResult{Topic: p.Topic, Partition: p.Partition, HighWatermark: pfRecords, LogEndOffset: pfRecords}
		if p.Offset < pfRecords {
			bld := record.NewBuilder(record.None)
			for o := p.Offset; o < pfRecords; o++ {
				bld.Append(time.Now().UnixMilli(), nil, fmt.Appendf(nil, "%d-%d", p.Partition, o), nil)
			}
			batch := bld.Build()
			record.SetBaseOffset(batch, p.Offset)
			r.Records = batch
		}
		resp.Partitions = append(resp.Partitions, r)
	}
	if len(resp.Partitions) > 0 && resp.Partitions[0].Records == nil {
		select {
		case <-time.After(time.Duration(in.MaxWaitMs) * time.Millisecond):
		case <-ctx.Done():
		}
	}
	return resp, nil
}

func (b *pfBroker) ConsumerGroupHeartbeat(_ context.Context, in *quirev1.ConsumerGroupHeartbeatRequest) (*quirev1.ConsumerGroupHeartbeatResponse, error) {
	resp := &quirev1.ConsumerGroupHeartbeatResponse{MemberId: in.MemberId, MemberEpoch: 1, HeartbeatIntervalMs: 20, SessionTimeoutMs: 30000}
	var owned []int32
	for _, t := range in.Owned.GetTopics() {
		owned = append(owned, t.Partitions...)
	}
	b.log("heartbeat epoch=%d owned=%v", in.MemberEpoch, owned)
	b.mu.Lock()
	revoke := b.revoke
	b.mu.Unlock()
	switch {
	case in.MemberEpoch == -1:
		resp.MemberEpoch = -1
	case in.MemberEpoch == 0:
		resp.Assignment = &quirev1.GroupAssignment{Topics: []*quirev1.GroupTopicPartitions{{Topic: "pf", Partitions: []int32{0, 1}}}}
	case revoke >= 0:
		resp.Assignment = &quirev1.GroupAssignment{Topics: []*quirev1.GroupTopicPartitions{{Topic: "pf", Partitions: []int32{1 - revoke}}}}
	}
	return resp, nil
}

func (b *pfBroker) CommitOffsets(_ context.Context, in *quirev1.CommitOffsetsRequest) (*quirev1.CommitOffsetsResponse, error) {
	for _, o := range in.Offsets {
		b.log("commit %d@%d", o.Partition, o.Offset)
	}
	return &quirev1.CommitOffsetsResponse{}, nil
}

// TestGroupConsumerPollFuncRevocationWaitsForTheCallback: a partition
// revoked while PollFunc's callback is handling one of its records is
// given up (OnRevoked, the commit of its position, the heartbeat without
// it) only once that callback has returned; the commit counts the record,
// and no later record of the partition reaches the callback, while the
// partition kept goes on being read to its end.
func TestGroupConsumerPollFuncRevocationWaitsForTheCallback(t *testing.T) {
	t.Parallel()
	fb := &pfBroker{revoke: -1}
	fb.addr = serveFake(t, fb, fb, fb)
	ctx := testCtx(t)
	cl := newClient(t, fb.addr, client.FetchMaxWait(50*time.Millisecond))
	revoked := make(chan []client.TopicPartition, 1)
	g, err := cl.NewGroupConsumer(client.GroupConfig{Group: "pf", Topics: []string{"pf"}, AutoCommitInterval: -1,
		OnRevoked: func(tps []client.TopicPartition) {
			fb.log("revoked %v", tps)
			revoked <- tps
		}})
	if err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	delivered := map[int32][]int64{}
	blocked := make(chan int32)
	release := make(chan struct{})
	first := true
	fn := func(r *client.Record) {
		mu.Lock()
		delivered[r.Partition] = append(delivered[r.Partition], r.Offset)
		mu.Unlock()
		if first {
			first = false
			blocked <- r.Partition
			<-release
			fb.log("callback returned")
		}
	}
	pollDone := make(chan error, 1)
	pctx, stopPolling := context.WithCancel(ctx)
	go func() {
		for pctx.Err() == nil {
			if _, err := g.PollFunc(pctx, fn); err != nil && pctx.Err() == nil {
				pollDone <- err
				return
			}
		}
		pollDone <- nil
	}()

	var p int32
	select {
	case p = <-blocked:
	case <-ctx.Done():
		t.Fatal("no record reached the callback")
	}
	fb.mu.Lock()
	fb.revoke = p
	fb.mu.Unlock()
	// The member has heard of the revocation once it no longer owns p.
	for slices.Contains(g.Assignment(), client.TopicPartition{Topic: "pf", Partition: p}) {
		if ctx.Err() != nil {
			t.Fatal("the revocation never reached the member")
		}
		time.Sleep(time.Millisecond) // polling the assignment
	}
	select {
	case tps := <-revoked:
		t.Fatalf("OnRevoked(%v) ran while the callback was still handling a record of partition %d", tps, p)
	default:
	}
	close(release)
	select {
	case <-revoked:
	case <-ctx.Done():
		t.Fatal("the partition was never given up")
	}
	keep := 1 - p
	for {
		mu.Lock()
		n := len(delivered[keep])
		mu.Unlock()
		if n == pfRecords {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("partition %d: %d of %d records", keep, n, pfRecords)
		}
		time.Sleep(time.Millisecond) // polling what was delivered
	}
	// Released, the partition must be in no heartbeat after the commit.
	released := fmt.Sprintf("heartbeat epoch=1 owned=[%d]", keep)
	for !slices.Contains(fb.eventLog(), released) {
		if ctx.Err() != nil {
			t.Fatalf("no heartbeat released partition %d: %v", p, fb.eventLog())
		}
		time.Sleep(time.Millisecond) // polling the heartbeats
	}
	stopPolling()
	if err := <-pollDone; err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	if got := delivered[p]; !slices.Equal(got, []int64{0}) {
		t.Errorf("partition %d (revoked while its record 0 was being handled) delivered %v, want only 0", p, got)
	}
	if got := delivered[keep]; len(got) != pfRecords || got[0] != 0 || got[pfRecords-1] != pfRecords-1 {
		t.Errorf("partition %d delivered %v, want 0..%d once each", keep, got, pfRecords-1)
	}
	mu.Unlock()
	// In order: the callback returned, then the revocation, the commit
	// of the record handled, and only then the heartbeat releasing it.
	events := fb.eventLog()
	at := func(e string) int {
		i := slices.Index(events, e)
		if i < 0 {
			t.Fatalf("no %q in %v", e, events)
		}
		return i
	}
	ret, rev := at("callback returned"), at(fmt.Sprintf("revoked [{pf %d}]", p))
	commit, hb := at(fmt.Sprintf("commit %d@1", p)), at(released)
	if ret >= rev || rev >= commit || commit >= hb {
		t.Errorf("events out of order (callback %d, revoked %d, commit %d, release %d): %v", ret, rev, commit, hb, events)
	}
	if err := g.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestGroupConsumerPollFunc: PollFunc passes every record of the owned
// partitions once, in offset order per partition; a Seek from inside the
// callback drops the rest of what was fetched and reads on from the
// offset sought; Close commits the positions after the last records
// passed.
func TestGroupConsumerPollFunc(t *testing.T) {
	t.Parallel()
	br := startGroupBroker(t)
	cl := newClient(t, br.Addr(), client.RecordPartitioner(client.ManualPartitioner()))
	ctx := testCtx(t)
	createTopic(t, cl, "gpf", 3)
	const per = 100
	var recs []*client.Record
	for p := range int32(3) {
		for i := range per {
			recs = append(recs, &client.Record{Topic: "gpf", Partition: p, Value: fmt.Appendf(nil, "%d-%d", p, i)})
		}
	}
	if err := cl.ProduceSync(ctx, recs...); err != nil {
		t.Fatal(err)
	}
	g, err := cl.NewGroupConsumer(client.GroupConfig{Group: "gpf", Topics: []string{"gpf"}, AutoCommitInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	got := map[int32][]int64{}
	total, sought := 0, false
	for total < 3*per+(per/2-10+1) {
		n, err := g.PollFunc(ctx, func(r *client.Record) {
			if want := fmt.Sprintf("%d-%d", r.Partition, r.Offset); string(r.Value) != want {
				t.Errorf("record %d of partition %d holds %q", r.Offset, r.Partition, r.Value)
			}
			got[r.Partition] = append(got[r.Partition], r.Offset)
			if r.Partition == 0 && r.Offset == per/2 && !sought {
				sought = true
				if err := g.Seek("gpf", 0, 10); err != nil {
					t.Error(err)
				}
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		total += n
	}
	var want0 []int64
	for o := int64(0); o <= per/2; o++ {
		want0 = append(want0, o)
	}
	for o := int64(10); o < per; o++ {
		want0 = append(want0, o)
	}
	if !slices.Equal(got[0], want0) {
		t.Errorf("partition 0 (sought back to 10 at %d) delivered %v", per/2, got[0])
	}
	for p := int32(1); p < 3; p++ {
		if len(got[p]) != per || got[p][0] != 0 || got[p][per-1] != per-1 || !slices.IsSorted(got[p]) {
			t.Errorf("partition %d delivered %v", p, got[p])
		}
	}
	if err := g.Close(ctx); err != nil {
		t.Fatal(err)
	}
	offs, err := cl.FetchOffsets(ctx, "gpf")
	if err != nil {
		t.Fatal(err)
	}
	if len(offs) != 3 || offs[0].Offset != per || offs[1].Offset != per || offs[2].Offset != per {
		t.Fatalf("committed %+v, want %d for each partition", offs, per)
	}
}
