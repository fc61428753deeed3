package testcluster_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/testcluster"
)

func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchMember is one member driven straight over gRPC.
type benchMember struct {
	group, id string
	epoch     int32
	owned     *quirev1.GroupAssignment
}

func (m *benchMember) heartbeat(ctx context.Context, g quirev1.GroupsClient, topic string) (changed bool, err error) {
	req := &quirev1.ConsumerGroupHeartbeatRequest{Group: m.group, MemberId: m.id, MemberEpoch: m.epoch, Owned: m.owned}
	if m.epoch == 0 {
		req.Subscription = &quirev1.GroupSubscription{Topics: []string{topic}}
		req.RebalanceTimeoutMs = 60000
	}
	if m.owned == nil {
		req.Owned = &quirev1.GroupAssignment{}
	}
	resp, err := g.ConsumerGroupHeartbeat(ctx, req)
	if err != nil {
		return false, err
	}
	changed = resp.MemberEpoch != m.epoch
	m.epoch = resp.MemberEpoch
	if resp.Assignment != nil {
		changed = true
		m.owned = resp.Assignment
	}
	return changed, nil
}

func ownedCount(a *quirev1.GroupAssignment) int {
	n := 0
	for _, t := range a.GetTopics() {
		n += len(t.Partitions)
	}
	return n
}

// BenchmarkGroupHeartbeats joins 1,000 groups of 10 members (one topic of
// 10 partitions: one each) on a one-node in-process cluster, the node
// being the controller and so the coordinator, then keeps every member
// heartbeating at the default interval (5s, 2,000 heartbeats/s) from 32
// goroutines, straight over gRPC as a stable client would (its epoch and
// owned partitions), and reports over 10 s of steady state (after one
// interval of warm-up) the process CPU per second (cpu-ms/s: the node
// and the harness's gRPC clients together, so an upper bound of the
// coordinator's), the heartbeats answered per second, and how long
// joining every member and reaching a stable assignment took (join-s).
// The session timeout is 10 minutes, not 45s, so that the first groups
// stay while the last ones join on a loaded machine:
//
//	go test ./testcluster/ -run '^$' -bench BenchmarkGroupHeartbeats -benchtime 1x
func BenchmarkGroupHeartbeats(b *testing.B) {
	const (
		groups, members, partitions = 1000, 10, 10
		interval                    = 5 * time.Second // group.consumer.heartbeat.interval.ms's default
		window                      = 10 * time.Second
		workers                     = 32
		topic                       = "hb"
	)
	c := testcluster.New(b, 1, testcluster.Config(func(_ int32, cfg *broker.Config) {
		cfg.GroupConsumerSessionTimeoutMs = 600000
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ctl := c.WaitController(ctx)
	if _, err := admin(c, ctl).CreateTopic(ctx, &quirev1.CreateTopicRequest{Name: topic,
		OptionalPartitions: &quirev1.CreateTopicRequest_Partitions{Partitions: partitions}}); err != nil {
		b.Fatal(err)
	}
	c.WaitImage(ctx, func(img *metadata.Image) bool {
		_, ok := img.Topic(topic)
		return ok && img.MetadataVersion() >= metadata.MetadataVersionProducerIDs
	})
	gc := quirev1.NewGroupsClient(c.Conn(ctl))
	all := make([]*benchMember, 0, groups*members)
	for g := range groups {
		for m := range members {
			all = append(all, &benchMember{group: fmt.Sprint("hb-", g), id: fmt.Sprintf("m-%d-%d", g, m)})
		}
	}
	for i := 0; i < b.N; i++ {
		// Join: each group in rounds of its members' heartbeats until a
		// round changes nothing and every partition is owned.
		t0 := time.Now()
		var next atomic.Int64
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for {
					g := int(next.Add(1)) - 1
					if g >= groups || b.Failed() {
						return
					}
					ms := all[g*members : (g+1)*members]
					for round := 0; ; round++ {
						if round > 1000 {
							b.Errorf("group %s not stable after %d rounds", ms[0].group, round)
							return
						}
						changed, owned := false, 0
						for _, m := range ms {
							ch, err := m.heartbeat(ctx, gc, topic)
							if err != nil {
								b.Errorf("join %s/%s: %v", m.group, m.id, err)
								return
							}
							changed = changed || ch
							owned += ownedCount(m.owned)
						}
						if !changed && owned == partitions {
							break
						}
					}
				}
			})
		}
		wg.Wait()
		joinS := time.Since(t0).Seconds()
		if b.Failed() {
			return
		}

		// Steady state: member k of each worker's share heartbeats at
		// start + k*interval/len(share) + n*interval.
		var sent, failed atomic.Int64
		var lastErr atomic.Value
		var cpu0, cpu1 time.Duration
		var t1, t2 time.Time
		start := time.Now()
		measureFrom, measureTo := start.Add(interval), start.Add(interval+window)
		hbCtx, hbCancel := context.WithDeadline(ctx, measureTo)
		windowStarted := make(chan struct{})
		go func() {
			defer close(windowStarted)
			time.Sleep(time.Until(measureFrom)) // the window's start, not synchronisation
			t1, cpu0 = time.Now(), processCPU()
			sent.Store(0)
		}()
		for w := range workers {
			wg.Go(func() {
				var share []*benchMember
				for j := w; j < len(all); j += workers {
					share = append(share, all[j])
				}
				for n := 0; ; n++ {
					for k, m := range share {
						at := start.Add(time.Duration(n)*interval + time.Duration(k)*interval/time.Duration(len(share)))
						if d := time.Until(at); d > 0 {
							select {
							case <-hbCtx.Done():
								return
							case <-time.After(d): // pacing at the heartbeat interval
							}
						}
						if _, err := m.heartbeat(hbCtx, gc, topic); err != nil {
							if hbCtx.Err() != nil || status.Code(err) == codes.DeadlineExceeded && time.Until(measureTo) < time.Second {
								return // the window's end
							}
							failed.Add(1)
							lastErr.Store(fmt.Sprintf("%s/%s: %v", m.group, m.id, err))
							continue
						}
						sent.Add(1)
					}
				}
			})
		}
		wg.Wait()
		hbCancel()
		t2, cpu1 = time.Now(), processCPU()
		<-windowStarted
		secs := t2.Sub(t1).Seconds()
		if f := failed.Load(); f > 0 {
			b.Errorf("%d heartbeats failed in steady state, the last: %v", f, lastErr.Load())
		}
		stable := 0
		for _, m := range all {
			if ownedCount(m.owned) == 1 {
				stable++
			}
		}
		if stable != len(all) {
			b.Errorf("%d of %d members own one partition after the steady state", stable, len(all))
		}
		b.ReportMetric(float64((cpu1-cpu0).Milliseconds())/secs, "cpu-ms/s")
		b.ReportMetric(float64(sent.Load())/secs, "heartbeats/s")
		b.ReportMetric(joinS, "join-s")
	}
}

