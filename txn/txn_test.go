package txn

import (
	"errors"
	"reflect"
	"testing"
)

const maxTimeout = 900000

var (
	tp0 = TopicPartition{"a", 0}
	tp1 = TopicPartition{"a", 1}
	tp2 = TopicPartition{"b", 0}
)

// initNew is a fresh transactional id after its first Init, with
// producer id 7 (what the metadata log would give it).
func initNew(t *testing.T, bump bool) Txn {
	t.Helper()
	res, err := Init(nil, InitRequest{ID: "tx", TimeoutMs: 1000, ProducerID: -1, ProducerEpoch: -1, BumpPerTransaction: bump, NowMs: 1}, maxTimeout)
	if err != nil || !res.AllocateID || res.Next.State != Empty || res.Next.ProducerEpoch != 0 {
		t.Fatalf("init of a new id: %+v, %v", res, err)
	}
	res.Next.ProducerID = 7
	return res.Next
}

func mustAdd(t *testing.T, cur Txn, parts ...TopicPartition) Txn {
	t.Helper()
	next, err := AddPartitions(&cur, cur.ProducerID, cur.ProducerEpoch, parts, false, 10)
	if err != nil || next == nil {
		t.Fatalf("add %v: %v, %v", parts, next, err)
	}
	return *next
}

func mustEnd(t *testing.T, cur Txn, commit bool) Txn {
	t.Helper()
	res, err := End(&cur, cur.ProducerID, cur.ProducerEpoch, commit, false, 20)
	if err != nil || res.Next == nil {
		t.Fatalf("end (commit %v) in %s: %+v, %v", commit, cur.State, res, err)
	}
	return *res.Next
}

func mustComplete(t *testing.T, cur Txn) Txn {
	t.Helper()
	next, err := Complete(cur, 30)
	if err != nil {
		t.Fatal(err)
	}
	return next
}

func wantErr(t *testing.T, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("error %v, want %v", err, want)
	}
}

func TestTxnInitValidates(t *testing.T) {
	for _, req := range []InitRequest{
		{ID: "", TimeoutMs: 1000},
		{ID: string(make([]byte, MaxIDLen+1)), TimeoutMs: 1000},
	} {
		_, err := Init(nil, req, maxTimeout)
		wantErr(t, err, ErrInvalidTransactionalID)
	}
	for _, ms := range []int32{0, -1, maxTimeout + 1} {
		_, err := Init(nil, InitRequest{ID: "tx", TimeoutMs: ms}, maxTimeout)
		wantErr(t, err, ErrInvalidTimeout)
	}
}

// TestTxnInitBumpsAndFences: each Init of a known id bumps the epoch;
// the old epoch is fenced from then on; a retry of the Init with the
// producer's previous epoch is recognised.
func TestTxnInitBumpsAndFences(t *testing.T) {
	cur := initNew(t, false)
	res, err := Init(&cur, InitRequest{ID: "tx", TimeoutMs: 2000, ProducerID: -1, ProducerEpoch: -1, NowMs: 5}, maxTimeout)
	if err != nil || res.AllocateID || res.Next.ProducerID != 7 || res.Next.ProducerEpoch != 1 || res.Next.LastProducerEpoch != 0 || res.Next.TimeoutMs != 2000 {
		t.Fatalf("second init: %+v, %v", res, err)
	}
	old := cur
	cur = res.Next
	_, err = AddPartitions(&cur, 7, old.ProducerEpoch, []TopicPartition{tp0}, false, 6)
	wantErr(t, err, ErrProducerFenced)
	_, err = AddPartitions(&cur, 8, cur.ProducerEpoch, []TopicPartition{tp0}, false, 6)
	wantErr(t, err, ErrInvalidProducerIDMapping)
	// KIP-360: the producer names its id and epoch.
	res, err = Init(&cur, InitRequest{ID: "tx", TimeoutMs: 2000, ProducerID: 7, ProducerEpoch: 0, NowMs: 7}, maxTimeout)
	if err != nil || !res.Unchanged || res.Next.ProducerEpoch != 1 {
		t.Fatalf("retried init: %+v, %v", res, err)
	}
	_, err = Init(&cur, InitRequest{ID: "tx", TimeoutMs: 2000, ProducerID: 9, ProducerEpoch: 1}, maxTimeout)
	wantErr(t, err, ErrInvalidProducerIDMapping)
	// At the largest epoch, a new producer id.
	cur.ProducerEpoch = MaxEpoch
	res, err = Init(&cur, InitRequest{ID: "tx", TimeoutMs: 2000, ProducerID: -1, ProducerEpoch: -1}, maxTimeout)
	if err != nil || !res.AllocateID || res.Next.ProducerEpoch != 0 {
		t.Fatalf("init at the largest epoch: %+v, %v", res, err)
	}
}

