package request

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/quirelog/quire/auth"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/record"
	"github.com/quirelog/quire/replica"
	"github.com/quirelog/quire/storage"
	"github.com/quirelog/quire/txn"
)

// Transactions: the transaction coordinator's calls, served on the
// controller (package txncoord) and reached through Transactions, which
// the broker implements over its session with the controller; the
// markers the coordinator has the partition leaders write
// (WriteTxnMarkers); and the check a leader makes of a transactional
// producer's first batch on a partition (checkTransactional).

// ErrTransactionsUnsupported refuses a transactional call on a core
// without a transaction coordinator to reach.
var ErrTransactionsUnsupported = errors.New("request: transactions are not supported by this node (no transaction coordinator)")

// Transactions is the transaction coordinator as the core reaches it.
// Its errors are txn's and the metadata's sentinels, wrapped as they
// come.
type Transactions interface {
	InitTxnProducer(ctx context.Context, req txn.InitRequest) (txn.Txn, error)
	AddPartitionsToTxn(ctx context.Context, p txn.Producer, parts []txn.TopicPartition, verifyOnly bool) error
	AddOffsetsToTxn(ctx context.Context, p txn.Producer, group string) error
	TxnOffsetCommit(ctx context.Context, p txn.Producer, group string, member txn.Member, offsets []txn.Offset, addGroup bool) error
	EndTxn(ctx context.Context, p txn.Producer, commit, bump bool) (txn.Txn, error)
	// DescribeTransactions answers one state per id, in order; found
	// false for an unknown one.
	DescribeTransactions(ctx context.Context, ids []string) ([]txn.Txn, []bool, error)
	ListTransactions(ctx context.Context) ([]txn.Txn, error)
}

func (c *Core) transactions() (Transactions, error) {
	if c.cfg.Transactions == nil {
		return nil, c.fail(ErrTransactionsUnsupported)
	}
	return c.cfg.Transactions, nil
}

// authorizeTxnID refuses unless the principal may do op on the
// transactional id (Kafka's TransactionalId resource).
func (c *Core) authorizeTxnID(ctx context.Context, op auth.Operation, id string) error {
	return c.authorize(ctx, op, auth.ResourceTransactionalID, id, false)
}

// InitTxnProducer is InitProducerId with a transactional id: the
// producer's id and epoch, the epoch bumped past (and fencing) any
// earlier producer with the same transactional id. It needs Write on the
// transactional id.
func (c *Core) InitTxnProducer(ctx context.Context, req txn.InitRequest) (txn.Txn, error) {
	if err := txn.CheckID(req.ID); err != nil {
		return txn.Txn{}, c.fail(err)
	}
	if err := c.authorizeTxnID(ctx, auth.OpWrite, req.ID); err != nil {
		return txn.Txn{}, err
	}
	t, err := c.transactions()
	if err != nil {
		return txn.Txn{}, err
	}
	out, err := t.InitTxnProducer(ctx, req)
	return out, c.fail(err)
}

// AddPartitionsToTxn adds partitions to the producer's transaction. It
// needs Write on the transactional id and on each topic.
func (c *Core) AddPartitionsToTxn(ctx context.Context, p txn.Producer, parts []txn.TopicPartition) error {
	if err := c.authorizeTxnID(ctx, auth.OpWrite, p.ID); err != nil {
		return err
	}
	if err := c.authorizeEach(ctx, auth.OpWrite, len(parts), func(i int) string { return parts[i].Topic }, nil); err != nil {
		return err
	}
	t, err := c.transactions()
	if err != nil {
		return err
	}
	return c.fail(t.AddPartitionsToTxn(ctx, p, parts, false))
}

