package testcluster_test

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/testcluster"
)

// TestClusterFormsAndServesFromAnyNode: the cluster forms; topics created
// through each node are visible on all with identical images; metadata
// answers from any node; produce and fetch on a non-leader get
// NOT_LEADER_OR_FOLLOWER with the leader and its epoch.
func TestClusterFormsAndServesFromAnyNode(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 3)
	ctx := testCtx(t)
	ctl := c.WaitController(ctx)
	t.Logf("controller: node %d", ctl)

	for _, id := range c.IDs() {
		createTopic(t, c, id, fmt.Sprintf("via-%d", id), 6, 3)
	}
	c.WaitImage(ctx, func(img *metadata.Image) bool { return len(img.Topics()) == 3 })
	img := c.WaitIdenticalImages(ctx)
	for _, id := range c.IDs() {
		got := c.Image(id)
		if !reflect.DeepEqual(got.Topics(), img.Topics()) || !reflect.DeepEqual(got.Brokers(), img.Brokers()) {
			t.Fatalf("node %d image differs at index %d", id, got.Index())
		}
	}
	for _, b := range img.Brokers() {
		if b.Fenced {
			t.Errorf("broker %d fenced in a healthy cluster", b.ID)
		}
	}

	// Metadata from every node, the same answer.
	// (Each node answers from the image its replicas reflect, which
	// follows the applied one by a moment.)
	c.Eventually(ctx, "same metadata from every node", func() error {
		var first *quirev1.GetMetadataResponse
		for _, id := range c.IDs() {
			md, err := quirev1.NewMetadataClient(c.Conn(id)).GetMetadata(ctx, &quirev1.GetMetadataRequest{})
			if err != nil {
				t.Fatalf("metadata from node %d: %v", id, err)
			}
			if len(md.Brokers) != 3 || len(md.Topics) != 3 || md.ControllerId != ctl || md.ClusterId != testcluster.ClusterID {
				return fmt.Errorf("metadata from node %d: %d brokers, %d topics, controller %d, cluster %q",
					id, len(md.Brokers), len(md.Topics), md.ControllerId, md.ClusterId)
			}
			if first == nil {
				first = md
			} else if !proto.Equal(first, md) {
				return fmt.Errorf("node %d answers other metadata:\n%v\nvs\n%v", id, md, first)
			}
		}
		return nil
	})

	// Replicas are spread: every node leads some of the 18 partitions.
	leads := map[int32]int{}
	for _, tp := range img.Topics() {
		for _, p := range tp.Partitions {
			leads[p.Leader]++
			if len(p.ISR) != 3 {
				t.Errorf("%s-%d: ISR %v", tp.Name, p.Partition, p.ISR)
			}
		}
	}
	for _, id := range c.IDs() {
		if leads[id] == 0 {
			t.Errorf("node %d leads nothing: %v", id, leads)
		}
	}

	// Produce to the leader works; to a follower it is refused with a hint.
	leader, epoch := c.WaitLeader(ctx, "via-1", 0)
	off := produceToLeader(t, c, "via-1", 0, "hello")
	if off != 0 {
		t.Fatalf("first offset %d", off)
	}
	follower := c.IDs()[(int(leader))%3] // the next node
	// A request a broker will not pass on to the leader is answered with
	// the leader's name.
	r, err := produce(asForwarded(ctx), c, follower, "via-1", 0, "misdirected")
	if err != nil {
		t.Fatalf("produce on follower: %v", err)
	}
	if r.Error == nil || r.Error.Code != quirev1.ErrorCode_NOT_LEADER_OR_FOLLOWER || !r.Error.Retriable ||
		r.Error.LeaderId != leader || r.Error.LeaderEpoch != epoch {
		t.Fatalf("produce on follower %d: %v; want NOT_LEADER_OR_FOLLOWER naming %d epoch %d", follower, r.Error, leader, epoch)
	}
	_, err = quirev1.NewConsumerClient(c.Conn(follower)).FetchRecords(asForwarded(ctx), &quirev1.FetchRecordsRequest{Topic: "via-1", Partition: 0})
	if e := errorDetail(err); e == nil || e.Code != quirev1.ErrorCode_NOT_LEADER_OR_FOLLOWER || e.LeaderId != leader || e.LeaderEpoch != epoch {
		t.Fatalf("fetch on follower %d: %v (%v); want NOT_LEADER_OR_FOLLOWER naming %d epoch %d", follower, err, e, leader, epoch)
	}
	// A client's own request is passed on.
	if r, err := produce(ctx, c, follower, "via-1", 0, "passed on"); err != nil || r.Error != nil || r.Offset != 1 {
		t.Fatalf("produce on follower %d: %v %v", follower, r, err)
	}
}

