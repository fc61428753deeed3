package metadata

import (
	"bytes"
	"io"
	"reflect"
	"testing"

	pb "github.com/quirelog/quire/api/metapb"
	"github.com/quirelog/quire/txn"
)

func putTxn(t txn.Txn, allocate bool) *pb.Command {
	return &pb.Command{Cmd: &pb.Command_PutTransaction{PutTransaction: &pb.PutTransaction{Txn: TxnToPB(t), AllocateProducerId: allocate}}}
}

// TestFSMPutTransaction: a transaction's state is stored whole, gets a
// producer id from the ids producers share, commits its staged offsets
// in the entry completing its commit (and never those of an abort), is
// refused below metadata.version 11, and survives a reopen.
func TestFSMPutTransaction(t *testing.T) {
	t.Parallel()
	tf := newTestFSM(t)
	tf.threeBrokersAt(SupportedMetadataVersions())
	tf.ok(createTopic("a", []int32{1}, []int32{2}))
	first := txn.Txn{ID: "tx", ProducerID: -1, LastProducerEpoch: -1, State: txn.Empty, TimeoutMs: 1000}
	tf.rejected(putTxn(first, true), ErrUnsupportedVersion)
	tf.ok(featureLevel(MetadataVersionTransactions))
	before := tf.f.Image().NextProducerID()
	got, ok := tf.ok(putTxn(first, true)).(txn.Txn)
	if !ok || got.ProducerID != before || got.ProducerEpoch != 0 || tf.f.Image().NextProducerID() != before+1 {
		t.Fatalf("allocated %+v (next id was %d, now %d)", got, before, tf.f.Image().NextProducerID())
	}
	tf.rejected(putTxn(first, false), txn.ErrInvalidProducerIDMapping)
	tf.rejected(putTxn(txn.Txn{ID: "", ProducerID: 1}, false), txn.ErrInvalidTransactionalID)
	tf.rejected(putTxn(txn.Txn{ID: "x", ProducerID: 1, State: 9}, false), txn.ErrInvalidTxnState)

	staged := got
	staged.State, staged.StartMs, staged.UpdateMs = txn.PrepareCommit, 5, 6
	staged.Partitions = []txn.TopicPartition{{Topic: "a", Partition: 1}}
	staged.Groups = []txn.GroupOffsets{{Group: "g", Offsets: []txn.Offset{
		{Topic: "a", Partition: 0, Offset: 10, LeaderEpoch: -1}, {Topic: "gone", Partition: 0, Offset: 3, LeaderEpoch: -1}}}}
	tf.ok(putTxn(staged, false))
	if offs := tf.f.Image().Offsets("g"); len(offs) != 0 {
		t.Fatalf("offsets committed before the commit completed: %+v", offs)
	}
	stored, _ := tf.f.Image().Transaction("tx")
	if !reflect.DeepEqual(stored, staged) {
		t.Fatalf("stored %+v, want %+v", stored, staged)
	}
	aborted := staged
	aborted.State = txn.CompleteAbort
	tf.ok(putTxn(aborted, false))
	if offs := tf.f.Image().Offsets("g"); len(offs) != 0 {
		t.Fatalf("offsets committed by an abort: %+v", offs)
	}
	done := staged
	done.State, done.UpdateMs = txn.CompleteCommit, 7
	tf.ok(putTxn(done, false))
	offs := tf.f.Image().Offsets("g")
	if len(offs) != 1 || offs[0].Offset != 10 || offs[0].CommitTimeMs != 7 {
		t.Fatalf("offsets after the commit: %+v", offs)
	}
	stored, _ = tf.f.Image().Transaction("tx")
	if stored.State != txn.CompleteCommit || stored.Groups != nil {
		t.Fatalf("stored after the commit %+v", stored)
	}
	reopened := reopen(t, tf)
	if !reflect.DeepEqual(reopened.Image().Transactions(), tf.f.Image().Transactions()) {
		t.Fatalf("reloaded transactions %+v, want %+v", reopened.Image().Transactions(), tf.f.Image().Transactions())
	}
	rm := &pb.Command{Cmd: &pb.Command_PutTransaction{PutTransaction: &pb.PutTransaction{Txn: TxnToPB(stored), Remove: true}}}
	tf.ok(rm)
	if _, ok := tf.f.Image().Transaction("tx"); ok || len(tf.f.Image().Transactions()) != 0 {
		t.Fatal("removed transaction still there")
	}
}

// TestFSMTransactionsSnapshotRestore: transactions travel in a raft
// snapshot, with the next producer id their allocations moved.
func TestFSMTransactionsSnapshotRestore(t *testing.T) {
	t.Parallel()
	tf := newTestFSM(t)
	tf.threeBrokersAt(SupportedMetadataVersions())
	tf.ok(featureLevel(MetadataVersionTransactions))
	tf.ok(putTxn(txn.Txn{ID: "t1", ProducerID: -1, LastProducerEpoch: -1, State: txn.Empty, TimeoutMs: 1000}, true))
	tf.ok(putTxn(txn.Txn{ID: "t2", ProducerID: -1, LastProducerEpoch: -1, State: txn.Empty, TimeoutMs: 2000}, true))
	snap, err := tf.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var s sink
	if err := snap.Persist(&s); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	other := newTestFSM(t)
	if err := other.f.Restore(io.NopCloser(bytes.NewReader(s.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(other.f.Image().Transactions(), tf.f.Image().Transactions()) || len(other.f.Image().Transactions()) != 2 {
		t.Fatalf("restored transactions %+v, want %+v", other.f.Image().Transactions(), tf.f.Image().Transactions())
	}
	if other.f.Image().NextProducerID() != tf.f.Image().NextProducerID() {
		t.Fatalf("restored next producer id %d, want %d", other.f.Image().NextProducerID(), tf.f.Image().NextProducerID())
	}
}

// TestFSMTransactionalIDACLNeedsLevel11: an ACL on a transactional id is
// refused below metadata.version 11 (an older node's authorizer does not
// know the resource type) and stored from it.
func TestFSMTransactionalIDACLNeedsLevel11(t *testing.T) {
	t.Parallel()
	tf := newTestFSM(t)
	tf.threeBrokersAt(SupportedMetadataVersions())
	cmd := aclCmd(&pb.AclRecord{Principal: "User:alice", Permission: "Allow", Operation: "Write", ResourceType: "TransactionalId",
		ResourceName: "tx", PatternType: "Literal"})
	tf.ok(featureLevel(MetadataVersionDeleteOffsets))
	tf.rejected(cmd, ErrUnsupportedVersion)
	tf.ok(featureLevel(MetadataVersionTransactions))
	tf.ok(cmd)
	if acls := tf.f.Image().ACLs(); len(acls) != 1 || acls[0].ResourceType != "TransactionalId" {
		t.Fatalf("ACLs %+v", acls)
	}
}