// AddPartitionsToTxnForBroker is AddPartitionsToTxn as brokers send it
// (Kafka's v4 and later, a batch of transactions): it needs ClusterAction
// on the cluster rather than the producer's ACLs (its producers asked
// the broker that sends it), and answers per partition, in order. With
// verifyOnly nothing is added: each partition is nil when it is in the
// producer's ongoing transaction, INVALID_TXN_STATE when not (KIP-890
// part 1's check of a producer's first batch by a partition leader);
// an error of the producer's (fenced, an unknown transactional id, a
// transaction being ended) is every partition's. Without verifyOnly the
// partitions are added, as AddPartitionsToTxn does, with one answer for
// all. err refuses the whole call.
func (c *Core) AddPartitionsToTxnForBroker(ctx context.Context, p txn.Producer, parts []txn.TopicPartition, verifyOnly bool) ([]error, error) {
	if err := c.authorizeCluster(ctx, auth.OpClusterAction); err != nil {
		return nil, err
	}
	t, err := c.transactions()
	if err != nil {
		return nil, err
	}
	out := make([]error, len(parts))
	all := c.fail(t.AddPartitionsToTxn(ctx, p, parts, verifyOnly))
	if e := c.asError(all); verifyOnly && len(parts) > 1 && e != nil &&
		(e.Code == c.codes(txn.ErrInvalidTxnState) || e.Code == c.codes(metadata.ErrUnknownTopic)) {
		// Some are not in it, or do not exist: which, one at a time
		// (the coordinator's answer names none).
		for i, tp := range parts {
			out[i] = c.fail(t.AddPartitionsToTxn(ctx, p, []txn.TopicPartition{tp}, true))
		}
		return out, nil
	}
	for i := range out {
		out[i] = all
	}
	return out, nil
}

// AddOffsetsToTxn adds a consumer group to the producer's transaction.
// It needs Write on the transactional id and Read on the group.
func (c *Core) AddOffsetsToTxn(ctx context.Context, p txn.Producer, group string) error {
	if err := c.authorizeTxnID(ctx, auth.OpWrite, p.ID); err != nil {
		return err
	}
	if err := c.authorize(ctx, auth.OpRead, auth.ResourceGroup, group, false); err != nil {
		return err
	}
	t, err := c.transactions()
	if err != nil {
		return err
	}
	return c.fail(t.AddOffsetsToTxn(ctx, p, group))
}

// TxnOffsetCommit stages a group's offsets in the producer's
// transaction: they are committed with it. Sent as a group member
// (member: none is the zero value), the coordinator refuses them unless
// the member is in the group at its epoch (group.ErrUnknownMemberID,
// group.ErrFencedInstanceID, group.ErrIllegalGeneration) and owns each
// partition at that epoch (group.ErrIllegalGeneration). It needs Write
// on the transactional id, Read on the group and Read on each topic.
func (c *Core) TxnOffsetCommit(ctx context.Context, p txn.Producer, group string, member txn.Member, offsets []txn.Offset, addGroup bool) error {
	if err := c.authorizeTxnID(ctx, auth.OpWrite, p.ID); err != nil {
		return err
	}
	if err := c.authorize(ctx, auth.OpRead, auth.ResourceGroup, group, false); err != nil {
		return err
	}
	if err := c.authorizeEach(ctx, auth.OpRead, len(offsets), func(i int) string { return offsets[i].Topic }, nil); err != nil {
		return err
	}
	t, err := c.transactions()
	if err != nil {
		return err
	}
	return c.fail(t.TxnOffsetCommit(ctx, p, group, member, offsets, addGroup))
}

// EndTxn commits or aborts the producer's transaction and returns the
// transactional id's state after it (its producer id and epoch are the
// producer's next; bump: the producer speaks transaction version 2, its
// epoch is bumped). It needs Write on the transactional id.
func (c *Core) EndTxn(ctx context.Context, p txn.Producer, commit, bump bool) (txn.Txn, error) {
	if err := c.authorizeTxnID(ctx, auth.OpWrite, p.ID); err != nil {
		return txn.Txn{}, err
	}
	t, err := c.transactions()
	if err != nil {
		return txn.Txn{}, err
	}
	out, err := t.EndTxn(ctx, p, commit, bump)
	return out, c.fail(err)
}

// TxnDescription is one transactional id's state; Err is set for an id
// unknown or not authorized.
type TxnDescription struct {
	ID  string
	Txn txn.Txn
	Err error
}

// DescribeTransactions describes transactional ids; each needs Describe
// on it.
func (c *Core) DescribeTransactions(ctx context.Context, ids []string) ([]TxnDescription, error) {
	t, err := c.transactions()
	if err != nil {
		return nil, err
	}
	out := make([]TxnDescription, len(ids))
	var allowed []string
	var at []int
	for i, id := range ids {
		out[i].ID = id
		if err := c.authorizeTxnID(ctx, auth.OpDescribe, id); err != nil {
			out[i].Err = err
			continue
		}
		allowed, at = append(allowed, id), append(at, i)
	}
	if len(allowed) == 0 {
		return out, nil
	}
	txns, found, err := t.DescribeTransactions(ctx, allowed)
	if err != nil {
		return nil, c.fail(err)
	}
	for j, i := range at {
		if j < len(found) && found[j] {
			out[i].Txn = txns[j]
		} else {
			out[i].Err = c.fail(fmt.Errorf("%w: transactional id %q", ErrTransactionalIDNotFound, ids[i]))
		}
	}
	return out, nil
}

