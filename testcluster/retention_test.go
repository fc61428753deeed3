package testcluster_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/group"
	"github.com/quirelog/quire/internal/clock"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/testcluster"
)

// shiftedClock is the system clock moved forward by what the test adds.
type shiftedClock struct {
	mu    sync.Mutex
	ahead time.Duration
}

func (c *shiftedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.ahead)
}

func (c *shiftedClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ahead += d
}

// TestClusterOffsetsRetention: with offsets.retention.minutes 1 and the
// coordinator's clock moved by hand, a group that never had members keeps
// its offsets until a minute after its last commit, then loses them; a
// group whose member left keeps them a minute after the leave, however
// old its commit; a group with a member keeps them however long it goes.
func TestClusterOffsetsRetention(t *testing.T) {
	t.Parallel()
	c, clock := retentionCluster(t)
	ctx := subCtx(t)
	ctl := c.WaitController(ctx)
	createTopic(t, c, ctl, "kept", 1, 3)
	waitTopic(ctx, c, "kept")
	via := c.IDs()[1]
	commitOffset(ctx, t, c, via, "standalone", "kept", 0, 1)
	commitOffset(ctx, t, c, via, "left", "kept", 0, 1)
	commitOffset(ctx, t, c, via, "active", "kept", 0, 1)

	join := func(group string) *groupMember {
		m := &groupMember{c: c, via: via, group: group, id: group + "-m"}
		c.Eventually(ctx, "join "+group, func() error { return m.heartbeatTopic(ctx, "kept") })
		return m
	}
	left := join("left")
	active := join("active")
	listed := func() []string { return listGroups(ctx, t, c, via) }

	// Half the retention: nothing expires.
	clock.add(30 * time.Second)
	if err := left.leave(ctx); err != nil {
		t.Fatal(err)
	}
	if err := active.heartbeatTopic(ctx, "kept"); err != nil {
		t.Fatal(err)
	}
	// The coordinator looks once a (clock) second: let it see the leave
	// before the clock moves on.
	c.Eventually(ctx, "the leave seen", func() error {
		clock.add(100 * time.Millisecond)
		d, err := groups(c, via).DescribeGroup(ctx, &quirev1.DescribeGroupRequest{Group: "left"})
		if err != nil {
			return err
		}
		if len(d.Members) != 0 {
			return fmt.Errorf("%d members", len(d.Members))
		}
		return nil
	})
	if got := listed(); !slices.Equal(got, []string{"active", "left", "standalone"}) {
		t.Fatalf("groups %v after half the retention", got)
	}
	// A retention after the commits: the standalone group's offsets go;
	// the one whose member left half a retention ago keeps them.
	clock.add(31 * time.Second)
	waitListed(ctx, t, c, via, nil, "active", "left")
	// A retention after the leave: its offsets go too; the active group
	// keeps them (its commit is a minute and a half old).
	clock.add(31 * time.Second)
	waitListed(ctx, t, c, via, nil, "active")
	if err := active.heartbeatTopic(ctx, "kept"); err != nil {
		t.Fatal(err)
	}
	clock.add(2 * time.Minute)
	if err := active.heartbeatTopic(ctx, "kept"); err != nil {
		t.Fatal(err)
	}
	if got := fetchOffset(ctx, t, c, via, "active", "kept", 0); got != 1 {
		t.Fatalf("the active group's offset is %d, want 1", got)
	}
}

// TestClusterCommitsBatched: commits from many groups at once are written
// in fewer metadata-log entries than commits (at metadata.version 3), and
// each is applied.
func TestClusterCommitsBatched(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 3)
	ctx := subCtx(t)
	ctl := c.WaitController(ctx)
	createTopic(t, c, ctl, "batched", 1, 3)
	c.WaitImage(ctx, func(img *metadata.Image) bool {
		_, ok := img.Topic("batched")
		return ok && img.MetadataVersion() >= metadata.MetadataVersionOffsetBatches
	})
	// Summed over the nodes: the controller may change meanwhile.
	stats := func() (entries, commits uint64) {
		for _, id := range c.Running() {
			e, n := c.Node(id).Metadata().Ctl().CommitBatchStats()
			entries, commits = entries+e, commits+n
		}
		return entries, commits
	}
	entries0, commits0 := stats()
	const n = 40
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			_, errs[i] = groups(c, c.IDs()[i%3]).CommitOffsets(ctx, &quirev1.CommitOffsetsRequest{Group: fmt.Sprint("batch-", i),
				Offsets: []*quirev1.OffsetCommit{{Topic: "batched", Partition: 0, Offset: int64(i)}}})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
	}
	entries, commits := stats()
	if commits-commits0 < n || entries-entries0 >= n/2 {
		t.Fatalf("%d commits in %d entries: not batched", commits-commits0, entries-entries0)
	}
	t.Logf("%d concurrent commits written in %d entries", commits-commits0, entries-entries0)
	for i := range n {
		if got := fetchOffset(ctx, t, c, ctl, fmt.Sprint("batch-", i), "batched", 0); got != int64(i) {
			t.Fatalf("batch-%d committed %d", i, got)
		}
	}
}

