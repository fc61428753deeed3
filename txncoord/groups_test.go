package txncoord

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/quirelog/quire/group"
	"github.com/quirelog/quire/txn"
)

// machineGroups is the group coordinator over a group state machine,
// without a log.
type machineGroups struct {
	mu sync.Mutex
	m  *group.Machine
}

func (g *machineGroups) ValidateTxnCommit(_ context.Context, id string, m txn.Member, parts []txn.TopicPartition) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	gps := make([]group.TopicPartition, len(parts))
	for i, p := range parts {
		gps[i] = group.TopicPartition{Topic: p.Topic, Partition: p.Partition}
	}
	return g.m.ValidateTxnCommit(id, m.ID, m.InstanceID, m.Epoch, gps)
}

// TestTxnCoordOffsetsFencedByGroup: offsets sent to a transaction as a
// consumer group member are staged only from a member the group has, at
// its epoch, for partitions it owns; refused ones leave the transaction's
// staged offsets as they were, and the commit commits only those
// accepted. Offsets sent as no member are not checked.
func TestTxnCoordOffsetsFencedByGroup(t *testing.T) {
	l := newFSMLog(t)
	gm, err := group.New(group.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	gm.SetTopics(map[string]int32{"t": 2})
	now := time.UnixMilli(1000)
	join := func(id string) int32 {
		t.Helper()
		resp, _, err := gm.Heartbeat(group.Heartbeat{Group: "g", MemberID: id, Subscription: &group.Subscription{Topics: []string{"t"}},
			RebalanceTimeout: time.Minute, HasOwned: true, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		return resp.MemberEpoch
	}
	epochA := join("a") // a has t-0 and t-1
	clk := &fakeClock{}
	clk.ms.Store(1000)
	co := New(l, &markerLog{}, &machineGroups{m: gm}, Config{MaxTimeoutMs: 60000, Clock: clk})
	ctx := context.Background()
	p := initProducer(t, co, "tx", true)
	if err := co.AddPartitions(ctx, p, []txn.TopicPartition{t0}, false); err != nil {
		t.Fatal(err)
	}
	off := func(part int32, at int64) []txn.Offset {
		return []txn.Offset{{Topic: "t", Partition: part, Offset: at, LeaderEpoch: -1}}
	}
	for _, c := range []struct {
		what   string
		member txn.Member
		offs   []txn.Offset
		want   error
	}{
		{"an unknown member", txn.Member{ID: "zz", Epoch: epochA}, off(0, 5), group.ErrUnknownMemberID},
		{"an epoch behind", txn.Member{ID: "a", Epoch: epochA - 1}, off(0, 5), group.ErrIllegalGeneration},
		{"an epoch ahead", txn.Member{ID: "a", Epoch: epochA + 1}, off(0, 5), group.ErrIllegalGeneration},
		{"the member at its epoch", txn.Member{ID: "a", Epoch: epochA}, off(0, 10), nil},
		{"no member named", txn.Member{}, off(1, 20), nil},
	} {
		err := co.CommitOffsets(ctx, p, "g", c.member, c.offs, true)
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.what, err, c.want)
		}
	}
	// b joins: t-1 goes to b once a gives it up; a, still at its epoch,
	// owns t-1 until then, b nothing.
	epochB := join("b")
	if err := co.CommitOffsets(ctx, p, "g", txn.Member{ID: "b", Epoch: epochB}, off(1, 30), true); !errors.Is(err, group.ErrIllegalGeneration) {
		t.Fatalf("b's offset of t-1 before it has it: %v, want illegal generation", err)
	}
	if _, err := co.End(ctx, p, true, true); err != nil {
		t.Fatal(err)
	}
	got := map[int32]int64{}
	for _, o := range l.Image().Offsets("g") {
		got[o.Partition] = o.Offset
	}
	if len(got) != 2 || got[0] != 10 || got[1] != 20 {
		t.Fatalf("committed %v, want t-0 at 10 and t-1 at 20", got)
	}
}
