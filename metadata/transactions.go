package metadata

// The transaction coordinator's state in the metadata log (from
// metadata.version 11, MetadataVersionTransactions): one TransactionState
// per transactional id, written whole by PutTransaction at each change
// (Kafka keeps the same in its __transaction_state topic). The
// coordinator (package txncoord) runs on the controller and decides the
// changes with package txn; the state machine here only checks and
// stores them, allocates producer ids, and commits a transaction's staged
// consumer group offsets in the entry that completes its commit, so the
// offsets and the commit are one.

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	pb "github.com/quirelog/quire/api/metapb"
	"github.com/quirelog/quire/txn"
)

// TxnToPB is a transaction's stored form.
func TxnToPB(t txn.Txn) *pb.TransactionState {
	r := &pb.TransactionState{TransactionalId: t.ID, ProducerId: t.ProducerID, ProducerEpoch: int32(t.ProducerEpoch),
		LastProducerEpoch: int32(t.LastProducerEpoch), State: int32(t.State), TimeoutMs: t.TimeoutMs,
		StartTimeMs: t.StartMs, UpdateTimeMs: t.UpdateMs, BumpEpoch: t.BumpEpoch, CoordinatorEpoch: t.CoordinatorEpoch}
	for _, p := range t.Partitions {
		r.Partitions = append(r.Partitions, &pb.OffsetPartition{Topic: p.Topic, Partition: p.Partition})
	}
	for _, g := range t.Groups {
		gr := &pb.TxnGroupOffsets{Group: g.Group}
		for _, o := range g.Offsets {
			gr.Offsets = append(gr.Offsets, &pb.OffsetCommit{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata})
		}
		r.Offsets = append(r.Offsets, gr)
	}
	return r
}

// TxnFromPB is TxnToPB's inverse.
func TxnFromPB(r *pb.TransactionState) txn.Txn {
	t := txn.Txn{ID: r.TransactionalId, ProducerID: r.ProducerId, ProducerEpoch: int16(r.ProducerEpoch),
		LastProducerEpoch: int16(r.LastProducerEpoch), State: txn.State(r.State), TimeoutMs: r.TimeoutMs,
		StartMs: r.StartTimeMs, UpdateMs: r.UpdateTimeMs, BumpEpoch: r.BumpEpoch, CoordinatorEpoch: r.CoordinatorEpoch}
	for _, p := range r.Partitions {
		t.Partitions = append(t.Partitions, txn.TopicPartition{Topic: p.Topic, Partition: p.Partition})
	}
	for _, g := range r.Offsets {
		gr := txn.GroupOffsets{Group: g.Group}
		for _, o := range g.Offsets {
			gr.Offsets = append(gr.Offsets, txn.Offset{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata})
		}
		t.Groups = append(t.Groups, gr)
	}
	return t
}

// Transaction returns a transactional id's state.
func (img *Image) Transaction(id string) (txn.Txn, bool) {
	t, ok := img.transactions[id]
	if !ok {
		return txn.Txn{}, false
	}
	return t.Clone(), true
}

// Transactions returns every transactional id's state, by id.
func (img *Image) Transactions() []txn.Txn {
	out := make([]txn.Txn, 0, len(img.transactions))
	for _, t := range img.transactions {
		out = append(out, t.Clone())
	}
	slices.SortFunc(out, func(a, b txn.Txn) int { return strings.Compare(a.ID, b.ID) })
	return out
}

func loadTransactions(tx *bolt.Tx, img *Image) error {
	img.transactions = map[string]txn.Txn{}
	err := tx.Bucket(bucketTransactions).ForEach(func(k, v []byte) error {
		var r pb.TransactionState
		if err := proto.Unmarshal(v, &r); err != nil {
			return err
		}
		img.transactions[string(k)] = TxnFromPB(&r)
		return nil
	})
	if err != nil {
		return fmt.Errorf("metadata: load transactions: %w", err)
	}
	return nil
}