// TestClusterOffsetsRetentionAcrossControllerChange: the time since a
// group was left without members is counted from the leave by whichever
// controller is the coordinator: a controller change half-way through
// the retention does not start the count again.
func TestClusterOffsetsRetentionAcrossControllerChange(t *testing.T) {
	t.Parallel()
	c, clock := retentionCluster(t)
	ctx := subCtx(t)
	ctl := c.WaitController(ctx)
	createTopic(t, c, ctl, "kept", 1, 3)
	waitTopic(ctx, c, "kept")
	c.WaitMetadataVersion(ctx, metadata.LatestMetadataVersion)
	via := c.IDs()[0]
	if via == ctl {
		via = c.IDs()[1]
	}
	commitOffset(ctx, t, c, via, "left", "kept", 0, 1)
	commitOffset(ctx, t, c, via, "other", "kept", 0, 1)
	m := &groupMember{c: c, via: via, group: "left", id: "left-m"}
	c.Eventually(ctx, "join", func() error { return m.heartbeatTopic(ctx, "kept") })
	listed := func() []string { return listGroups(ctx, t, c, via) }

	// The commit is a retention old when the member leaves: from then on
	// only the leave keeps the offsets.
	clock.add(61 * time.Second)
	if err := m.leave(ctx); err != nil {
		t.Fatal(err)
	}
	waitListed(ctx, t, c, via, func() { clock.add(100 * time.Millisecond) }, "left")
	// Past half the retention after the leave, the controller changes.
	clock.add(35 * time.Second)
	c.Stop(ctl)
	next := c.WaitController(ctx)
	if next == ctl {
		t.Fatalf("controller %d again", next)
	}
	// The new coordinator is loaded (it answers for the group) and keeps
	// the offsets: the leave is 35 s old.
	c.Eventually(ctx, "the new coordinator", func() error {
		_, err := groups(c, via).DescribeGroup(ctx, &quirev1.DescribeGroupRequest{Group: "left"})
		return err
	})
	if got := listed(); !slices.Equal(got, []string{"left"}) {
		t.Fatalf("groups %v 35 s after the leave", got)
	}
	// A retention after the leave the offsets go, though the new
	// controller has seen the group empty for only 26 s (and the real
	// clock, which the test's clock follows, must not make up the
	// difference: the count would then end anyway).
	clock.add(26 * time.Second)
	soon, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	c.Eventually(soon, "the left group's offsets expired by the new controller", func() error {
		if got := listed(); len(got) != 0 {
			return fmt.Errorf("groups %v", got)
		}
		return nil
	})
}

// TestClusterGroupEmptySinceBelowItsLevel: on a cluster whose nodes
// support metadata.version 3 at most, the coordinator writes a leave
// without the time the group became empty (a command carrying it would
// be refused), so members still leave; the offsets then expire a
// retention after the coordinator first saw the group empty.
func TestClusterGroupEmptySinceBelowItsLevel(t *testing.T) {
	t.Parallel()
	c, clock := retentionCluster(t, func(cfg *broker.Config) {
		cfg.MetadataVersions = metadata.VersionRange{Min: 1, Max: metadata.MetadataVersionSecurity}
	})
	ctx := subCtx(t)
	ctl := c.WaitController(ctx)
	createTopic(t, c, ctl, "kept", 1, 3)
	waitTopic(ctx, c, "kept")
	c.WaitMetadataVersion(ctx, metadata.MetadataVersionSecurity)
	via := c.IDs()[1]
	commitOffset(ctx, t, c, via, "left", "kept", 0, 1)
	m := &groupMember{c: c, via: via, group: "left", id: "left-m"}
	c.Eventually(ctx, "join", func() error { return m.heartbeatTopic(ctx, "kept") })
	clock.add(61 * time.Second) // the commit is a retention old
	if err := m.leave(ctx); err != nil {
		t.Fatalf("leave at metadata.version 3: %v", err)
	}
	c.WaitImage(ctx, func(img *metadata.Image) bool {
		recs := img.GroupMembers("left")
		if len(recs) == 0 {
			return false
		}
		e, ok := recs[0].(group.GroupEpoch)
		return ok && len(recs) == 2 && e.EmptySince.IsZero() // epoch and target: no members
	})
	if v := c.Image(via).MetadataVersion(); v != metadata.MetadataVersionSecurity {
		t.Fatalf("the cluster is at %d", v)
	}
	c.Eventually(ctx, "the offsets expired", func() error {
		clock.add(time.Second)
		resp, err := groups(c, via).ListGroups(ctx, &quirev1.ListGroupsRequest{})
		if err != nil {
			return err
		}
		if len(resp.Groups) != 0 {
			return fmt.Errorf("groups %v", resp.Groups)
		}
		return nil
	})
}

