package testcluster_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/testcluster"
)

// TestReplicationDeleteRecords: DeleteRecords sent to a follower is done
// by the leader, which answers once every in-sync replica's log start is
// there too (REQUEST_TIMED_OUT while one is cut off from it); so when the
// leader is cut off right after the answer, the
// leader elected from the ISR has deleted the same records, and reads
// below them are OFFSET_OUT_OF_RANGE there. Once healed, every replica
// has the same start.
func TestReplicationDeleteRecords(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 3)
	createReplicatedTopic(t, c, "delrec")
	vals := values("v", 20)
	produceAll(t, c, "delrec", vals)
	waitInSync(t, c, "delrec")
	ctx := testCtx(t)

	leader, _ := c.WaitLeader(ctx, "delrec", 0)
	via := c.IDs()[0]
	if via == leader {
		via = c.IDs()[1]
	}
	var cut int32 // the third node, an in-sync follower
	for _, id := range c.IDs() {
		if id != leader && id != via {
			cut = id
		}
	}
	// With an in-sync follower cut off from the leader, the deletion is
	// not acknowledged: that follower could be elected with the records.
	c.Partition(cut, leader)
	del := &quirev1.DeleteRecordsRequest{Partitions: []*quirev1.DeleteRecordsPartition{{Topic: "delrec", Offset: 12}}, TimeoutMs: 300}
	// Asked of the leader itself: its own wait, not a forward's, runs out.
	// The answer names every in-sync replica without the new log start:
	// the cut-off follower always, the other one too until its next fetch
	// (on a loaded machine that can outlast the 300 ms), so it is asked
	// again until the cut-off follower is the only one left.
	want := fmt.Sprintf("not yet on in-sync replicas [%d]", cut)
	c.Eventually(ctx, "DeleteRecords answered with only the cut-off follower missing", func() error {
		resp, err := admin(c, leader).DeleteRecords(ctx, del)
		if err != nil {
			t.Fatal(err)
		}
		r := resp.GetPartitions()[0]
		msg := r.GetError().GetMessage()
		if r.GetError().GetCode() != quirev1.ErrorCode_REQUEST_TIMED_OUT || !r.GetError().GetRetriable() ||
			!strings.Contains(msg, "not yet on in-sync replicas [") || !slices.Contains(missingReplicas(msg), cut) {
			t.Fatalf("DeleteRecords with in-sync follower %d cut off: %v, want REQUEST_TIMED_OUT naming it", cut, r)
		}
		if !strings.Contains(msg, want) {
			return fmt.Errorf("answer %q, want it to name only follower %d", msg, cut)
		}
		return nil
	})
	c.Heal()
	del.TimeoutMs = 0
	resp, err := admin(c, via).DeleteRecords(ctx, del)
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.GetPartitions()[0]; r.GetError() != nil || r.GetLowWatermark() != 12 {
		t.Fatalf("DeleteRecords through node %d (leader %d): %v", via, leader, r)
	}
	// Answered: every in-sync replica has it now, not eventually.
	for _, id := range c.Running() {
		d, err := describeLog(ctx, c, id, "delrec", 0)
		if err != nil {
			t.Fatal(err)
		}
		if d.GetLogStartOffset() != 12 {
			t.Fatalf("node %d's log start is %d once DeleteRecords answered, want 12", id, d.GetLogStartOffset())
		}
	}

	c.Partition(leader)
	var newLeader int32
	c.Eventually(ctx, "a new leader", func() error {
		p, ok := c.Image(via).Partition("delrec", 0)
		if !ok || p.Leader == leader || p.Leader < 0 {
			return errors.New("the cut-off node still leads")
		}
		newLeader = p.Leader
		return nil
	})
	// The new leader may not have applied its election yet (and passes
	// the read on to the cut-off node meanwhile): asked until it answers
	// itself, it must never serve what was deleted.
	c.Eventually(ctx, "the new leader's answer below the deleted offset", func() error {
		_, err := quirev1.NewConsumerClient(c.Conn(newLeader)).FetchRecords(ctx, &quirev1.FetchRecordsRequest{Topic: "delrec", Offset: 11})
		switch status.Code(err) {
		case codes.OutOfRange:
			return nil
		case codes.OK:
			t.Fatalf("the new leader %d read below the deleted offset", newLeader)
		}
		return err
	})
	c.Heal()
	after := values("after", 5)
	produceAll(t, c, "delrec", after)
	if got, want := consumeFrom(t, c, "delrec", 12), append(slices.Clone(vals[12:]), after...); !slices.Equal(got, want) {
		t.Fatalf("from 12 on the new leader: %v, want %v", got, want)
	}
	waitInSync(t, c, "delrec")
	c.Eventually(ctx, "every replica's log start at 12", func() error {
		for _, id := range c.Running() {
			d, err := describeLog(ctx, c, id, "delrec", 0)
			if err != nil {
				return err
			}
			if d.GetLogStartOffset() != 12 {
				return fmt.Errorf("node %d: log start %d", id, d.GetLogStartOffset())
			}
		}
		return nil
	})
}

// missingReplicas reads the replica ids out of a DeleteRecords timeout's
// "not yet on in-sync replicas [2 3]".
func missingReplicas(msg string) []int32 {
	_, rest, ok := strings.Cut(msg, "not yet on in-sync replicas [")
	if !ok {
		return nil
	}
	list, _, _ := strings.Cut(rest, "]")
	var ids []int32
	for _, f := range strings.Fields(list) {
		var id int32
		if _, err := fmt.Sscan(f, &id); err == nil {
			ids = append(ids, id)
		}
	}
	return ids
}
