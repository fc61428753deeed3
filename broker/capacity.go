package broker

import (
	"math"

	"github.com/hashicorp/go-hclog"
)

// A node's partition budget (max.partitions.per.broker): how many
// partition replicas, leaders and followers, it can host. Unset, it is
// derived at start from the open-file limit (raised to the hard limit
// first) and the memory, whichever allows fewer:
//
//   - files: a partition in use holds up to three files of its active
//     segment (.log while written, .index and .timeindex at a flush or
//     roll). Every segment file goes through the node's file cache
//     (log.open.files.max, half the limit by default), which closes idle
//     ones, so the limit does not bound what a node holds on disk or
//     restarts with; the budget keeps every hosted partition's active
//     files within the limit, so that all of them in use at once do not
//     churn the cache. A quarter of the limit, at least reservedFiles, is
//     left for connections, the raft log, the metadata store and
//     snapshots (so a limit of 1024 gives 256 partitions, 20000 gives
//     5000).
//   - memory: partitionMemory per hosted partition (its replica state,
//     the active segment's in-memory indexes, producer state and fetch
//     buffers), within half the memory.
const (
	filesPerPartition = 3
	reservedFiles     = 64
	partitionMemory   = 1 << 20
)

// capacity is what a node's partition budget was derived from.
type capacity struct {
	// OpenFiles is the open-file limit (RLIMIT_NOFILE) after the raise,
	// 0 when unknown; OpenFilesHard its hard limit.
	OpenFiles, OpenFilesHard uint64
	// Memory is the memory the node may use in bytes (the machine's, or
	// its cgroup's limit when lower), 0 when unknown.
	Memory uint64
}

// derivePartitionBudget is the partition budget of a node with capacity
// c: the lower of what its open files and its memory allow (an unknown
// one does not limit), at least 1; math.MaxInt32 when both are unknown.
func derivePartitionBudget(c capacity) int32 {
	budget := uint64(math.MaxInt32)
	if c.OpenFiles > 0 {
		reserved := max(c.OpenFiles/4, reservedFiles)
		files := uint64(0)
		if c.OpenFiles > reserved {
			files = (c.OpenFiles - reserved) / filesPerPartition
		}
		budget = min(budget, files)
	}
	if c.Memory > 0 {
		budget = min(budget, c.Memory/2/partitionMemory)
	}
	return int32(max(budget, 1))
}

// partitionBudget raises the open-file limit, and returns the configured
// max.partitions.per.broker or, when it is 0, the derived budget; it logs
// which, with what it was derived from.
func partitionBudget(cfg *Config, logger hclog.Logger) int32 {
	c, err := raiseOpenFileLimit()
	if err != nil {
		logger.Warn("cannot raise the open-file limit", "soft", c.OpenFiles, "hard", c.OpenFilesHard, "error", err)
	}
	c.Memory = memoryLimit()
	derived := derivePartitionBudget(c)
	if cfg.MaxPartitionsPerBroker > 0 {
		logger.Info("partition budget", "max.partitions.per.broker", cfg.MaxPartitionsPerBroker, "source", "configured",
			"derived", derived, "open_files", c.OpenFiles, "open_files_hard", c.OpenFilesHard, "memory_bytes", c.Memory)
		return cfg.MaxPartitionsPerBroker
	}
	logger.Info("partition budget", "max.partitions.per.broker", derived, "source", "derived",
		"open_files", c.OpenFiles, "open_files_hard", c.OpenFilesHard, "memory_bytes", c.Memory,
		"files_per_partition", filesPerPartition, "memory_per_partition", partitionMemory)
	return derived
}
