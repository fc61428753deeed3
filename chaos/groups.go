package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/client"
)

// The group workload: idempotent producers through the Go client, whose
// every write must land exactly once, and the members of one consumer
// group reading the topic, committing after processing and recording
// every change of what they own.

// idempotentProducer produces value after value through the Go client's
// idempotent producer (its own retries, sequence numbers and epoch
// bumps), each to the next partition, with at most inflight records
// outstanding. A record the client reports as failed is recorded as a
// definite failure: the client claims so for everything but
// ErrUnknownOutcome, and the checker holds it to that (a read of such a
// record is an anomaly).
func idempotentProducer(ctx context.Context, h *History, cl *client.Client, name, topic string, partitions int32, inflight int, pace time.Duration) {
	sem := make(chan struct{}, inflight)
	var wg sync.WaitGroup
	defer wg.Wait()
	for seq := 0; ctx.Err() == nil; seq++ {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		p := int32(seq) % partitions
		v := fmt.Sprintf("%s-%d", name, seq)
		h.Add(Event{Kind: Send, Process: name, Partition: p, Value: v})
		wg.Add(1)
		// The callback's context is not the workload's: a record
		// buffered when the workload stops still gets its answer.
		cl.Produce(context.Background(), &client.Record{Topic: topic, Partition: p, Value: []byte(v)}, func(r *client.Record, err error) {
			defer wg.Done()
			defer func() { <-sem }()
			switch {
			case err == nil:
				h.Add(Event{Kind: Ack, Process: name, Partition: p, Offset: r.Offset, Value: v})
			case errors.Is(err, client.ErrUnknownOutcome):
				h.Add(Event{Kind: Unknown, Process: name, Partition: p, Value: v, Error: err.Error()})
			default:
				h.Add(Event{Kind: Fail, Process: name, Partition: p, Value: v, Error: err.Error()})
			}
		})
		if pace > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(pace):
			}
		}
	}
}

// groupMember is one member of the workload's consumer group: it polls,
// records what it read (GroupRead) and what it owns (Assign, Revoke, each
// stamped when the client tells it), and commits after processing.
// Now and then it leaves and joins again, so that partitions move even
// without faults; a static member (instance not "") comes back in its
// place instead.
func groupMember(ctx context.Context, h *History, cl *client.Client, group, name, instance, topic string, rng *rand.Rand) error {
	for ctx.Err() == nil {
		if err := memberTerm(ctx, h, cl, group, name, instance, topic, 10*time.Second+time.Duration(rng.Int64N(int64(20*time.Second)))); err != nil {
			return err
		}
	}
	return nil
}

// memberTerm is one membership of name: join, consume for about d, leave.
func memberTerm(ctx context.Context, h *History, cl *client.Client, group, name, instance, topic string, d time.Duration) error {
	var mu sync.Mutex
	owned := map[int32]bool{}
	record := func(kind Kind, tps []client.TopicPartition) {
		mu.Lock()
		defer mu.Unlock()
		for _, tp := range tps {
			owned[tp.Partition] = kind == Assign
			h.Add(Event{Kind: kind, Process: name, Partition: tp.Partition})
		}
	}
	g, err := cl.NewGroupConsumer(client.GroupConfig{Group: group, Topics: []string{topic},
		AutoCommitInterval: -1, RebalanceTimeout: 10 * time.Second, InstanceID: instance,
		OnAssigned: func(tps []client.TopicPartition) { record(Assign, tps) },
		OnRevoked:  func(tps []client.TopicPartition) { record(Revoke, tps) }})
	if err != nil {
		return fmt.Errorf("chaos: group member %s: %w", name, err)
	}
	term, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for term.Err() == nil {
		recs, err := g.Poll(term)
		if err != nil && term.Err() == nil && len(recs) == 0 {
			// Retriable failures are retried by the consumer; a lasting
			// one (the group refused the member) ends the term.
			if errors.Is(err, client.ErrClosed) || client.ErrorCode(err) == quirev1.ErrorCode_FENCED_INSTANCE_ID {
				break // for good: closed, or replaced by another process of its instance
			}
			continue
		}
		for _, r := range recs {
			h.Add(Event{Kind: GroupRead, Process: name, Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
		}
		if len(recs) > 0 {
			cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
			_ = g.Commit(cctx) // refused when fenced meanwhile; the next owner reads again
			ccancel()
		}
	}
	cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer ccancel()
	// Close gives up whatever is still owned, with or without the
	// coordinator's answer (an error here is a commit or leave that did
	// not get through: the session timeout removes the member instead).
	_ = g.Close(cctx)
	mu.Lock()
	var still []client.TopicPartition
	for p, own := range owned {
		if own {
			still = append(still, client.TopicPartition{Topic: topic, Partition: p})
		}
	}
	mu.Unlock()
	record(Revoke, still)
	return nil
}

// committedPoller records the group's committed offset of every
// partition every interval, as one client sees it.
func committedPoller(ctx context.Context, h *History, cl *client.Client, group, topic string, partitions int32, every time.Duration) {
	for ctx.Err() == nil {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_ = recordCommitted(rctx, h, cl, group, topic, partitions)
		cancel()
		select {
		case <-ctx.Done():
		case <-time.After(every):
		}
	}
}

// recordCommitted records the group's committed offset of every
// partition once.
func recordCommitted(ctx context.Context, h *History, cl *client.Client, group, topic string, partitions int32) error {
	var tps []client.TopicPartition
	for p := range partitions {
		tps = append(tps, client.TopicPartition{Topic: topic, Partition: p})
	}
	offs, err := cl.FetchOffsets(ctx, group, tps...)
	if err != nil {
		return err
	}
	for _, o := range offs {
		if o.Offset >= 0 {
			h.Add(Event{Kind: Committed, Process: "committed", Partition: o.Partition, Offset: o.Offset})
		}
	}
	return nil
}