// TestTxnInitAbortsOngoing: an Init while a transaction is ongoing fences
// its producer and aborts it; while one is being ended it is refused.
func TestTxnInitAbortsOngoing(t *testing.T) {
	cur := mustAdd(t, initNew(t, false), tp0)
	res, err := Init(&cur, InitRequest{ID: "tx", TimeoutMs: 1000, ProducerID: -1, ProducerEpoch: -1, NowMs: 50}, maxTimeout)
	if err != nil || !res.Aborting || res.Next.State != PrepareAbort || res.Next.ProducerEpoch != 1 ||
		!reflect.DeepEqual(res.Next.Partitions, []TopicPartition{tp0}) {
		t.Fatalf("init over an ongoing transaction: %+v, %v", res, err)
	}
	m, ok := Markers(res.Next)
	if !ok || m.Commit || m.ProducerEpoch != 1 || !reflect.DeepEqual(m.Partitions, []TopicPartition{tp0}) {
		t.Fatalf("markers %+v", m)
	}
	_, err = Init(&res.Next, InitRequest{ID: "tx", TimeoutMs: 1000, ProducerID: -1, ProducerEpoch: -1}, maxTimeout)
	wantErr(t, err, ErrConcurrentTransactions)
	done := mustComplete(t, res.Next)
	res, err = Init(&done, InitRequest{ID: "tx", TimeoutMs: 1000, ProducerID: -1, ProducerEpoch: -1}, maxTimeout)
	if err != nil || res.Next.State != Empty || res.Next.ProducerEpoch != 2 || res.Next.Partitions != nil {
		t.Fatalf("init after the abort: %+v, %v", res, err)
	}
}

// TestTxnCommitV1: a transaction of version 1 keeps its epoch across
// transactions; Ends are idempotent once complete.
func TestTxnCommitV1(t *testing.T) {
	cur := initNew(t, false)
	_, err := End(&cur, 7, 0, true, false, 1)
	wantErr(t, err, ErrInvalidTxnState) // nothing begun
	cur = mustAdd(t, cur, tp1, tp0)
	if cur.State != Ongoing || cur.StartMs != 10 || !reflect.DeepEqual(cur.Partitions, []TopicPartition{tp0, tp1}) {
		t.Fatalf("after add: %+v", cur)
	}
	if next, err := AddPartitions(&cur, 7, 0, []TopicPartition{tp0}, false, 11); err != nil || next != nil {
		t.Fatalf("adding a partition in already: %v, %v", next, err)
	}
	cur = mustAdd(t, cur, tp2)
	if _, err := AddPartitions(&cur, 7, 0, []TopicPartition{tp0, tp2}, true, 12); err != nil {
		t.Fatalf("verify of partitions in: %v", err)
	}
	_, err = AddPartitions(&cur, 7, 0, []TopicPartition{{"c", 0}}, true, 12)
	wantErr(t, err, ErrInvalidTxnState)
	prep := mustEnd(t, cur, true)
	if prep.State != PrepareCommit || prep.ProducerEpoch != 0 {
		t.Fatalf("prepare: %+v", prep)
	}
	_, err = End(&prep, 7, 0, true, false, 21)
	wantErr(t, err, ErrConcurrentTransactions)
	_, err = End(&prep, 7, 0, false, false, 21)
	wantErr(t, err, ErrInvalidTxnState)
	_, err = AddPartitions(&prep, 7, 0, []TopicPartition{tp0}, false, 21)
	wantErr(t, err, ErrConcurrentTransactions)
	done := mustComplete(t, prep)
	if done.State != CompleteCommit {
		t.Fatalf("complete: %+v", done)
	}
	res, err := End(&done, 7, 0, true, false, 31)
	if err != nil || !res.Done || res.Current.ProducerEpoch != 0 {
		t.Fatalf("retried commit: %+v, %v", res, err)
	}
	_, err = End(&done, 7, 0, false, false, 31)
	wantErr(t, err, ErrInvalidTxnState)
	// The next transaction, same epoch.
	next := mustAdd(t, done, tp2)
	if next.StartMs != 10 || !reflect.DeepEqual(next.Partitions, []TopicPartition{tp2}) || next.ProducerEpoch != 0 {
		t.Fatalf("next transaction: %+v", next)
	}
}

