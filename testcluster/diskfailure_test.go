package testcluster_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/storage"
	"github.com/quirelog/quire/testcluster"
)

// TestReplicationLeaderDiskFailureMovesLeadership: the leader's disk fails
// (EIO on every write to the partition's log) under acks=all produces. The
// leader takes its replica out of service: it gives up leadership and
// leaves the ISR through the controller, an in-sync follower takes over,
// producing goes on there, and no acknowledged record is lost. The failed
// broker's DescribeLogs names the failed log and its directory. Restarted
// on a working disk, it recovers the log, catches up and rejoins the ISR.
func TestReplicationLeaderDiskFailureMovesLeadership(t *testing.T) {
	t.Parallel()
	disks := map[int32]*storage.ErrorFS{}
	for id := int32(1); id <= 3; id++ {
		disks[id] = storage.NewErrorFS(storage.OSFS{})
	}
	c := testcluster.New(t, 3, testcluster.Config(func(id int32, cfg *broker.Config) { cfg.FS = disks[id] }))
	const topic = "disk"
	createReplicatedTopic(t, c, topic)
	acked := produceAll(t, c, topic, values("before", 20))
	waitInSync(t, c, topic)
	ctx := testCtx(t)
	failed, epoch := c.WaitLeader(ctx, topic, 0)
	logDir := filepath.Join(c.Dir(failed), topic+"-0")
	disks[failed].SetInjector(func(op storage.Op, path string) error {
		if op == storage.OpWrite && strings.HasPrefix(path, logDir+string(filepath.Separator)) {
			return syscall.EIO
		}
		return nil
	})

	// Producing goes on, through the failure, to whichever node leads.
	acked = append(acked, produceAll(t, c, topic, values("after", 20))...)
	leader, newEpoch := c.WaitLeader(ctx, topic, 0)
	if leader == failed || newEpoch <= epoch {
		t.Fatalf("leader %d at epoch %d after node %d's disk failed (epoch %d)", leader, newEpoch, failed, epoch)
	}
	c.WaitImage(ctx, func(img *metadata.Image) bool {
		p, ok := img.Partition(topic, 0)
		return ok && !slices.Contains(p.ISR, failed) && len(p.ISR) == 2
	})

	got := consumeAll(t, c, topic)
	for i, v := range append(values("before", 20), values("after", 20)...) {
		if acked[i] >= int64(len(got)) || got[acked[i]] != v {
			t.Fatalf("acknowledged record %q at offset %d lost: log has %d records", v, acked[i], len(got))
		}
	}

	c.Eventually(ctx, "the failed log reported", func() error {
		d, err := describeLog(ctx, c, failed, topic, 0)
		if err != nil {
			return err
		}
		if d.Leader || d.Dir != logDir || !strings.Contains(d.Failure, "log failed") {
			return fmt.Errorf("node %d describes its log as leader=%v dir=%q failure=%q", failed, d.Leader, d.Dir, d.Failure)
		}
		return nil
	})

	// Every node's DescribeTopics names the failed replica, its directory
	// and the error (asked of the broker outside the ISR), as does the
	// client's description.
	for _, id := range c.IDs() {
		c.Eventually(ctx, fmt.Sprintf("node %d describes the failed replica", id), func() error {
			resp, err := quirev1.NewAdminClient(c.Conn(id)).DescribeTopics(ctx, &quirev1.DescribeTopicsRequest{Names: []string{topic}})
			if err != nil {
				return err
			}
			pd := resp.GetTopics()[0].GetPartitions()[0]
			if off := pd.GetOfflineReplicas(); len(off) != 1 || off[0].GetBrokerId() != failed || off[0].GetDir() != logDir ||
				!strings.Contains(off[0].GetError(), "log failed") {
				return fmt.Errorf("offline replicas %v, want node %d at %s", off, failed, logDir)
			}
			return nil
		})
	}

	// A new disk: the broker restarts (its failed log cannot be closed
	// cleanly, so this is a kill), recovers the log and catches up.
	c.Kill(failed)
	disks[failed].SetInjector(nil)
	c.Restart(failed)
	c.WaitImage(ctx, func(img *metadata.Image) bool {
		p, ok := img.Partition(topic, 0)
		return ok && slices.Contains(p.ISR, failed)
	})
	waitInSync(t, c, topic)
	checkIdenticalLogs(t, c, topic)
	if d, err := describeLog(ctx, c, failed, topic, 0); err != nil || d.Failure != "" {
		t.Fatalf("node %d after the restart: %+v %v", failed, d, err)
	}
	resp, err := quirev1.NewAdminClient(c.Conn(leader)).DescribeTopics(ctx, &quirev1.DescribeTopicsRequest{Names: []string{topic}})
	if err != nil || len(resp.GetTopics()[0].GetPartitions()[0].GetOfflineReplicas()) != 0 {
		t.Fatalf("after the restart: %v %v", resp, err)
	}
}