// TestClusterControllerFailover: killing the controller elects another and
// topic creation keeps working through any node; the old controller comes
// back as a follower and catches up.
func TestClusterControllerFailover(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 3)
	ctx := testCtx(t)
	old := c.WaitController(ctx)
	createTopic(t, c, old, "before", 3, 3)

	start := time.Now()
	c.Kill(old)
	var via int32
	for _, id := range c.IDs() {
		if id != old {
			via = id
			break
		}
	}
	// The admin call itself rides out the election (the Forwarder retries).
	createTopic(t, c, via, "after", 3, 2)
	t.Logf("controller failover (kill to created topic): %v", time.Since(start))
	ctl := c.WaitController(ctx)
	if ctl == old {
		t.Fatalf("controller still %d", old)
	}
	for _, id := range c.Running() {
		createTopic(t, c, id, fmt.Sprintf("after-via-%d", id), 1, 2)
	}

	c.Restart(old)
	c.WaitImage(ctx, func(img *metadata.Image) bool { return len(img.Topics()) == 4 })
	img := c.WaitIdenticalImages(ctx)
	if b, _ := img.Broker(old); b.Fenced {
		t.Fatalf("restarted node %d still fenced", old)
	}
	if c.WaitController(ctx) == old && !c.Node(old).Metadata().IsController() {
		t.Fatal("inconsistent controller")
	}
}

// TestClusterBrokerFencedAfterSessionTimeout: a broker that dies without a
// controlled shutdown is fenced once broker.session.timeout.ms passes; its
// partitions get leaders from their ISR with higher epochs, and produce
// works on the new leaders.
func TestClusterBrokerFencedAfterSessionTimeout(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 3)
	ctx := testCtx(t)
	ctl := c.WaitController(ctx)
	createTopic(t, c, ctl, "fence", 6, 3)
	c.WaitImage(ctx, func(img *metadata.Image) bool { _, ok := img.Topic("fence"); return ok })
	victim := ctl%3 + 1 // a node that is not the controller
	before, _ := c.Image(ctl).Topic("fence")
	var led []metadata.PartitionInfo
	for _, p := range before.Partitions {
		if p.Leader == victim {
			led = append(led, p)
		}
	}
	if len(led) == 0 {
		t.Fatalf("node %d leads no partition of %v", victim, before.Partitions)
	}

	start := time.Now()
	c.Kill(victim)
	c.WaitBroker(ctx, victim, true)
	fencedAfter := time.Since(start)
	t.Logf("broker %d fenced %v after kill (session timeout %dms)", victim, fencedAfter, testcluster.SessionTimeoutMs)
	if fencedAfter < time.Duration(testcluster.SessionTimeoutMs)*time.Millisecond/2 {
		t.Errorf("fenced after %v, before the session could expire", fencedAfter)
	}
	for _, old := range led {
		leader, epoch := c.WaitLeader(ctx, "fence", old.Partition)
		p, _ := c.Image(leader).Partition("fence", old.Partition)
		if leader == victim || epoch <= old.LeaderEpoch || !slices.Contains(old.ISR, leader) || slices.Contains(p.ISR, victim) {
			t.Fatalf("partition %d after fencing: %+v (before %+v)", old.Partition, p, old)
		}
		produceToLeader(t, c, "fence", old.Partition, "after failover")
	}
	t.Logf("partition leader failover (kill to produce on all %d partitions): %v", len(led), time.Since(start))

	// Back again, the broker is unfenced and hosts its replicas as follower.
	c.Restart(victim)
	c.WaitBroker(ctx, victim, false)
}