// TestTxnBumpPerTransaction: version 2 bumps the epoch at each End; the
// markers carry the new epoch, the producer continues with it, and a
// retried End with the old epoch is answered, not fenced.
func TestTxnBumpPerTransaction(t *testing.T) {
	cur := mustAdd(t, initNew(t, true), tp0)
	prep := mustEnd(t, cur, false)
	if prep.State != PrepareAbort || prep.ProducerEpoch != 1 || prep.LastProducerEpoch != 0 {
		t.Fatalf("prepare: %+v", prep)
	}
	if m, _ := Markers(prep); m.ProducerEpoch != 1 || m.Commit {
		t.Fatalf("markers %+v", m)
	}
	res, err := End(&prep, 7, 0, false, false, 21)
	wantErr(t, err, ErrConcurrentTransactions)
	done := mustComplete(t, prep)
	res, err = End(&done, 7, 0, false, false, 31)
	if err != nil || !res.Done || res.Current.ProducerEpoch != 1 {
		t.Fatalf("retried abort with the old epoch: %+v, %v", res, err)
	}
	_, err = AddPartitions(&done, 7, 0, []TopicPartition{tp0}, false, 31)
	wantErr(t, err, ErrProducerFenced)
	cur = mustAdd(t, done, tp0)
	prep = mustEnd(t, cur, true)
	if prep.ProducerEpoch != 2 || prep.LastProducerEpoch != 1 {
		t.Fatalf("second prepare: %+v", prep)
	}
	done = mustComplete(t, prep)
	// An abort of nothing begun still ends (and bumps): the producer
	// may abort what never reached a partition.
	res, err = End(&done, 7, 2, false, false, 40)
	if err != nil || res.Next == nil || res.Next.State != PrepareAbort || res.Next.ProducerEpoch != 3 || res.Next.Partitions != nil {
		t.Fatalf("abort of nothing: %+v, %v", res, err)
	}
	_, err = End(&done, 7, 2, true, false, 40)
	wantErr(t, err, ErrInvalidTxnState)
	// A producer two epochs behind is fenced.
	_, err = End(&done, 7, 0, true, false, 40)
	wantErr(t, err, ErrProducerFenced)
}

// TestTxnOffsets: offsets are staged per group in the transaction,
// replaced per partition, kept to commit on CompleteCommit and dropped
// on abort.
func TestTxnOffsets(t *testing.T) {
	cur := initNew(t, false)
	_, err := CommitOffsets(&cur, 7, 0, "g", []Offset{{Topic: "a", Offset: 1}}, false, 5)
	wantErr(t, err, ErrInvalidTxnState)
	next, err := AddGroup(&cur, 7, 0, "g", 5)
	if err != nil || next.State != Ongoing || len(next.Groups) != 1 {
		t.Fatalf("add group: %+v, %v", next, err)
	}
	if again, err := AddGroup(next, 7, 0, "g", 6); err != nil || again != nil {
		t.Fatalf("group added twice: %v, %v", again, err)
	}
	cur = *next
	next, err = CommitOffsets(&cur, 7, 0, "g", []Offset{{Topic: "a", Partition: 0, Offset: 5}, {Topic: "a", Partition: 1, Offset: 9}}, false, 6)
	if err != nil {
		t.Fatal(err)
	}
	next, err = CommitOffsets(next, 7, 0, "g", []Offset{{Topic: "a", Partition: 0, Offset: 8}}, false, 7)
	if err != nil {
		t.Fatal(err)
	}
	want := []GroupOffsets{{Group: "g", Offsets: []Offset{{Topic: "a", Partition: 0, Offset: 8}, {Topic: "a", Partition: 1, Offset: 9}}}}
	if !reflect.DeepEqual(next.Groups, want) {
		t.Fatalf("staged %+v", next.Groups)
	}
	// Version 2 adds the group with the commit; the original is left as is.
	v2, err := CommitOffsets(next, 7, 0, "h", []Offset{{Topic: "b", Offset: 1}}, true, 8)
	if err != nil || len(v2.Groups) != 2 || len(next.Groups) != 1 {
		t.Fatalf("commit adding a group: %+v, %v (original %+v)", v2, err, next)
	}
	done := mustComplete(t, mustEnd(t, *next, true))
	if !reflect.DeepEqual(done.Groups, want) {
		t.Fatalf("offsets on CompleteCommit %+v", done.Groups)
	}
	aborted := mustComplete(t, mustEnd(t, *next, false))
	if aborted.Groups != nil {
		t.Fatalf("offsets on CompleteAbort %+v", aborted.Groups)
	}
}

