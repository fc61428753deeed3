package testcluster_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/testcluster"
)

// TestReplicationDeleteRecords: DeleteRecords sent to a follower is done
// by the leader; every replica's log start follows it, so the leader
// elected after the old one is killed keeps the records deleted, and the
// old leader comes back with the same start. Reads below it are
// OFFSET_OUT_OF_RANGE everywhere.
func TestReplicationDeleteRecords(t *testing.T) {
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
	resp, err := admin(c, via).DeleteRecords(ctx, &quirev1.DeleteRecordsRequest{Partitions: []*quirev1.DeleteRecordsPartition{{Topic: "delrec", Offset: 12}}})
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.GetPartitions()[0]; r.GetError() != nil || r.GetLowWatermark() != 12 {
		t.Fatalf("DeleteRecords through node %d (leader %d): %v", via, leader, r)
	}
	waitLogStart := func(want int64) {
		t.Helper()
		c.Eventually(ctx, fmt.Sprintf("every replica's log start at %d", want), func() error {
			for _, id := range c.Running() {
				d, err := describeLog(ctx, c, id, "delrec", 0)
				if err != nil {
					return err
				}
				if d.GetLogStartOffset() != want {
					return fmt.Errorf("node %d: log start %d", id, d.GetLogStartOffset())
				}
			}
			return nil
		})
	}
	waitLogStart(12)

	c.Kill(leader)
	c.Eventually(ctx, "a new leader", func() error {
		if l, _ := c.WaitLeader(ctx, "delrec", 0); l == leader {
			return errors.New("the killed node still leads")
		}
		return nil
	})
	after := values("after", 5)
	produceAll(t, c, "delrec", after)
	newLeader, _ := c.WaitLeader(ctx, "delrec", 0)
	cons := quirev1.NewConsumerClient(c.Conn(newLeader))
	_, err = cons.FetchRecords(ctx, &quirev1.FetchRecordsRequest{Topic: "delrec", Offset: 11})
	if status.Code(err) != codes.OutOfRange {
		t.Fatalf("the new leader %d read below the deleted offset: %v", newLeader, err)
	}
	if got, want := consumeFrom(t, c, "delrec", 12), append(slices.Clone(vals[12:]), after...); !slices.Equal(got, want) {
		t.Fatalf("from 12 on the new leader: %v, want %v", got, want)
	}

	c.Restart(leader)
	waitInSync(t, c, "delrec")
	waitLogStart(12)
}