// BenchmarkCommitOffsets commits offsets of one partition from G groups
// with no members at once (G goroutines, one group each, each call to
// the next of the 3 nodes in turn, so 2 of 3 are passed on to the
// controller) on a 3-node in-process cluster, and reports CommitOffsets
// calls/s, the process CPU per call (the 3 nodes and the callers) and
// the calls retried after UNAVAILABLE (an election); under load the controller puts many groups' commits in one
// metadata-log entry:
//
//	go test ./testcluster/ -run '^$' -bench BenchmarkCommitOffsets -benchtime 3000x
func BenchmarkCommitOffsets(b *testing.B) {
	c := testcluster.New(b, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ctl := c.WaitController(ctx)
	if _, err := admin(c, ctl).CreateTopic(ctx, &quirev1.CreateTopicRequest{Name: "commits",
		OptionalPartitions:        &quirev1.CreateTopicRequest_Partitions{Partitions: 1},
		OptionalReplicationFactor: &quirev1.CreateTopicRequest_ReplicationFactor{ReplicationFactor: 3}}); err != nil {
		b.Fatal(err)
	}
	c.WaitImage(ctx, func(img *metadata.Image) bool {
		_, ok := img.Topic("commits")
		return ok && img.MetadataVersion() >= metadata.MetadataVersionOffsetBatches
	})
	ids := c.IDs()
	clients := make([]quirev1.GroupsClient, len(ids))
	for i, id := range ids {
		clients[i] = quirev1.NewGroupsClient(c.Conn(id))
	}
	for _, g := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("groups-%d", g), func(b *testing.B) {
			var left, retries atomic.Int64
			left.Store(int64(b.N))
			var wg sync.WaitGroup
			cpu0 := processCPU()
			b.ResetTimer()
			for w := range g {
				wg.Go(func() {
					group := fmt.Sprintf("commit-%d-%d", g, w)
					for n := int64(0); left.Add(-1) >= 0; n++ {
						req := &quirev1.CommitOffsetsRequest{Group: group,
							Offsets: []*quirev1.OffsetCommit{{Topic: "commits", Partition: 0, Offset: n,
								OptionalLeaderEpoch: &quirev1.OffsetCommit_LeaderEpoch{LeaderEpoch: -1}}}}
						_, err := clients[int(n)%len(clients)].CommitOffsets(ctx, req)
						for status.Code(err) == codes.Unavailable && ctx.Err() == nil {
							// An election (the loaded machine): retried, as
							// the client does, and counted.
							retries.Add(1)
							time.Sleep(50 * time.Millisecond) // retry backoff
							_, err = clients[int(n)%len(clients)].CommitOffsets(ctx, req)
						}
						if err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N)/1000, "cpu-us/commit")
			b.ReportMetric(float64(retries.Load()), "retries")
		})
	}
}
