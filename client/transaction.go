package client

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"google.golang.org/grpc"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

// Transaction is a transactional producer: records written to any
// partitions, and consumer group offsets, committed or aborted together
// (Kafka's exactly-once semantics). It speaks transaction version 2
// (KIP-890): each partition and group joins the transaction on its first
// write, and each transaction's end bumps the producer's epoch, so a
// late retry of an ended transaction's write is refused everywhere. A
// second Transaction with the same transactional id fences this one: its
// calls then fail PRODUCER_FENCED, for good. Readers see the committed
// records only with read_committed (ReadCommitted on a consumer, or
// isolation_level READ_COMMITTED on a fetch).
//
// A Transaction is safe for concurrent use, but its writes to one
// partition are sent one at a time (each waits for the one before), in
// call order.
type Transaction struct {
	c       *Client
	id      string
	timeout time.Duration

	mu    sync.Mutex
	pid   int64
	epoch int16
	open  bool
	// touched: the open transaction sent a write or offsets (perhaps
	// taken even if the call failed); one that did not ends without a
	// call, as it has nothing at the coordinator to end.
	touched bool
	seqs    map[TopicPartition]int32 // next base sequence per partition
	err     error                    // fatal: fenced
}

// ErrTransactionState: Begin with a transaction open, or a write, Commit
// or Abort with none.
var ErrTransactionState = errors.New("client: no transaction open (Begin) or one already open")

// NewTransaction initializes the transactional producer of id, fencing
// any earlier one with the same id (its open transaction, if any, is
// aborted). timeout bounds each transaction: one open longer is aborted
// by the coordinator (0: 60s).
func (c *Client) NewTransaction(ctx context.Context, id string, timeout time.Duration) (*Transaction, error) {
	t := &Transaction{c: c, id: id, timeout: timeout, seqs: map[TopicPartition]int32{}}
	var resp *quirev1.InitTransactionsResponse
	err := t.call(ctx, func(ctx context.Context, tc quirev1.TransactionsClient) error {
		var err error
		resp, err = tc.InitTransactions(ctx, &quirev1.InitTransactionsRequest{TransactionalId: id, TimeoutMs: int32(timeout.Milliseconds())})
		return err
	})
	if err != nil {
		return nil, err
	}
	t.pid, t.epoch = resp.ProducerId, int16(resp.ProducerEpoch)
	return t, nil
}

// ProducerID returns the producer id and epoch the next write carries.
func (t *Transaction) ProducerID() (int64, int16) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.pid, t.epoch
}

// call runs fn on any broker, riding out what a retry may cure: the
// controller or a previous transaction's end being under way
// (CONCURRENT_TRANSACTIONS), a coordinator moving (NOT_COORDINATOR).
func (t *Transaction) call(ctx context.Context, fn func(ctx context.Context, tc quirev1.TransactionsClient) error) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.c.cfg.requestTimeout)
		defer cancel()
	}
	backoff := t.c.cfg.retryBackoff
	for {
		err := t.c.anyBroker(ctx, func(ctx context.Context, cc *grpc.ClientConn) error {
			return fn(ctx, quirev1.NewTransactionsClient(cc))
		})
		if err == nil || !txnRetriable(err) {
			return err
		}
		if serr := t.c.sleepCtx(ctx, backoff); serr != nil {
			return fmt.Errorf("%w (last error: %w)", serr, err)
		}
		backoff = min(2*backoff, time.Second)
	}
}

func txnRetriable(err error) bool {
	switch ErrorCode(err) {
	case quirev1.ErrorCode_CONCURRENT_TRANSACTIONS, quirev1.ErrorCode_NOT_COORDINATOR, quirev1.ErrorCode_COORDINATOR_NOT_AVAILABLE,
		quirev1.ErrorCode_COORDINATOR_LOAD_IN_PROGRESS:
		return true
	}
	return adminRetriable(err)
}

// fatal records a fence: every later call fails with it.
func (t *Transaction) fatal(err error) error {
	if ErrorCode(err) == quirev1.ErrorCode_PRODUCER_FENCED || ErrorCode(err) == quirev1.ErrorCode_INVALID_PRODUCER_EPOCH {
		t.err = err
	}
	return err
}

// Begin opens a transaction.
func (t *Transaction) Begin() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil {
		return t.err
	}
	if t.open {
		return fmt.Errorf("%w: transaction of %q already open", ErrTransactionState, t.id)
	}
	t.open = true
	return nil
}

