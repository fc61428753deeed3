package testcluster_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/testcluster"
)

// TestClusterElectPreferredLeader: with automatic rebalancing off, a
// partition whose preferred replica was stopped stays with the replica
// that took over, even once the preferred one is back in sync;
// ElectLeaders then moves leadership back to it at a new leader epoch,
// a second call finds the election not needed, and every record written
// before, during and after is read back in order. While the preferred
// replica is down the election is PREFERRED_LEADER_NOT_AVAILABLE.
func TestClusterElectPreferredLeader(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 3, testcluster.Config(func(_ int32, cfg *broker.Config) {
		cfg.AutoLeaderRebalanceEnable = false
	}))
	createTopic(t, c, 1, "el", 1, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	info, ok := c.Image(1).Topic("el")
	if !ok {
		t.Fatal("no topic el in the image")
	}
	pref := info.Partitions[0].Replicas[0]
	leader, epoch := c.WaitLeader(ctx, "el", 0)
	if leader != pref {
		t.Fatalf("new partition led by %d, its preferred replica is %d", leader, pref)
	}
	before := []string{"b0", "b1", "b2"}
	produceAll(t, c, "el", before)

	c.Stop(pref)
	c.Eventually(ctx, "another leader of el-0", func() error {
		leader, epoch = c.WaitLeader(ctx, "el", 0)
		if leader == pref {
			return fmt.Errorf("still led by %d", leader)
		}
		return nil
	})
	during := []string{"d0", "d1", "d2"}
	produceAll(t, c, "el", during)

	var other int32
	for _, id := range c.Running() {
		other = id
	}
	elect := func(what string) *quirev1.ElectLeadersResult {
		t.Helper()
		resp, err := quirev1.NewAdminClient(c.Conn(other)).ElectLeaders(ctx, &quirev1.ElectLeadersRequest{
			Topics: []*quirev1.ElectLeadersTopic{{Topic: "el", Partitions: []int32{0}}}})
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if len(resp.Partitions) != 1 {
			t.Fatalf("%s: %d results", what, len(resp.Partitions))
		}
		return resp.Partitions[0]
	}
	if r := elect("preferred replica down"); r.GetError().GetCode() != quirev1.ErrorCode_PREFERRED_LEADER_NOT_AVAILABLE {
		t.Fatalf("preferred replica down: %v, want PREFERRED_LEADER_NOT_AVAILABLE", r.Error)
	}

	c.Restart(pref)
	c.WaitImage(ctx, func(img *metadata.Image) bool {
		ti, ok := img.Topic("el")
		return ok && slices.Contains(ti.Partitions[0].ISR, pref)
	})
	if l, _ := c.WaitLeader(ctx, "el", 0); l == pref {
		t.Fatalf("leadership moved back to %d with automatic rebalancing off", pref)
	}
	if r := elect("preferred replica in sync"); r.Error != nil {
		t.Fatalf("preferred replica in sync: %v", r.Error)
	}
	newLeader, newEpoch := c.WaitLeader(ctx, "el", 0)
	if newLeader != pref || newEpoch <= epoch {
		t.Fatalf("after the election: leader %d at epoch %d, want %d above epoch %d", newLeader, newEpoch, pref, epoch)
	}
	if r := elect("preferred replica leads"); r.GetError().GetCode() != quirev1.ErrorCode_ELECTION_NOT_NEEDED {
		t.Fatalf("preferred replica leads: %v, want ELECTION_NOT_NEEDED", r.Error)
	}

	after := []string{"a0", "a1", "a2"}
	produceAll(t, c, "el", after)
	want := slices.Concat(before, during, after)
	if got := consumeAll(t, c, "el"); !slices.Equal(got, want) {
		t.Fatalf("read %v, want %v", got, want)
	}
}
