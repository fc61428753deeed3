package request_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/quirelog/quire/request"
	"github.com/quirelog/quire/txn"
)

// oneTxn is a transaction coordinator of one transactional id, the
// transitions those of package txn.
type oneTxn struct {
	cur   *txn.Txn
	calls int
}

func (o *oneTxn) InitTxnProducer(context.Context, txn.InitRequest) (txn.Txn, error) {
	return txn.Txn{}, nil
}
func (o *oneTxn) AddPartitionsToTxn(_ context.Context, p txn.Producer, parts []txn.TopicPartition, verifyOnly bool) error {
	o.calls++
	cur := o.cur
	if p.ID != cur.ID {
		cur = nil
	}
	next, err := txn.AddPartitions(cur, p.PID, p.Epoch, parts, verifyOnly, 1)
	if next != nil {
		o.cur = next
	}
	return err
}
func (o *oneTxn) AddOffsetsToTxn(context.Context, txn.Producer, string) error { return nil }
func (o *oneTxn) TxnOffsetCommit(context.Context, txn.Producer, string, txn.Member, []txn.Offset, bool) error {
	return nil
}
func (o *oneTxn) EndTxn(context.Context, txn.Producer, bool, bool) (txn.Txn, error) {
	return txn.Txn{}, nil
}
func (o *oneTxn) DescribeTransactions(context.Context, []string) ([]txn.Txn, []bool, error) {
	return nil, nil, nil
}
func (o *oneTxn) ListTransactions(context.Context) ([]txn.Txn, error) { return nil, nil }

// txnCodes adds the transaction errors these tests meet to codes.
func txnCodes(err error) int32 {
	switch {
	case errors.Is(err, txn.ErrInvalidTxnState):
		return 48
	case errors.Is(err, txn.ErrProducerFenced):
		return 90
	case errors.Is(err, txn.ErrInvalidProducerIDMapping):
		return 49
	}
	return codes(err)
}

// AddPartitionsToTxnForBroker (Kafka's AddPartitionsToTxn v4+): with
// verify_only, each partition is answered on its own (in the ongoing
// transaction or INVALID_TXN_STATE) and nothing is added; a producer's
// error (fenced, unknown id) is every partition's; without, the
// partitions are added, after which they verify.
func TestCoreAddPartitionsToTxnForBroker(t *testing.T) {
	t.Parallel()
	co := &oneTxn{cur: &txn.Txn{ID: "tx", ProducerID: 7, ProducerEpoch: 2, LastProducerEpoch: -1, State: txn.Ongoing,
		Partitions: []txn.TopicPartition{{Topic: "a", Partition: 0}, {Topic: "b", Partition: 1}}}}
	f := newCore(t, func(c *request.Config) { c.Transactions, c.Codes = co, txnCodes })
	ctx := ctxT(t)
	p := txn.Producer{ID: "tx", PID: 7, Epoch: 2}
	parts := []txn.TopicPartition{{Topic: "a", Partition: 0}, {Topic: "a", Partition: 1}, {Topic: "b", Partition: 1}}
	answers := func(errs []error) []int32 {
		out := make([]int32, len(errs))
		for i, err := range errs {
			out[i] = code(t, err)
		}
		return out
	}
	check := func(what string, p txn.Producer, verify bool, want ...int32) {
		t.Helper()
		errs, err := f.core.AddPartitionsToTxnForBroker(ctx, p, parts, verify)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := answers(errs); !slices.Equal(got, want) {
			t.Fatalf("%s: answered %v, want %v", what, got, want)
		}
	}
	check("verify, a-1 not added", p, true, 0, 48, 0)
	if len(co.cur.Partitions) != 2 {
		t.Fatalf("a verification added partitions: %v", co.cur.Partitions)
	}
	check("verify, fenced", txn.Producer{ID: "tx", PID: 7, Epoch: 1}, true, 90, 90, 90)
	check("verify, unknown id", txn.Producer{ID: "other", PID: 7, Epoch: 2}, true, 49, 49, 49)
	check("add", p, false, 0, 0, 0)
	calls := co.calls
	check("verify, all added", p, true, 0, 0, 0)
	if co.calls != calls+1 {
		t.Fatalf("a verification of partitions all in the transaction took %d calls, want 1", co.calls-calls)
	}
}