// TestClusterRestartCatchesUpBySnapshot: a node stopped while the log moved
// on past the leader's compaction point catches up through a snapshot.
func TestClusterRestartCatchesUpBySnapshot(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 3, testcluster.Config(func(_ int32, cfg *broker.Config) {
		cfg.RaftSnapshotThreshold = 8
		cfg.RaftSnapshotInterval = 50 * time.Millisecond
		cfg.RaftTrailingLogs = 2
	}))
	ctx := testCtx(t)
	ctl := c.WaitController(ctx)
	lagger := ctl%3 + 1
	c.Stop(lagger)
	stoppedAt := c.Image(ctl).Index()
	for i := range 20 {
		createTopic(t, c, ctl, fmt.Sprintf("snap-%02d", i), 1, 2)
	}
	// Wait until the leader compacted past what the lagger has.
	c.Eventually(ctx, "leader snapshot", func() error {
		s := c.Node(ctl).Metadata().Raft().Stats()
		snap, _ := strconv.ParseUint(s["last_snapshot_index"], 10, 64)
		if snap <= stoppedAt+2+1 {
			return fmt.Errorf("last snapshot at %d, lagger at %d", snap, stoppedAt)
		}
		return nil
	})
	c.Restart(lagger)
	img := c.WaitIdenticalImages(ctx)
	if len(img.Topics()) != 20 {
		t.Fatalf("%d topics", len(img.Topics()))
	}
	// Raft records the installed snapshot only after the FSM has restored
	// it (and the image shows it), so its figures may trail a moment.
	c.Eventually(ctx, "the lagger's raft records the snapshot", func() error {
		s := c.Node(lagger).Metadata().Raft().Stats()
		if snap, _ := strconv.ParseUint(s["last_snapshot_index"], 10, 64); snap <= stoppedAt {
			return fmt.Errorf("lagger has no snapshot past %d: %v", stoppedAt, s)
		}
		return nil
	})
	if !reflect.DeepEqual(c.Image(lagger).Topics(), c.Image(ctl).Topics()) {
		t.Fatal("lagger's topics differ")
	}
}

// TestClusterVotersAndBrokerOnlyNodes: 3 voters and 2 broker-only nodes;
// the broker-only nodes are raft non-voters, apply the log and host
// replicas.
func TestClusterVotersAndBrokerOnlyNodes(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 5, testcluster.Voters(3))
	ctx := testCtx(t)
	ctl := c.WaitController(ctx)
	if ctl > 3 {
		t.Fatalf("broker-only node %d is controller", ctl)
	}
	c.Eventually(ctx, "raft membership", func() error {
		f := c.Node(ctl).Metadata().Raft().GetConfiguration()
		if err := f.Error(); err != nil {
			return err
		}
		voters, nonvoters := 0, 0
		for _, s := range f.Configuration().Servers {
			if s.Suffrage == raft.Voter {
				voters++
			} else {
				nonvoters++
			}
		}
		if voters != 3 || nonvoters != 2 {
			return fmt.Errorf("%d voters, %d non-voters", voters, nonvoters)
		}
		return nil
	})
	createTopic(t, c, 5, "wide", 10, 2)
	img := c.WaitIdenticalImages(ctx)
	hosts := map[int32]int{}
	t0, _ := img.Topic("wide")
	for _, p := range t0.Partitions {
		for _, r := range p.Replicas {
			hosts[r]++
		}
	}
	for _, id := range c.IDs() {
		if hosts[id] == 0 {
			t.Fatalf("node %d hosts no replica: %v", id, hosts)
		}
	}
	for _, p := range t0.Partitions {
		if p.Leader >= 4 {
			produceToLeader(t, c, "wide", p.Partition, "on a broker-only node")
			break
		}
	}
	// A broker-only node killed is fenced like any other.
	c.Kill(5)
	c.WaitBroker(ctx, 5, true)
}

