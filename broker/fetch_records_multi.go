package broker

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/replica"
)

// forwardFetchMargin is how long past its wait a leader a fetch was passed
// on to may take to answer before its partitions are answered
// NOT_LEADER_OR_FOLLOWER, so that one leader that does not answer cannot
// hold back the records of the others.
const forwardFetchMargin = 5 * time.Second

// FetchRecordsMulti is FetchRecords for many partitions: one long poll,
// decoded records, errors per partition. Partitions led elsewhere are
// passed on to their leaders: first every broker reads without waiting;
// if none has a record, all wait at once and the first answer with a
// record or an error ends the others' waits.
func (s *consumerService) FetchRecordsMulti(ctx context.Context, req *quirev1.FetchRecordsMultiRequest) (*quirev1.FetchRecordsMultiResponse, error) {
	if err := checkFetchRecordsMulti(req); err != nil {
		return nil, toStatus(err)
	}
	b := s.b
	maxRecords := int(req.MaxRecords)
	if maxRecords <= 0 {
		maxRecords = defaultMaxRecords
	}
	wait := time.Duration(req.MaxWaitMs) * time.Millisecond

	split := b.splitByLeader(ctx, len(req.Partitions), func(i int) (string, int32) {
		return req.Partitions[i].Topic, req.Partitions[i].Partition
	})
	maxBytes := split.shareBytes(int(req.MaxBytes))
	answers := make([]*quirev1.FetchRecordsPartitionResult, len(req.Partitions))
	split.poll(ctx, wait, func(ctx context.Context, idx []int, wait time.Duration) bool {
		return s.fetchLocal(ctx, req, idx, wait, maxRecords, maxBytes, answers)
	}, func(ctx context.Context, addr string, idx []int, wait time.Duration) bool {
		return b.forwardFetchRecordsMulti(ctx, addr, req, wait, maxBytes, idx, answers)
	})
	trimRecords(answers, maxRecords)
	return &quirev1.FetchRecordsMultiResponse{Partitions: answers}, nil
}

// checkFetchRecordsMulti rejects what is wrong with the request as a whole.
func checkFetchRecordsMulti(req *quirev1.FetchRecordsMultiRequest) error {
	if len(req.Partitions) == 0 {
		return fmt.Errorf("%w: no partitions", ErrInvalidRequest)
	}
	if err := checkRecordFormat(req.Format); err != nil {
		return err
	}
	if err := notNegative(field{"max_wait_ms", int64(req.MaxWaitMs)}, field{"max_records", int64(req.MaxRecords)},
		field{"max_bytes", int64(req.MaxBytes)}); err != nil { // validate.go
		return err
	}
	type key struct {
		topic string
		part  int32
	}
	seen := make(map[key]bool, len(req.Partitions))
	for _, p := range req.Partitions {
		k := key{p.Topic, p.Partition}
		if seen[k] {
			return fmt.Errorf("%w: partition %s-%d named twice", ErrInvalidRequest, p.Topic, p.Partition)
		}
		seen[k] = true
		if err := partitionMaxBytes(p.Topic, p.Partition, p.MaxBytes); err != nil { // validate.go
			return err
		}
	}
	return nil
}

// ledElsewhere returns the NOT_LEADER error for a partition the metadata
// image says another broker leads, else nil: the partition is read here,
// and reading it says what is wrong with it, if anything.
func (b *Broker) ledElsewhere(topic string, p int32) error {
	t, ok := b.cluster.image().Topic(topic)
	if !ok || p < 0 || int(p) >= len(t.Partitions) {
		return nil
	}
	pi := t.Partitions[p]
	if pi.Leader < 0 || pi.Leader == b.cfg.NodeID {
		return nil
	}
	return &replica.NotLeaderError{Topic: topic, Partition: p, Leader: pi.Leader, Epoch: pi.LeaderEpoch}
}

