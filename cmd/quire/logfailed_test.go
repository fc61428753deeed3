package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/client"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/storage"
	"github.com/quirelog/quire/testcluster"
)

// TestCLITopicDescribeLogFailed: once a replica's log fails (EIO on its
// writes), topic describe lists it under OFFLINE REPLICAS with its
// directory and error, and --under-replicated shows the partition as
// LOG-FAILED.
func TestCLITopicDescribeLogFailed(t *testing.T) {
	t.Parallel()
	disks := map[int32]*storage.ErrorFS{}
	for id := int32(1); id <= 3; id++ {
		disks[id] = storage.NewErrorFS(storage.OSFS{})
	}
	c := testcluster.New(t, 3, testcluster.Config(func(id int32, cfg *broker.Config) { cfg.FS = disks[id] }))
	ctx, cl := testClient(t, c.Addr(1))
	if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: "lf", Partitions: 1, ReplicationFactor: 3}); err != nil {
		t.Fatal(err)
	}
	leader, _ := c.WaitLeader(ctx, "lf", 0)
	logDir := filepath.Join(c.Dir(leader), "lf-0")
	disks[leader].SetInjector(func(op storage.Op, path string) error {
		if op == storage.OpWrite && strings.HasPrefix(path, logDir+string(filepath.Separator)) {
			return syscall.EIO
		}
		return nil
	})
	// A write makes the leader's log fail; it gives up the partition.
	_ = cl.ProduceSync(ctx, &client.Record{Topic: "lf", Partition: 0, Value: []byte("x")})
	c.WaitImage(ctx, func(img *metadata.Image) bool {
		p, ok := img.Partition("lf", 0)
		return ok && p.Leader != leader && !slices.Contains(p.ISR, leader)
	})
	other := int32(1)
	if leader == 1 {
		other = 2
	}
	c.Eventually(ctx, "topic describe lists the failed replica", func() error {
		out, _, err := runCLIStdin("", "--brokers", c.Addr(other), "topic", "describe", "lf")
		if err != nil {
			return err
		}
		if !strings.Contains(out, "OFFLINE REPLICAS") || !strings.Contains(out, logDir) || !strings.Contains(out, "log failed") {
			return fmt.Errorf("topic describe:\n%s", out)
		}
		return nil
	})
	out, _, err := runCLIStdin("", "--brokers", c.Addr(other), "topic", "describe", "--under-replicated", "lf")
	if err != nil || !strings.Contains(out, "LOG-FAILED") {
		t.Fatalf("--under-replicated: %v\n%s", err, out)
	}
}