// ErrTransactionalIDNotFound: DescribeTransactions of an id the
// coordinator has no state for.
var ErrTransactionalIDNotFound = errors.New("request: transactional id not found")

// ListTransactions lists the transactional ids the caller may describe,
// filtered by state and producer id (empty filters match all).
func (c *Core) ListTransactions(ctx context.Context, states []txn.State, producerIDs []int64) ([]txn.Txn, error) {
	t, err := c.transactions()
	if err != nil {
		return nil, err
	}
	all, err := t.ListTransactions(ctx)
	if err != nil {
		return nil, c.fail(err)
	}
	var out []txn.Txn
	for _, x := range all {
		if len(states) > 0 && !contains(states, x.State) {
			continue
		}
		if len(producerIDs) > 0 && !contains(producerIDs, x.ProducerID) {
			continue
		}
		if c.authorizeTxnID(ctx, auth.OpDescribe, x.ID) != nil {
			continue
		}
		out = append(out, x)
	}
	return out, nil
}

func contains[T comparable](s []T, v T) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// checkTransactional checks a transactional producer's batches before
// they are appended: on a partition where the producer has no
// transaction open at the batch's epoch, the partition must be in its
// transaction at the coordinator (added explicitly, or implicitly here:
// KIP-890), so that a late or stray transactional batch never opens a
// transaction no marker will end. A transaction open at an older epoch
// is the previous one, ended at the coordinator (which bumped the epoch)
// and waiting for its marker here: the batch of the next one is asked
// about too (CONCURRENT_TRANSACTIONS until that marker is written), or
// it would join the previous transaction and share its fate. Control
// batches from a producer are refused by the log.
func (c *Core) checkTransactional(ctx context.Context, req *ProduceRequest, part *replica.Partition, batches []byte) error {
	if len(batches) < record.HeaderSize {
		return nil
	}
	h, err := record.ParseHeader(batches)
	if err != nil || !h.Transactional() || h.Control() || h.ProducerID < 0 {
		return nil
	}
	if part.InTransaction(h.ProducerID, h.ProducerEpoch) {
		return nil
	}
	if req.TransactionalID == "" {
		return fmt.Errorf("%w: %s-%d: a transactional batch of producer %d without its transactional id",
			storage.ErrInvalidTxnState, part.Topic(), part.ID(), h.ProducerID)
	}
	t, err := c.transactions()
	if err != nil {
		return err
	}
	p := txn.Producer{ID: req.TransactionalID, PID: h.ProducerID, Epoch: h.ProducerEpoch}
	return t.AddPartitionsToTxn(ctx, p, []txn.TopicPartition{{Topic: part.Topic(), Partition: part.ID()}}, req.VerifyPartitions)
}

// TxnMarker is one transaction's end in some partitions, as a
// coordinator sends it to their leaders.
type TxnMarker struct {
	ProducerID       int64
	ProducerEpoch    int16
	Commit           bool
	CoordinatorEpoch int32
	Partitions       []txn.TopicPartition
}

// WriteTxnMarkers is Kafka's WriteTxnMarkers from a client of a door: it
// needs ClusterAction on the cluster (brokers only), and writes to the
// partitions led here only.
func (c *Core) WriteTxnMarkers(ctx context.Context, markers []TxnMarker) ([][]error, error) {
	if err := c.authorizeCluster(ctx, auth.OpClusterAction); err != nil {
		return nil, err
	}
	return c.WriteMarkers(ctx, markers, true), nil
}