// fetchLocal long-polls the partitions at idx of req on this broker and
// fills in their answers; it reports whether any has records or an error.
func (s *consumerService) fetchLocal(ctx context.Context, req *quirev1.FetchRecordsMultiRequest, idx []int, wait time.Duration, maxRecords, maxBytes int, answers []*quirev1.FetchRecordsPartitionResult) bool {
	specs := make([]fetchSpec, len(idx))
	for j, i := range idx {
		p := req.Partitions[i]
		specs[j] = fetchSpec{Topic: p.Topic, Partition: p.Partition, Offset: p.Offset, MaxBytes: int(p.MaxBytes)}
	}
	results := s.b.fetch(ctx, specs, s.b.queue.Received(), wait, 1, maxBytes, false)
	found := false
	left := maxRecords
	for j, r := range results {
		a := &quirev1.FetchRecordsPartitionResult{Topic: r.Topic, Partition: r.Partition,
			NextOffset: r.Offset, HighWatermark: r.HighWatermark, LogStartOffset: r.LogStartOffset}
		answers[idx[j]] = a
		err := r.Err
		if err == nil {
			var d decodedPartition
			if d, err = decodeFetched(r, max(left, 0), req.Format); err == nil {
				a.Records, a.NextOffset = d.records, d.next
				left -= len(d.records)
			}
		}
		if err != nil {
			a.Error, a.HighWatermark, a.LogStartOffset = toError(err), -1, -1
		}
		found = found || err != nil || len(a.Records) > 0
	}
	return found
}

// forwardFetchRecordsMulti passes the partitions at idx of req on to the
// leader at addr and fills in its answers; it reports whether any has
// records or an error. A call ended because another leader answered first
// leaves its partitions with no records, to be fetched again from the
// same offsets; a leader that cannot be reached leaves NOT_LEADER.
func (b *Broker) forwardFetchRecordsMulti(ctx context.Context, addr string, req *quirev1.FetchRecordsMultiRequest, wait time.Duration, maxBytes int, idx []int, answers []*quirev1.FetchRecordsPartitionResult) bool {
	sub := &quirev1.FetchRecordsMultiRequest{MaxWaitMs: int32(wait.Milliseconds()),
		MaxRecords: req.MaxRecords, MaxBytes: int32(maxBytes), Format: req.Format}
	for _, i := range idx {
		sub.Partitions = append(sub.Partitions, req.Partitions[i])
	}
	answerAll := func(errFor func(p *quirev1.FetchRecordsPartition) error) {
		for _, i := range idx {
			p := req.Partitions[i]
			answers[i] = &quirev1.FetchRecordsPartitionResult{Topic: p.Topic, Partition: p.Partition,
				NextOffset: p.Offset, HighWatermark: -1, LogStartOffset: -1, Error: toError(errFor(p))}
		}
	}
	cc, err := b.cluster.peer(addr)
	if err != nil {
		answerAll(func(p *quirev1.FetchRecordsPartition) error {
			return b.unreachedLeader(p, addr, "cannot be reached", err)
		})
		return true
	}
	callCtx, cancel := context.WithTimeout(ctx, wait+forwardFetchMargin)
	defer cancel()
	resp, err := quirev1.NewConsumerClient(cc).FetchRecordsMulti(b.forwardContext(callCtx), sub, grpc.MaxCallRecvMsgSize(maxSendBytes))
	if err == nil && len(resp.Partitions) != len(idx) {
		err = fmt.Errorf("broker: the leader at %s answered %d partitions for %d", addr, len(resp.Partitions), len(idx))
	}
	if err != nil {
		if ctx.Err() != nil { // another leader answered first, or the caller left
			answerAll(func(*quirev1.FetchRecordsPartition) error { return nil })
			return false
		}
		b.logger.Debug("a fetch passed on to the leader got no answer", "leader", addr, "error", err)
		answerAll(func(p *quirev1.FetchRecordsPartition) error {
			return b.unreachedLeader(p, addr, "did not answer", err)
		})
		return true
	}
	found := false
	for j, i := range idx {
		answers[i] = resp.Partitions[j]
		found = found || resp.Partitions[j].Error != nil || len(resp.Partitions[j].Records) > 0
	}
	return found
}

// unreachedLeader is the NOT_LEADER_OR_FOLLOWER answer, naming the leader,
// for a partition whose leader at addr could not be asked.
func (b *Broker) unreachedLeader(p *quirev1.FetchRecordsPartition, addr, what string, err error) error {
	if nle := b.ledElsewhere(p.Topic, p.Partition); nle != nil {
		return fmt.Errorf("%w; its address %s %s: %v", nle, addr, what, err)
	}
	return fmt.Errorf("%w: %s-%d: the leader at %s %s: %v", ErrNotLeader, p.Topic, p.Partition, addr, what, err)
}

// trimRecords keeps at most maxRecords records in all, filling partitions
// in request order; a partition cut short fetches next from the first
// record dropped.
func trimRecords(answers []*quirev1.FetchRecordsPartitionResult, maxRecords int) {
	left := maxRecords
	for _, a := range answers {
		if len(a.Records) > left {
			keep := max(left, 0)
			a.NextOffset = a.Records[keep].Offset
			a.Records = a.Records[:keep]
		}
		left -= len(a.Records)
	}
}
