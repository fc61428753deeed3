package request

import (
	"context"
	"sync"

	"github.com/quirelog/quire/metadata"
)

// ReassignmentProgress is a pending reassignment with how far each of
// its adding replicas has caught up with the leader.
type ReassignmentProgress struct {
	metadata.PartitionInfo
	// LeaderLogEndOffset and LeaderSizeBytes are the leader's log end and
	// size on disk, -1 when the leader did not answer in time (or no
	// longer leads the partition).
	LeaderLogEndOffset, LeaderSizeBytes int64
	// Adding is one entry for each of AddingReplicas, in its order.
	Adding []AddingReplicaProgress
}

// AddingReplicaProgress is a replica being added, as its broker has it:
// SizeBytes 0 and LogEndOffset -1 when it has no log yet, both -1 when
// its broker did not answer in time.
type AddingReplicaProgress struct {
	BrokerID                int32
	LogEndOffset, SizeBytes int64
	// BytesLeft is what it has still to fetch: the leader's size on disk
	// less its own (0 once it has as much), -1 when either is not known.
	// A follower's log is the leader's, byte for byte, up to the offset
	// it has fetched, so the difference is what the throttle still has
	// to let through.
	BytesLeft int64
}

// ListPartitionReassignmentsProgress is ListPartitionReassignments with
// each adding replica's progress: the leader and the brokers adding a
// replica are asked for their logs (this broker's own directly, the
// others at once, within DescribeLogsTimeout; one that does not answer
// leaves -1).
func (c *Core) ListPartitionReassignmentsProgress(ctx context.Context, topics []PartitionsOf) ([]ReassignmentProgress, error) {
	parts, err := c.ListPartitionReassignments(ctx, topics)
	if err != nil {
		return nil, err
	}
	out := make([]ReassignmentProgress, len(parts))
	type ask struct {
		i      int // into out
		adding int // into out[i].Adding, -1 for the leader
	}
	asks := map[int32][]ask{}
	refs := map[int32][]LogRef{}
	answer := func(a ask, l LogDescription) {
		pr := &out[a.i]
		switch {
		case a.adding < 0:
			if l.Hosted && l.Leader {
				pr.LeaderLogEndOffset, pr.LeaderSizeBytes = l.LogEndOffset, l.SizeBytes
			}
		case l.Hosted:
			pr.Adding[a.adding].LogEndOffset, pr.Adding[a.adding].SizeBytes = l.LogEndOffset, l.SizeBytes
		default:
			pr.Adding[a.adding].LogEndOffset, pr.Adding[a.adding].SizeBytes = -1, 0
		}
	}
	for i, p := range parts {
		pr := &out[i]
		*pr = ReassignmentProgress{PartitionInfo: p, LeaderLogEndOffset: -1, LeaderSizeBytes: -1, Adding: make([]AddingReplicaProgress, len(p.AddingReplicas))}
		want := []ask{}
		ids := []int32{}
		if p.Leader >= 0 {
			want, ids = append(want, ask{i: i, adding: -1}), append(ids, p.Leader)
		}
		for j, id := range p.AddingReplicas {
			pr.Adding[j] = AddingReplicaProgress{BrokerID: id, LogEndOffset: -1, SizeBytes: -1, BytesLeft: -1}
			want, ids = append(want, ask{i: i, adding: j}), append(ids, id)
		}
		for k, a := range want {
			id := ids[k]
			if id == c.cfg.NodeID {
				answer(a, c.DescribeLog(p.Topic, p.Partition))
				continue
			}
			asks[id] = append(asks[id], a)
			refs[id] = append(refs[id], LogRef{Topic: p.Topic, Partition: p.Partition})
		}
	}
	if len(asks) > 0 && c.cfg.Logs != nil {
		ctx, cancel := context.WithTimeout(ctx, DescribeLogsTimeout)
		defer cancel()
		var mu sync.Mutex
		var wg sync.WaitGroup
		for id, as := range asks {
			br, ok := c.cfg.Cluster.Broker(id)
			if !ok || br.Addr == "" || br.Fenced {
				continue
			}
			wg.Go(func() {
				logs, err := c.cfg.Logs.DescribeLogs(ctx, br, refs[id])
				if err != nil {
					return // -1
				}
				mu.Lock()
				defer mu.Unlock()
				for k, a := range as {
					if k < len(logs) && logs[k].Topic == refs[id][k].Topic && logs[k].Partition == refs[id][k].Partition {
						answer(a, logs[k])
					}
				}
			})
		}
		wg.Wait()
	}
	for i := range out {
		for j := range out[i].Adding {
			a := &out[i].Adding[j]
			if out[i].LeaderSizeBytes >= 0 && a.SizeBytes >= 0 {
				a.BytesLeft = max(0, out[i].LeaderSizeBytes-a.SizeBytes)
			}
		}
	}
	return out, nil
}
