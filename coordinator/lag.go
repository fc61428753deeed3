package coordinator

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/quirelog/quire/group"
	"github.com/quirelog/quire/metadata"
)

// Consumer group lag, on the coordinator. The controller has every
// group's committed offsets; the high watermarks and record timestamps
// are the partition leaders'. Every LagRefresh the coordinator asks each
// leader once (Config.Logs, one DescribeLogs call per leader) for the
// high watermark of every partition some group committed in, and the
// timestamp of the record at each committed offset below it (the first
// record not committed). Asking the leaders, rather than having them
// report high watermarks with their broker heartbeats, costs nothing
// while no group has committed, asks only for the partitions groups read,
// and gives the record timestamps lag in seconds needs, which only a
// read at a group's own offset can. Lag in records is then the high
// watermark minus the committed offset; lag in seconds now minus that
// record's timestamp, 0 when caught up. DescribeGroup asks the leaders of
// its group's partitions afresh.

// DefaultLagRefresh is how often the coordinator asks the partition
// leaders for the figures of group lag (group.lag.refresh.ms).
const DefaultLagRefresh = 5 * time.Second

// lagSample is what a leader said of one partition.
type lagSample struct {
	hw  int64
	lso int64
	ts  map[int64]int64 // record timestamp by offset asked, -1 none
	at  time.Time
}

// lagState is the coordinator's last view of the leaders.
type lagState struct {
	mu         sync.Mutex
	samples    map[group.TopicPartition]lagSample
	committed  map[string][]metadata.CommittedOffset // by group, as when sampled
	rebalances map[string]uint64
	history    rateHistory // throughput.go
}

// countRebalances counts the target assignments among recs.
func (ls *lagState) countRebalances(recs []group.Record) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for _, r := range recs {
		switch r := r.(type) {
		case group.TargetAssignment:
			if ls.rebalances == nil {
				ls.rebalances = map[string]uint64{}
			}
			ls.rebalances[r.Group]++
		case group.GroupDeleted:
			delete(ls.rebalances, r.Group)
		}
	}
}