// TestReplicationLeaderStorageFailureOffTheAppendPath: the leader's
// storage fails where no append looks: its fsyncs (the periodic flush,
// flush.ms) or the data directory's checkpoints. Appends still succeed
// there, so before, the leader kept leading and serving on a disk it could
// no longer sync. Now the failure takes its replica out of service as a
// failed append does: another in-sync replica becomes leader, the failed
// one leaves the ISR and reports its failed log, and no acknowledged
// record is lost.
func TestReplicationLeaderStorageFailureOffTheAppendPath(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		inject func(dataDir, logDir string) storage.Injector
	}{
		{"flush", func(_, logDir string) storage.Injector {
			return func(op storage.Op, path string) error {
				if op == storage.OpSync && strings.HasPrefix(path, logDir+string(filepath.Separator)) {
					return syscall.EIO
				}
				return nil
			}
		}},
		{"checkpoint", func(dataDir, _ string) storage.Injector {
			return func(op storage.Op, path string) error {
				if op == storage.OpRename && filepath.Dir(path) == dataDir && strings.HasSuffix(path, "-checkpoint") {
					return syscall.EIO
				}
				return nil
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			disks := map[int32]*storage.ErrorFS{}
			for id := int32(1); id <= 3; id++ {
				disks[id] = storage.NewErrorFS(storage.OSFS{})
			}
			c := testcluster.New(t, 3, testcluster.Config(func(id int32, cfg *broker.Config) {
				cfg.FS = disks[id]
				cfg.LogFlushIntervalMs = 100
				cfg.LogFlushSchedulerIntervalMs = 50
				cfg.LogFlushOffsetCheckpointIntervalMs = 100
			}))
			const topic = "offpath"
			createReplicatedTopic(t, c, topic)
			acked := produceAll(t, c, topic, values("before", 10))
			waitInSync(t, c, topic)
			ctx := testCtx(t)
			failed, epoch := c.WaitLeader(ctx, topic, 0)
			logDir := filepath.Join(c.Dir(failed), topic+"-0")
			disks[failed].SetInjector(tc.inject(c.Dir(failed), logDir))

			// Records go on being produced, to whichever node leads.
			acked = append(acked, produceAll(t, c, topic, values("after", 10))...)
			c.WaitImage(ctx, func(img *metadata.Image) bool {
				p, ok := img.Partition(topic, 0)
				return ok && p.Leader != failed && p.Leader >= 0 && p.LeaderEpoch > epoch && !slices.Contains(p.ISR, failed)
			})
			c.Eventually(ctx, "the failed log reported", func() error {
				d, err := describeLog(ctx, c, failed, topic, 0)
				if err != nil {
					return err
				}
				if d.Leader || !strings.Contains(d.Failure, "log failed") {
					return fmt.Errorf("node %d describes its log as leader=%v failure=%q", failed, d.Leader, d.Failure)
				}
				return nil
			})
			// A new leader's high watermark may still be below what the
			// old one acknowledged until its followers fetch again: read
			// until every acknowledged offset is below it (a record lost
			// for good never is, and fails the wait).
			want := append(values("before", 10), values("after", 10)...)
			var got []string
			c.Eventually(ctx, "every acknowledged record below the high watermark", func() error {
				got = consumeAll(t, c, topic)
				for i, v := range want {
					if acked[i] >= int64(len(got)) {
						return fmt.Errorf("acknowledged record %q at offset %d not read: log has %d records", v, acked[i], len(got))
					}
				}
				return nil
			})
			for i, v := range want {
				if got[acked[i]] != v {
					t.Fatalf("acknowledged record %q at offset %d lost: offset %d holds %q", v, acked[i], acked[i], got[acked[i]])
				}
			}
			// The failed node's log cannot close cleanly: stop it as a
			// crash, with its disk working again, for the cleanup.
			c.Kill(failed)
			disks[failed].SetInjector(nil)
		})
	}
}
