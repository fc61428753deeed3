package request

import (
	"context"
	"fmt"

	"github.com/quirelog/quire/auth"
	"github.com/quirelog/quire/replica"
)

// LogDir is one of this broker's log directories and the replicas in it.
// The disk's size and free space are not measured: -1, Kafka's
// "unknown".
type LogDir struct {
	Path                    string
	TotalBytes, UsableBytes int64
	Partitions              []LogDirPartition
}

// LogDirPartition is one replica in a log directory: its size on disk,
// and how far its log end is behind the high watermark it knows.
type LogDirPartition struct {
	Topic     string
	Partition int32
	Size      int64
	OffsetLag int64
}

// DescribeLogDirs describes this broker's one log directory
// (Config.LogDir) and the replicas in it, those whose log failed left
// out. It needs Describe on the cluster, as Kafka's DescribeLogDirs does.
func (c *Core) DescribeLogDirs(ctx context.Context) ([]LogDir, error) {
	if err := c.authorize(ctx, auth.OpDescribe, auth.ResourceCluster, auth.ClusterName, false); err != nil {
		return nil, err
	}
	if c.cfg.LogDir == "" {
		return nil, c.fail(fmt.Errorf("%w: this node describes no log directory", replica.ErrInvalidRequest))
	}
	dir := LogDir{Path: c.cfg.LogDir, TotalBytes: -1, UsableBytes: -1}
	for _, p := range c.cfg.Replicas.Stats().Partitions {
		if p.LogFailed {
			continue // out of service: not in the directory's count
		}
		dir.Partitions = append(dir.Partitions, LogDirPartition{Topic: p.Topic, Partition: p.Partition, Size: p.SizeBytes,
			OffsetLag: max(0, p.HighWatermark-p.LogEndOffset)})
	}
	return []LogDir{dir}, nil
}