// Produce writes records to one partition of topic in the open
// transaction and returns their offsets. It returns once every in-sync
// replica has them (acks=all); a retry after a lost answer is recognised
// by the partition (the same sequences), never written twice. The
// records are read by read_committed consumers once the transaction
// commits, never if it aborts.
func (t *Transaction) Produce(ctx context.Context, topic string, partition int32, records ...*Record) ([]int64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil {
		return nil, t.err
	}
	if !t.open {
		return nil, fmt.Errorf("%w: Produce outside a transaction", ErrTransactionState)
	}
	if len(records) == 0 {
		return nil, nil
	}
	tp := TopicPartition{Topic: topic, Partition: partition}
	seq := t.seqs[tp]
	req := &quirev1.ProduceRecordsRequest{Topic: topic, OptionalAcks: &quirev1.ProduceRecordsRequest_Acks{Acks: -1},
		OptionalProducerId: &quirev1.ProduceRecordsRequest_ProducerId{ProducerId: t.pid}, ProducerEpoch: int32(t.epoch),
		BaseSequence: seq, TransactionalId: t.id}
	for _, r := range records {
		pr := &quirev1.ProduceRecord{KeyData: &quirev1.ProduceRecord_KeyBytes{KeyBytes: r.Key}, ValueData: &quirev1.ProduceRecord_ValueBytes{ValueBytes: r.Value},
			OptionalPartition: &quirev1.ProduceRecord_Partition{Partition: partition}}
		if r.Key == nil {
			pr.KeyData = nil
		}
		if r.Value == nil {
			pr.ValueData = nil
		}
		if !r.Timestamp.IsZero() {
			pr.TimestampMs = r.Timestamp.UnixMilli()
		}
		for _, h := range r.Headers {
			pr.Headers = append(pr.Headers, &quirev1.RecordHeader{Key: h.Key, Value: h.Value})
		}
		req.Records = append(req.Records, pr)
	}
	var offsets []int64
	t.touched = true
	err := t.produce(ctx, req, &offsets)
	if err != nil {
		return nil, t.fatal(err)
	}
	if seq > math.MaxInt32-int32(len(records)) {
		t.seqs[tp] = int32(len(records)) - (math.MaxInt32 - seq) - 1
	} else {
		t.seqs[tp] = seq + int32(len(records))
	}
	return offsets, nil
}

// produce sends req until every record has an answer that a retry would
// not change.
func (t *Transaction) produce(ctx context.Context, req *quirev1.ProduceRecordsRequest, offsets *[]int64) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.c.cfg.requestTimeout)
		defer cancel()
	}
	backoff := t.c.cfg.retryBackoff
	for {
		var resp *quirev1.ProduceRecordsResponse
		err := t.c.anyBroker(ctx, func(ctx context.Context, cc *grpc.ClientConn) error {
			var err error
			resp, err = quirev1.NewProducerClient(cc).ProduceRecords(ctx, req)
			return err
		})
		if err == nil {
			for _, r := range resp.Results {
				if e := fromProto(r.Error); e != nil {
					err = e
					break
				}
			}
		}
		if err == nil {
			out := make([]int64, len(resp.Results))
			for i, r := range resp.Results {
				out[i] = r.Offset
			}
			*offsets = out
			return nil
		}
		var e *Error
		if !(errors.As(err, &e) && e.Retriable) && !txnRetriable(err) {
			return err
		}
		if serr := t.c.sleepCtx(ctx, backoff); serr != nil {
			return fmt.Errorf("%w (last error: %w)", serr, err)
		}
		backoff = min(2*backoff, time.Second)
	}
}

// SendOffsets stages a consumer group's offsets in the open transaction:
// they are committed with it (never if it aborts), as one with the
// records: consume-transform-produce, exactly once. They are sent as no
// member, so the group's membership does not fence them: a consumer in
// the group sends them with SendGroupOffsets.
func (t *Transaction) SendOffsets(ctx context.Context, group string, offsets ...OffsetCommit) error {
	return t.sendOffsets(ctx, &quirev1.SendOffsetsRequest{Group: group}, offsets)
}

// SendGroupOffsets is SendOffsets for g's group, sent as g's member at
// its current epoch: the coordinator refuses them (ILLEGAL_GENERATION,
// UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID) unless the member is still in
// the group at that epoch and owns each partition, so a consumer that
// lost partitions in a rebalance cannot commit offsets of them with its
// output. The error is not fatal to the transaction: abort it and go on
// from the group's committed offsets.
func (t *Transaction) SendGroupOffsets(ctx context.Context, g *GroupConsumer, offsets ...OffsetCommit) error {
	req := &quirev1.SendOffsetsRequest{Group: g.cfg.Group, MemberId: g.MemberID(), MemberEpoch: g.Epoch(), InstanceId: g.cfg.InstanceID}
	return t.sendOffsets(ctx, req, offsets)
}

func (t *Transaction) sendOffsets(ctx context.Context, req *quirev1.SendOffsetsRequest, offsets []OffsetCommit) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil {
		return t.err
	}
	if !t.open {
		return fmt.Errorf("%w: SendOffsets outside a transaction", ErrTransactionState)
	}
	t.touched = true
	req.Producer = t.producer()
	for _, o := range offsets {
		req.Offsets = append(req.Offsets, &quirev1.OffsetCommit{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset,
			OptionalLeaderEpoch: &quirev1.OffsetCommit_LeaderEpoch{LeaderEpoch: o.LeaderEpoch}, Metadata: o.Metadata})
	}
	return t.fatal(t.call(ctx, func(ctx context.Context, tc quirev1.TransactionsClient) error {
		_, err := tc.SendOffsets(ctx, req)
		return err
	}))
}

