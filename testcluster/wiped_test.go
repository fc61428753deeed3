package testcluster_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/testcluster"
)

// TestClusterWipedSoleReplicaGoesOffline: a replication-factor-1
// partition led by node w keeps its data over a plain restart (same log
// directory id: led by w again, offsets continue). After Wipe(w) and a
// restart, w registers with a new directory id: the partition goes
// offline (leader -1, empty ISR, higher leader epoch) on every node, and
// produce and fetch answer LEADER_NOT_AVAILABLE (retriable) instead of
// w serving the partition again from offset 0.
func TestClusterWipedSoleReplicaGoesOffline(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 3)
	ctx := testCtx(t)
	ctl := c.WaitController(ctx)
	w := ctl%3 + 1 // not the controller
	const topic = "solo"
	createTopic(t, c, ctl, topic, 3, 1)
	c.WaitImage(ctx, func(img *metadata.Image) bool { _, ok := img.Topic(topic); return ok })
	tp, _ := c.Image(ctl).Topic(topic)
	part := int32(-1)
	for _, p := range tp.Partitions {
		if slices.Equal(p.Replicas, []int32{w}) {
			part = p.Partition
		}
	}
	if part < 0 {
		t.Fatalf("no partition of %q on node %d: %+v", topic, w, tp.Partitions)
	}
	for i := range 3 {
		if off := produceToLeader(t, c, topic, part, fmt.Sprint("v", i)); off != int64(i) {
			t.Fatalf("offset %d, want %d", off, i)
		}
	}
	before, _ := c.Image(ctl).Broker(w)
	if before.DirectoryID == "" {
		t.Fatalf("broker %d registered without a directory id: %+v", w, before)
	}

	// A restart with its data: the same directory id, led by w again, and
	// the offsets continue.
	c.Stop(w)
	c.Restart(w)
	if b := c.WaitBroker(ctx, w, false); b.DirectoryID != before.DirectoryID {
		t.Fatalf("restart changed the directory id: %+v, before %+v", b, before)
	}
	if off := produceToLeader(t, c, topic, part, "after restart"); off != 3 {
		t.Fatalf("offset after a plain restart %d, want 3", off)
	}
	ledBefore, _ := c.Image(ctl).Partition(topic, part)

	// Wiped: a new directory id, and the partition is offline.
	c.Stop(w)
	c.Wipe(w)
	c.Restart(w)
	after := c.WaitBroker(ctx, w, false)
	if after.DirectoryID == "" || after.DirectoryID == before.DirectoryID {
		t.Fatalf("wiped node registered with directory id %q, before %q", after.DirectoryID, before.DirectoryID)
	}
	c.WaitImage(ctx, func(img *metadata.Image) bool {
		p, _ := img.Partition(topic, part)
		return p.Leader == -1 && len(p.ISR) == 0 && p.LeaderEpoch > ledBefore.LeaderEpoch
	})
	c.WaitIdenticalImages(ctx)

	// Metadata from every node shows no leader.
	for _, id := range c.IDs() {
		c.Eventually(ctx, "metadata shows the partition offline", func() error {
			md, err := quirev1.NewMetadataClient(c.Conn(id)).GetMetadata(ctx, &quirev1.GetMetadataRequest{Topics: []string{topic}})
			if err != nil {
				return err
			}
			if pm := md.Topics[0].Partitions[part]; pm.Leader != -1 || len(pm.Isr) != 0 {
				return fmt.Errorf("node %d: %v", id, pm)
			}
			return nil
		})
	}

	// Produce and fetch, on the wiped node and elsewhere, keep answering
	// LEADER_NOT_AVAILABLE over several heartbeats (the wiped node is
	// unfenced and heartbeating: it is never elected).
	deadline := time.Now().Add(10 * testcluster.HeartbeatMs * time.Millisecond)
	for time.Now().Before(deadline) {
		for _, via := range c.IDs() {
			r, err := produce(ctx, c, via, topic, part, "lost?")
			if err != nil {
				t.Fatalf("produce via node %d: %v", via, err)
			}
			if r.Error == nil {
				t.Fatalf("produce via node %d accepted at offset %d: the wiped node serves the partition", via, r.Offset)
			}
			if r.Error.Code != quirev1.ErrorCode_LEADER_NOT_AVAILABLE || !r.Error.Retriable {
				t.Fatalf("produce via node %d: %v; want LEADER_NOT_AVAILABLE, retriable", via, r.Error)
			}
		}
		fctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		resp, err := quirev1.NewConsumerClient(c.Conn(w)).FetchRecords(fctx, &quirev1.FetchRecordsRequest{Topic: topic, Partition: part})
		cancel()
		if err == nil {
			t.Fatalf("fetch from the wiped node answered %v", resp)
		}
		if e := errorDetail(err); e == nil || e.Code != quirev1.ErrorCode_LEADER_NOT_AVAILABLE || !e.Retriable {
			t.Fatalf("fetch from the wiped node: %v (%v); want LEADER_NOT_AVAILABLE", err, e)
		}
		time.Sleep(testcluster.HeartbeatMs * time.Millisecond) // spacing the probes over heartbeats, not synchronising
	}
	if p, _ := c.Image(ctl).Partition(topic, part); p.Leader != -1 {
		t.Fatalf("offline partition got leader: %+v", p)
	}
	// The other partitions of the topic are untouched.
	for _, p := range tp.Partitions {
		if p.Partition != part {
			produceToLeader(t, c, topic, p.Partition, "still fine")
		}
	}
}