// TestClusterCommitStampedByController: an offset commit is stamped by
// the controller, whose clock also judges offsets.retention.minutes, not
// by the node that took it. A node whose wall clock is two hours behind
// stamped its commits two hours old, and the coordinator expired a
// memberless group's offsets a second after they were committed through
// it (offsets.retention.minutes 1 here, 7 days by default: a node
// restored from an old snapshot does it too).
func TestClusterCommitStampedByController(t *testing.T) {
	t.Parallel()
	clocks := map[int32]*clock.Jumped{}
	c := testcluster.New(t, 3, testcluster.Config(func(id int32, cfg *broker.Config) {
		clocks[id] = &clock.Jumped{}
		cfg.Clock = clocks[id]
		cfg.OffsetsRetentionMinutes = 1
	}))
	ctx := subCtx(t)
	createTopic(t, c, c.WaitController(ctx), "stamped", 1, 3)
	waitTopic(ctx, c, "stamped")
	c.Eventually(ctx, "a commit through a node two hours behind stamped by the controller", func() error {
		ctl := c.WaitController(ctx)
		via := ctl
		for _, id := range c.IDs() {
			if id == ctl {
				clocks[id].Set(0)
			} else {
				clocks[id].Set(-2 * time.Hour)
				via = id
			}
		}
		before := time.Now().UnixMilli()
		resp, err := groups(c, via).CommitOffsets(ctx, &quirev1.CommitOffsetsRequest{Group: "standalone",
			Offsets: []*quirev1.OffsetCommit{{Topic: "stamped", Partition: 0, Offset: 7}}})
		after := time.Now().UnixMilli()
		if err != nil {
			return err
		}
		got, err := groups(c, ctl).FetchOffsets(ctx, &quirev1.FetchOffsetsRequest{Group: "standalone"})
		if err != nil {
			return err
		}
		if len(got.Offsets) != 1 || got.Offsets[0].Offset != 7 {
			return fmt.Errorf("committed %v, want offset 7 (expired?)", got.Offsets)
		}
		if now := c.WaitController(ctx); now != ctl {
			return fmt.Errorf("the controller moved from %d to %d meanwhile", ctl, now)
		}
		stamp := got.Offsets[0].CommitTimeMs
		if stamp < before || stamp > after {
			t.Fatalf("committed through node %d (two hours behind): stamped %v, %v from the controller's clock",
				via, time.UnixMilli(stamp), time.Duration(stamp-before)*time.Millisecond)
		}
		if resp.CommitTimeMs != stamp {
			t.Fatalf("the commit answered commit_time_ms %d, the group holds %d", resp.CommitTimeMs, stamp)
		}
		return nil
	})
}

// retentionCluster is a 3-node cluster whose group coordinators keep
// offsets a minute (offsets.retention.minutes 1) by a clock the test moves
// by hand; members do not time out when it jumps. tweak adjusts every
// node's config further.
func retentionCluster(t *testing.T, tweak ...func(*broker.Config)) (*testcluster.Cluster, *shiftedClock) {
	clock := &shiftedClock{}
	c := testcluster.New(t, 3, testcluster.Config(func(_ int32, cfg *broker.Config) {
		cfg.OffsetsRetentionMinutes = 1
		cfg.GroupClock = clock
		cfg.GroupConsumerSessionTimeoutMs = 600000 // the clock jumps: no member times out
		cfg.GroupConsumerHeartbeatIntervalMs = 100
		for _, f := range tweak {
			f(cfg)
		}
	}))
	return c, clock
}