func (t *Transaction) producer() *quirev1.TransactionalProducer {
	return &quirev1.TransactionalProducer{TransactionalId: t.id, ProducerId: t.pid, ProducerEpoch: int32(t.epoch)}
}

// Commit commits the open transaction: its records become visible to
// read_committed readers and its offsets are committed, all at once.
func (t *Transaction) Commit(ctx context.Context) error { return t.end(ctx, true) }

// Abort aborts the open transaction: its records are never visible to
// read_committed readers and its offsets are dropped.
func (t *Transaction) Abort(ctx context.Context) error { return t.end(ctx, false) }

func (t *Transaction) end(ctx context.Context, commit bool) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil {
		return t.err
	}
	if !t.open {
		return fmt.Errorf("%w: no transaction to end", ErrTransactionState)
	}
	if !t.touched {
		t.open = false
		return nil
	}
	var resp *quirev1.EndTransactionResponse
	err := t.call(ctx, func(ctx context.Context, tc quirev1.TransactionsClient) error {
		var err error
		resp, err = tc.EndTransaction(ctx, &quirev1.EndTransactionRequest{Producer: t.producer(), Commit: commit})
		return err
	})
	if err != nil {
		return t.fatal(err)
	}
	// The next transaction: the bumped epoch, sequences from 0.
	t.open, t.touched = false, false
	t.pid, t.epoch = resp.ProducerId, int16(resp.ProducerEpoch)
	clear(t.seqs)
	return nil
}

// TransactionDescription is a transactional id's state at the
// coordinator.
type TransactionDescription struct {
	ID            string           `json:"transactional_id"`
	ProducerID    int64            `json:"producer_id"`
	ProducerEpoch int16            `json:"producer_epoch"`
	State         string           `json:"state"`
	TimeoutMs     int32            `json:"timeout_ms"`
	StartTime     time.Time        `json:"start_time,omitzero"`
	Partitions    []TopicPartition `json:"partitions,omitempty"`
	Groups        []string         `json:"groups,omitempty"`
}

func transactionDescription(d *quirev1.TransactionDescription) TransactionDescription {
	out := TransactionDescription{ID: d.TransactionalId, ProducerID: d.ProducerId, ProducerEpoch: int16(d.ProducerEpoch),
		State: d.State, TimeoutMs: d.TimeoutMs, Groups: d.Groups}
	if d.StartTimeMs > 0 {
		out.StartTime = time.UnixMilli(d.StartTimeMs)
	}
	for _, p := range d.Partitions {
		out.Partitions = append(out.Partitions, TopicPartition{Topic: p.Topic, Partition: p.Partition})
	}
	return out
}

// DescribeTransactions describes transactional ids; an unknown one fails
// the call with TRANSACTIONAL_ID_NOT_FOUND.
func (c *Client) DescribeTransactions(ctx context.Context, ids ...string) ([]TransactionDescription, error) {
	var resp *quirev1.DescribeTransactionsResponse
	err := c.anyBrokerRetried(ctx, func(ctx context.Context, cc *grpc.ClientConn) error {
		var err error
		resp, err = quirev1.NewTransactionsClient(cc).DescribeTransactions(ctx, &quirev1.DescribeTransactionsRequest{TransactionalIds: ids})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]TransactionDescription, 0, len(resp.Transactions))
	for _, d := range resp.Transactions {
		if e := fromProto(d.Error); e != nil {
			return nil, fmt.Errorf("transactional id %q: %w", d.TransactionalId, e)
		}
		out = append(out, transactionDescription(d))
	}
	return out, nil
}

// ListTransactions lists the transactional ids in the given states
// (Kafka's names: Empty, Ongoing, PrepareCommit, PrepareAbort,
// CompleteCommit, CompleteAbort), all when none is named.
func (c *Client) ListTransactions(ctx context.Context, states ...string) ([]TransactionDescription, error) {
	var resp *quirev1.ListTransactionsResponse
	err := c.anyBrokerRetried(ctx, func(ctx context.Context, cc *grpc.ClientConn) error {
		var err error
		resp, err = quirev1.NewTransactionsClient(cc).ListTransactions(ctx, &quirev1.ListTransactionsRequest{States: states})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]TransactionDescription, 0, len(resp.Transactions))
	for _, d := range resp.Transactions {
		out = append(out, transactionDescription(d))
	}
	return out, nil
}

// AbortTransaction aborts the transactional id's ongoing transaction,
// if any, and fences its producer; it returns the id's state after.
func (c *Client) AbortTransaction(ctx context.Context, id string) (TransactionDescription, error) {
	err := c.anyBrokerRetried(ctx, func(ctx context.Context, cc *grpc.ClientConn) error {
		_, err := quirev1.NewTransactionsClient(cc).AbortTransaction(ctx, &quirev1.AbortTransactionRequest{TransactionalId: id})
		return err
	})
	if err != nil {
		return TransactionDescription{}, err
	}
	got, err := c.DescribeTransactions(ctx, id)
	if err != nil {
		return TransactionDescription{}, err
	}
	return got[0], nil
}