// TestClusterMajorityLost: with two of three voters gone, admin writes fail
// with UNAVAILABLE within metadata.write.timeout.ms, and metadata reads
// still answer from the local image.
func TestClusterMajorityLost(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 3)
	ctx := testCtx(t)
	ctl := c.WaitController(ctx)
	createTopic(t, c, ctl, "kept", 2, 1)
	c.WaitImage(ctx, func(img *metadata.Image) bool { _, ok := img.Topic("kept"); return ok })
	survivor := ctl
	for _, id := range c.IDs() {
		if id != survivor {
			c.Kill(id)
		}
	}
	start := time.Now()
	_, err := admin(c, survivor).CreateTopic(ctx, &quirev1.CreateTopicRequest{Name: "lost", OptionalPartitions: &quirev1.CreateTopicRequest_Partitions{Partitions: 1}, OptionalReplicationFactor: &quirev1.CreateTopicRequest_ReplicationFactor{ReplicationFactor: 1}})
	took := time.Since(start)
	t.Logf("create topic without quorum failed after %v: %v", took, err)
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("create topic without quorum: %v; want UNAVAILABLE", err)
	}
	if e := errorDetail(err); e == nil || !e.Retriable {
		t.Fatalf("error detail %v: want retriable", e)
	}
	// Refused after metadata.write.timeout.ms, not held until the
	// caller's deadline.
	if took > time.Duration(testcluster.WriteTimeoutMs)*time.Millisecond+30*time.Second {
		t.Fatalf("refused after %v, want about metadata.write.timeout.ms (%d ms)", took, testcluster.WriteTimeoutMs)
	}
	md, err := quirev1.NewMetadataClient(c.Conn(survivor)).GetMetadata(ctx, &quirev1.GetMetadataRequest{Topics: []string{"kept"}})
	if err != nil || len(md.Topics) != 1 || md.Topics[0].Error != nil {
		t.Fatalf("metadata read without quorum: %v %v", md, err)
	}
	// The quorum back, writes work again.
	for _, id := range c.IDs() {
		if id != survivor {
			if err := c.TryRestart(id); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Replication factor 3 needs all three brokers live. The image still
	// shows the killed brokers' old registrations as live (no controller
	// could fence them), so wait for each restarted broker's own new
	// registration to be unfenced.
	for _, id := range c.IDs() {
		if id == survivor {
			continue
		}
		if err := c.Node(id).WaitReady(ctx); err != nil {
			t.Fatal(err)
		}
		own, _ := c.Node(id).Metadata().Image().Broker(id)
		c.Eventually(ctx, fmt.Sprintf("node %d sees broker %d's new registration live", survivor, id), func() error {
			bi, _ := c.Node(survivor).Metadata().Image().Broker(id)
			if bi.Epoch < own.Epoch || bi.Fenced {
				return fmt.Errorf("broker %d: epoch %d fenced=%v, want epoch %d live", id, bi.Epoch, bi.Fenced, own.Epoch)
			}
			return nil
		})
	}
	createTopic(t, c, survivor, "regained", 1, 3)
}

// TestClusterPartitionedController: the controller cut off from the
// others loses its role; the majority elects a new controller, keeps
// accepting writes and fences the cut-off broker; after Heal the old
// controller rejoins, is unfenced, and every image is the same.
func TestClusterPartitionedController(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 3)
	ctx := testCtx(t)
	old := c.WaitController(ctx)
	createTopic(t, c, old, "split", 3, 3)
	c.Partition(old)
	var majority []int32
	for _, id := range c.IDs() {
		if id != old {
			majority = append(majority, id)
		}
	}
	var ctl int32
	c.Eventually(ctx, "new controller in the majority", func() error {
		ctl = -1
		for _, id := range majority {
			got, _, ok := c.Node(id).Metadata().Controller()
			if !ok || got == old || (ctl != -1 && got != ctl) {
				return fmt.Errorf("node %d sees controller %d (ok=%v)", id, got, ok)
			}
			ctl = got
		}
		return nil
	})
	createTopic(t, c, majority[0], "during", 1, 2)
	c.Eventually(ctx, "old controller fenced", func() error {
		if b, _ := c.Image(ctl).Broker(old); !b.Fenced {
			return errors.New("not yet")
		}
		return nil
	})
	// The isolated node still answers reads from its (stale) image.
	md, err := quirev1.NewMetadataClient(c.Conn(old)).GetMetadata(ctx, &quirev1.GetMetadataRequest{Topics: []string{"split"}})
	if err != nil || md.Topics[0].Error != nil {
		t.Fatalf("isolated node metadata: %v %v", md, err)
	}

	c.Heal()
	c.WaitController(ctx)
	c.WaitBroker(ctx, old, false)
	c.WaitImage(ctx, func(img *metadata.Image) bool { _, ok := img.Topic("during"); return ok })
	c.WaitIdenticalImages(ctx)
}

