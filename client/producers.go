package client

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

// PartitionProducers is the idempotent producers active on one partition,
// as its leader's log knows them.
type PartitionProducers struct {
	Partition int32           `json:"partition"`
	Leader    int32           `json:"leader"`
	Producers []ProducerState `json:"producers"`
	// Err is set when the partition's leader could not answer for it (no
	// leader, not reachable, its log failed); Producers is then empty.
	Err error `json:"-"`
}

// ProducerState is one producer's state on a partition.
type ProducerState struct {
	ProducerID    int64 `json:"producer_id"`
	ProducerEpoch int16 `json:"producer_epoch"`
	// LastSequence is the last sequence of its latest batch.
	LastSequence int32 `json:"last_sequence"`
	// LastTimestamp is the largest timestamp of its latest batch.
	LastTimestamp time.Time `json:"last_timestamp"`
	// LastOffset is the offset of its latest batch's last record.
	LastOffset int64 `json:"last_offset"`
}

// DescribeProducers lists the idempotent producers active on a topic's
// partitions (all of them when none are named), asking each partition's
// leader (Kafka's DescribeProducers, KIP-664). A producer stays listed
// until the topic's producer.id.expiration.ms after its last batch. An
// unknown topic or a partition out of range fails the call; a partition
// whose leader cannot answer has its Err set.
func (c *Client) DescribeProducers(ctx context.Context, topic string, partitions ...int32) ([]PartitionProducers, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.cfg.requestTimeout)
		defer cancel()
	}
	// Fresh metadata: the leaders as they are now.
	if err := c.meta.refresh(ctx, []string{topic}, false); err != nil {
		return nil, err
	}
	tm, err := c.meta.loadTopic(ctx, topic, false)
	if err != nil {
		return nil, err
	}
	n := int32(len(tm.partitions))
	if len(partitions) == 0 {
		for p := range n {
			partitions = append(partitions, p)
		}
	}
	for _, p := range partitions {
		if p < 0 || p >= n {
			return nil, fmt.Errorf("%w: no partition %d in topic %s, which has %d (0 to %d)", ErrNoSuchPartition, p, topic, n, n-1)
		}
	}
	out := make([]PartitionProducers, len(partitions))
	todo := make([]int, len(partitions)) // indexes into out still to ask
	for i, p := range partitions {
		out[i].Partition = p
		todo[i] = i
	}
	backoff := c.cfg.retryBackoff
	for {
		todo = c.describeProducersOnce(ctx, topic, out, todo)
		if len(todo) == 0 || ctx.Err() != nil {
			return out, nil
		}
		// Leadership moved under the call: ask the new leaders.
		if err := c.sleepCtx(ctx, backoff); err != nil {
			return out, nil
		}
		if err := c.meta.refresh(ctx, []string{topic}, false); err != nil {
			return out, nil
		}
		backoff = min(2*backoff, time.Second)
	}
}

// describeProducersOnce asks the leaders of out[todo] as the metadata has
// them, all at once, and returns the indexes worth asking again (the
// broker asked no longer leads them).
func (c *Client) describeProducersOnce(ctx context.Context, topic string, out []PartitionProducers, todo []int) []int {
	tm := c.meta.topic(topic)
	byLeader := map[int32][]int{}
	for _, i := range todo {
		pm := tm.partitions[out[i].Partition]
		out[i].Leader = pm.leader
		if pm.leader < 0 {
			out[i].Err = newError(quirev1.ErrorCode_LEADER_NOT_AVAILABLE, fmt.Sprintf("%s/%d has no leader", topic, out[i].Partition))
			continue
		}
		byLeader[pm.leader] = append(byLeader[pm.leader], i)
	}
	var mu sync.Mutex
	var again []int
	var wg sync.WaitGroup
	for leader, idx := range byLeader {
		wg.Go(func() {
			retry := c.describeProducersAt(ctx, topic, leader, out, idx)
			mu.Lock()
			again = append(again, retry...)
			mu.Unlock()
		})
	}
	wg.Wait()
	sort.Ints(again)
	return again
}

// describeProducersAt asks broker leader for the partitions out[idx].
func (c *Client) describeProducersAt(ctx context.Context, topic string, leader int32, out []PartitionProducers, idx []int) (again []int) {
	fail := func(err error) []int {
		for _, i := range idx {
			out[i].Err = err
		}
		return nil
	}
	b, ok := c.meta.broker(leader)
	if !ok {
		return fail(newError(quirev1.ErrorCode_BROKER_NOT_AVAILABLE, fmt.Sprintf("broker %d not in metadata", leader)))
	}
	cc, err := c.conn(b.addr)
	if err != nil {
		return fail(err)
	}
	req := &quirev1.DescribeProducersRequest{Topic: topic}
	for _, i := range idx {
		req.Partitions = append(req.Partitions, out[i].Partition)
	}
	resp, err := quirev1.NewAdminClient(cc).DescribeProducers(ctx, req)
	if err != nil {
		return fail(fromStatus(err))
	}
	res := resp.GetPartitions()
	if len(res) != len(idx) {
		return fail(fmt.Errorf("client: broker %d answered for %d partitions of %d", leader, len(res), len(idx)))
	}
	for k, i := range idx {
		r := res[k]
		if r.GetPartition() != out[i].Partition {
			out[i].Err = fmt.Errorf("client: broker %d answered for partition %d, asked %d", leader, r.GetPartition(), out[i].Partition)
			continue
		}
		if r.GetError() != nil && r.GetError().GetCode() != quirev1.ErrorCode_NONE {
			out[i].Err = fromProto(r.GetError())
			if needsMetadata(out[i].Err) {
				again = append(again, i)
			}
			continue
		}
		out[i].Err = nil
		out[i].Producers = make([]ProducerState, 0, len(r.GetProducers()))
		for _, p := range r.GetProducers() {
			out[i].Producers = append(out[i].Producers, ProducerState{
				ProducerID: p.GetProducerId(), ProducerEpoch: int16(p.GetProducerEpoch()), LastSequence: p.GetLastSequence(),
				LastTimestamp: time.UnixMilli(p.GetLastTimestampMs()), LastOffset: p.GetLastOffset(),
			})
		}
	}
	return again
}