// applyPutTransaction stores a transactional id's state, answering it as
// stored (a txn.Txn: with its producer id when one was allocated).
func (d *draft) applyPutTransaction(c *pb.PutTransaction, _ uint64) any {
	if c.Txn == nil {
		return fmt.Errorf("%w: PutTransaction without a state", txn.ErrInvalidTransactionalID)
	}
	t := TxnFromPB(c.Txn)
	if err := txn.CheckID(t.ID); err != nil {
		return err
	}
	if c.Remove {
		if _, ok := d.img.transactions[t.ID]; ok {
			d.img.transactions = cloneMap(d.img.transactions)
			delete(d.img.transactions, t.ID)
			d.must(d.tx.Bucket(bucketTransactions).Delete([]byte(t.ID)))
		}
		return t
	}
	if !t.State.Valid() {
		return fmt.Errorf("%w: transactional id %q in state %d", txn.ErrInvalidTxnState, t.ID, t.State)
	}
	if c.AllocateProducerId {
		t.ProducerID, t.ProducerEpoch, t.LastProducerEpoch = d.img.nextProducerID, 0, -1
		d.img.nextProducerID++
		d.must(d.tx.Bucket(bucketMeta).Put(keyNextProducerID, binary.BigEndian.AppendUint64(nil, uint64(d.img.nextProducerID))))
	}
	if t.ProducerID < 0 {
		return fmt.Errorf("%w: transactional id %q without a producer id", txn.ErrInvalidProducerIDMapping, t.ID)
	}
	if t.State == txn.CompleteCommit {
		d.commitTxnOffsets(t)
	}
	if t.State == txn.CompleteCommit || t.State == txn.CompleteAbort {
		t.Groups = nil // committed now, or dropped
	}
	d.img.transactions = cloneMap(d.img.transactions)
	d.img.transactions[t.ID] = t
	d.put(bucketTransactions, []byte(t.ID), TxnToPB(t))
	return t.Clone()
}

// commitTxnOffsets commits the staged offsets of a transaction completing
// its commit, at its completion time. An offset of a topic or partition
// gone since it was staged, or of an invalid group, is skipped: the
// transaction's commit is already decided (its markers are written).
func (d *draft) commitTxnOffsets(t txn.Txn) {
	for _, g := range t.Groups {
		if ValidateGroupID(g.Group) != nil {
			continue
		}
		for _, o := range g.Offsets {
			tp, ok := d.img.topics[o.Topic]
			if !ok || o.Partition < 0 || int(o.Partition) >= len(tp.Partitions) || o.Offset < 0 {
				continue
			}
			d.putOffset(g.Group, CommittedOffset{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset,
				LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata, CommitTimeMs: t.UpdateMs})
		}
	}
}

// PutTransaction writes a transactional id's state through the metadata
// log and returns it as stored.
func (c *Controller) PutTransaction(ctx context.Context, cmd *pb.PutTransaction) (txn.Txn, error) {
	resp, err := c.propose(ctx, &pb.Command{Cmd: &pb.Command_PutTransaction{PutTransaction: cmd}})
	if err != nil {
		return txn.Txn{}, err
	}
	t, ok := resp.(txn.Txn)
	if !ok {
		return txn.Txn{}, fmt.Errorf("metadata: PutTransaction answered %T", resp)
	}
	return t, nil
}

// TxnCoordinator is the transaction coordinator as the controller calls
// it (package txncoord). Its errors are txn's sentinels and this
// package's (ErrNotCoordinator when it could not write a change).
type TxnCoordinator interface {
	// RunTerm completes the transactions a previous controller left
	// being ended, and aborts those past their timeout, for one
	// leadership term, until ctx ends.
	RunTerm(ctx context.Context)
	// InitProducer is a transactional producer's InitProducerId.
	InitProducer(ctx context.Context, req txn.InitRequest) (txn.Txn, error)
	// AddPartitions adds partitions to the producer's transaction (or,
	// with verifyOnly, checks they are in it).
	AddPartitions(ctx context.Context, p txn.Producer, parts []txn.TopicPartition, verifyOnly bool) error
	// AddGroup adds a consumer group to the producer's transaction.
	AddGroup(ctx context.Context, p txn.Producer, group string) error
	// CommitOffsets stages a group's offsets in the transaction.
	// Sent as member (none: not checked), they are fenced by the group's
	// membership.
	CommitOffsets(ctx context.Context, p txn.Producer, group string, member txn.Member, offsets []txn.Offset, addGroup bool) error
	// End commits or aborts the producer's transaction and returns the
	// state it was left in (its producer id and epoch are the
	// producer's for the next transaction).
	// bump: the producer speaks transaction version 2 (the end bumps its
	// epoch).
	End(ctx context.Context, p txn.Producer, commit, bump bool) (txn.Txn, error)
}

// errNoTxnCoordinator answers the transactional calls of a node built
// without a transaction coordinator.
var errNoTxnCoordinator = fmt.Errorf("%w: this node runs no transaction coordinator", ErrNotCoordinator)

// TxnCoordinator returns this node's transaction coordinator once this
// node is the active controller (ErrNotController when it is not).
func (c *Controller) TxnCoordinator(ctx context.Context) (TxnCoordinator, error) {
	if c.txns == nil {
		return nil, errNoTxnCoordinator
	}
	if err := c.active(ctx); err != nil {
		return nil, err
	}
	return c.txns, nil
}