// WriteMarkers has the leaders of the markers' partitions append them
// (this broker for those it leads, the others through the Forwarder
// unless local), each answering once its in-sync replicas have the
// marker. It answers per marker, per partition, in order: nil, or why
// not (an *Error). It authorizes nothing: the node's own transaction
// coordinator calls it, and the node-to-node service.
func (c *Core) WriteMarkers(ctx context.Context, markers []TxnMarker, local bool) [][]error {
	out := make([][]error, len(markers))
	type remote struct {
		marker, part int
		notHere      error // the answer if the leader cannot be reached
	}
	byLeader := map[int32][]remote{}
	var wg sync.WaitGroup
	for i, m := range markers {
		out[i] = make([]error, len(m.Partitions))
		for j, tp := range m.Partitions {
			part, err := c.leaderPartition(ctx, tp.Topic, tp.Partition, false)
			if err == nil {
				// A replica here that another broker leads: pass it on.
				if st := part.State(); !st.Leader {
					err = &replica.NotLeaderError{Topic: tp.Topic, Partition: tp.Partition, Leader: st.LeaderID, Epoch: st.LeaderEpoch}
				}
			}
			if err == nil {
				// Each waits for its own in-sync replicas: at once.
				wg.Go(func() {
					_, err := part.WriteMarker(ctx, m.ProducerID, m.ProducerEpoch, markerOf(m))
					out[i][j] = c.fail(err)
				})
				continue
			}
			leader, ok := c.routeTo(!local && c.cfg.Forwarder != nil, err)
			if !ok {
				out[i][j] = c.fail(err)
				continue
			}
			byLeader[leader] = append(byLeader[leader], remote{i, j, err})
		}
	}
	for leader, rs := range byLeader {
		wg.Go(func() {
			// One marker per partition passed on: the leader answers each.
			fwd := make([]TxnMarker, len(rs))
			for k, r := range rs {
				m := markers[r.marker]
				fwd[k] = TxnMarker{ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch, Commit: m.Commit,
					CoordinatorEpoch: m.CoordinatorEpoch, Partitions: []txn.TopicPartition{m.Partitions[r.part]}}
			}
			got, err := c.cfg.Forwarder.WriteTxnMarkers(ctx, leader, fwd)
			for k, r := range rs {
				tp := markers[r.marker].Partitions[r.part]
				switch {
				case errors.Is(err, ErrLeaderUnreachable):
					out[r.marker][r.part] = c.fail(r.notHere)
				case err != nil:
					out[r.marker][r.part] = c.fail(fmt.Errorf("%w: %s-%d: the leader %d did not take the marker: %v",
						replica.ErrRequestTimedOut, tp.Topic, tp.Partition, leader, err))
				case k < len(got) && len(got[k]) == 1:
					out[r.marker][r.part] = c.fail(got[k][0])
				default:
					out[r.marker][r.part] = c.fail(fmt.Errorf("%w: the leader %d answered %d markers for %d",
						replica.ErrRequestTimedOut, leader, len(got), len(fwd)))
				}
			}
		})
	}
	wg.Wait()
	return out
}

func markerOf(m TxnMarker) record.Marker {
	t := record.ControlAbort
	if m.Commit {
		t = record.ControlCommit
	}
	return record.Marker{Type: t, CoordinatorEpoch: m.CoordinatorEpoch}
}

// AuthorizeFindTxnCoordinator refuses FindCoordinator of a transactional
// id the caller may not describe, and answers for a core without
// transactions.
func (c *Core) AuthorizeFindTxnCoordinator(ctx context.Context, id string) error {
	if _, err := c.transactions(); err != nil {
		return err
	}
	return c.authorizeTxnID(ctx, auth.OpDescribe, id)
}

// AbortTransaction aborts a transactional id's ongoing transaction (if
// any) and fences its producer, as a new producer's InitProducerId with
// the id does: an operator's way out of a transaction whose producer is
// gone. It needs Write on the transactional id, and answers the id's
// producer id and epoch after the fence.
func (c *Core) AbortTransaction(ctx context.Context, id string) (txn.Txn, error) {
	desc, err := c.DescribeTransactions(ctx, []string{id})
	if err != nil {
		return txn.Txn{}, err
	}
	if desc[0].Err != nil {
		return txn.Txn{}, desc[0].Err
	}
	req := txn.InitRequest{ID: id, TimeoutMs: desc[0].Txn.TimeoutMs, ProducerID: -1, ProducerEpoch: -1, BumpPerTransaction: desc[0].Txn.BumpEpoch}
	out, err := c.InitTxnProducer(ctx, req)
	if errors.Is(err, txn.ErrConcurrentTransactions) {
		// The ongoing transaction was aborted; the fence is done too (its
		// epoch bumped). Ask again for the state it was left in.
		if desc, err = c.DescribeTransactions(ctx, []string{id}); err == nil && desc[0].Err == nil {
			return desc[0].Txn, nil
		}
	}
	return out, err
}