// TestClusterWipedNodeRejoinsAsFollower: with replication factor 3 a
// wiped node (new directory id) comes back as a follower of every
// partition, out of every ISR and leading none; the partitions it did not
// lead keep their leader and their offsets. (Those it led moved to another
// ISR member; until follower replication exists, that member's log may
// be behind, which this test does not judge.)
func TestClusterWipedNodeRejoinsAsFollower(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 3)
	ctx := testCtx(t)
	ctl := c.WaitController(ctx)
	const topic = "triple"
	createTopic(t, c, ctl, topic, 6, 3)
	c.WaitImage(ctx, func(img *metadata.Image) bool { _, ok := img.Topic(topic); return ok })
	w := ctl%3 + 1
	ledByW := map[int32]bool{}
	firstEnd := map[int32]int64{}
	for p := range int32(6) {
		if leader, _ := c.WaitLeader(ctx, topic, p); leader == w {
			ledByW[p] = true
		}
		// Kept when its leader stops. The end of the log after it, not 1:
		// a produce that timed out after its append is tried again, as a
		// producer without idempotence does, and is then written twice.
		firstEnd[p] = produceToLeaderAcks(t, c, topic, p, "first", -1) + 1
	}
	if len(ledByW) == 0 || len(ledByW) == 6 {
		t.Logf("node %d leads %d of the 6 partitions of %q", w, len(ledByW), topic)
	}
	before, _ := c.Image(ctl).Broker(w)

	c.Stop(w)
	c.Wipe(w)
	c.Restart(w)
	after := c.WaitBroker(ctx, w, false)
	if after.DirectoryID == before.DirectoryID || after.DirectoryID == "" {
		t.Fatalf("wiped node directory id %q, before %q", after.DirectoryID, before.DirectoryID)
	}
	img := c.WaitIdenticalImages(ctx)
	ti, _ := img.Topic(topic)
	for _, p := range ti.Partitions {
		if p.Leader == w || p.Leader == -1 || !slices.Contains(p.Replicas, w) {
			t.Fatalf("after wipe: %+v", p)
		}
	}
	waitRejoined(t, c, topic, 6, w, after.Incarnation)
	for p := range int32(6) {
		leader, epoch := c.WaitLeader(ctx, topic, p)
		if off := produceToLeader(t, c, topic, p, "second"); !ledByW[p] {
			keptOffsets(ctx, t, c, leader, topic, p, firstEnd[p], off)
		}
		c.Eventually(ctx, "the wiped node is a follower", func() error {
			r, err := produce(asForwarded(ctx), c, w, topic, p, "x")
			if err != nil {
				return err
			}
			if r.Error == nil || r.Error.Code != quirev1.ErrorCode_NOT_LEADER_OR_FOLLOWER || r.Error.LeaderId != leader || r.Error.LeaderEpoch != epoch {
				return fmt.Errorf("%s-%d via wiped node: %v", topic, p, r.Error)
			}
			return nil
		})
	}
}

// keptOffsets fails the test unless partition p's leader holds "first"
// at every offset below firstEnd and "second" at second, at or after it:
// its log kept its offsets through another node's wipe.
func keptOffsets(ctx context.Context, t *testing.T, c *testcluster.Cluster, leader int32, topic string, p int32, firstEnd, second int64) {
	t.Helper()
	if second < firstEnd {
		t.Fatalf("%s-%d: \"second\" written at %d, below the end %d the log had before the wipe", topic, p, second, firstEnd)
	}
	var resp *quirev1.FetchRecordsResponse
	var got []string
	// Up to the high watermark, which passes "second" (written with
	// acks=1) once the followers have it.
	c.Eventually(ctx, fmt.Sprintf("%s-%d's leader answering offsets 0 to %d", topic, p, second), func() error {
		var err error
		resp, err = quirev1.NewConsumerClient(c.Conn(leader)).FetchRecords(asForwarded(ctx), &quirev1.FetchRecordsRequest{Topic: topic, Partition: p, MaxRecords: int32(second + 1)})
		if err != nil {
			return err
		}
		got = got[:0]
		for _, r := range resp.Records {
			got = append(got, fmt.Sprintf("%d:%s", r.Offset, r.GetValue()))
		}
		if int64(len(resp.Records)) != second+1 {
			return fmt.Errorf("leader %d answers %v", leader, got)
		}
		return nil
	})
	for i, r := range resp.Records {
		want := "first"
		if int64(i) == second {
			want = "second"
		} else if int64(i) >= firstEnd {
			want = "second" // a retried "second"
		}
		if r.Offset != int64(i) || r.GetValue() != want {
			t.Fatalf("%s-%d: leader %d holds %v; want \"first\" below %d and \"second\" from there to %d", topic, p, leader, got, firstEnd, second)
		}
	}
}
