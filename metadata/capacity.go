package metadata

import (
	"fmt"
	"slices"

	pb "github.com/quirelog/quire/api/metapb"
)

// MaxPartitionsPerRequest bounds the partitions one CreateTopic or
// CreatePartitions may add. It is checked before anything is sized by the
// count, so an absurd count (2^31-1) is refused at once instead of
// allocating its placement.
const MaxPartitionsPerRequest = 10000

// BudgetKey is the broker config key of a broker's partition budget, named
// in the refusals.
const BudgetKey = "max.partitions.per.broker"

// PlanTopic is the replica assignment CreateTopic proposes for spec on
// img, or the error it answers: an invalid or too large partition count
// (ErrInvalidPartitions), a replication factor the live brokers cannot
// hold, an explicit assignment that does not fit, or a chosen broker
// pushed past its budget (ErrPartitionBudget). It does not check whether
// the topic exists. A validate-only request calls it to answer what the
// real one would.
func PlanTopic(img *Image, spec TopicSpec) ([][]int32, error) {
	if spec.Name == "" {
		return nil, fmt.Errorf("%w: empty topic name", ErrInvalidPartitions)
	}
	assign := spec.Assignment
	if assign == nil {
		if spec.Partitions < 1 {
			return nil, fmt.Errorf("%w: topic %q: partitions must be positive, got %d", ErrInvalidPartitions, spec.Name, spec.Partitions)
		}
		if err := checkRequestSize(spec.Name, int64(spec.Partitions)); err != nil {
			return nil, err
		}
		var err error
		assign, err = placeReplicas(img.placeableBrokers(), 0, spec.Partitions, int(spec.ReplicationFactor), img.PartitionCount())
		if err != nil {
			return nil, err
		}
	} else {
		if err := checkRequestSize(spec.Name, int64(len(assign))); err != nil {
			return nil, err
		}
		if err := checkExplicit(img, assign, spec.Partitions); err != nil {
			return nil, err
		}
	}
	if err := checkBudgets(img, spec.Name, assign); err != nil {
		return nil, err
	}
	return assign, nil
}

// PlanPartitions is the assignment of the partitions CreatePartitions adds
// to grow topic to total on img (numbered from first), or the error it
// answers, as PlanTopic.
func PlanPartitions(img *Image, topic string, total int32) (first int32, assign [][]int32, err error) {
	t, ok := img.topics[topic]
	if !ok {
		return 0, nil, fmt.Errorf("%w: %q", ErrUnknownTopic, topic)
	}
	have := int32(len(t.Partitions))
	if total <= have {
		return 0, nil, fmt.Errorf("%w: topic %q has %d partitions, asked for %d", ErrInvalidPartitions, topic, have, total)
	}
	if err := checkRequestSize(topic, int64(total)-int64(have)); err != nil {
		return 0, nil, err
	}
	rf := len(t.Partitions[0].Replicas)
	assign, err = placeReplicas(img.placeableBrokers(), have, total-have, rf, img.PartitionCount())
	if err != nil {
		return 0, nil, err
	}
	if err := checkBudgets(img, topic, assign); err != nil {
		return 0, nil, err
	}
	return have, assign, nil
}

// checkRequestSize refuses adding more than MaxPartitionsPerRequest
// partitions to topic in one request.
func checkRequestSize(topic string, adding int64) error {
	if adding > MaxPartitionsPerRequest {
		return fmt.Errorf("%w: topic %q: %d new partitions in one request, over the limit of %d per request",
			ErrInvalidPartitions, topic, adding, MaxPartitionsPerRequest)
	}
	return nil
}

// checkBudgets refuses an assignment that would make any broker it names
// host more partition replicas than its budget (BrokerInfo.MaxPartitions;
// 0 is no limit), naming the first such broker by id and the numbers.
func checkBudgets(img *Image, topic string, assign [][]int32) error {
	adding := map[int32]int{}
	for _, replicas := range assign {
		for _, id := range replicas {
			adding[id]++
		}
	}
	ids := make([]int32, 0, len(adding))
	for id := range adding {
		if img.brokers[id].MaxPartitions > 0 {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	slices.Sort(ids)
	hosted := img.HostedReplicas()
	for _, id := range ids {
		limit := int(img.brokers[id].MaxPartitions)
		if n := hosted[id] + adding[id]; n > limit {
			return fmt.Errorf("%w: topic %q: broker %d would host %d partition replicas (%d now, %d more), over its %s of %d",
				ErrPartitionBudget, topic, id, n, hosted[id], adding[id], BudgetKey, limit)
		}
	}
	return nil
}

// replicasOf is the replica lists of parts.
func replicasOf(parts []PartitionInfo) [][]int32 {
	out := make([][]int32, len(parts))
	for i, p := range parts {
		out[i] = p.Replicas
	}
	return out
}

// HostedReplicas counts, per broker id, the partition replicas assigned to
// it (leaders and followers).
func (img *Image) HostedReplicas() map[int32]int {
	out := map[int32]int{}
	for _, t := range img.topics {
		for _, p := range t.Partitions {
			for _, id := range p.Replicas {
				out[id]++
			}
		}
	}
	return out
}

// applyBrokerBudget records a broker's partition budget.
func (d *draft) applyBrokerBudget(c *pb.BrokerBudget, _ uint64) any {
	b, ok := d.img.brokers[c.BrokerId]
	if !ok {
		return fmt.Errorf("%w: %d", ErrUnknownBroker, c.BrokerId)
	}
	if c.BrokerEpoch != b.Epoch {
		return fmt.Errorf("%w: broker %d epoch %d, current %d", ErrStaleEpoch, c.BrokerId, c.BrokerEpoch, b.Epoch)
	}
	if c.MaxPartitions < 0 {
		return fmt.Errorf("%w: broker %d: negative %s %d", ErrInvalidPartitions, c.BrokerId, BudgetKey, c.MaxPartitions)
	}
	b.MaxPartitions = c.MaxPartitions
	d.putBroker(b)
	return nil
}