// probe asks the leaders of the partitions in want (partition to the
// offsets whose timestamps are wanted) at once, within timeout; a
// partition without a leader, or whose leader did not answer, is absent.
func (co *Coordinator) probe(ctx context.Context, img *metadata.Image, want map[group.TopicPartition][]int64, timeout time.Duration) map[group.TopicPartition]lagSample {
	out := map[group.TopicPartition]lagSample{}
	if co.logs == nil || len(want) == 0 {
		return out
	}
	byLeader := map[int32][]metadata.PositionQuery{}
	for tp, offs := range want {
		p, ok := img.Partition(tp.Topic, tp.Partition)
		if !ok || p.Leader < 0 {
			continue
		}
		byLeader[p.Leader] = append(byLeader[p.Leader], metadata.PositionQuery{Topic: tp.Topic, Partition: tp.Partition, Offsets: offs})
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for leader, qs := range byLeader {
		b, ok := img.Broker(leader)
		if !ok {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ps, err := co.logs.ReadPositions(ctx, b, qs)
			if err != nil {
				co.logger.Debug("cannot ask a partition leader for group lag", "broker", leader, "error", err)
				return
			}
			now := co.clock.Now()
			mu.Lock()
			defer mu.Unlock()
			for i, q := range qs {
				if i >= len(ps) || !ps[i].Leader {
					continue
				}
				s := lagSample{hw: ps[i].HighWatermark, lso: ps[i].LastStableOffset, ts: make(map[int64]int64, len(q.Offsets)), at: now}
				for j, off := range q.Offsets {
					if j < len(ps[i].Timestamps) {
						s.ts[off] = ps[i].Timestamps[j]
					}
				}
				out[group.TopicPartition{Topic: q.Topic, Partition: q.Partition}] = s
			}
		}()
	}
	wg.Wait()
	return out
}

// refreshLag asks the leaders about every partition a group committed
// in and keeps their answers for Stats.
func (co *Coordinator) refreshLag(ctx context.Context) {
	img := co.log.Image()
	committed := map[string][]metadata.CommittedOffset{}
	want := map[group.TopicPartition][]int64{}
	for _, g := range img.Groups() {
		offs := img.Offsets(g)
		committed[g] = offs
		for _, o := range offs {
			tp := group.TopicPartition{Topic: o.Topic, Partition: o.Partition}
			if !slices.Contains(want[tp], o.Offset) {
				want[tp] = append(want[tp], o.Offset)
			}
		}
	}
	samples := co.probe(ctx, img, want, min(co.lagRefresh, 2*time.Second))
	now := co.clock.Now()
	co.lag.mu.Lock()
	co.lag.samples, co.lag.committed = samples, committed
	co.lag.history.record(now, committed, samples, rateWindowRefreshes*co.lagRefresh)
	co.lag.mu.Unlock()
}

// runLag refreshes the lag figures until ctx ends (the controller loop's
// term), and forgets them then.
func (co *Coordinator) runLag(ctx context.Context) {
	defer func() {
		co.lag.mu.Lock()
		co.lag.samples, co.lag.committed = nil, nil
		co.lag.history = rateHistory{}
		co.lag.mu.Unlock()
	}()
	t := time.NewTicker(co.lagRefresh)
	defer t.Stop()
	for {
		co.refreshLag(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// owners maps each partition assigned in group id to its member.
func owners(img *metadata.Image, id string) map[group.TopicPartition]string {
	return img.GroupOwners(id)
}

// partitionLag is a group's lag in tp at now from sample s (ok false:
// none).
func partitionLag(tp group.TopicPartition, committed int64, s lagSample, ok bool, now time.Time) metadata.GroupPartitionLag {
	l := metadata.GroupPartitionLag{Topic: tp.Topic, Partition: tp.Partition, Committed: committed, HighWatermark: -1, Lag: -1, LagSeconds: -1,
		LastStableOffset: -1, StableLag: -1}
	if !ok {
		return l
	}
	l.HighWatermark, l.LastStableOffset, l.Observed = s.hw, s.lso, s.at
	if committed >= 0 && s.lso >= 0 {
		l.StableLag = max(s.lso-committed, 0)
	}
	if committed < 0 || s.hw < 0 {
		return l
	}
	l.Lag = max(s.hw-committed, 0)
	if l.Lag == 0 {
		l.LagSeconds = 0
	} else if ts, ok := s.ts[committed]; ok && ts >= 0 {
		l.LagSeconds = max(now.Sub(time.UnixMilli(ts)).Seconds(), 0)
	}
	return l
}

// Lag is group id's lag in every partition it committed in or has
// assigned (extra: those of its members' assignments and targets),
// asking the partitions' leaders afresh, sorted by topic and partition;
// and its throughput, with the rates of the last refreshes.
func (co *Coordinator) Lag(ctx context.Context, id string, extra []group.TopicPartition) metadata.GroupLag {
	img := co.log.Image()
	committed := map[group.TopicPartition]int64{}
	for _, o := range img.Offsets(id) {
		committed[group.TopicPartition{Topic: o.Topic, Partition: o.Partition}] = o.Offset
	}
	for _, tp := range extra {
		if _, ok := committed[tp]; !ok {
			committed[tp] = -1
		}
	}
	want := make(map[group.TopicPartition][]int64, len(committed))
	for tp, off := range committed {
		want[tp] = nil
		if off >= 0 {
			want[tp] = []int64{off}
		}
	}
	samples := co.probe(ctx, img, want, 2*time.Second)
	own := owners(img, id)
	now := co.clock.Now()
	out := make([]metadata.GroupPartitionLag, 0, len(committed))
	for _, tp := range slices.SortedFunc(maps.Keys(committed), compareTP) {
		s, ok := samples[tp]
		l := partitionLag(tp, committed[tp], s, ok, now)
		l.MemberID = own[tp]
		out = append(out, l)
	}
	return metadata.GroupLag{Partitions: out, Throughput: co.throughput(id, img, out)}
}

// throughput is group id's throughput with its lag ls: the rates as of
// the last refresh, the members and partitions of img.
func (co *Coordinator) throughput(id string, img *metadata.Image, ls []metadata.GroupPartitionLag) metadata.GroupThroughput {
	tps := make([]group.TopicPartition, len(ls))
	for i, l := range ls {
		tps[i] = group.TopicPartition{Topic: l.Topic, Partition: l.Partition}
	}
	co.lag.mu.Lock()
	consume, produce := co.lag.history.rates(id, tps)
	co.lag.mu.Unlock()
	return throughput(totalLag(ls), consume, produce, img.GroupStateMembers(id), len(tps))
}

func compareTP(a, b group.TopicPartition) int {
	return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
}

// metadata.GroupStats returns every consumer group with committed offsets or
// members, with its lag as of the last refresh; none off the controller.
func (co *Coordinator) Stats() []metadata.GroupStats {
	co.lag.mu.Lock()
	samples, committed := co.lag.samples, co.lag.committed
	rebalances := maps.Clone(co.lag.rebalances)
	co.lag.mu.Unlock()
	if committed == nil {
		return nil
	}
	img := co.log.Image()
	ids := map[string]bool{}
	for g := range committed {
		ids[g] = true
	}
	for _, g := range img.GroupStateIDs() {
		ids[g] = true
	}
	now := co.clock.Now()
	out := make([]metadata.GroupStats, 0, len(ids))
	for _, id := range slices.Sorted(maps.Keys(ids)) {
		st := metadata.GroupStats{Group: id, Rebalances: rebalances[id]}
		st.Members = img.GroupStateMembers(id)
		own := owners(img, id)
		for _, o := range committed[id] {
			tp := group.TopicPartition{Topic: o.Topic, Partition: o.Partition}
			s, ok := samples[tp]
			l := partitionLag(tp, o.Offset, s, ok, now)
			l.MemberID = own[tp]
			st.Partitions = append(st.Partitions, l)
		}
		// The partitions assigned but not committed in count too: more
		// members than partitions have nothing to read.
		tps := make([]group.TopicPartition, 0, len(st.Partitions))
		seen := map[group.TopicPartition]bool{}
		for _, l := range st.Partitions {
			tp := group.TopicPartition{Topic: l.Topic, Partition: l.Partition}
			seen[tp] = true
			tps = append(tps, tp)
		}
		for tp := range own {
			seen[tp] = true
		}
		co.lag.mu.Lock()
		consume, produce := co.lag.history.rates(id, tps)
		co.lag.mu.Unlock()
		st.Throughput = throughput(totalLag(st.Partitions), consume, produce, st.Members, len(seen))
		out = append(out, st)
	}
	return out
}