// TestClusterWipedNodeRejoins: a node refuses a data dir of another
// cluster; wiped, it rejoins as a new incarnation with a new broker epoch
// and is out of the ISR of every partition it shares, so it cannot lead
// them with its empty logs.
func TestClusterWipedNodeRejoins(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 3)
	ctx := testCtx(t)
	ctl := c.WaitController(ctx)
	createTopic(t, c, ctl, "shared", 6, 3)
	c.WaitImage(ctx, func(img *metadata.Image) bool { _, ok := img.Topic("shared"); return ok })
	w := ctl%3 + 1
	for p := range int32(6) {
		produceToLeaderAcks(t, c, "shared", p, "data", -1) // kept when its leader stops
	}
	before, _ := c.Image(ctl).Broker(w)

	c.Stop(w)
	err := c.TryRestart(w, func(cfg *broker.Config) { cfg.ClusterID = "another-cluster" })
	if !errors.Is(err, metadata.ErrClusterIDMismatch) {
		t.Fatalf("start with another cluster id: %v; want ErrClusterIDMismatch", err)
	}
	t.Logf("refused: %v", err)

	c.Wipe(w)
	c.Restart(w)
	after := c.WaitBroker(ctx, w, false)
	if after.Incarnation == before.Incarnation || after.Epoch <= before.Epoch {
		t.Fatalf("wiped node registered as %+v, before %+v", after, before)
	}
	img := c.WaitIdenticalImages(ctx)
	tp, _ := img.Topic("shared")
	for _, p := range tp.Partitions {
		if p.Leader == w {
			t.Fatalf("wiped node %d leads: %+v", w, p)
		}
		if !slices.Contains(p.Replicas, w) {
			t.Fatalf("replica assignment changed: %+v", p)
		}
	}
	// It left every ISR when it registered with its new directory; it is
	// back in each only once it has copied the leader's log.
	waitRejoined(t, c, "shared", 6, w, after.Incarnation)
	// It hosts its replicas again (as a follower, with empty logs) and
	// refuses produces with the leader's name.
	leader, epoch := c.WaitLeader(ctx, "shared", 0)
	c.Eventually(ctx, "wiped node answers NOT_LEADER", func() error {
		r, err := produce(asForwarded(ctx), c, w, "shared", 0, "x")
		if err != nil {
			return err
		}
		if r.Error == nil || r.Error.Code != quirev1.ErrorCode_NOT_LEADER_OR_FOLLOWER || r.Error.LeaderId != leader || r.Error.LeaderEpoch != epoch {
			return fmt.Errorf("got %v", r.Error)
		}
		return nil
	})
}
