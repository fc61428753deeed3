package testcluster_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/testcluster"
)

// TestClusterUnregisterBroker: a broker-only node gone for good is
// removed with Admin.UnregisterBroker: refused while it is alive and for a
// voter; once fenced, it leaves the raft configuration (no more metadata
// log sent to it), the broker list and every ISR, and stays in its
// partitions' replica lists.
func TestClusterUnregisterBroker(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 4, testcluster.Voters(3))
	ctx := testCtx(t)
	ctl := c.WaitController(ctx)
	const gone = int32(4)
	createTopic(t, c, 1, "spread", 8, 2)
	img := c.WaitIdenticalImages(ctx)
	t0, _ := img.Topic("spread")
	var hosted []int32
	for _, p := range t0.Partitions {
		if slices.Contains(p.Replicas, gone) {
			hosted = append(hosted, p.Partition)
		}
	}
	if len(hosted) == 0 {
		t.Fatalf("broker %d hosts no replica", gone)
	}
	inRaft := func(id int32) bool {
		f := c.Node(c.WaitController(ctx)).Metadata().Raft().GetConfiguration()
		if err := f.Error(); err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(f.Configuration().Servers, func(s raft.Server) bool { return s.ID == raft.ServerID(fmt.Sprint(id)) })
	}
	c.Eventually(ctx, "broker-only node in raft", func() error {
		if !inRaft(gone) {
			return fmt.Errorf("node %d not a raft member", gone)
		}
		return nil
	})

	unregister := func(via, id int32) error {
		_, err := admin(c, via).UnregisterBroker(ctx, &quirev1.UnregisterBrokerRequest{BrokerId: id})
		return err
	}
	if err := unregister(1, gone); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("unregister a live broker: %v; want FAILED_PRECONDITION", err)
	}
	voter := int32(2)
	if voter == ctl {
		voter = 3
	}
	c.Kill(voter)
	c.WaitBroker(ctx, voter, true)
	if err := unregister(1, voter); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("unregister a voter: %v; want FAILED_PRECONDITION", err)
	}
	c.Restart(voter)
	if err := unregister(1, 42); status.Code(err) != codes.NotFound {
		t.Fatalf("unregister an unknown broker: %v; want NOT_FOUND", err)
	}

	c.Kill(gone)
	c.WaitBroker(ctx, gone, true)
	via := int32(3)
	c.Eventually(ctx, "unregister the dead broker", func() error {
		err := unregister(via, gone)
		if status.Code(err) == codes.FailedPrecondition { // heard from too recently (a controller change)
			return err
		}
		if err != nil {
			t.Fatalf("unregister broker %d: %v", gone, err)
		}
		return nil
	})
	c.WaitImage(ctx, func(img *metadata.Image) bool { _, ok := img.Broker(gone); return !ok })
	c.Eventually(ctx, "removed from raft", func() error {
		if inRaft(gone) {
			return fmt.Errorf("node %d still a raft member", gone)
		}
		return nil
	})
	img = c.WaitIdenticalImages(ctx)
	t1, _ := img.Topic("spread")
	for _, pn := range hosted {
		p := t1.Partitions[pn]
		if !slices.Contains(p.Replicas, gone) || slices.Contains(p.ISR, gone) || p.Leader == gone {
			t.Fatalf("spread-%d after unregister: replicas %v isr %v leader %d", pn, p.Replicas, p.ISR, p.Leader)
		}
	}
	dc, err := admin(c, 1).DescribeCluster(ctx, &quirev1.DescribeClusterRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(dc.Brokers) != 3 {
		t.Fatalf("brokers after unregister: %v", dc.Brokers)
	}
	if err := unregister(1, gone); status.Code(err) != codes.NotFound {
		t.Fatalf("unregister again: %v; want NOT_FOUND", err)
	}
}