// TestTxnExpiry: an ongoing transaction past its timeout is aborted with
// the epoch bumped, fencing its producer.
func TestTxnExpiry(t *testing.T) {
	cur := mustAdd(t, initNew(t, false), tp0) // started at 10, timeout 1000
	if _, ok := Expired(cur, 1010); ok {
		t.Fatal("expired at its timeout")
	}
	next, ok := Expired(cur, 1011)
	if !ok || next.State != PrepareAbort || next.ProducerEpoch != 1 {
		t.Fatalf("expired: %+v, %v", next, ok)
	}
	for _, s := range []State{Empty, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort} {
		c := cur
		c.State = s
		if _, ok := Expired(c, 1<<40); ok {
			t.Fatalf("%s expired", s)
		}
	}
	_, err := End(&next, 7, 0, true, false, 1012)
	wantErr(t, err, ErrProducerFenced)
	if _, err := Complete(cur, 1); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("complete of an ongoing transaction: %v", err)
	}
}

// TestTxnIDExpired: an id with no transaction in progress expires once
// it has not changed for the expiration time; one ongoing or being ended
// never does.
func TestTxnIDExpired(t *testing.T) {
	cur := initNew(t, false)
	cur.UpdateMs = 500
	for _, s := range []State{Empty, CompleteCommit, CompleteAbort} {
		c := cur
		c.State = s
		if IDExpired(c, 500+99, 100) {
			t.Errorf("%s expired before its time", s)
		}
		if !IDExpired(c, 500+100, 100) {
			t.Errorf("%s not expired at its time", s)
		}
	}
	for _, s := range []State{Ongoing, PrepareCommit, PrepareAbort} {
		c := cur
		c.State = s
		if IDExpired(c, 1<<40, 100) {
			t.Errorf("%s expired", s)
		}
	}
}

func TestTxnStateNames(t *testing.T) {
	for s := Empty; s <= CompleteAbort; s++ {
		if got, ok := ParseState(s.String()); !ok || got != s {
			t.Fatalf("%s does not parse back", s)
		}
	}
	if State(9).Valid() {
		t.Fatal("state 9 valid")
	}
}

// TestTxnEndUpgradesToVersion2: an id initialized at version 1 whose
// producer ends with version 2 (Kafka's EndTxn 5) has its epoch bumped
// from then on, and the End retried with the old epoch is answered.
func TestTxnEndUpgradesToVersion2(t *testing.T) {
	cur := mustAdd(t, initNew(t, false), tp0)
	res, err := End(&cur, 7, 0, true, true, 20)
	if err != nil || res.Next == nil || res.Next.ProducerEpoch != 1 || !res.Next.BumpEpoch {
		t.Fatalf("version 2 end: %+v, %v", res, err)
	}
	done := mustComplete(t, *res.Next)
	again, err := End(&done, 7, 0, true, true, 30)
	if err != nil || !again.Done || again.Current.ProducerEpoch != 1 {
		t.Fatalf("retried version 2 end: %+v, %v", again, err)
	}
}
